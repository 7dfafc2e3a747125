"""The race page as a user meets it (issue 19): a phone's width, a queued second user, two races in a
row without console errors, whole-round x labels on the chart, Run off while a race runs; and the two
notes a finished lane or race can carry (cut at max tokens, slower than greedy).

Browser tests reuse the session's served app (tiny random models) and Chromium (tests/conftest.py)."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from test_app import (  # noqa: E402,F401
    PROMPT,
    STREAMING_JS,
    artifacts,
    fixed_lengths,
    opened,
    set_max_tokens,
    set_slider,
    visit,
    wait_done,
)
from test_outcome import race, result  # noqa: E402

from demo.lanes import Lane, meters_html, text_html  # noqa: E402
from demo.notes import below_greedy_html  # noqa: E402
from demo.view import View  # noqa: E402

LANE_IDS = ("dspark", "dflash", "greedy")


def settings(page, want_open: bool) -> None:
    """Open or close the Settings panel (a click toggles it)."""
    if (page.locator("#settings button.label-wrap.open").count() > 0) != want_open:
        page.locator("#settings button.label-wrap").click()


def fresh(page, url: str, tokens: int, prompt: str = PROMPT) -> None:
    visit(page, url)
    page.wait_for_selector("#run")
    page.fill("#prompt textarea", prompt)
    settings(page, True)
    set_max_tokens(page, tokens)
    settings(page, False)


# -- without a browser -----------------------------------------------------------------------------

def finished(**finish: float) -> View:
    """A finished view of hand-built results (finish times in engine seconds, 64 tokens each)."""
    from spec.race.outcome import Outcome

    view = View({n: Lane(n) for n in finish}, state="finished")
    view.outcome = Outcome.of(race(**finish))
    for name, o in view.outcome.lanes.items():
        view.lanes[name].outcome = o
    return view


def test_a_lane_cut_by_max_tokens_says_so():
    from spec.race.outcome import Outcome

    lane = Lane("dflash")
    lane.outcome = Outcome.of({"dflash": result("dflash", 2.0, reason="length")}).lanes["dflash"]
    assert "cut at max tokens" in meters_html("dflash", lane, 1.0)
    lane.outcome = Outcome.of({"dflash": result("dflash", 2.0, reason="eos")}).lanes["dflash"]
    assert "cut at max tokens" not in meters_html("dflash", lane, 1.0)
    lane.outcome = Outcome.of({"dflash": result("dflash", 2.0, reason="stopped")}).lanes["dflash"]
    card = meters_html("dflash", lane, 1.0)
    assert "stopped at" in card and "finished" not in card  # a stopped lane never says finished


def test_a_lane_shows_its_last_rounds_tree_and_the_branch_that_landed():
    """Live, a drafting lane's card names what its last round verified; a tree round is drawn under the
    lane's text, its committed path in the lane's colour, and the badge says which guess landed where."""
    from spec.loop.results import Round
    from spec.race.run import Meter

    lane = Lane("dflash")
    lane.meter = Meter()
    # rows: 1, 2 under the anchor; 3 under 2; 4 under 1: the path took the 2nd guess at depth 1, then its child
    tree = Round("dflash", 1, [5, 6, 7], 2, 4, "", 0.1, levels=((2, 2), (1, 1)), parents=(0, 0, 2, 1),
                 path=(0, 2, 3))
    lane.meter.add(tree)
    card = meters_html("dflash", lane, 1.0)
    assert "tree of 4: landed 2 via the 2nd guess at depth 1" in card and "<svg" not in card
    svg = re.search(r'<svg class="round-tree dflash".*?</svg>', text_html("dflash", lane)).group(0)
    assert svg.count("<circle") == 5 and svg.count("<line") == 4
    assert svg.count('line x1') == 4 and svg.count('class="hit"/>') == 2 + 3  # 2 edges and 3 nodes on the path
    chain = Round("dflash", 2, [5, 6], 1, 3, "", 0.1, levels=((1, 1), (0, 1)), parents=(0, 1, 2), path=(0, 1))
    lane.meter.add(chain)
    card = meters_html("dflash", lane, 1.0)
    assert "drafting 3" in card and "<svg" not in text_html("dflash", lane)  # a chain: its length, no picture
    lane.meter.add(Round("dflash", 3, [9], 0, 0, "", 0.1))
    assert "parked: plain step" in meters_html("dflash", lane, 1.0)
    from spec.race.outcome import (
        Outcome,  # finished: how often it branched, and the last tree round's picture
    )

    lane.outcome = Outcome.of({"dflash": result("dflash", 2.0)}).lanes["dflash"]
    card = meters_html("dflash", lane, 1.0)
    assert "trees in 1 of 3 rounds" in card and "parked" not in card
    assert re.search(r'<svg class="round-tree dflash".*?<title>the last tree round: 4 drafts',
                     text_html("dflash", lane))
    chains = Lane("dflash")
    chains.meter, chains.outcome = Meter(), lane.outcome
    chains.meter.add(chain)
    assert "trees in" not in meters_html("dflash", chains, 1.0)  # chains only: nothing about trees


def test_a_head_slower_than_greedy_gets_a_note_at_the_end():
    view = finished(dspark=2.5, dflash=3.75, greedy=3.0)
    note = below_greedy_html(view)
    assert "DFlash ×0.80" in note and "DSpark" not in note and "verif" in note
    assert below_greedy_html(finished(dspark=2.5, dflash=3.05, greedy=3.0)) == ""  # a tie is not slower
    view.state = "racing"
    assert below_greedy_html(view) == ""


def test_the_status_line_the_cards_and_the_table_tell_one_story():
    from demo.status import status_html

    view = finished(dspark=2.61, dflash=2.0, greedy=2.62)
    line = status_html(view)
    assert "DFlash wins: ×1.31 vs greedy, end to end." in line
    assert "Finish: DFlash 2.00 s → DSpark 2.61 s = Greedy baseline 2.62 s" in line
    cards = {n: meters_html(n, view.lanes[n], view.speedup(n)) for n in view.lanes}
    assert ">1st<" in cards["dflash"] and ">=2nd<" in cards["dspark"] and ">=2nd<" in cards["greedy"]
    assert "×1.31" in cards["dflash"] and "×1.00" in cards["dspark"]


def test_the_chart_redraws_at_most_once_a_second_while_racing_and_at_once_at_the_end():
    """Redrawn at the lanes' pace (every 0.12 s), the chart put the page 8-11 s behind a 10-15 s race on two
    cores and slowed the engines it was measuring; the lanes' texts and cards keep that pace."""
    import gradio as gr

    from demo.view import PLOT_EVERY

    def drawn(update) -> bool:
        return not (isinstance(update, dict) and update == gr.skip())

    view = View({n: Lane(n) for n in ("dspark", "greedy")}, state="racing")
    sent = []
    for i in range(30):  # a round every 0.1 s of race wall
        view.wall = 0.1 * i
        view.lanes["dspark"].meter = SimpleNamespace(accept_lengths=[2] * (i + 1), drafted=[3] * (i + 1))
        if drawn(view.plot_update()):
            sent.append(view.wall)
    assert sent[0] == 0.0  # the first frame at once: it fixes the lanes' colours for the race
    assert len(sent) == 3 and all(b - a >= PLOT_EVERY for a, b in zip(sent, sent[1:])), sent
    view.state = "finished"
    assert drawn(view.plot_update())  # the finished chart holds every round


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
        visit(page, app.url)
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
        page.click("#stop")  # at once: on the tiny target a lane can fill its context in about 2 s
        wait_done(page, "stopped", timeout=60_000)
        for name in LANE_IDS:  # a stopped lane never says finished
            card = page.locator(f"#meters-{name}").inner_text().lower()
            assert "finished" not in card and "stopped" in card, card
        expect(page.locator("#run")).to_be_enabled(timeout=10_000)
        expect(page.locator("#run")).to_have_text("Run race")
        expect(page.locator("#stop")).to_be_disabled()
        page.fill("#prompt textarea", " ")  # a refused run gives both back too
        page.click("#run")
        expect(page.locator("#errors .error-box")).to_contain_text("prompt is empty")
        expect(page.locator("#run")).to_be_enabled(timeout=10_000)
        expect(page.locator("#stop")).to_be_disabled()


