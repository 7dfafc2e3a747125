"""The lanes of the race page: one column per engine, its meters card and its text painted as accepted
drafts vs the target's own tokens (HTML only; the text comes from the engine's streaming detokenizer)."""

from __future__ import annotations

import html
from typing import Any

LANES = {"dspark": "DSpark", "dflash": "DFlash", "lookup": "Prompt lookup", "greedy": "Greedy baseline"}
LANE_NOTES = {"dspark": "target + DSpark head", "dflash": "target + DFlash head",
              "lookup": "target + n-gram copies, no head", "greedy": "the target alone"}
DRAFTERS = ("dspark", "dflash", "lookup")  # the lanes that draft: the two heads and the head-free lookup
# Each lane's colour, ONE table for the cards, the strip, the charts and the sweep's bars (style.css repeats
# them by class). Lookup's orange is its own: the target's own tokens are painted a pale amber, not this.
COLORS = {"dspark": "#7c3aed", "dflash": "#0891b2", "lookup": "#ea580c", "greedy": "#94a3b8"}
LIGHT = {"dspark": "#c4b5fd", "dflash": "#67e8f9", "lookup": "#fdba74"}  # the chart's "drafts" series


def lane_label(name: str, sampled: bool = False) -> str:
    """A lane's name on the page: the third lane is the target decoding alone, greedy at T = 0 and
    sampling at T > 0."""
    return "Plain sampling" if name == "greedy" and sampled else LANES[name]


def esc(s: Any) -> str:
    return html.escape(str(s), quote=True)


def fmt(x: float | None, digits: int = 2, prefix: str = "", suffix: str = "") -> str:
    return "–" if x is None else f"{prefix}{x:,.{digits}f}{suffix}"


def plural(n: int, word: str, words: str = "") -> str:
    """'1 round', '2 rounds' ('1 guess', '2 guesses' with words="guesses")."""
    return f"{n:,} {word if n == 1 else words or word + 's'}"


class Lane:
    """One engine's column: the text of each round, as pieces of accepted drafts ("acc") and of the
    target's own tokens ("own"), appended as the engine streams them. Where a round's draft was rejected,
    its own piece keeps what the drafter had drafted there instead (Round.missed)."""

    def __init__(self, name: str, sampled: bool = False):
        self.name, self.sampled = name, sampled
        self.progress = ""  # before the first token: how far the shared prefill has read the prompt
        self.spans: list[list[str]] = []  # [kind, text, what was drafted there ("" if nothing missed)]
        self.text = ""
        self.meter: Any = None
        self.verdict = ""
        self.done = False
        self.outcome: Any = None  # spec.race.outcome.LaneOutcome once the race is over: the numbers its card shows
        self.note = ""  # how this lane runs unlike its usual self ("Markov off"), said on its card
        self.races = ""  # a finished repeat: its speedups' range ("3 races: ×1.28–1.35"), a badge on its card

    def add(self, r: Any) -> None:
        for kind, text in r.pieces:
            self._append(kind, text, r.missed if kind == "own" else "")
        self.done = self.done or r.done

    def finish(self, result: Any) -> None:
        """Done: a stopped generation flushes what its detokenizer held back."""
        self.done = True
        if result.text.startswith(self.text):
            self._append("own", result.text[len(self.text):])

    def _append(self, kind: str, text: str, missed: str = "") -> None:
        if not text:
            return
        if self.spans and self.spans[-1][0] == kind == "own" and not missed and not self.spans[-1][2]:
            self.spans[-1][1] += text
        else:
            self.spans.append([kind, text, missed])
        self.text += text


def verdict_badge(v: str) -> str:
    if not v:
        return ""
    kind = "ok" if v.startswith("identical") else "bad" if v.startswith("DIFFERS") else "info"
    mark = {"ok": "✓ ", "bad": "✗ ", "info": "≠ " if v.startswith("differs") else "– "}[kind]
    short_v = v.split(":")[0] if kind == "info" else v
    return f'<span class="verdict {kind}" title="{esc(v)}">{mark}{esc(short_v)}</span>'


