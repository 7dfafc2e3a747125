"""Who wins where, before any race (spec.race.story): the last sweep run here, or the shipped head-to-head, as one
line per domain, labelled with the machine and date it was measured on. Only drawn here."""

from __future__ import annotations

from demo.lanes import esc
from spec.race.story import HEADS, LOOKUP


def story_html(story: object | None) -> str:
    if story is None or not story.lines:
        return ""
    heads = [h for h in HEADS if any(h in r for r in story.rows)]
    cells = "".join(f"<tr><td>{esc(r['domain'])}</td>" + "".join(f"<td>{esc(r.get(h, '–'))}</td>" for h in heads)
                    + "</tr>" for r in story.rows)
    th = "".join(f"<th>{h} {esc(story.label)}{' + lookup branch' if story.branched and h != LOOKUP else ''}: "
                 "accept / speedup</th>" for h in heads)
    table = f"<table><tr><th>domain</th>{th}</tr>{cells}</table>"
    lines = "".join(f"<li>{esc(x)}</li>" for x in story.lines)
    return (f'<details class="story" open><summary>Who wins where: {esc(story.source)}</summary>'
            f"{table}<ul>{lines}</ul></details>")
