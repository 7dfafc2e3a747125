"""A race's outcome from hand-built results: places follow the one speedup (end to end, so the finish
times at T = 0), differences inside the noise band are ties said as such, a stopped race has no places,
and the band widens for short or jittery races."""

import pytest

from spec.loop.engine import GenResult
from spec.race.outcome import TIE_FLOOR, Outcome, places, tie_band
from spec.report import results_table


def result(name: str, finish: float, tokens: int = 64, prefill: float = 0.2, rounds: int | None = None,
           reason: str = "length", steps: list[float] | None = None) -> GenResult:
    n = rounds if rounds is not None else tokens - 1
    decode = finish - prefill
    steps = steps if steps is not None else [decode / n] * n if n else []
    return GenResult(text="x", token_ids=[1] * tokens, accept_lengths=[max(1, (tokens - 1) // max(n, 1))] * n,
                     drafted=[0] * n, target_forwards=n + 1, prompt_tokens=10, prefill_seconds=prefill,
                     decode_seconds=decode, finish_reason=reason, engine=name, round_seconds=steps)


def race(**finish: float) -> dict[str, GenResult]:
    rounds = {"dspark": 30, "dflash": 25, "greedy": 63}
    return {n: result(n, t, rounds=rounds[n]) for n, t in finish.items()}


def test_places_follow_finish_times_and_the_speedup_is_end_to_end():
    out = Outcome.of(race(dspark=2.0, dflash=2.5, greedy=3.0))
    assert [o.engine for o in out.order] == ["dspark", "dflash", "greedy"]
    assert [o.place for o in out.order] == [1, 2, 3] and not any(o.tied for o in out.order)
    assert out.lanes["dspark"].speedup == pytest.approx(3.0 / 2.0)  # same tokens: greedy's time over its own
    assert out.winner == "dspark" and out.headline() == "DSpark wins: ×1.50 vs greedy, end to end."
    table = results_table(out, {"dspark": "identical to greedy", "dflash": "identical to greedy"})
    assert list(table["place"]) == ["1st", "2nd", "3rd"] and list(table["speedup"]) == [1.5, 1.2, 1.0]
    assert list(table["finish s"]) == [2.0, 2.5, 3.0] and set(table["status"]) == {"cut at max tokens"}


def test_a_difference_inside_the_band_is_a_tie_and_said_as_one():
    out = Outcome.of(race(dspark=2.61, dflash=2.0, greedy=2.62))
    assert out.band == pytest.approx(TIE_FLOOR)
    assert out.lanes["dflash"].place == 1 and not out.lanes["dflash"].tied
    assert out.lanes["dspark"].place == out.lanes["greedy"].place == 2
    assert out.lanes["dspark"].tied and out.lanes["greedy"].tied
    assert list(results_table(out, {})["place"]) == ["1st", "=2nd", "=2nd"]
    top = Outcome.of(race(dspark=2.60, dflash=2.62, greedy=2.61))
    assert top.winner is None and {o.place for o in top.order} == {1}
    assert top.headline() == (f"A tie: all three lanes within {100 * TIE_FLOOR:.0f}% of each other "
                              "(this race's noise band).")
    two = Outcome.of(race(dspark=2.0, dflash=2.02, greedy=3.0))
    assert two.headline().startswith("A tie: DSpark and DFlash within")
    assert two.lanes["greedy"].place == 3  # the lanes ahead of it count, tie or not


def test_greedy_winning_says_speculation_did_not_pay():
    out = Outcome.of(race(dspark=3.5, dflash=4.0, greedy=3.0))
    assert out.winner == "greedy"
    assert out.headline() == ("Greedy baseline wins: speculation did not pay on this prompt "
                              "(DSpark ×0.86, DFlash ×0.75).")


def test_a_stopped_race_has_no_places_and_its_lanes_say_stopped():
    res = race(dspark=1.0, dflash=1.2, greedy=1.1)
    res["dflash"] = result("dflash", 1.2, tokens=20, rounds=10, reason="stopped")
    out = Outcome.of(res)
    assert out.stopped and out.winner is None and all(o.place is None for o in out.order)
    assert out.lanes["dflash"].status == "stopped" and out.lanes["dflash"].ended == "stopped at"
    assert out.lanes["dspark"].ended == "finished at"  # it had ended before the stop
    assert out.headline().startswith("Stopped")
    assert set(results_table(out, {})["place"]) == {"–"}


def test_a_race_of_one_token_has_no_accept_length_and_ties():
    res = {n: result(n, 0.2, tokens=1, rounds=0) for n in ("dspark", "dflash", "greedy")}
    res["dflash"] = result("dflash", 0.201, tokens=1, rounds=0)
    out = Outcome.of(res)
    assert all(o.mean_accept is None for o in out.order)  # never "mean accept 0"
    assert out.winner is None and out.headline().startswith("A tie: all three lanes")


def test_at_t_above_zero_the_plain_lane_is_named_for_what_it_does():
    res = race(dspark=2.0, dflash=2.5, greedy=3.0)
    res["dspark"] = result("dspark", 2.0, tokens=40, rounds=20)  # its own sample: shorter
    out = Outcome.of(res, sampled=True)
    assert out.lanes["dspark"].speedup == pytest.approx((40 / 2.0) / (64 / 3.0))  # tokens per engine second
    assert out.label("greedy") == "Plain sampling" and "vs plain sampling" in out.headline()
    assert "plain sampling" in list(results_table(out, {})["engine"])


def test_the_band_widens_for_a_short_or_jittery_race():
    steady = race(dspark=2.0, dflash=2.5, greedy=3.0)
    assert tie_band(steady) == TIE_FLOOR  # identical steps: no jitter, the floor
    jitter = [0.03, 0.07] * 31 + [0.05]  # +-40% step to step
    noisy = dict(steady, greedy=result("greedy", 0.2 + sum(jitter), rounds=63, steps=jitter))
    assert tie_band(noisy) > 2 * TIE_FLOOR
    short = {n: result(n, 0.3, tokens=4, rounds=3) for n in ("dspark", "greedy")}  # too few steps to measure
    assert tie_band(short) > TIE_FLOOR


def test_places_group_each_lane_with_the_fastest_of_its_group():
    assert places({"a": 10.0, "b": 9.8, "c": 9.75}, 0.03) == [(1, ["a", "b", "c"])]
    assert places({"a": 10.0, "b": 9.8, "c": 9.5}, 0.03) == [(1, ["a", "b"]), (3, ["c"])]
    assert places({"a": 1.0}, 0.03) == [(1, ["a"])]