@pytest.mark.browser
def test_a_lane_draws_its_last_rounds_tree(app, browser):
    """Fixed draft lengths with trees: while racing, each head's card names its tree and draws it."""
    from playwright.sync_api import expect

    with opened(browser, "tree-failure.png") as page:
        fresh(page, app.url, 400, "Tell me a long story.")
        settings(page, True)
        fixed_lengths(page, dspark_max_draft=4, dflash_max_draft=4, tree=8)
        settings(page, False)
        page.click("#run")
        for lane in ("dspark", "dflash"):
            page.wait_for_selector(f"#text-{lane} svg.round-tree", timeout=60_000)
            expect(page.locator(f".lane-card.{lane} .chosen")).to_contain_text("tree of 8")
        page.locator("#lanes").screenshot(path=str(artifacts() / "lanes-tree.png"))
        page.click("#stop")
        wait_done(page, "stopped", timeout=60_000)
        for lane in ("dspark", "dflash"):  # the stopped race keeps each head's last tree and how often it branched
            badge = page.locator(f".lane-card.{lane} .chosen")
            expect(badge).to_contain_text(re.compile(r"trees in \d+ of \d+ rounds"))
            assert page.locator(f"#text-{lane} svg.round-tree").count() == 1  # under its text, captioned
            expect(page.locator(f"#text-{lane} figure.lane-tree figcaption")).to_contain_text("The last tree round")
        tops = page.evaluate("() => ['dspark', 'dflash', 'greedy'].map(n => "  # each text's box (a long text scrolls in it)
                             "document.querySelector(`#text-${n} .html-container`).getBoundingClientRect().top)")
        assert max(tops) - min(tops) <= 3, tops  # the three texts start at one height


