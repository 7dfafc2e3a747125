"""Finishing and stopping as seen on screen (issue 39): the race bar (the status line with its headline, and
Stop beside it) is on screen at every moment of a race, sampled every frame while the user scrolls the lanes
and at the finish; a stopped race says so once and lists the lanes in the order they had got to; a race
file that cannot be opened says why where the user looks. On a desktop (1440x900) and a 390 px phone.

Browser tests reuse the session's served app (tiny random models) and Chromium (tests/conftest.py)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from test_app import STREAMING_JS, artifacts, opened, visit  # noqa: E402
from test_page import fresh, open_file, settings  # noqa: E402

SIZES = [(1440, 900), (390, 844)]
# Every frame from the race's start: where the status line and Stop are (and the state the status is in).
WATCH_JS = """() => {
  window.seen = []; window.watching = true;
  const box = e => { const r = e.getBoundingClientRect(); return {t: r.top, b: r.bottom}; };
  const tick = () => {
    const s = document.querySelector('#status .status'), cls = s ? s.className : '';
    if (/\\b(starting|racing|finished|stopped)\\b/.test(cls))
      window.seen.push({cls, h: innerHeight, y: scrollY, status: box(s), stop: box(document.querySelector('#stop'))});
    if (window.watching) requestAnimationFrame(tick);
  };
  requestAnimationFrame(tick);
}"""
# A user scrolling while the race runs (never after it: then the page is theirs again).
SCROLL_JS = """(to) => { if (!document.querySelector('#status .racing')) return false;
  window.scrollTo(0, to === 'end' ? document.documentElement.scrollHeight : to); return true; }"""


def long_race(page, url: str, tokens: int) -> None:
    """A fresh page runs a long race, every frame watched (WATCH_JS), until all three lanes stream."""
    fresh(page, url, tokens, "Tell me a long story.")
    page.evaluate(WATCH_JS)
    page.click("#run")
    page.wait_for_function(STREAMING_JS, timeout=60_000, polling="raf")


def out_of_view(seen: list[dict]) -> list[dict]:
    """Frames where the status line's first line (the headline's start) or Stop was off screen."""
    return [f for f in seen if not (-1 <= f["status"]["t"] and f["status"]["t"] + 20 <= f["h"]
                                    and -1 <= f["stop"]["t"] and f["stop"]["b"] <= f["h"] + 1)]


def watched(page) -> list[dict]:
    page.wait_for_timeout(600)  # frames after the last update
    return page.evaluate("() => { window.watching = false; return window.seen; }")


def scroll_around(page) -> None:
    """Down the lanes, back to the prompt, to the page's end: as far as the race lasts."""
    for to in (700, 0, "end"):
        if not page.evaluate(SCROLL_JS, to):
            return
        page.wait_for_timeout(400)


@pytest.mark.browser
@pytest.mark.parametrize("size", SIZES)
def test_the_headline_and_stop_stay_in_view_through_the_finish(app, browser, size):
    """It once finished with the winner sentence 71 px above the screen (desktop) and Stop by the prompt,
    out of view the whole race."""
    tag = "phone" if size[0] < 500 else "desktop"
    with opened(browser, f"race-bar-{tag}-failure.png", size=size) as page:
        long_race(page, app.url, 600)
        if page.evaluate(SCROLL_JS, 700):
            page.wait_for_timeout(300)
            page.screenshot(path=str(artifacts() / f"race-bar-{tag}-live.png"))
        scroll_around(page)
        page.wait_for_selector("#status .status.finished", timeout=120_000)
        seen = watched(page)
        assert sum("racing" in f["cls"] for f in seen) >= 10 and "finished" in seen[-1]["cls"], seen[-3:]
        assert out_of_view(seen) == [], out_of_view(seen)[:5]
        winner = page.evaluate("() => { const r = document.querySelector('#status .winner').getBoundingClientRect();"
                               " return [r.top, r.bottom, innerHeight]; }")
        assert 0 <= winner[0] and winner[1] <= winner[2], winner  # the whole winner sentence
        page.screenshot(path=str(artifacts() / f"race-bar-{tag}-finished.png"))
        settings(page, True)  # and the tiny target's chat template has no thinking switch: not offered
        assert page.locator("#thinking").is_hidden()


