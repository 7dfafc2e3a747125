"""The status line above the lanes (HTML only). While racing: the race clock (engine seconds) next to the
wall clock, and a strip of each lane's progress that stays in view (sticky) while the page scrolls.
Finished: the outcome's headline, the places with finish times, the lossless verdicts; every number
comes from spec.race.outcome, so a replay, which carries the same outcome, shows the same line."""

from __future__ import annotations

from typing import Any

from demo.lanes import LANES, esc, lane_label, verdict_badge

LONG_PROMPT = 1000  # prompt tokens whose prefill is said to take a while before any speed is measured
STOPPED_ORDER = "Ahead when stopped, by tokens per engine second"  # a stopped race's order (spec.race.outcome)


def clocks(view: Any) -> str:
    last = "the last race's " if view.repeat is not None and view.repeat.races > 1 else ""  # one: its own
    return (f'<span class="clock" title="engine seconds: each lane\'s own compute">{last}race clock '
            f'<b>{view.clock:.2f} s</b></span> · <span class="wall">{view.wall:.2f} s wall</span>')


def strip_html(view: Any) -> str:
    """One small bar per lane: tokens written of the most allowed, and its speedup so far."""
    cells = []
    for name in LANES:
        lane = view.lanes.get(name)
        if lane is None:
            continue
        m = lane.meter
        tokens = m.tokens if m else 0
        full = 100 * min(1.0, tokens / view.max_new_tokens) if view.max_new_tokens else 0
        if lane.done:
            full = 100
        x = view.speedup(name) if name != "greedy" else None
        cells.append(f'<div class="strip-lane {name}"><span class="strip-name">{esc(lane_label(name, view.sampled))}'
                     f'</span><span class="strip-bar"><i style="width:{full:.0f}%"></i></span>'
                     f'<span class="strip-num">{tokens}{f" · ×{x:.2f}" if x else ""}{" ✓" if lane.done else ""}'
                     f'</span></div>')
    return f'<div class="strip">{"".join(cells)}</div>' if cells else ""


def reading(view: Any) -> str:
    """While the shared prefill reads the prompt: its length, how far it has read and about how long is
    left, from the speed measured (this race's chunks so far, or before the first one the last race's):
    a long prompt is minutes of prefill on a CPU, said up front instead of a silent wait."""
    n, done = view.prompt_tokens, view.prefilled
    rate = done / view.clock if done and view.clock > 0 else view.prefill_rate
    left = (n - done) / rate if rate > 0 else 0.0
    if left >= 1:
        when = f", about {duration(left)} left at this machine's measured speed"
    elif not rate and n >= LONG_PROMPT:
        when = ": a long prompt, reading it takes a while"
    else:
        when = ""
    return f"Reading the prompt (one prefill shared by every lane): {done:,} of {n:,} tokens{when}"


def duration(seconds: float) -> str:
    """'40 s', '3 min 5 s'."""
    s = round(seconds)
    return f"{s} s" if s < 60 else f"{s // 60} min {s % 60} s"


def status_html(view: Any) -> str:
    if view.state == "waiting":
        return '<div class="status">Waiting for the arena…</div>'
    if view.state == "racing":
        what = "Racing" if not view.replay else ("Replaying at measured speed" if view.speed == 1 else
                                                 f"Replaying at {view.speed:g}x the measured speed")
        if view.stopping:
            what = "Stopping…"
        elif view.prompt_tokens and view.prefilled < view.prompt_tokens and not view.replay:
            what = reading(view)
        source = f'<div class="source">{esc(view.source)}</div>' if view.source else ""
        i, n = view.race_no
        if n > 1:
            what = f"Race {i} of {n} · {what}"
        return (f'<div class="status racing"><span class="pulse"></span>{what} · {clocks(view)}'
                f'{strip_html(view)}{source}</div>')
    out = view.outcome
    label = lambda n: lane_label(n, view.sampled)  # noqa: E731
    summary = " · ".join(f"{label(n)} {verdict_badge(v)}" for n, v in view.verdicts.items())
    why = ("At T > 0 each lane draws its own exact sample from the target (the Leviathan/Chen rule), so "
           "texts match only by chance; the sampling tests check the law, not one text" if view.sampled else "")
    replayed = " (replayed)" if view.replay else ""
    if view.state == "stopped":  # the headline starts "Stopped:": said once
        said = out.headline().removeprefix("Stopped:").strip() if out else ""
        head = f"<b>Stopped{replayed}:</b> {esc(said)} {order_html(out) if out else ''}"
        if view.repeat is not None and view.repeat.races:
            head += f'<div class="repeat">{esc(view.repeat.headline())}</div>'
    elif view.repeat is not None and view.repeat.asked > 1 and view.repeat.races:
        head = (f'<b>Finished.</b> <span class="winner">{esc(view.repeat.headline())}</span> '
                f"{order_html(out, median=True)}. {same_rounds_html(view.repeat) if view.repeat.races > 1 else ''}")
    else:
        head = (f'<b>Finished{replayed}.</b> <span class="winner">{esc(out.headline())}</span> '
                f"{order_html(out)}")
    check = "Compared with plain sampling" if view.sampled else "Lossless check"
    return (f'<div class="status {view.state}">{head} · {clocks(view)}. '
            f'<span class="lossless">{check}: {summary or "–"}</span>'
            + (f'<div class="why">{esc(why)}.</div>' if why else "")
            + (f'<div class="source">{esc(view.source)}</div>' if view.source else "") + "</div>")


def same_rounds_html(rep: Any) -> str:
    """Whether every race of a repeat committed the same rounds (then only the machine's timing moved)."""
    if rep.same_rounds:
        return (f'<span class="same-rounds">Same rounds in all {rep.races} races (draft lengths, accepts, tokens): '
                "only the times moved</span>")
    differ = ", ".join(lane_label(o.engine, False) for o in rep.lanes.values() if not o.same_rounds)
    return f'<span class="same-rounds differ">The rounds differed between races in: {esc(differ)}</span>'


def order_html(outcome: Any, median: bool = False) -> str:
    """The places, fastest first, each lane with its finish time on the race clock ("=" joins a tie).
    When the lanes wrote different lengths (T > 0, or a stopped race), speed ranks them, so each shows its
    tokens too. `median`: a repeat's median outcome (spec.race.repeat), said so."""
    lanes = outcome.order
    if not lanes:
        return ""
    same = len({o.tokens for o in lanes}) == 1 and not outcome.stopped
    parts = []
    for i, o in enumerate(lanes):
        sep = "" if i == 0 else (" = " if o.tied and o.place == lanes[i - 1].place else " → ")
        what = f"{o.finish_seconds:.2f} s" if same else f"{o.tokens} tokens in {o.finish_seconds:.2f} s"
        parts.append(f"{sep}{esc(outcome.label(o.engine))} {what}")
    title = (("Median finish: " if median else "Finish: ") if same else STOPPED_ORDER + ": " if outcome.stopped
             else f"By {'median ' if median else ''}tokens per engine second (the lanes wrote different lengths): ")
    return f'<span class="order">{title}{"".join(parts)}</span>'


def error_html(msg: str) -> str:
    return f'<div class="error-box"><b>Error.</b> {esc(msg)}</div>' if msg else ""