# -- the page never contradicts itself (issue 28) ----------------------------------------------------

@pytest.mark.browser
def test_a_replay_changes_no_number_on_the_page(app, browser):
    from test_app import page_numbers

    with opened(browser, "replay-failure.png", size=(1440, 900)) as page:
        fresh(page, app.url, 40)
        race_to_the_end(page)
        before = page_numbers(page)
        page.evaluate("() => document.querySelector('#status .status').classList.add('old')")
        page.click("#replay")
        page.wait_for_selector("#status .status.finished:not(.old)", timeout=60_000)
        assert "(replayed)" in page.locator("#status").inner_text()
        assert page_numbers(page) == before


@pytest.mark.browser
def test_a_tie_is_called_a_tie(app, browser):
    """One new token after a long shared prefill: every lane ends at the prefill's time, a tie, said as one,
    and every card shares first place (the page once crowned one lane and badged another)."""
    with opened(browser, "tie-failure.png") as page:
        fresh(page, app.url, 1, "count the words: " + "word " * 80)  # ~420 tokens of the tiny 512-token context
        race_to_the_end(page)
        status = page.locator("#status").inner_text()
        assert "A tie: all three lanes within" in status and "wins" not in status, status
        for name in LANE_IDS:
            assert page.locator(f"#meters-{name} .place").inner_text() == "=1st"
            assert page.locator(f"#meters-{name} .m .v").first.inner_text() == "–"  # no round: no accept length
        assert "=1st" in page.locator("#table").inner_text()


IN_VIEW_JS = """() => {
  const r = s => document.querySelector(s).getBoundingClientRect();
  const strip = [...document.querySelectorAll('#status .strip-lane')].map(e => e.getBoundingClientRect());
  return {h: window.innerHeight, status: r('#status'), strip: strip.map(b => ({t: b.top, b: b.bottom})),
          meters: ['dspark', 'dflash', 'greedy'].map(n => r(`#meters-${n}`)),
          text: r('#text-dspark')};
}"""


@pytest.mark.browser
@pytest.mark.parametrize("size", [(1440, 900), (390, 844)])
def test_the_race_is_in_view_after_run(app, browser, size):
    """After Run the status line and its strip of the three lanes are on screen (sticky at the top); on a
    wide screen the three lane cards and the start of their text are too, without scrolling."""
    from playwright.sync_api import expect

    with opened(browser, f"in-view-{size[0]}-failure.png", size=size) as page:
        fresh(page, app.url, 2000, "Tell me a long story.")
        page.click("#run")
        page.wait_for_function(STREAMING_JS, timeout=60_000, polling="raf")
        page.wait_for_timeout(800)  # the smooth scroll
        got = page.evaluate(IN_VIEW_JS)
        assert 0 <= got["status"]["top"] and got["status"]["bottom"] <= got["h"], got
        assert len(got["strip"]) == 3 and all(0 <= b["t"] and b["b"] <= got["h"] for b in got["strip"]), got
        if size[0] > 1000:
            assert all(0 <= m["top"] and m["bottom"] <= got["h"] for m in got["meters"]), got
            assert got["text"]["top"] + 60 <= got["h"], got
        page.screenshot(path=str(artifacts() / f"in-view-{size[0]}.png"))
        page.evaluate("() => window.scrollBy(0, 600)")  # scrolled down the lanes: the strip stays in view
        page.wait_for_timeout(300)
        got = page.evaluate(IN_VIEW_JS)
        assert all(0 <= b["t"] and b["b"] <= got["h"] for b in got["strip"]), got
        page.click("#stop")  # the lanes that are still racing (the run-and-stop test checks what they say)
        expect(page.locator("#run")).to_be_enabled(timeout=60_000)


