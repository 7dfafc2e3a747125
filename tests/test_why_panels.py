"""The two "why" panels under the lanes agree when trees are used (issue 39, item 4). The per-slot chart
counts every drafting round; DSpark's confidence check can only check chain rounds (a round drafted as a
tree carries no estimates), so it says which rounds it covers and why; every count reads "1 round",
"2 rounds". A lane's last tree is drawn under its text with a caption a phone shows without hover, and
the three lanes' texts start at one height.

Hand-built rounds (no model) for the counts and the wording; the same race as a file opened in Chromium
(desktop and a 390 px phone) for the page. The tiny pair's own trees: tests/test_page.py."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from test_app import artifacts, opened  # noqa: E402
from test_page import replay_file  # noqa: E402

from demo.confidence_chart import confidence_chart, cuts_html  # noqa: E402
from demo.confidence_chart import reading as confidence_reading
from demo.lanes import Lane, meters_html, plural, text_html  # noqa: E402
from demo.slot_chart import reading as slot_reading  # noqa: E402
from demo.slot_chart import slot_chart
from spec.loop.confidence import ConfidenceCheck  # noqa: E402
from spec.loop.results import GenResult, Round  # noqa: E402
from spec.race.outcome import Outcome  # noqa: E402
from spec.race.run import Meter, RaceEvent  # noqa: E402
from spec.race.settings import RaceSettings

# One lane's rounds after its prefill: (accepted, drafted, parents, path, levels, estimates). A tree's
# parents: rows 1, 2 under the anchor, 3 under 1, 4 under 2 (the path (0, 2) took the 2nd guess).
TREE = (0, 0, 1, 2)
ROUNDS = {
    "dspark": [  # the race: slot 1 lands in 1 of 5 drafting rounds; 2 chain rounds carry estimates
        (0, 2, (0, 1), (0,), ((0, 1),), (0.93, 0.9)),  # a chain whose 1st draft missed
        (1, 4, TREE, (0, 2), ((2, 2), (0, 1)), ()),  # a tree: landed via the 2nd guess at depth 1
        (0, 2, (0, 1), (0,), ((0, 1),), (0.91, 0.88)),
        (0, 4, TREE, (0,), ((0, 2),), ()),
        (0, 0, (), (), (), ()),  # parked: a plain step
        (0, 4, TREE, (0,), ((0, 2),), ()),  # its last tree: none landed
    ],
    "dflash": [
        (1, 4, TREE, (0, 1), ((1, 2), (0, 1)), ()),
        (0, 3, (0, 1, 2), (0,), ((0, 1),), ()),
        (2, 4, TREE, (0, 1, 3), ((1, 2), (1, 1)), ()),  # its last tree: 2 landed
        (0, 3, (0, 1, 2), (0,), ((0, 1),), ()),  # then a chain
    ],
    "greedy": [(0, 0, (), (), (), ())] * 7,
}
STEP = {"dspark": 0.03, "dflash": 0.035, "greedy": 0.03}  # seconds a round
PREFILL = 0.05


def word(i: int) -> str:
    return f" w{i}"


def lane_rounds(name: str) -> list[Round]:
    """The prefill's round, then the lane's rounds, each committing its accepted drafts and one own token."""
    out = [Round(name, 0, [1], 0, 0, word(1), PREFILL, pieces=(("own", word(1)),))]
    nxt = 2
    specs = ROUNDS[name]
    for i, (acc, drafted, parents, path, levels, est) in enumerate(specs, 1):
        ids = list(range(nxt, nxt + acc + 1))
        nxt += acc + 1
        pieces = ((("acc", "".join(word(t) for t in ids[:-1])),) if acc else ()) + (("own", word(ids[-1])),)
        out.append(Round(name, i, ids, acc, drafted, "".join(word(t) for t in ids), STEP[name], i == len(specs),
                         pieces, levels, parents, path, estimates=est))
    return out


def lane_result(name: str) -> GenResult:
    rounds = lane_rounds(name)
    decode = [r for r in rounds if r.index]
    ids = [t for r in rounds for t in r.tokens]
    return GenResult(text="".join(word(t) for t in ids), token_ids=ids,
                     accept_lengths=[len(r.tokens) for r in decode], drafted=[r.drafted for r in decode],
                     target_forwards=len(rounds), prompt_tokens=6, prefill_seconds=PREFILL,
                     decode_seconds=STEP[name] * len(decode), finish_reason="length", engine=name,
                     trees=[r.is_tree for r in decode], round_seconds=[STEP[name]] * len(decode),
                     levels=[r.levels for r in decode], estimates=[r.estimates for r in decode])


def hand_race() -> list[RaceEvent]:
    """The three lanes' rounds as a race's events, each lane's rounds when its clock reached them."""
    meters = {n: Meter() for n in ROUNDS}
    timeline = sorted(((PREFILL + STEP[n] * r.index, n, r) for n in ROUNDS for r in lane_rounds(n)),
                      key=lambda x: x[0])
    settings = RaceSettings(max_new_tokens=8)
    events = [RaceEvent("start", prompt_tokens=6, settings=settings)]
    results = {n: lane_result(n) for n in ROUNDS}
    for at, name, r in timeline:
        meters[name].add(r)
        events.append(RaceEvent("round", name, r, meters[name].snapshot(), wall=at, clock=at, lane_clock=at))
        if r.done:
            events.append(RaceEvent("done", name, meter=meters[name].snapshot(), result=results[name], wall=at,
                                    clock=at))
    verdicts = {"dspark": "identical to greedy", "dflash": "identical to greedy"}
    end = max(t for t, _, _ in timeline)
    events.append(RaceEvent("finish", results=results, verdicts=verdicts, wall=end, clock=end,
                            outcome=Outcome.of(results)))
    return events


