"""The lanes of the race page: one column per engine, its meters card and its text painted as accepted
drafts vs the target's own tokens (HTML only; the text comes from the engine's streaming detokenizer)."""

from __future__ import annotations

import html
from typing import Any

LANES = {"dspark": "DSpark", "dflash": "DFlash", "greedy": "Greedy baseline"}
LANE_NOTES = {"dspark": "target + DSpark head", "dflash": "target + DFlash head",
              "greedy": "the target alone"}


def lane_label(name: str, sampled: bool = False) -> str:
    """A lane's name on the page: the third lane is the target decoding alone, greedy at T = 0 and
    sampling at T > 0."""
    return "Plain sampling" if name == "greedy" and sampled else LANES[name]


def esc(s: Any) -> str:
    return html.escape(str(s), quote=True)


def fmt(x: float | None, digits: int = 2, prefix: str = "", suffix: str = "") -> str:
    return "–" if x is None else f"{prefix}{x:,.{digits}f}{suffix}"


class Lane:
    """One engine's column: the text of each round, as pieces of accepted drafts ("acc") and of the
    target's own tokens ("own"), appended as the engine streams them."""

    def __init__(self, name: str, sampled: bool = False):
        self.name, self.sampled = name, sampled
        self.progress = ""  # before the first token: how far the shared prefill has read the prompt
        self.spans: list[list[str]] = []  # [kind, text]
        self.text = ""
        self.meter: Any = None
        self.result: Any = None
        self.verdict = ""
        self.done = False

    def add(self, r: Any) -> None:
        for kind, text in r.pieces:
            self._append(kind, text)
        self.done = self.done or r.done

    def finish(self, result: Any) -> None:
        """Done: a stopped generation flushes what its detokenizer held back."""
        self.result, self.done = result, True
        if result.text.startswith(self.text):
            self._append("own", result.text[len(self.text):])

    def _append(self, kind: str, text: str) -> None:
        if not text:
            return
        if self.spans and self.spans[-1][0] == kind == "own":
            self.spans[-1][1] += text
        else:
            self.spans.append([kind, text])
        self.text += text


def verdict_badge(v: str) -> str:
    if not v:
        return ""
    kind = "ok" if v.startswith("identical") else "bad" if v.startswith("DIFFERS") else "info"
    mark = {"ok": "✓ ", "bad": "✗ ", "info": "≠ " if v.startswith("differs") else "– "}[kind]
    short_v = v.split(":")[0] if kind == "info" else v
    return f'<span class="verdict {kind}" title="{esc(v)}">{mark}{esc(short_v)}</span>'


def meters_html(name: str, lane: Lane | None, speedup: float | None, place: int | None = None,
                absent: str = "") -> str:
    """The lane's card: accept length, decode tok/s and speedup (own busy time), tokens, and its engine
    seconds (the race clock it has reached; its finish time once done, with its place). A lane not in
    the race says why (`absent`: e.g. no head of its kind is published for this target)."""
    label = lane_label(name, lane is not None and lane.sampled)
    head = (f'<div class="lane-head"><span class="dot {name}"></span><span class="lane-name">{label}</span>'
            f'<span class="lane-note">{LANE_NOTES[name]}</span></div>')
    if lane is None:
        why = "baseline off" if name == "greedy" else absent or "no head loaded"
        return f'<div class="lane-card off">{head}<div class="muted">not in this race ({why})</div></div>'
    m = lane.meter
    clock_label = "finished at" if lane.done and m else "engine s"
    cells = [
        (fmt(m.mean_accept if m and m.rounds else None), "accept length"),
        (fmt(m.tok_s if m and m.busy else None, 1), "tok/s decode"),
        (fmt(speedup, 2, "×") if name != "greedy" else ("×1.00" if m and m.busy else "–"), "vs greedy"),
        (str(m.tokens) if m else "0", "tokens"),
        (fmt(m.clock if m else None, 1, suffix=" s"), clock_label),
    ]
    body = "".join(f'<div class="m"><div class="v">{v}</div><div class="k">{k}</div></div>' for v, k in cells)
    badges = verdict_badge(lane.verdict) if name != "greedy" else (
        f'<span class="verdict base">{"its own sample" if lane.sampled else "reference"}</span>' if lane.done else "")
    if name != "greedy" and m is not None and m.drafted:
        k = m.drafted[-1]
        badges += (f'<span class="chosen" title="drafts verified in the last round">'
                   f'{"parked: plain step" if k == 0 else f"drafting {k}"}</span>')
    if lane.done and getattr(lane.result, "finish_reason", "") == "length":
        badges += '<span class="cut" title="the answer reached Max new tokens (Settings)">cut at max tokens</span>'
    if place is not None:
        badges = f'<span class="place p{place}">{ordinal(place)}</span>' + badges
    return (f'<div class="lane-card {name}">{head}<div class="meters">{body}</div>'
            f'<div class="badges">{badges}</div></div>')


def ordinal(n: int) -> str:
    return {1: "1st", 2: "2nd", 3: "3rd"}.get(n, f"{n}th")


def text_html(name: str, lane: Lane | None, idle: bool = False) -> str:
    if lane is None:
        return '<div class="lane-text empty"></div>'
    if not lane.spans:
        word = ("Press Run race." if idle else "(no text)" if lane.done
                else f"reading the prompt… {lane.progress}" if lane.progress else "waiting for the first token…")
        return f'<div class="lane-text {name}"><span class="muted">{word}</span></div>'
    paint = name != "greedy"
    parts = [f'<span class="tok-{kind}">{html.escape(text, quote=False)}</span>' if paint
             else html.escape(text, quote=False) for kind, text in lane.spans]
    caret = "" if lane.done else '<span class="caret"></span>'
    return f'<div class="lane-text {name}">{"".join(parts)}{caret}</div>'