@pytest.mark.browser
def test_the_sweep_stop_confirms_and_keeps_what_was_raced(app, browser):
    from playwright.sync_api import expect

    with opened(browser, "sweep-stop-failure.png") as page:
        visit(page, app.url)
        page.get_by_role("tab", name="Domain sweep").click()
        expect(page.locator("#sweep-stop")).to_be_disabled()  # nothing runs: Stop is off
        set_slider(page, "sweep-max-new", 200)
        page.click("#sweep-run")
        expect(page.locator("#sweep-run")).to_be_disabled()
        expect(page.locator("#sweep-run")).to_have_text("Sweeping…")
        page.wait_for_function("() => /Raced [1-7] of 8/.test(document.querySelector('#sweep-status').innerText)",
                               timeout=90_000, polling="raf")
        page.click("#sweep-stop")
        expect(page.locator("#sweep-status")).to_contain_text(re.compile(r"Stopped after [1-7] of 8 prompts"),
                                                              timeout=30_000)
        expect(page.locator("#sweep-status .pulse")).to_have_count(0)
        for ext in ("csv", "json"):  # the partial results, downloadable, named by the time they were run
            expect(page.locator(f'#sweep-files a[href*="spec-arena-sweep-2"][href$=".{ext}"]')).to_be_attached()
        expect(page.locator("#sweep-run")).to_be_enabled()
        expect(page.locator("#sweep-stop")).to_be_disabled()
        assert "chat" in page.locator("#sweep-table").inner_text()


@pytest.mark.browser
def test_rejected_input_leaves_no_traceback_or_warning(app, browser):
    """Bad input gets one clear message and the server's log stays clean (it once logged two tracebacks per
    rejected API call, and a warning per Shift+Enter)."""
    from gradio_client import Client
    from gradio_client.exceptions import AppError

    mark = app.log.stat().st_size
    c = Client(app.url, verbose=False)
    for kwargs, why in (({"max_new_tokens": 5000}, "between 1 and 2048"), ({"dspark_max_draft": "soon"}, "auto"),
                        ({"max_new_tokens": 0}, "between 1 and 2048")):
        with pytest.raises(AppError, match=why):
            c.predict(PROMPT, api_name="/race", **kwargs)
    with pytest.raises(AppError, match="between 1 and 6"):
        c.predict("chat", 0, api_name="/sweep")
    with opened(browser) as page:
        fresh(page, app.url, 4)
        race_to_the_end(page, submit_with_keys=True)
    log = app.log.read_text()[mark:]
    assert "Traceback" not in log and "Warning" not in log, log


@pytest.mark.browser
def test_the_api_runs_what_the_page_runs(app, browser):
    """The page's defaults (Auto draft length on) and the API's are the same settings, echoed in both
    results, with the same table columns."""
    import json
    import urllib.request

    from gradio_client import Client

    with opened(browser) as page:
        fresh(page, app.url, 12)
        race_to_the_end(page)
        href = page.locator('#files a[href$=".json"]').get_attribute("href")
        columns = page.locator("#table thead th").all_inner_texts()
    with urllib.request.urlopen(href if href.startswith("http") else app.url.rstrip("/") + href) as r:
        doc = json.loads(r.read())
    out = Client(app.url, verbose=False).predict(PROMPT, 12, api_name="/race")
    assert out["settings"] == doc["settings"] and doc["settings"]["dflash_max_draft"] == "auto"
    assert [c.strip() for c in columns if c.strip()] == out["columns"]


# -- why a head wins (issue 31) ----------------------------------------------------------------------