SAID = ("Over 2 slots in 2 rounds the head expected 92% to land; 0% did. Chain rounds only: 2 of the 5 drafting "
        "rounds; the others were drafted as trees, which carry no confidence estimates.")


# -- the counts and the words, without a browser ------------------------------------------------------

def test_the_confidence_check_counts_the_tree_rounds_it_cannot_check():
    """Both panels read the same rounds: the per-slot chart's first slot is reached by every drafting round,
    and the confidence check covers the chain rounds and counts the rest (drafted as trees)."""
    res = lane_result("dspark")
    slots, conf = res.positions, res.confidence()
    assert slots[0] == {"slot": 1, "reached": 5, "landed": 1}
    assert (conf["rounds"], conf["drafted_as_trees"]) == (2, 3)
    assert conf["rounds"] + conf["drafted_as_trees"] == slots[0]["reached"]  # the same drafting rounds
    meter = Meter()  # live: the meters count the same, and a snapshot keeps the count
    for r in lane_rounds("dspark"):
        meter.add(r)
    assert meter.slots.rows() == slots and meter.snapshot().confidence.record() == conf
    assert Outcome.of({"dspark": res}).confidence["dspark"]["drafted_as_trees"] == 3  # the API's record carries it
    chains = ConfidenceCheck()
    chains.add((0.9, 0.5), 2, 1)
    chains.add((), 0, 0)  # a plain step: no drafting round at all
    assert chains.record()["drafted_as_trees"] == 0


def test_the_panels_name_the_same_rounds_and_say_why_the_check_has_fewer():
    out = Outcome.of({n: lane_result(n) for n in ROUNDS})
    assert slot_reading(out.positions).startswith("DSpark: 1st draft lands 20% of 5 rounds, deepest landed slot 1")
    assert confidence_reading(out.confidence["dspark"]) == SAID
    chains = ConfidenceCheck()  # a race of chains only: nothing to explain
    chains.add((0.93, 0.9), 2, 0)
    chains.add((0.91, 0.88), 2, 0)
    assert confidence_reading(chains.record()) == "Over 2 slots in 2 rounds the head expected 92% to land; 0% did."


