"""DSpark's confidence head, checked (spec.loop.confidence): a reliability picture (per estimate bin, the share
of the slots it covered that landed, against the diagonal a reliable head would follow; the count under
each bar) and what the threshold slider would do at each value (verify rows saved, landed drafts lost).
Only drawn here: the numbers come from spec.loop.confidence."""

from __future__ import annotations

from demo.lanes import esc, plural

COLOR = "#7c3aed"
FEW = 5  # a bin with fewer slots is drawn faded
W, H, LEFT, TOP = 220, 90, 28, 6


def confidence_chart(record: dict | None) -> str:
    """The picture and the slider's what-if for one DSpark lane's record; "" without one."""
    if not record or not record.get("rounds"):
        return ""
    bins = record["bins"]
    step = W / len(bins)
    parts = [f'<line x1="{LEFT}" y1="{TOP + H * (1 - f)}" x2="{LEFT + W}" y2="{TOP + H * (1 - f)}" class="grid"/>'
             f'<text x="{LEFT - 3}" y="{TOP + H * (1 - f) + 3}" class="axis" text-anchor="end">{int(100 * f)}%</text>'
             for f in (0, 0.5, 1)]
    parts.append(f'<line x1="{LEFT}" y1="{TOP + H}" x2="{LEFT + W}" y2="{TOP}" class="diag"/>')
    for i, b in enumerate(bins):
        x = LEFT + i * step
        parts.append(f'<text x="{x + step / 2}" y="{TOP + H + 10}" class="axis" text-anchor="middle">'
                     f'{b["low"]:.1f}</text>')
        if not b["slots"]:
            continue
        share = b["landed"] / b["slots"]
        top = TOP + H * (1 - share)
        tip = (f"estimates {b['low']:.1f}-{b['high']:.1f} (mean {b['mean_estimate']:.2f}): {b['landed']} of "
               f"{plural(b['slots'], 'slot')} landed ({100 * share:.0f}%)")
        faded = ' opacity="0.35"' if b["slots"] < FEW else ""
        parts.append(f'<rect x="{x + 2}" y="{top}" width="{step - 4}" height="{max(0.5, TOP + H - top)}" '
                     f'class="bar dspark" fill="{COLOR}"{faded}><title>{esc(tip)}</title></rect>'
                     f'<text x="{x + step / 2}" y="{TOP + H + 19}" class="count dspark" fill="{COLOR}" '
                     f'text-anchor="middle">{b["slots"]}</text>')
    width, height = LEFT + W + 4, TOP + H + 24
    svg = (f'<svg class="slot-svg conf-svg" viewBox="0 0 {width} {height}" role="img" '
           f'style="max-width:{int(width * 1.8)}px"><title>DSpark confidence: estimate against share landed'
           f'</title>{"".join(parts)}</svg>')
    return (f'<div class="slot-chart conf-chart"><div class="slot-title">DSpark\'s confidence head, checked</div>'
            f'<div class="slot-reading">{esc(reading(record))}</div>{svg}'
            '<div class="slot-key muted">bars: of the slots a round reached with its estimate in that range, the '
            "share that landed (a reliable head follows the diagonal); numbers: how many slots</div>"
            f"{cuts_html(record)}</div>")


def reading(record: dict) -> str:
    """How far the estimates are from what landed, over all slots checked; where the race drafted trees,
    which rounds those are: chain rounds only, of the drafting rounds the per-slot chart counts, and why."""
    slots = sum(b["slots"] for b in record["bins"])
    landed = sum(b["landed"] for b in record["bins"])
    said = sum(b["mean_estimate"] * b["slots"] for b in record["bins"] if b["slots"])
    if not slots:
        return "No slot reached yet."
    chains, trees = record["rounds"], record.get("drafted_as_trees", 0)
    line = (f"Over {plural(slots, 'slot')} in {plural(chains, 'round')} the head expected "
            f"{100 * said / slots:.0f}% to land; {100 * landed / slots:.0f}% did.")
    if trees:  # how many is left unsaid: a lane's "trees in N rounds" counts only the trees that branched
        others = ("the other was drafted as a tree, which carries" if trees == 1
                  else "the others were drafted as trees, which carry")
        line += (f" Chain rounds only: {chains} of the {plural(chains + trees, 'drafting round')}; {others} no "
                 "confidence estimates.")
    return line


def cuts_html(record: dict) -> str:
    """What each threshold would do, the one the race ran with marked."""
    rows = []
    for c in record["cuts"]:
        mark = ' class="used"' if abs(c["threshold"] - record.get("used", 0.0)) < 1e-9 else ""
        unknown = f" ({plural(c['unknown'], 'round')} not judged)" if c["unknown"] else ""
        rows.append(f'<tr{mark}><td>{c["threshold"]:.1f}</td><td>{c["saved"]} of {c["verified"]}</td>'
                    f'<td>{c["lost"]} of {c["landed"]}{unknown}</td></tr>')
    used = record.get("used", 0.0)
    head = ("the race ran without a cut" if not used else f"the race ran with the cut at {used:.1f}")
    return (f'<details class="cuts"><summary>What the threshold slider would do ({esc(head)})</summary>'
            '<table><tr><th>threshold</th><th>verify rows saved</th><th>landed drafts lost</th></tr>'
            f'{"".join(rows)}</table></details>')
