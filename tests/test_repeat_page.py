"""A repeat on the page (issue 39): Repeat 3 races the prompt three times in turn, the status counting the
races; at the end the status, the cards and the table all follow the repeat's medians (never one race's
places beside the repeat's), each card and the table give every race's speedup, and the status says whether
every race committed the same rounds. Hand-built views first, then the served tiny app in Chromium."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from test_app import artifacts, opened  # noqa: E402
from test_outcome import race  # noqa: E402
from test_page import fresh  # noqa: E402
from test_race_bar import table_rows  # noqa: E402

from demo.lanes import Lane, meters_html  # noqa: E402
from demo.status import status_html  # noqa: E402
from demo.view import View  # noqa: E402
from spec.race.outcome import Outcome  # noqa: E402
from spec.race.repeat import Repeated  # noqa: E402


def finished_repeat(*finishes: dict) -> View:
    """The page after a repeat of hand-built races: the last race fed, then the repeat shown."""
    results = [race(**f) for f in finishes]
    outs = [Outcome.of(r) for r in results]
    view = View({n: Lane(n) for n in finishes[-1]}, state="finished")
    view.outcome, view.verdicts = outs[-1], {n: "identical to greedy" for n in finishes[-1] if n != "greedy"}
    for name, o in outs[-1].lanes.items():
        view.lanes[name].outcome = o
    view.show_repeat(Repeated.of(list(zip(results, outs))))
    return view


def test_a_finished_repeat_shows_its_medians_everywhere_and_never_one_races_places():
    view = finished_repeat(dict(dspark=2.0, dflash=2.4, greedy=3.0), dict(dspark=2.4, dflash=2.0, greedy=3.0),
                           dict(dspark=2.2, dflash=2.25, greedy=3.0))  # the last race alone: DSpark ahead
    status = status_html(view)
    assert "Finished.</b> <span class=\"winner\">Over 3 races: a tie, DSpark and DFlash" in status
    assert "Median finish: DSpark 2.20 s = DFlash 2.25 s → Greedy baseline 3.00 s" in status
    assert "Same rounds in all 3 races" in status
    cards = {n: meters_html(n, view.lanes[n], view.speedup(n)) for n in view.lanes}
    assert all("=1st" in cards[n] for n in ("dspark", "dflash")) and "3rd" in cards["greedy"]
    assert "3 races" not in cards["greedy"]  # its speedup is 1 by definition: no range to show
    assert "3 races: ×1.25–1.50" in cards["dspark"] and "×1.36" in cards["dspark"]  # its median, 3.0 / 2.2
    table = view.outputs()[-3].value
    assert list(table["data"][i][0] for i in range(3)) == ["=1st", "=1st", "3rd"]
    assert "speedups (each race)" in table["headers"]
    assert "3 races" in view.outputs()[-3].label


def test_rounds_that_differ_between_races_are_said():
    view = finished_repeat(dict(dspark=2.0, greedy=3.0), dict(dspark=2.1, greedy=3.0), dict(dspark=2.0, greedy=3.0))
    assert view.repeat.same_rounds
    view.repeat.lanes["dspark"] = view.repeat.lanes["dspark"].__class__(
        **{**view.repeat.lanes["dspark"].__dict__, "same_rounds": False})
    assert "The rounds differed between races in: DSpark" in status_html(view)


def test_a_race_of_a_repeat_says_which_it_is():
    view = View({"greedy": Lane("greedy")}, state="racing", race_no=(2, 3))
    assert "Race 2 of 3 · Racing" in status_html(view)
    assert "Race " not in status_html(View({"greedy": Lane("greedy")}, state="racing"))


@pytest.mark.browser
@pytest.mark.parametrize("size", [(1440, 900), (390, 844)])
def test_browser_repeat_three_races_then_the_medians(app, browser, size):
    tag = "phone" if size[0] < 500 else "desktop"
    with opened(browser, f"repeat-{tag}-failure.png", size=size) as page:
        fresh(page, app.url, 12, "hello there")
        page.locator("#repeat label", has_text="3").click()
        page.click("#run")
        page.wait_for_function("() => /Race [23] of 3/.test(document.querySelector('#status').textContent)",
                               timeout=60_000, polling="raf")
        page.wait_for_selector("#status .status.finished .winner", timeout=120_000)
        page.wait_for_function("() => /Finished\\. Over 3 races/.test(document.querySelector('#status').textContent)",
                               timeout=30_000)
        status = page.inner_text("#status")
        assert "Same rounds in all 3 races" in status and "Median finish:" in status
        page.screenshot(path=str(artifacts() / f"repeat-{tag}.png"))
        cards = {n: page.inner_text(f"#meters-{n}") for n in ("dspark", "dflash", "greedy")}
        assert all(re.search(r"3 races: ×[\d.]+", cards[n]) for n in ("dspark", "dflash"))
        head, rows = table_rows(page)
        assert "speedups (each race)" in head
        places = {r[head.index("engine")]: r[head.index("place")] for r in rows}
        assert all(len(r[head.index("speedups (each race)")].split()) == 3 for r in rows)
        if size[0] > 1000:  # every column in view at 1440 px: the race's speedups replace the decode details
            edges = page.evaluate("""() => [document.querySelector('#table').getBoundingClientRect().right,
                Math.max(...[...document.querySelectorAll('#table thead th')]
                  .map(h => h.getBoundingClientRect().right))]""")
            assert edges[1] <= edges[0] + 1, edges
        for name, card in cards.items():  # the cards' places are the table's (the repeat's), never one race's
            assert places[name] in card, (name, places, card)


class ScriptedArena:
    """An arena whose races are hand-built (each finishes at once): enough for the page's handler."""

    def __init__(self, finishes: list[dict], on_finish=lambda i: None):
        self.heads, self.missing, self.info, self.stopping = {"dspark": None, "dflash": None}, {}, {}, False
        self.finishes, self.on_finish, self.raced = finishes, on_finish, 0

    def race(self, prompt, settings):
        from spec.race.run import RaceEvent

        res = race(**self.finishes[self.raced])
        self.raced += 1
        yield RaceEvent("start", settings=settings, prompt_tokens=10)
        yield RaceEvent("finish", results=res, verdicts={n: "identical to greedy" for n in res if n != "greedy"},
                        outcome=Outcome.of(res), clock=3.0, wall=3.0)
        self.on_finish(self.raced)

    def stop(self):
        self.stopping = True


