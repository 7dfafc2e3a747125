"""The note under a finished race when a head decoded slower than greedy, and why: without it a
speedup below 1 reads as a bug, when it is what speculation costs when drafts are not accepted."""

from __future__ import annotations

from typing import Any

from demo.lanes import LANES, esc


def below_greedy_html(view: Any) -> str:
    """One short paragraph naming each head whose decode speedup (its card's "vs greedy") is < 1."""
    if view.state != "finished":
        return ""
    slow = []
    for name in ("dspark", "dflash"):
        lane, ratio = view.lanes.get(name), view.speedup(name) if name in view.lanes else None
        if ratio is not None and ratio < 1 and lane.meter is not None and lane.meter.rounds:
            slow.append(f"{LANES[name]} ×{ratio:.2f}, accept length {lane.meter.mean_accept:.2f}")
    if not slow:
        return ""
    plain = "plain sampling" if view.sampled else "greedy"
    return (f'<div class="note slower"><b>Slower than {plain} here</b> (' + esc("; ".join(slow)) + "). A "
            "speculative round verifies k drafts in one target forward, which costs more than one plain step "
            "(on a CPU, markedly more), plus the head's drafting; it pays only when enough drafts are accepted, "
            "and drafts the target rejects are wasted work. A weak head, or a prompt it was not trained on, "
            "loses to greedy.</div>")
