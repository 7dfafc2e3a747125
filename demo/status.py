"""The status line above the lanes: the race clock (engine seconds) next to the wall clock while racing;
then the finishing order, the winner and its speedup, and the lossless verdicts (HTML only)."""

from __future__ import annotations

from typing import Any

from demo.lanes import esc, lane_label, verdict_badge


def clocks(view: Any) -> str:
    return (f'<span class="clock" title="engine seconds: each lane\'s own compute">race clock '
            f'<b>{view.clock:.2f} s</b></span> · <span class="wall">{view.wall:.2f} s wall</span>')


def status_html(view: Any) -> str:
    if view.state == "waiting":
        return '<div class="status">Waiting for the arena…</div>'
    if view.state == "racing":
        what = "Replaying at measured speed" if view.replay else "Racing"
        if view.stopping:
            what = "Stopping…"
        elif view.prompt_tokens and view.prefilled < view.prompt_tokens and not view.replay:
            what = (f"Reading the prompt (one prefill shared by every lane): {view.prefilled:,} of "
                    f"{view.prompt_tokens:,} tokens")
        return f'<div class="status racing"><span class="pulse"></span>{what} · {clocks(view)}</div>'
    label = lambda n: lane_label(n, view.sampled)  # noqa: E731
    summary = " · ".join(f"{label(n)} {verdict_badge(v)}" for n, v in view.verdicts.items())
    why = ("At T > 0 each lane draws its own exact sample from the target (the Leviathan/Chen rule), so "
           "texts match only by chance; the sampling tests check the law, not one text" if view.sampled else "")
    if view.state == "stopped":
        head = "<b>Stopped</b> (texts compared up to where the first engine stopped)"
    else:
        head = f"<b>Finished.</b> {winner_html(view.winner, label)} {order_html(view.order, label)}"
    check = "Compared with plain sampling" if view.sampled else "Lossless check"
    return (f'<div class="status {view.state}">{head} · {clocks(view)}. '
            f'<span class="lossless">{check}: {summary or "–"}</span>'
            + (f'<div class="why">{esc(why)}.</div>' if why else "") + "</div>")


def winner_html(win: tuple[str, dict[str, float]] | None, label: Any = lane_label) -> str:
    if win is None:
        return ""
    name, ratios = win
    if not ratios:
        return f'<span class="winner">{label(name)} wins.</span>'
    if name == "greedy":
        lost = ", ".join(f"{label(n)} ×{r:.2f}" for n, r in ratios.items() if n != "greedy")
        return (f'<span class="winner">{label(name)} wins: speculation did not pay on this prompt'
                f'{f" ({lost} end to end)" if lost else ""}.</span>')
    return f'<span class="winner">{label(name)} wins: ×{ratios[name]:.2f} {label("greedy").lower()} end to end.</span>'


def order_html(order: list[tuple[str, float]], label: Any = lane_label) -> str:
    if not order:
        return ""
    return "Finish: " + " → ".join(f"{label(n)} {t:.2f} s" for n, t in order)


def error_html(msg: str) -> str:
    return f'<div class="error-box"><b>Error.</b> {esc(msg)}</div>' if msg else ""