def table_rows(page) -> tuple[list[str], list[list[str]]]:
    """The results table's header and rows as the page shows them (Gradio draws the rows as a grid of divs)."""
    return page.evaluate("""() => [[...document.querySelectorAll('#table thead th')].map(h => h.innerText.trim()),
        [...document.querySelectorAll('#table .virtual-row')].map(r => [...r.querySelectorAll('[role=gridcell]')]
          .map(c => c.textContent.trim()))]""")


@pytest.mark.browser
@pytest.mark.parametrize("size", SIZES)
def test_a_stopped_race_says_so_once_in_the_order_the_lanes_had_got_to(app, browser, size):
    """Stop is pressed where the user is (the lanes, scrolled down); the result reads "Stopped:" once (it
    read "Stopped. Stopped: no places") and the table is headed and ordered by how far each lane had got
    (it was headed "fastest first" and read greedy 1, DFlash 0.81, DSpark 1.02)."""
    tag = "phone" if size[0] < 500 else "desktop"
    with opened(browser, f"race-bar-stopped-{tag}-failure.png", size=size) as page:
        long_race(page, app.url, 2000)
        page.evaluate("() => window.scrollBy(0, 700)")
        page.wait_for_timeout(300)
        stop = page.evaluate("() => { const r = document.querySelector('#stop').getBoundingClientRect();"
                             " return [r.top, r.bottom, innerHeight]; }")
        assert 0 <= stop[0] and stop[1] <= stop[2], stop  # in view where the user is, before any click
        page.click("#stop")
        page.wait_for_selector("#status .status.stopped", timeout=60_000)
        seen = watched(page)
        assert out_of_view(seen) == [], out_of_view(seen)[:5]
        status = page.locator("#status").inner_text()
        assert status.startswith("Stopped: no places") and status.count("Stopped") == 1, status
        order = re.search(r"Ahead when stopped, by tokens per engine second: (.*?) · race clock", status).group(1)
        named = re.findall(r"(DSpark|DFlash|Greedy baseline) \d+ tokens", order)
        page.screenshot(path=str(artifacts() / f"race-bar-stopped-{tag}.png"))
        label = page.locator("#table").inner_text()
        assert "Results of a stopped race" in label and "ahead first" in label and "fastest first" not in label
        page.locator("#table").scroll_into_view_if_needed()
        heads, rows = table_rows(page)
        col = heads.index("speedup")
        speedups = [float(r[col].lstrip("×")) for r in rows]
        assert len(rows) == 3 and speedups == sorted(speedups, reverse=True), rows
        assert [r[heads.index("engine")] for r in rows] == [{"Greedy baseline": "greedy"}.get(n, n.lower())
                                                             for n in named], (rows, named)
        assert "×1.00" in [r[col] for r in rows]  # greedy's speedup as its card writes it
        page.locator("#table").screenshot(path=str(artifacts() / f"race-bar-stopped-table-{tag}.png"))


@pytest.mark.browser
@pytest.mark.parametrize("size", SIZES)
def test_a_race_file_that_cannot_be_opened_says_why_in_view(app, browser, tmp_path, size):
    """It said "Not opened." in view while the reason sat in the error box 900 px above, with no toast."""
    tag = "phone" if size[0] < 500 else "desktop"
    bad = tmp_path / "broken.json"
    bad.write_text('{"spec_arena_results": 3, "events": [')
    with opened(browser, f"race-bar-bad-file-{tag}-failure.png", size=size) as page:
        visit(page, app.url)
        open_file(page, bad)
        page.wait_for_function("() => /Not opened/.test(document.querySelector('#status').innerText)",
                               timeout=30_000)
        status = page.locator("#status .status")
        assert re.match(r"Not opened: not a race file: it is not JSON", status.inner_text()), status.inner_text()
        box = page.evaluate("() => { const r = document.querySelector('#status .status').getBoundingClientRect();"
                            " return [r.top, r.bottom, innerHeight]; }")
        assert 0 <= box[0] and box[1] <= box[2], box
        toast = page.locator("[data-testid=toast-body]")
        toast.first.wait_for(timeout=10_000)
        assert "not a race file" in toast.first.inner_text()
        page.wait_for_timeout(800)  # the toast fades in
        page.screenshot(path=str(artifacts() / f"race-bar-bad-file-{tag}.png"))