def run_page(arena, repeat: str):
    """Handlers.run over `arena` with the page's defaults and Repeat set; (handler, request, updates)."""
    from types import SimpleNamespace

    from demo.handlers import Handlers
    from demo.knobs import KNOBS
    from demo.stage import Stage

    stage = Stage()
    stage.arena = arena
    h = Handlers(stage)
    controls = {k.name: object() for k in KNOBS}
    auto, prompt, repeat_box, plot_x = object(), object(), object(), object()
    h.bind(prompt, auto, controls, [], plot_x, repeat_box)
    data = {prompt: "hi", auto: True, repeat_box: repeat, plot_x: "round",
            **{c: (0 if k.default == "auto" else k.default) for k, c in zip(KNOBS, controls.values())}}
    request = SimpleNamespace(session_hash="me")
    return h, request, data


def test_the_page_runs_each_race_of_a_repeat_then_its_medians():
    arena = ScriptedArena([dict(dspark=2.0, dflash=2.5, greedy=3.0)] * 3)
    h, request, data = run_page(arena, "3")
    updates = list(h.run(data, request))
    assert arena.raced == 3 and "Over 3 races: DSpark wins" in updates[-1][0]


def test_stop_between_two_races_of_a_repeat_ends_it_and_says_so():
    arena = None

    def stop_after_first(i):
        if i == 1:
            h.stop(request)  # pressed while the first race's finish is on the page

    arena = ScriptedArena([dict(dspark=2.0, dflash=2.5, greedy=3.0)] * 3, stop_after_first)
    h, request, data = run_page(arena, "3")
    arena.stop = lambda: None  # between races the arena has nothing to stop: its next race would clear the flag
    h.stage.owner = "me"
    updates = list(h.run(data, request))
    assert arena.raced == 1, "a second race started after Stop"
    assert "Over 1 race (stopped: 1 of 3 ran)" in updates[-1][0]
    assert "Same rounds" not in updates[-1][0] and "1 races" not in updates[-1][0]
