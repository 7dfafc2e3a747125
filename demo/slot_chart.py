"""The per-slot chart: for draft slot i, how often each drafter's slot i lands once every slot before it did
(spec.loop.slots), the drafters side by side (both heads, and prompt lookup where it raced), and under the
bars how many rounds reached the slot. This is where they differ: a block drafted in one pass keeps landing
deep, a left-to-right head lands its first slots, a lookup copies long runs or nothing. An inline SVG that
scales to the page's width (a phone's too); each bar's tooltip gives its counts. Only drawn here: the counts
come from spec.loop.slots."""

from __future__ import annotations

from demo.lanes import COLORS, DRAFTERS, LANES, esc, plural

HEADS = {n: (LANES[n], COLORS[n]) for n in DRAFTERS}  # the drafters, in the lanes' order and colours
FEW = 5  # a slot reached by fewer rounds is drawn faded: its share rests on too few rounds to compare
BAR, GAP, HEIGHT, LEFT, TOP = 11, 8, 90, 30, 8  # px in the picture's own units (it scales to the page)


TITLE = "Per draft slot: how deep each {who}'s drafts land"


def who(names) -> str:
    """'head' while only heads drafted, 'drafter' once prompt lookup (no head) is among them."""
    return "drafter" if "lookup" in names else "head"


def slot_chart(positions: dict[str, list[dict]], title: str = TITLE) -> str:
    """Every drafter's per-slot shares as one picture, with a one-line reading above it."""
    heads = [h for h in HEADS if positions.get(h)]
    head = f'<div class="slot-title">{esc(title.replace("{who}", who(heads)))}</div>' if title else ""
    if not heads:
        return (f'<div class="slot-chart empty">{head}<span class="muted">Per draft slot: how often each lane\'s '
                "i-th draft lands once the drafts before it did. Appears once a lane has drafted.</span></div>")
    slots = max(len(positions[h]) for h in heads)
    group = len(heads) * BAR + GAP
    width, height = LEFT + slots * group + 4, TOP + HEIGHT + 34
    parts = [f'<line x1="{LEFT}" y1="{TOP + HEIGHT * (1 - f)}" x2="{width}" y2="{TOP + HEIGHT * (1 - f)}" '
             f'class="grid"/><text x="{LEFT - 4}" y="{TOP + HEIGHT * (1 - f) + 3}" class="axis" '
             f'text-anchor="end">{int(100 * f)}%</text>' for f in (0, 0.5, 1)]
    for i in range(slots):
        x0 = LEFT + i * group + GAP / 2
        parts.append(f'<text x="{x0 + len(heads) * BAR / 2}" y="{TOP + HEIGHT + 11}" class="axis" '
                     f'text-anchor="middle">{i + 1}</text>')
        for j, h in enumerate(heads):
            rows = positions[h]
            if i >= len(rows) or not rows[i]["reached"]:
                continue
            reached, landed = rows[i]["reached"], rows[i]["landed"]
            share, (name, color) = landed / reached, HEADS[h]
            x, top = x0 + j * BAR, TOP + HEIGHT * (1 - landed / reached)
            tip = (f"{name}, slot {i + 1}: landed in {landed} of the {plural(reached, 'round')} that reached it "
                   f"({100 * share:.0f}%)")
            faded = ' opacity="0.35"' if reached < FEW else ""
            parts.append(f'<rect x="{x}" y="{top}" width="{BAR - 1}" height="{max(0.5, TOP + HEIGHT - top)}" '
                         f'class="bar {h}" fill="{color}"{faded}><title>{esc(tip)}</title></rect>')
            parts.append(f'<text x="{x + (BAR - 1) / 2}" y="{TOP + HEIGHT + 22 + 9 * j}" class="count {h}" '
                         f'fill="{color}" text-anchor="middle">{reached}</text>')
    svg = (f'<svg class="slot-svg" viewBox="0 0 {width} {height}" role="img" preserveAspectRatio="xMinYMin meet" '
           f'style="max-width:{width * 2}px"><title>{esc(reading(positions))}</title>{"".join(parts)}</svg>')
    return (f'<div class="slot-chart">{head}<div class="slot-reading">{esc(reading(positions))}</div>{svg}'
            '<div class="slot-key muted">bars: the share of rounds whose i-th draft landed, among those where '
            "every earlier draft landed; numbers: how many rounds got that far (faded: fewer than "
            f"{FEW})</div></div>")


def reading(positions: dict[str, list[dict]]) -> str:
    """One line per chart: each drafter's first-slot share and the deepest slot it ever landed."""
    out = []
    for h in HEADS:
        rows = positions.get(h)
        if not rows:
            continue
        first = rows[0]
        deepest = max((r["slot"] for r in rows if r["landed"]), default=0)
        out.append(f"{HEADS[h][0]}: 1st draft lands {100 * first['landed'] / first['reached']:.0f}% of "
                   f"{plural(first['reached'], 'round')}, "
                   + (f"deepest landed slot {deepest}" if deepest else "none landed"))
    return "; ".join(out)
