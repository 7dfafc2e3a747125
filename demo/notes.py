"""The note under a finished race when a drafter decoded slower than greedy, and why: without it a
speedup below 1 reads as a bug, when it is what speculation costs when drafts are not accepted."""

from __future__ import annotations

from typing import Any

from demo.lanes import LANES, esc


def below_greedy_html(view: Any) -> str:
    """One short paragraph naming each drafter placed behind the plain lane (a tie is not slower), with why
    in words true of the lanes named: a head's drafting, or a lookup that found too little to copy."""
    out = view.outcome
    if view.state != "finished" or out is None or "greedy" not in out.lanes:
        return ""
    base = out.lanes["greedy"]
    slow = {n: f"{LANES[n]} ×{o.speedup:.2f}, accept length {o.mean_accept:.2f}" for n, o in out.lanes.items()
            if n != "greedy" and o.place is not None and base.place is not None and o.place > base.place
            and o.speedup is not None and o.mean_accept is not None}
    if not slow:
        return ""
    plain = "plain sampling" if view.sampled else "greedy"
    heads = [n for n in slow if n != "lookup"]
    drafting = "the head's drafting" if "lookup" not in slow else (
        "the drafting" if heads else "the lookup's search")
    why = [("A weak head, or a prompt it was not trained on, loses to greedy." if heads else ""),
           ("Prompt lookup only copies: where the answer does not repeat the prompt or itself it finds little "
            "to draft, and what it guesses is often rejected." if "lookup" in slow else "")]
    return (f'<div class="note slower"><b>Slower than {plain} here</b> (' + esc("; ".join(slow.values())) + "). A "
            "speculative round verifies k drafts in one target forward, which costs more than one plain step "
            f"(on a CPU, markedly more), plus {drafting}; it pays only when enough drafts are accepted, "
            "and drafts the target rejects are wasted work. " + " ".join(w for w in why if w) + "</div>")
