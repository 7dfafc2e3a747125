"""What the page writes about a race (issue 39): the results table with the cards' digits, a stopped race
said once and listed in the order the lanes had got to, a long prompt's wait said up front, and a missed
guess's newlines drawn. No browser: the HTML and the tables themselves."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from test_outcome import race, result  # noqa: E402

from demo.lanes import Lane, round_badge, span_html  # noqa: E402
from demo.status import status_html  # noqa: E402
from demo.view import STOPPED_TABLE_LABEL, TABLE_LABEL, View  # noqa: E402
from spec.race.outcome import Outcome  # noqa: E402
from spec.report import results_table, shown  # noqa: E402


def stopped_race() -> dict:
    """Stopped at about the same engine time (one clock), greedy furthest, DFlash behind: the order the
    issue saw the table in (greedy 1, DFlash 0.81, DSpark 1.02) was by engine time reached."""
    return {"greedy": result("greedy", 1.31, tokens=300, reason="stopped"),
            "dflash": result("dflash", 1.30, tokens=240, rounds=120, reason="stopped"),
            "dspark": result("dspark", 1.32, tokens=308, rounds=100, reason="stopped")}


def test_the_table_writes_each_figure_as_the_cards_do():
    out = Outcome.of(race(dspark=2.0, dflash=2.5, greedy=3.0))
    table = shown(results_table(out, {}))
    assert list(table["speedup"]) == ["×1.50", "×1.20", "×1.00"]  # greedy's "×1.00" as on its card, not "1"
    assert list(table["decode speedup"])[-1] == "×1.00" and list(table["mean accept"]) == ["2.00", "2.00", "1.00"]
    assert list(table["finish s"]) == ["2.00", "2.50", "3.00"] and list(table["prefill s"]) == ["0.200"] * 3
    assert list(table["tok/s"]) == ["32.0", "25.6", "21.3"]
    one = shown(results_table(Outcome.of({n: result(n, 0.2, tokens=1, rounds=0) for n in ("dspark", "greedy")}), {}))
    assert list(one["mean accept"]) == ["–", "–"]  # no decode round: no accept length, never "nan"
    assert results_table(out, {})["speedup"].tolist() == [1.5, 1.2, 1.0]  # the API keeps numbers


def test_the_results_table_fits_a_wide_screen():
    from demo.view import TABLE_COLUMNS

    assert sum(TABLE_COLUMNS.values()) <= 1200  # the page's column at 1440 px is 1,214 px wide


def test_a_stopped_race_is_in_the_order_the_lanes_had_got_to_and_says_so_once():
    out = Outcome.of(stopped_race())
    assert [o.engine for o in out.order] == ["dspark", "greedy", "dflash"]
    table = shown(results_table(out, {}))
    assert list(table["speedup"]) == ["×1.02", "×1.00", "×0.81"] and set(table["place"]) == {"–"}
    view = View({n: Lane(n) for n in out.lanes}, state="stopped")
    view.outcome = out
    line = status_html(view)
    text = re.sub(r"<[^>]+>", "", line)
    assert text.count("Stopped") == 1 and "Stopped. Stopped" not in text, text
    assert text.startswith("Stopped: no places"), text
    assert ("Ahead when stopped, by tokens per engine second: DSpark 308 tokens in 1.32 s → Greedy baseline "
            "300 tokens in 1.31 s → DFlash 240 tokens in 1.30 s") in text, text
    view.table = results_table(out, {})  # numbers, as the downloads keep them; the page writes them shown()
    label = view.outputs()[-3].label
    assert label == STOPPED_TABLE_LABEL and "ahead first" in label and "fastest first" not in label
    view.state = "finished"
    assert view.outputs()[-3].label == TABLE_LABEL


def reading(prompt_tokens: int, prefilled: int, clock: float, rate: float = 0.0) -> str:
    view = View({n: Lane(n) for n in ("dspark", "greedy")}, state="racing", prompt_tokens=prompt_tokens,
                prefilled=prefilled, clock=clock, prefill_rate=rate)
    return re.sub(r"<[^>]+>", "", status_html(view))


def test_a_long_prompts_wait_is_said_up_front():
    """A 6,000-word prompt once read for minutes with no word about the wait: its length in tokens, and
    how long is left at the speed measured (this race's chunks, or before them an earlier race's)."""
    first = reading(8000, 0, 0.0)
    assert "0 of 8,000 tokens: a long prompt, reading it takes a while" in first, first
    assert "about 2 min 40 s left" in reading(8000, 0, 0.0, rate=50.0)  # an earlier race read 50 tokens a second
    later = reading(8000, 640, 4.0)  # 160 tokens a second so far
    assert "640 of 8,000 tokens, about 46 s left at this machine's measured speed" in later, later
    assert "left" not in reading(200, 0, 0.0) and "a while" not in reading(200, 0, 0.0)  # short: nothing to say


def test_a_finished_race_remembers_how_fast_the_prompt_was_read():
    from demo.handlers import prefill_rate

    assert prefill_rate(Outcome.of(race(dspark=2.0, greedy=3.0))) == 0.0  # 10 prompt tokens: too short to tell
    long = {n: result(n, 9.0, prefill=8.0) for n in ("dspark", "greedy")}
    for r in long.values():
        r.prompt_tokens = 400
    assert prefill_rate(Outcome.of(long)) == 50.0


def test_a_missed_guess_shows_its_newlines():
    tip = re.search(r'data-missed="([^"]*)"', span_html("own", "\n\n1.", "Sure\nthing\tx")).group(1)
    assert tip == "drafted “Sure⏎thing→x”, the target wrote “⏎⏎1.”" and "\n" not in tip
    assert span_html("own", "\n", "").startswith('<span class="tok-own">\n')  # the text itself keeps its lines


def test_a_trees_badge_counts_the_heads_rows_and_the_copied_ones_apart():
    """A fixed tree of 8 with a lookup row grafted reads "tree of 8 + 1 copied", never "tree of 9" (it failed
    once so in the browser test under load: the card contradicted the setting)."""
    from spec.loop.results import Round

    tree = dict(levels=((1, 2), (0, 1)), parents=(0, 0, 1) + tuple(range(3, 9)), path=(0, 1))
    assert round_badge(Round("dspark", 3, [5, 6], 1, 9, "", 0.1, copied=1, **tree)) == "tree of 8 + 1 copied: landed 1"
    assert round_badge(Round("dspark", 3, [5, 6], 1, 8, "", 0.1, **tree)) == "tree of 8: landed 1"