def test_one_round_one_slot_one_draft_read_in_the_singular():
    check = ConfidenceCheck()
    check.add((0.8,), 1, 0)
    check.add((), 3, 0)  # drafted as a tree
    assert confidence_reading(check.record()) == (
        "Over 1 slot in 1 round the head expected 80% to land; 0% did. Chain rounds only: 1 of the 2 drafting "
        "rounds; the other was drafted as a tree, which carries no confidence estimates.")
    assert "of 1 slot landed" in confidence_chart(check.record())
    one = {"dspark": [{"slot": 1, "reached": 1, "landed": 0}]}
    assert slot_reading(one) == "DSpark: 1st draft lands 0% of 1 round, none landed"
    assert "landed in 0 of the 1 round that reached it" in slot_chart(one)
    cut = ConfidenceCheck()
    cut.add((0.9, 0.6, 0.4), 2, 2)  # the race's own cut at 0.5 ended it: a threshold of 0.3 cannot judge it
    assert "(1 round not judged)" in cuts_html(cut.record(0.5))
    lane = Lane("dflash")
    lane.meter = Meter()
    lane.meter.add(lane_rounds("dflash")[3])  # one round, a tree
    lane.outcome = Outcome.of({"dflash": lane_result("dflash")}).lanes["dflash"]
    assert "trees in 1 of 1 round<" in meters_html("dflash", lane, 1.0)
    text = " ".join([confidence_chart(check.record()), slot_chart(one), cuts_html(cut.record(0.5)),
                     meters_html("dflash", lane, 1.0), text_html("dflash", lane)])
    assert not re.search(r"\b1 (rounds|slots|drafts|drafting rounds|tree rounds)\b", text), text
    assert (plural(1, "round"), plural(2, "round"), plural(1, "guess", "guesses")) == ("1 round", "2 rounds", "1 guess")


def test_a_lanes_tree_is_drawn_under_its_text_with_a_caption():
    """Not on its card (where it pushed the lane's text below the others'): under the text, with words."""
    lane = Lane("dspark")
    lane.meter = Meter()
    rounds = lane_rounds("dspark")
    for r in rounds[:3]:  # live, its latest round a tree
        lane.add(r)
        lane.meter.add(r)
    assert "<svg" not in meters_html("dspark", lane, 1.0)
    assert "tree of 4: landed 1 via the 2nd guess at depth 1" in meters_html("dspark", lane, 1.0)
    text = text_html("dspark", lane)
    assert text.index('class="lane-text') < text.index('<figure class="lane-tree dspark">')
    caption = re.search(r"<figcaption>(.*?)</figcaption>", text).group(1)
    assert caption.startswith("<b>The last round's tree</b>: 4 drafts verified in one forward, 1 landed.")
    assert "the committed path" in caption and "drafts not taken" in caption
    lane.meter.add(rounds[3])  # a chain round: nothing to draw
    assert "<figure" not in text_html("dspark", lane)
    for r in rounds[4:]:
        lane.meter.add(r)
    lane.outcome = Outcome.of({"dspark": lane_result("dspark")}).lanes["dspark"]  # finished: its last tree
    card, text = meters_html("dspark", lane, 1.0), text_html("dspark", lane)
    assert "trees in 3 of 6 rounds" in card and "<svg" not in card
    assert "<b>The last tree round</b>: 4 drafts verified in one forward, none landed." in text
    assert text.count('<svg class="round-tree dspark"') == 1
    greedy = Lane("greedy")
    greedy.meter = lane.meter
    assert "<figure" not in text_html("greedy", greedy)