def meters_html(name: str, lane: Lane | None, speedup: float | None, absent: str = "") -> str:
    """The lane's card: accept length, tok/s and the speedup over the plain lane (end to end: tokens per
    engine second, prefill included), tokens, and its engine seconds (the race clock it has reached).
    Once the race is over every number is the race's outcome (spec.race.outcome): its place (shared in a
    tie), how it ended (finished, cut, stopped). A lane not in the race says why (`absent`)."""
    label = lane_label(name, lane is not None and lane.sampled)
    head = (f'<div class="lane-head"><span class="dot {name}"></span><span class="lane-name">{label}</span>'
            f'<span class="lane-note">{LANE_NOTES[name]}'
            f'{", " + esc(lane.note) if lane is not None and lane.note else ""}</span></div>')
    if lane is None:
        why = {"greedy": "baseline off", "lookup": "lane off in Settings"}.get(name) or absent or "no head loaded"
        return f'<div class="lane-card off">{head}<div class="muted">not in this race ({why})</div></div>'
    m, o = lane.meter, lane.outcome
    versus = "vs plain" if lane.sampled else "vs greedy"
    if o is not None:
        accept, tok_s, tokens, clock, ended = o.mean_accept, o.tok_s, o.tokens, o.finish_seconds, o.ended
    else:
        accept = m.mean_accept if m and m.rounds else None
        tok_s, tokens = (m.e2e_tok_s if m and m.clock else None), (m.tokens if m else 0)
        clock, ended = (m.clock if m else None), "finished at" if lane.done else "engine s"
    cells = [
        (fmt(accept), "accept length", "tokens committed per target forward (the target's own token included)"),
        (fmt(tok_s, 1), "tok/s", "tokens per engine second, prefill included"),
        (fmt(speedup, 2, "×") if name != "greedy" else ("×1.00" if tok_s else "–"), versus,
         "the speedup: this lane's tok/s over the plain lane's (end to end)"),
        (str(tokens), "tokens", ""),
        (fmt(clock, 1, suffix=" s"), ended, "engine seconds: this lane's own compute"),
    ]
    body = "".join(f'<div class="m" title="{esc(tip)}"><div class="v">{v}</div><div class="k">{k}</div></div>'
                   for v, k, tip in cells)
    badges = verdict_badge(lane.verdict) if name != "greedy" else (
        f'<span class="verdict base">{"its own sample" if lane.sampled else "reference"}</span>' if lane.done else "")
    if name != "greedy" and m is not None and m.drafted and o is None:  # its tree is drawn under its text
        last = m.last if m.drafted[-1] else None
        badges += f'<span class="chosen" title="drafts verified in the last round">{esc(round_badge(last))}</span>'
    elif name != "greedy" and m is not None and m.last_tree is not None:  # finished: how often it branched
        tip = "rounds whose drafts were verified as a tree; the picture under the text: the last of them"
        badges += (f'<span class="chosen" title="{tip}">trees in {m.tree_rounds} of '
                   f'{plural(m.rounds, "round")}</span>')
    if o is not None and o.status != "finished":
        badges += f'<span class="cut {o.status.split()[0]}" title="how this lane ended">{esc(o.status)}</span>'
    if lane.races:
        badges += (f'<span class="chosen races" title="a repeat: the card shows the medians of its races">'
                   f'{esc(lane.races)}</span>')
    if o is not None and o.place is not None:
        tie, why = (" tie", "a tie: within the race&#39;s noise band") if o.tied else ("", "")
        badges = f'<span class="place p{o.place}{tie}" title="{why}">{o.place_text}</span>' + badges
    return (f'<div class="lane-card {name}">{head}<div class="meters">{body}</div>'
            f'<div class="badges">{badges}</div></div>')


def text_html(name: str, lane: Lane | None, idle: bool = False) -> str:
    if lane is None:
        return '<div class="lane-text empty"></div>'
    if not lane.spans:
        word = ("Press Run race." if idle else "(no text)" if lane.done
                else f"reading the prompt… {lane.progress}" if lane.progress else "waiting for the first token…")
        return f'<div class="lane-text {name}"><span class="muted">{word}</span></div>{tree_figure(name, lane)}'
    paint = name != "greedy"
    parts = [span_html(kind, text, missed) if paint else html.escape(text, quote=False)
             for kind, text, missed in lane.spans]
    caret = "" if lane.done else '<span class="caret"></span>'
    return f'<div class="lane-text {name}">{"".join(parts)}{caret}</div>{tree_figure(name, lane)}'


