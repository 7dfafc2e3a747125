"""The race page as a user meets it (issue 19): a phone's width, a queued second user, two races in a
row without console errors, whole-round x labels on the chart, Run off while a race runs; and the two
notes a finished lane or race can carry (cut at max tokens, slower than greedy).

Browser tests reuse tests/test_app.py's served app (tiny random models) and Debian's Chromium."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from demo.lanes import Lane, meters_html  # noqa: E402
from demo.notes import below_greedy_html  # noqa: E402
from demo.view import View  # noqa: E402
from test_app import PROMPT, STREAMING_JS, app, browser, opened, set_max_tokens, wait_done  # noqa: E402,F401

LANE_IDS = ("dspark", "dflash", "greedy")


def settings(page, want_open: bool) -> None:
    """Open or close the Settings panel (a click toggles it)."""
    if (page.locator("#settings button.label-wrap.open").count() > 0) != want_open:
        page.locator("#settings button.label-wrap").click()


def fresh(page, url: str, tokens: int, prompt: str = PROMPT) -> None:
    page.goto(url)
    page.wait_for_selector("#run")
    page.fill("#prompt textarea", prompt)
    settings(page, True)
    set_max_tokens(page, tokens)
    settings(page, False)


# -- without a browser -----------------------------------------------------------------------------

class Meter:
    def __init__(self, tok_s: float, accept: float = 1.2):
        self.tok_s, self.busy, self.rounds, self.mean_accept = tok_s, 1.0, 10, accept
        self.tokens, self.clock, self.drafted, self.accept_lengths = 12, 1.0, [], [accept] * 10


class Result:
    def __init__(self, reason: str):
        self.finish_reason, self.text = reason, ""


def test_a_lane_cut_by_max_tokens_says_so():
    lane = Lane("dflash")
    lane.meter = Meter(10.0)
    lane.finish(Result("length"))
    assert "cut at max tokens" in meters_html("dflash", lane, 1.0)
    lane.finish(Result("eos"))
    assert "cut at max tokens" not in meters_html("dflash", lane, 1.0)


def test_a_head_slower_than_greedy_gets_a_note_at_the_end():
    view = View({n: Lane(n) for n in LANE_IDS}, state="finished")
    for name, tok_s in (("dspark", 12.0), ("dflash", 8.0), ("greedy", 10.0)):
        view.lanes[name].meter = Meter(tok_s)
    note = below_greedy_html(view)
    assert "DFlash ×0.80" in note and "DSpark" not in note and "verif" in note
    view.state = "racing"
    assert below_greedy_html(view) == ""


# -- in the browser --------------------------------------------------------------------------------

LAYOUT_JS = """() => {
  const box = e => { const r = e.getBoundingClientRect(); return {l: r.left, r: r.right, t: r.top, b: r.bottom}; };
  return {scroll: document.documentElement.scrollWidth, width: window.innerWidth,
    run: box(document.querySelector('#run')),
    lanes: ['dspark', 'dflash', 'greedy'].map(n => box(document.querySelector(`#meters-${n} .lane-card`))),
    labels: ['dspark', 'dflash', 'greedy'].map(n => [...document.querySelectorAll(`#meters-${n} .m > div`)]
      .map(k => ({...box(k), spill: k.scrollWidth > k.clientWidth + 1, text: k.textContent})))};
}"""


def overlap(a: dict, b: dict) -> bool:
    return a["l"] < b["r"] - 0.5 and b["l"] < a["r"] - 0.5 and a["t"] < b["b"] - 0.5 and b["t"] < a["b"] - 0.5


def check_layout(page, width: int) -> dict:
    got = page.evaluate(LAYOUT_JS)
    assert got["scroll"] <= got["width"] == width, f"the page is {got['scroll']} px wide at {width} px"
    assert 0 <= got["run"]["l"] and got["run"]["r"] <= width, got["run"]
    for lane in got["labels"]:
        assert len(lane) == 10  # five meters: a value and a label each
        for i, a in enumerate(lane):
            assert not a["spill"], f"{a['text']} spills out of its cell at {width} px"
            for b in lane[i + 1:]:
                assert not overlap(a, b), f"{a['text']} and {b['text']} overlap at {width} px"
    return got


@pytest.mark.browser
def test_the_page_fits_a_phone_and_a_wide_screen(app, browser):
    from playwright.sync_api import expect

    with opened(browser, size=(390, 844)) as page:
        page.goto(app.url)
        page.wait_for_selector("#meters-greedy .m")
        check_layout(page, 390)  # idle
        fresh(page, app.url, 8)
        race_to_the_end(page)  # the meters hold real numbers now
        got = check_layout(page, 390)
        expect(page.locator("#run")).to_be_visible()
        lanes = got["lanes"]
        for upper, lower in zip(lanes, lanes[1:]):  # stacked: one column, each lane below the last
            assert upper["b"] <= lower["t"] and abs(upper["l"] - lower["l"]) < 2, lanes
        settings(page, True)  # the open Settings do not widen the page either
        assert page.evaluate("() => document.documentElement.scrollWidth") <= 390
        settings(page, False)
        for width in (820, 1440):
            page.set_viewport_size({"width": width, "height": 1000})
            page.wait_for_timeout(300)
            got = check_layout(page, width)
        assert len({round(lane["t"]) for lane in got["lanes"]}) == 1, got["lanes"]  # side by side when wide


SHOWN_JS = """(sel) => {  // on screen for a person: a box, not faded, not clipped away by a parent
  const e = document.querySelector(sel);
  if (!e) return false;
  const r = e.getBoundingClientRect();
  if (r.width < 1 || r.height < 1) return false;
  let op = 1;
  for (let x = e; x; x = x.parentElement) {
    const s = getComputedStyle(x);
    op *= parseFloat(s.opacity);
    if (x !== e && s.overflow !== 'visible') {
      const p = x.getBoundingClientRect();
      if (r.top < p.top - 1 || r.bottom > p.bottom + 1 || r.left < p.left - 1 || r.right > p.right + 1) return false;
    }
  }
  return op >= 0.9;
}"""


@pytest.mark.browser
def test_a_second_page_sees_it_is_queued_then_races(app, browser):
    from playwright.sync_api import expect

    first, second = browser.new_page(), browser.new_page()
    try:
        fresh(first, app.url, 2000, "Tell me a long story.")
        fresh(second, app.url, 8)
        first.click("#run")
        first.wait_for_function(STREAMING_JS, timeout=60_000, polling="raf")
        second.click("#run")
        expect(second.locator("#status .status")).to_contain_text("Queued", timeout=10_000)
        second.wait_for_function(SHOWN_JS, arg="#status .status.queued", timeout=10_000)
        second.wait_for_function(SHOWN_JS, arg="#status .progress-text", timeout=20_000)  # Gradio's position
        expect(second.locator("#status .progress-text")).to_contain_text(re.compile(r"queue: *\d+ */ *\d+"))
        first.click("#stop")
        wait_done(first, "stopped", timeout=60_000)
        wait_done(second, timeout=60_000)  # its turn came: it raced to the end
        expect(second.locator("#meters-dflash .verdict.ok")).to_have_text("✓ identical to greedy")
    finally:
        first.close()
        second.close()


X_LABELS_JS = """() => [...document.querySelectorAll('#plot svg g.role-axis')]
  .filter(g => (g.getAttribute('aria-label') || '').startsWith('X-axis'))
  .flatMap(g => [...g.querySelectorAll('g.role-axis-label text')].map(t => t.textContent))"""


def race_to_the_end(page, submit_with_keys: bool = False) -> None:
    """One race; waits for ITS finish (the status line before it is marked old)."""
    page.evaluate("() => document.querySelector('#status .status').classList.add('old')")
    if submit_with_keys:
        page.locator("#prompt textarea").press("Shift+Enter")  # the shortcut the page names
    else:
        page.click("#run")
    page.wait_for_selector("#status .status.finished:not(.old)", timeout=60_000)


@pytest.mark.browser
def test_two_races_in_a_row_leave_no_console_errors(app, browser):
    page = browser.new_page(viewport={"width": 1440, "height": 1000})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(f"console: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"pageerror: {e}"))
    try:
        fresh(page, app.url, 12)
        race_to_the_end(page)
        race_to_the_end(page, submit_with_keys=True)
        page.wait_for_timeout(1000)  # a resize after the last update threw on the old page
        assert errors == []
    finally:
        page.close()


@pytest.mark.browser
def test_the_chart_labels_each_round_once(app, browser):
    with opened(browser) as page:
        for tokens in (3, 48):  # two rounds (ticks at halves once read 1, 2, 2) and more
            fresh(page, app.url, tokens)
            race_to_the_end(page)
            page.wait_for_function(f"() => ({X_LABELS_JS})().length > 0", timeout=10_000)
            page.wait_for_timeout(500)
            labels = page.evaluate(X_LABELS_JS)
            assert len(labels) == len(set(labels)) and all(re.fullmatch(r"\d+", x) for x in labels), labels


@pytest.mark.browser
def test_run_is_off_and_stop_on_only_while_racing(app, browser):
    from playwright.sync_api import expect

    with opened(browser) as page:
        fresh(page, app.url, 2000, "Tell me a long story.")
        expect(page.locator("#stop")).to_be_disabled()
        page.click("#run")
        expect(page.locator("#run")).to_be_disabled()
        expect(page.locator("#run")).to_have_text("Racing…")
        expect(page.locator("#stop")).to_be_enabled()
        page.wait_for_function(STREAMING_JS, timeout=60_000, polling="raf")
        page.click("#stop")
        wait_done(page, "stopped", timeout=60_000)
        expect(page.locator("#run")).to_be_enabled(timeout=10_000)
        expect(page.locator("#run")).to_have_text("Run race")
        expect(page.locator("#stop")).to_be_disabled()
        page.fill("#prompt textarea", " ")  # a refused run gives both back too
        page.click("#run")
        expect(page.locator("#errors .error-box")).to_contain_text("prompt is empty")
        expect(page.locator("#run")).to_be_enabled(timeout=10_000)
        expect(page.locator("#stop")).to_be_disabled()