def test_a_saved_race_keeps_the_count(tmp_path):
    """The file a race downloads reopens with the same panels (the count is rebuilt from its rounds)."""
    from spec.race.file import race_record, read_race

    events = hand_race()
    path = tmp_path / "race.json"
    path.write_text(json.dumps(race_record(events, "A race with trees.", {"target": "hand-built"})))
    loaded, _ = read_race(str(path))
    assert loaded[-1].outcome.confidence == events[-1].outcome.confidence
    assert loaded[-1].outcome.confidence["dspark"]["drafted_as_trees"] == 3


# -- the page ------------------------------------------------------------------------------------------

TOPS_JS = """() => ['dspark', 'dflash', 'greedy'].map(n => {
  const box = document.querySelector(`#text-${n} .lane-text`).getBoundingClientRect();
  const card = document.querySelector(`#meters-${n} .lane-card`).getBoundingClientRect();
  const fig = document.querySelector(`#text-${n} figure.lane-tree`);
  const seen = document.querySelector(`#text-${n} .html-container`).getBoundingClientRect().top;  // a long text scrolls
  return {top: Math.max(box.top, seen), bottom: box.bottom, card: card.bottom,
          figure: fig && fig.getBoundingClientRect().top}; })"""


@pytest.mark.browser
@pytest.mark.parametrize("size", [(1440, 900), (390, 844)])
def test_the_why_panels_agree_and_the_lanes_align_on_a_race_with_trees(app, browser, tmp_path, size):
    from playwright.sync_api import expect

    path = tmp_path / "race-with-trees.json"
    from spec.race.file import race_record

    path.write_text(json.dumps(race_record(hand_race(), "A race with trees.", {"target": "hand-built"})))
    tag = "phone" if size[0] < 500 else "desktop"
    with opened(browser, f"why-trees-{tag}-failure.png", size=size) as page:
        replay_file(page, app.url, path)
        slots = page.locator("#why .slot-chart .slot-reading").first.inner_text()
        conf = page.locator("#why .conf-chart .slot-reading").inner_text()
        assert "DSpark: 1st draft lands 20% of 5 rounds" in slots, slots
        assert conf == SAID, conf
        reached = int(re.search(r"DSpark: 1st draft lands \d+% of (\d+) rounds?", slots).group(1))
        assert int(re.search(r"of the (\d+) drafting rounds", conf).group(1)) == reached  # the same rounds
        for lane, caption in (("dspark", "The last tree round: 4 drafts verified in one forward, none landed."),
                              ("dflash", "The last tree round: 4 drafts verified in one forward, 2 landed.")):
            figure = page.locator(f"#text-{lane} figure.lane-tree")
            figure.scroll_into_view_if_needed()
            expect(figure.locator("figcaption")).to_be_visible()
            expect(figure.locator("figcaption")).to_contain_text(caption)
            expect(figure.locator("figcaption")).to_contain_text("the committed path")
            box = figure.bounding_box()
            assert box["x"] >= 0 and box["x"] + box["width"] <= size[0] + 0.5, box  # all of it on the screen
            assert page.locator(f"#meters-{lane} svg").count() == 0  # the card keeps its height
        assert page.locator("#text-greedy figure").count() == 0
        lanes = page.evaluate(TOPS_JS)
        for n, lane in zip(("dspark", "dflash", "greedy"), lanes):  # its card, its text, then its tree
            assert lane["card"] < lane["top"] and (lane["figure"] or 1e9) >= lane["bottom"], (n, lanes)
        if tag == "desktop":  # side by side: the three texts start at one height
            assert max(x["top"] for x in lanes) - min(x["top"] for x in lanes) <= 3, lanes
        page.locator("#lanes").screenshot(path=str(artifacts() / f"why-trees-lanes-{tag}.png"))
        page.locator("#why").screenshot(path=str(artifacts() / f"why-trees-panels-{tag}.png"))
        page.screenshot(path=str(artifacts() / f"why-trees-{tag}.png"), full_page=True)
