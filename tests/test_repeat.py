"""A repeated race (issue 39): each lane's speedups, their median and spread; places by the medians with
the tie band widened by the spread the races showed; whether every race committed the same rounds. Hand-
built results, as tests/test_outcome.py builds them; the CLI's --repeat on a tiny pair."""

import json
from dataclasses import replace

import pytest
from test_outcome import race

from spec.errors import SpecError
from spec.loop.verify import Sampling
from spec.race.outcome import TIE_FLOOR, Outcome
from spec.race.repeat import REPEATS, Repeated, repeat_count


def races(*finishes: dict) -> list:
    out = []
    for f in finishes:
        res = race(**f)
        out.append((res, Outcome.of(res)))
    return out


def test_places_follow_the_medians_and_each_lane_keeps_its_speedups():
    rep = Repeated.of(races(dict(dspark=2.0, dflash=2.5, greedy=3.0), dict(dspark=2.1, dflash=2.4, greedy=3.0),
                            dict(dspark=1.9, dflash=2.5, greedy=3.0)))
    ds = rep.lanes["dspark"]
    assert ds.speedups == pytest.approx([1.5, 3.0 / 2.1, 3.0 / 1.9]) and ds.median == pytest.approx(1.5)
    assert ds.spread == pytest.approx((3.0 / 1.9 - 3.0 / 2.1) / 1.5)
    assert rep.lanes["greedy"].speedups == [1.0, 1.0, 1.0] and rep.lanes["greedy"].spread == 0.0
    assert rep.band == pytest.approx(ds.spread)  # the widest spread, wider than one race's noise
    assert rep.band > TIE_FLOOR and rep.races == rep.asked == 3 and not rep.stopped
    assert rep.winner == "dspark" and [o.engine for o in rep.order] == ["dspark", "dflash", "greedy"]
    assert rep.headline().startswith("Over 3 races: DSpark wins, median ×1.50 vs greedy "
                                      "(DSpark ×1.50 (×1.43–1.58)")
    assert rep.same_rounds  # the hand-built races commit the same rounds


def test_medians_closer_than_the_spread_tie_even_where_one_race_had_a_winner():
    rep = Repeated.of(races(dict(dspark=2.0, dflash=2.4, greedy=3.0), dict(dspark=2.4, dflash=2.0, greedy=3.0),
                            dict(dspark=2.2, dflash=2.25, greedy=3.0)))
    assert rep.outcomes[0].winner == "dspark" and rep.outcomes[1].winner == "dflash"  # each race alone: a winner
    assert rep.lanes["dspark"].tied and rep.lanes["dflash"].tied and rep.winner is None
    assert rep.lanes["dspark"].place == rep.lanes["dflash"].place == 1 and rep.lanes["greedy"].place == 3
    assert "a tie, DSpark and DFlash within" in rep.headline() and "widest spread" in rep.headline()


def test_one_race_is_its_own_outcome():
    (res, out), = races(dict(dspark=2.0, dflash=2.5, greedy=3.0))
    rep = Repeated.of([(res, out)])
    assert rep.band == out.band and rep.winner == out.winner
    assert {n: o.place for n, o in rep.lanes.items()} == {n: o.place for n, o in out.lanes.items()}


def test_a_stopped_race_ends_the_repeat_and_counts_as_not_run():
    done = races(dict(dspark=2.0, dflash=2.5, greedy=3.0))
    stopped = race(dspark=1.0, dflash=1.0, greedy=1.0)
    stopped["dspark"] = replace(stopped["dspark"], finish_reason="stopped")
    rep = Repeated.of(done + [(stopped, Outcome.of(stopped))], asked=3)
    assert rep.races == 1 and rep.stopped and rep.lanes["dspark"].speedups == [1.5]
    assert "stopped: 1 of 3 ran" in rep.headline()
    none = Repeated.of([(stopped, Outcome.of(stopped))], asked=3)
    assert none.races == 0 and none.lanes == {} and none.headline().startswith("Stopped before")


def test_different_rounds_are_caught():
    (a, oa), (b, ob) = races(dict(dspark=2.0, greedy=3.0), dict(dspark=2.0, greedy=3.0))
    b["dspark"] = replace(b["dspark"], drafted=[1] * len(b["dspark"].drafted))
    rep = Repeated.of([(a, oa), (b, ob)])
    assert not rep.lanes["dspark"].same_rounds and rep.lanes["greedy"].same_rounds and not rep.same_rounds
    assert rep.record()["same_rounds"] is False


def test_the_record_holds_each_lanes_speedups_and_median():
    rec = Repeated.of(races(dict(dspark=2.0, greedy=3.0), dict(dspark=2.5, greedy=3.0), dict(dspark=2.4, greedy=3.0)),
                      ).record()
    lane = next(x for x in rec["lanes"] if x["engine"] == "dspark")
    assert lane["speedups"] == [1.5, 1.2, 1.25] and lane["median"] == 1.25 and rec["races"] == 3
    json.dumps(rec)


def test_one_range_and_one_message_for_the_repeat():
    assert [repeat_count(n) for n in ("1", 3, 5)] == list(REPEATS)
    for bad in (0, 2, 7, "x", None):
        with pytest.raises(SpecError, match=r"repeat must be 1, 3 or 5 races"):
            repeat_count(bad)


# -- on models ----------------------------------------------------------------------------------------

def busy_core():
    """A process that keeps one core busy until killed."""
    import subprocess
    import sys

    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def races_of(arena, prompt, settings, n, hog_after_first=True):
    from spec.race.repeat import repeat_race

    finishes, hog = [], None
    try:
        for i, ev in repeat_race(arena, prompt, settings, n):
            if ev.kind == "finish":
                finishes.append(ev)
                if hog_after_first and hog is None:
                    hog = busy_core()  # the machine changes between the races
    finally:
        if hog is not None:
            hog.kill()
            hog.wait()
    return finishes


