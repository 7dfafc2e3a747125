"""The prompt-lookup lane on the page: its own colour in every place a lane is drawn (card, dot, strip, the
per-round chart, the per-slot chart, the sweep's bars), words that stay true when a racer without a head is
among the slow ones, the Settings box ticked by default only where the preset misses a head, and in a real
browser a race with the lane on (four lanes side by side on a desktop, stacked on a phone; pictures in the
artifacts) and the column gone again once a race runs without it.

Browser tests reuse the session's served app (tiny random models) and Chromium (tests/conftest.py)."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from test_app import QUOTING, artifacts, opened, screenshot, set_max_tokens, visit  # noqa: E402
from test_outcome import result  # noqa: E402
from test_page import race_to_the_end, settings  # noqa: E402
from test_race_bar import table_rows  # noqa: E402

from demo.handlers import READY, knob_limits, lookup_lane  # noqa: E402
from demo.lanes import COLORS, LIGHT, Lane  # noqa: E402
from demo.notes import below_greedy_html  # noqa: E402
from demo.race_tab import COLORS as SERIES_COLORS  # noqa: E402
from demo.slot_chart import slot_chart  # noqa: E402
from demo.view import View, idle_lanes  # noqa: E402

LANES4 = ("dspark", "dflash", "lookup", "greedy")


# -- without a browser -----------------------------------------------------------------------------

def test_the_lookup_lane_has_a_colour_of_its_own_everywhere():
    own_token = "245,158,11"  # the pale amber the target's own tokens are painted in (style.css .tok-own)
    assert len(set(COLORS.values())) == 4 and len(set(LIGHT.values())) == 3
    css = (ROOT / "demo" / "style.css").read_text()
    assert f".tok-own {{ background: rgba({own_token},.20); }}" in css.replace(".sw.own, ", "")
    assert COLORS["lookup"] == "#ea580c" and own_token not in COLORS["lookup"]
    for rule in (".lane-card.lookup", ".dot.lookup", ".strip-lane.lookup", ".slot-chart .lookup"):
        assert re.search(re.escape(rule) + r"[^{]*\{[^}]*#ea580c", css), rule
    assert SERIES_COLORS["Prompt lookup"] == COLORS["lookup"] and SERIES_COLORS["Prompt lookup drafts"] == LIGHT["lookup"]


class Meter:
    def __init__(self, accept_lengths, drafted):
        self.accept_lengths, self.drafted = accept_lengths, drafted


def test_the_round_chart_and_the_slot_chart_draw_the_lookup_lane():
    view = View({n: Lane(n) for n in ("dspark", "lookup", "greedy")}, state="racing")
    view.lanes["dspark"].meter = Meter([2, 1], [3, 2])
    assert view.plot() is None  # until every drafter has a round: the chart keeps its first frame's colours
    view.lanes["lookup"].meter = Meter([4], [4])
    assert sorted(view.plot()["series"].unique()) == ["DSpark", "DSpark drafts", "Prompt lookup",
                                                      "Prompt lookup drafts"]
    rows = [{"slot": 1, "reached": 6, "landed": 3}, {"slot": 2, "reached": 3, "landed": 3}]
    both = slot_chart({"dspark": rows, "lookup": rows})
    assert 'class="bar lookup"' in both and "Prompt lookup: 1st draft lands 50% of 6 rounds" in both
    assert "each drafter&#x27;s drafts land" in both  # lookup is no head: the title says so
    assert "each head&#x27;s drafts land" in slot_chart({"dspark": rows})


def finished(**finish: float) -> View:
    from spec.race.outcome import Outcome

    view = View({n: Lane(n) for n in finish}, state="finished")
    view.outcome = Outcome.of({n: result(n, t, rounds=30) for n, t in finish.items()})
    return view


def test_the_slower_note_says_why_in_words_true_of_the_lanes_it_names():
    only = below_greedy_html(finished(lookup=3.5, dflash=2.0, greedy=3.0))
    assert "Prompt lookup ×0.86" in only and "DFlash" not in only
    assert "only copies" in only and "head" not in only  # no head to blame
    both = below_greedy_html(finished(lookup=3.5, dspark=3.6, greedy=3.0))
    assert "A weak head" in both and "only copies" in both and "plus the drafting" in both
    assert "the head's drafting" in below_greedy_html(finished(dspark=3.6, greedy=3.0))


def stage(missing: dict) -> SimpleNamespace:
    arena = SimpleNamespace(heads={"dflash": SimpleNamespace(max_drafts=8)}, missing=missing,
                            target=SimpleNamespace(can_think=False))
    return SimpleNamespace(arena=arena)


def test_the_lookup_box_starts_ticked_only_where_the_preset_misses_a_head():
    gap = stage({"dspark": "no DSpark head is published for Qwen3.5"})
    assert knob_limits(gap)[-1].value is True and knob_limits(stage({}))[-1].value is False
    cards = dict(zip(("dspark", "dflash", "lookup", "greedy"), idle_lanes(gap)[::2]))
    assert "not in this race (no DSpark head is published" in cards["dspark"] and "off" not in cards["lookup"]
    assert "lane off in Settings" in idle_lanes(stage({}))[4]  # every head loaded: the lookup lane waits
    meters, text = lookup_lane(True, READY)  # ticked before any race: its idle card at once
    assert 'class="lane-card lookup"' in meters and "Press Run race." in text
    assert "lane off in Settings" in lookup_lane(False, READY)[0]
    assert all(x is not None and not isinstance(x, str) for x in lookup_lane(False, '<div class="status finished">'))


def test_the_sweep_bars_give_lookup_its_bar_and_leave_no_gap():
    import pandas as pd

    from demo.sweep_tab import bars_figure

    table = pd.DataFrame([{"method": m, "domain": d, "speedup": x} for d in ("chat", "code")
                          for m, x in (("DSpark", 1.2), ("lookup", 1.6), ("greedy", 1.0))])
    ax = bars_figure(table).axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert sorted(labels) == ["DSpark", "Prompt lookup", "greedy = 1.0"] and len(ax.containers) == 2


# -- in the browser --------------------------------------------------------------------------------

LANES_JS = """() => ['dspark', 'dflash', 'lookup', 'greedy'].map(n => {
  const c = document.querySelector(`#meters-${n} .lane-card`), r = c.getBoundingClientRect();
  return {n, l: r.left, r: r.right, t: r.top, b: r.bottom, shown: r.width > 0 && r.height > 0,
          spill: [...c.querySelectorAll('.m > div, .lane-name, .lane-note')].some(k => k.scrollWidth > k.clientWidth + 1)};
})"""


def lanes_fit(page, width: int, side_by_side: bool) -> list[dict]:
    """The four lanes drawn, nothing spilling, the page no wider than the screen; in one row or one column."""
    boxes = page.evaluate(LANES_JS)
    assert page.evaluate("() => document.documentElement.scrollWidth") <= width
    assert all(b["shown"] and not b["spill"] for b in boxes), boxes
    if side_by_side:
        assert len({round(b["t"]) for b in boxes}) == 1 and all(a["r"] <= b["l"] for a, b in zip(boxes, boxes[1:]))
    else:
        assert all(a["b"] <= b["t"] and abs(a["l"] - b["l"]) < 2 for a, b in zip(boxes, boxes[1:])), boxes
    return boxes


@pytest.mark.browser
@pytest.mark.parametrize("size", [(1440, 1000), (390, 844)])
def test_the_lookup_lane_races_on_the_page(app, browser, size):
    """Off by default with both heads loaded (no column); ticked in Settings its lane appears, races a prompt
    that quotes itself, and ends with its numbers, a place, the lossless verdict and its row in the table;
    a race run with it unticked again takes its column away."""
    from playwright.sync_api import expect

    tag = "phone" if size[0] < 500 else "desktop"
    with opened(browser, f"lookup-{tag}-failure.png", size=size) as page:
        visit(page, app.url)
        expect(page.locator("#meters-lookup .lane-card.off")).to_be_hidden()  # off: no column at all
        page.fill("#prompt textarea", QUOTING)
        settings(page, True)
        set_max_tokens(page, 32)
        page.locator("#lookup input[type=checkbox]").check()
        expect(page.locator("#meters-lookup .lane-card.lookup")).to_be_visible()  # its idle card, at once
        settings(page, False)
        race_to_the_end(page)
        values = page.locator("#meters-lookup .m .v").all_inner_texts()
        assert re.fullmatch(r"\d+\.\d\d", values[0]) and float(values[1]) > 0, values  # accept, tok/s
        assert re.fullmatch(r"×\d+\.\d\d", values[2]) and values[3] == "32", values  # speedup, tokens
        expect(page.locator("#meters-lookup .verdict.ok")).to_have_text("✓ identical to greedy")
        expect(page.locator("#meters-lookup .place")).to_have_text(re.compile(r"^=?[1-4](st|nd|rd|th)$"))
        header, rows = table_rows(page)
        row = next(r for r in rows if r[header.index("engine")] == "lookup")
        assert row[header.index("lossless (vs greedy)")] == "identical to greedy", row
        expect(page.locator("#status")).to_contain_text("Prompt lookup")
        expect(page.locator("#plot-legend .lookup").first).to_be_visible()
        lanes_fit(page, size[0], side_by_side=size[0] > 1000)
        screenshot(page, f"lookup-{tag}.png")
        page.locator("#lanes").screenshot(path=str(artifacts() / f"lookup-lanes-{tag}.png"))
        if tag == "phone":
            return
        settings(page, True)
        page.locator("#lookup input[type=checkbox]").uncheck()  # the finished race on the page keeps its lanes
        settings(page, False)
        expect(page.locator("#meters-lookup .lane-card.lookup")).to_be_visible()
        race_to_the_end(page)
        expect(page.locator("#meters-lookup .lane-card")).to_be_hidden()  # a race without it: gone again
        expect(page.locator("#plot-legend .lookup").first).to_be_hidden()
        assert "lookup" not in page.locator("#table").inner_text()


@pytest.mark.browser
def test_the_heads_cards_say_when_they_race_with_the_lookup_branch(app, browser):
    """On by default (Settings' box ticked): both heads' cards say "+ lookup branch"; unticked, a race runs the
    heads alone and the note is gone."""
    from playwright.sync_api import expect

    with opened(browser, "lookup-branch-failure.png") as page:
        visit(page, app.url)
        page.fill("#prompt textarea", QUOTING)
        settings(page, True)
        set_max_tokens(page, 24)
        expect(page.locator("#lookup-branch input[type=checkbox]")).to_be_checked()
        settings(page, False)
        race_to_the_end(page)
        for name in ("dspark", "dflash"):
            expect(page.locator(f"#meters-{name} .lane-note")).to_contain_text("+ lookup branch")
        expect(page.locator("#meters-greedy .lane-note")).not_to_contain_text("lookup")
        screenshot(page, "lookup-branch.png")
        settings(page, True)
        page.locator("#lookup-branch input[type=checkbox]").uncheck()
        settings(page, False)
        race_to_the_end(page)
        expect(page.locator("#meters-dspark .lane-note")).not_to_contain_text("lookup")