@pytest.mark.browser
@pytest.mark.parametrize("size", [(1440, 900), (390, 844)])
def test_why_a_head_wins_is_on_the_page(app, browser, size):
    """While the race runs the per-slot chart fills for both heads and DSpark's confidence picture shows; a
    rejected draft shows the head's guess when tapped (focus: a phone has no hover); the finished race offers
    its Markdown summary. Screenshots on a desktop and a 390 px phone."""
    tag = "phone" if size[0] < 500 else "desktop"
    with opened(browser, f"why-{tag}-failure.png", size=size) as page:
        fresh(page, app.url, 48)
        story = page.locator("#story").inner_text()  # before any race: who wins where, and where it was measured
        assert re.search(r"Who wins where: (measured on .+ \d{4}-\d\d-\d\d|your last domain sweep)", story), story
        assert re.search(r"(?m)^(chat|code|math): .*(wins|tie|neither|slower than|over greedy)", story), story
        page.locator("#story").screenshot(path=str(artifacts() / f"story-{tag}.png"))
        settings(page, True)
        fixed_lengths(page, dspark_max_draft=3, dflash_max_draft=3, tree=0)  # the tiny random heads would park with auto
        settings(page, False)
        race_to_the_end(page)
        for head in ("dspark", "dflash"):
            assert page.locator(f"#why .slot-chart rect.bar.{head}").count() > 0, page.locator("#why").inner_html()
        assert "1st draft lands" in page.locator("#why .slot-reading").first.inner_text()
        assert page.locator("#why .conf-chart").count() == 1  # the tiny DSpark head has a confidence head
        guess = page.locator("#text-dspark .tok-own.missed").first
        guess.scroll_into_view_if_needed()
        guess.click()
        assert page.evaluate("() => document.activeElement.classList.contains('missed')")
        assert guess.get_attribute("data-missed").startswith("drafted “")
        shown = page.evaluate("e => getComputedStyle(e, '::after').content", guess.element_handle())
        assert shown.startswith('"drafted'), shown  # the guess is drawn next to the token
        page.locator("#lanes").screenshot(path=str(artifacts() / f"missed-guess-{tag}.png"))
        page.locator("#why").screenshot(path=str(artifacts() / f"why-{tag}.png"))
        summary = page.locator("#summary textarea")
        assert summary.input_value().startswith("**Spec Arena race**")


def open_file(page, path) -> None:
    """Open a race file the way a user does: the button, then the file chooser."""
    with page.expect_file_chooser() as chooser:
        page.click("#open-race")
    chooser.value.set_files(str(path))


def replay_file(page, url: str, path) -> None:
    """A fresh page opens a race file and watches it replayed at 2x to its end."""
    visit(page, url)
    page.get_by_label("2x").check()
    open_file(page, path)
    page.wait_for_selector("#status .status.finished", timeout=60_000)


@pytest.mark.browser
@pytest.mark.parametrize("size", [(1440, 900), (390, 844)])
def test_an_opened_race_file_replays_the_same_race(app, browser, tiny_dir, tmp_path, size):
    """A race saved elsewhere (spec.race_file) opened on the page: replayed at the chosen speed, then the same
    table and texts as the file, with where and when it was raced; a foreign file gets one clear error."""
    import json

    from spec.heads.registry import load_dflash, load_dspark
    from spec.race.file import race_record
    from spec.race.run import run_race
    from spec.race.settings import RaceSettings
    from spec.target import load_target

    t = load_target(str(tiny_dir / "qwen3"))
    heads = {"dspark": load_dspark(str(tiny_dir / "dspark-qwen3"), t),
             "dflash": load_dflash(str(tiny_dir / "dflash-qwen3"), t)}
    events = list(run_race(t, heads, "A race from elsewhere.", RaceSettings(max_new_tokens=20)))
    path = tmp_path / "shared-race.json"
    path.write_text(json.dumps(race_record(events, "A race from elsewhere.", {"target": "tiny"})))
    tag = "phone" if size[0] < 500 else "desktop"
    with opened(browser, f"open-race-{tag}-failure.png", size=size) as page:
        replay_file(page, app.url, path)
        status = page.locator("#status").inner_text()
        assert "(replayed)" in status and "Opened shared-race.json" in status, status
        assert "Models: target tiny. Settings: 20 new tokens, T = 0 (greedy), DSpark draft length auto" in status
        assert events[-1].outcome.headline() in status
        for name, res in events[-1].results.items():
            assert page.locator(f"#text-{name} .lane-text").inner_text().strip() == res.text.strip()
        page.screenshot(path=str(artifacts() / f"opened-race-{tag}.png"), full_page=True)
        bad = tmp_path / "foreign.json"
        bad.write_text('{"hello": 1}')
        open_file(page, bad)
        page.wait_for_selector("#errors .error-box", timeout=30_000)
        assert "not a race file" in page.locator("#errors").inner_text()