def tree_figure(name: str, lane: Lane) -> str:
    """Under a head's text: the tree its latest round verified (live) or its last tree round (finished),
    captioned in words a phone shows without hover. Under the text, not on the card, so that the lanes'
    texts start at one height."""
    m = lane.meter
    if name == "greedy" or m is None or not m.drafted:
        return ""
    finished = lane.outcome is not None
    r = m.last_tree if finished else (m.last if m.drafted[-1] else None)
    if r is None or not r.is_tree:
        return ""
    which = "The last tree round" if finished else "The last round's tree"
    landed = f"{r.accepted} landed" if r.accepted else "none landed"
    return (f'<figure class="lane-tree {name}">{tree_svg(r, name, which.lower())}<figcaption>'
            f'<b>{which}</b>: {plural(r.drafted, "draft")} verified in one forward, {landed}.<br>'
            '<span class="tree-key"><i class="hit"></i>the committed path</span> '
            '<span class="tree-key"><i class="miss"></i>drafts not taken</span><br>'
            "Left to right: the last committed token, then slots 1, 2, …; where it branches, the head's "
            "guesses, its best on top.</figcaption></figure>")


def span_html(kind: str, text: str, missed: str = "") -> str:
    """One piece of a lane's text. The target's own token where a draft was rejected carries the drafter's
    guess, shown on hover or tap (focus: a phone has no hover) as 'drafted “…”, the target wrote “…”'."""
    body = html.escape(text, quote=False)
    if not missed:
        return f'<span class="tok-{kind}">{body}</span>'
    guess = missed if len(missed) <= 40 else missed[:39] + "…"
    tip = f"drafted “{shown(guess)}”, the target wrote “{shown(text)}”"
    return f'<span class="tok-{kind} missed" tabindex="0" data-missed="{html.escape(tip)}">{body}</span>'


def shown(text: str) -> str:
    """A guess as its tip shows it: a newline drawn as ⏎ (a bare line break inside the quotes read as
    nothing, or as a break in the tip), a tab as →."""
    return text.replace("\r\n", "\n").replace("\n", "⏎").replace("\t", "→")


def ordinal(n: int) -> str:
    return {1: "1st", 2: "2nd", 3: "3rd"}.get(n, f"{n}th")


def round_badge(r: Any) -> str:
    """What the lane's latest drafting round verified and what landed: a chain's length, or a tree's
    size and the choices its accepted path took ("via the 2nd guess at depth 1")."""
    if r is None or not r.drafted:
        return "parked: plain step"
    if not r.is_tree:
        return f"drafting {r.drafted}"
    detours = [f"{ordinal(rank)} guess at depth {d + 1}" for d, (rank, _) in enumerate(r.levels) if rank > 1]
    copied = r.copied  # rows the lookup branch added: a fixed tree of 8 stays "tree of 8"
    size = f"tree of {r.drafted - copied}" + (f" + {copied} copied" if copied else "")
    return f"{size}: landed {r.accepted}" + (f" via the {', '.join(detours)}" if detours else "")


def tree_svg(r: Any, name: str, which: str = "the last round's tree") -> str:
    """A small picture of a round's draft tree: the anchor on the left, each depth a column, siblings
    stacked best first; the committed path drawn in the lane's colour."""
    if r is None or not r.is_tree:
        return ""
    kids: dict[int, list[int]] = {}
    for i, p in enumerate(r.parents):
        kids.setdefault(p, []).append(i + 1)
    y: dict[int, int] = {}

    def place(row: int, depth: int, nxt: list[int]) -> None:
        for c in kids.get(row, []):
            place(c, depth + 1, nxt)
        y[row] = y[kids[row][0]] if row in kids else nxt.append(len(nxt)) or nxt[-1]

    place(0, 0, [])
    depth = {0: 0}
    for i, p in enumerate(r.parents):
        depth[i + 1] = depth[p] + 1
    dx, dy = 14, 10
    on = set(r.path)
    x = {n: 6 + d * dx for n, d in depth.items()}
    ypx = {n: 6 + v * dy for n, v in y.items()}
    lines = "".join(f'<line x1="{x[p]}" y1="{ypx[p]}" x2="{x[i + 1]}" y2="{ypx[i + 1]}"'
                    f' class="{"hit" if p in on and i + 1 in on else "miss"}"/>' for i, p in enumerate(r.parents))
    dots = "".join(f'<circle cx="{x[n]}" cy="{ypx[n]}" r="3" class="{"hit" if n in on else "miss"}"/>' for n in depth)
    w, h = 12 + max(depth.values()) * dx, 12 + max(y.values()) * dy
    tip = f"{which}: {r.drafted} drafts verified in one forward, {r.accepted} landed"
    return (f'<svg class="round-tree {name}" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img">'
            f'<title>{esc(tip)}</title>{lines}{dots}</svg>')