def assert_same_rounds(finishes):
    from spec.race.repeat import fingerprint

    first = finishes[0].results
    for ev in finishes[1:]:
        assert set(ev.results) == set(first)
        for name, res in ev.results.items():
            assert fingerprint(res) == fingerprint(first[name]), name


def test_three_races_of_one_prompt_commit_the_same_rounds_at_t0_and_seeded_t_gt_0(tiny_dir):
    from spec.race.arena import load_preset_arena
    from spec.race.repeat import repeated
    from spec.race.settings import RaceSettings

    arena = load_preset_arena(target=str(tiny_dir / "qwen3"), dspark=str(tiny_dir / "dspark-qwen3"),
                              dflash=str(tiny_dir / "dflash-qwen3"))
    try:
        for settings in (RaceSettings(max_new_tokens=24), RaceSettings(max_new_tokens=24, sampling=Sampling(0.8, seed=7))):
            finishes = races_of(arena, "hello there, tell me a story", settings, 3)
            assert len(finishes) == 3
            assert_same_rounds(finishes)
            rep = repeated(finishes, 3)
            assert rep.same_rounds and rep.races == 3
            assert all(len(o.speedups) == 3 for o in rep.lanes.values())
    finally:
        arena.close()


@pytest.mark.slow  # CLI subprocesses
def test_the_race_command_repeats_and_prints_speedups_and_medians(tiny_dir):
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-m", "spec", "race", "--prompt", "hi", "--max-new-tokens", "8",
                          "--repeat", "3", "--json", "--target", str(tiny_dir / "qwen3"),
                          "--dspark", str(tiny_dir / "dspark-qwen3"), "--dflash", str(tiny_dir / "dflash-qwen3")],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    out = json.loads(run.stdout)
    assert out["repeat"]["races"] == 3 and out["repeat"]["same_rounds"] is True
    lanes = {x["engine"]: x for x in out["repeat"]["lanes"]}
    assert set(lanes) == {"dspark", "dflash", "greedy"} and len(lanes["dflash"]["speedups"]) == 3
    assert lanes["greedy"]["median"] == 1.0 and "race 3 of 3" in run.stderr
    bad = subprocess.run([sys.executable, "-m", "spec", "race", "--prompt", "hi", "--repeat", "4"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "repeat must be 1, 3 or 5 races" in bad.stderr


@pytest.mark.pocket
def test_a_pocket_race_twice_with_a_busy_core_between_commits_the_same_rounds(pocket_home, monkeypatch):
    """Issue 39's check: the same prompt raced twice, a CPU hog started between the two, and every lane
    commits the same draft lengths, trees, accepts and tokens (only the times differ)."""
    from spec.race.arena import load_preset_arena
    from spec.race.settings import RaceSettings

    for k, v in pocket_home.items():  # the pocket app's cache and calibration, shared with its tests
        monkeypatch.setenv(k, v)
    arena = load_preset_arena("pocket")
    try:
        finishes = races_of(arena, "What is 17 * 23? Show your steps.", RaceSettings(max_new_tokens=40), 3)
    finally:
        arena.close()
    assert len(finishes) == 3
    assert_same_rounds(finishes)
    drafted = [d for ev in finishes for n, r in ev.results.items() if n != "greedy" for d in r.drafted]
    assert any(drafted)  # the heads drafted: the rounds compared are not all plain steps


def test_the_api_repeats_and_gives_each_lanes_speedups_and_median(app):
    from gradio_client import Client
    from gradio_client.exceptions import AppError

    c = Client(app.url, verbose=False)
    out = c.predict("hello there", 6, repeat=3, api_name="/race")
    assert out["repeat"]["races"] == 3 and out["repeat"]["same_rounds"] is True
    for lane in out["finish_order"]:
        assert len(lane["speedups"]) == 3 and lane["median"] == lane["speedup"]
    assert out["headline"] == out["repeat"]["headline"] and out["headline"].startswith("Over 3 races")
    places = {x["engine"]: x["place"] for x in out["finish_order"]}
    assert [r["engine"] for r in out["table"]] == [x["engine"] for x in out["finish_order"]]  # one order
    assert all(len(r["speedups (each race)"].split()) == 3 for r in out["table"]) and places
    one = c.predict("hello there", 6, api_name="/race")
    assert one["repeat"] is None and all(len(x["speedups"]) == 1 for x in one["finish_order"])
    with pytest.raises(AppError, match="repeat must be 1, 3 or 5 races"):
        c.predict("hello there", 6, repeat=2, api_name="/race")
    updates = list(c.submit("hello there", 4, repeat=3, api_name="/race_stream"))
    assert {u["race"] for u in updates} == {1, 2, 3} and updates[-1]["result"]["repeat"]["races"] == 3


def test_the_median_outcome_shows_the_repeats_places_and_medians():
    from spec.report import results_table

    rep = Repeated.of(races(dict(dspark=2.0, dflash=2.4, greedy=3.0), dict(dspark=2.4, dflash=2.0, greedy=3.0),
                            dict(dspark=2.2, dflash=2.25, greedy=3.0)))
    out = rep.median_outcome()
    assert out.band == rep.band and out.lanes["dspark"].speedup == rep.lanes["dspark"].median
    assert out.lanes["dspark"].finish_seconds == 2.2 and out.lanes["dspark"].tied and out.winner is None
    table = results_table(out, {}, each={n: o.speedups for n, o in rep.lanes.items()})
    assert list(table["place"]) == ["=1st", "=1st", "3rd"]
    assert list(table["speedups (each race)"])[-1] == "1.00 1.00 1.00"
