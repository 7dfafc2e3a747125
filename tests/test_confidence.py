"""DSpark's confidence head checked against what landed (spec.confidence): bins and the slider's what-if from
hand-built rounds, and from a real engine, whose recorded estimates reproduce the cut it made."""

import mlx.core as mx
import pytest

from spec.heads.registry import load_dflash, load_dspark
from spec.loop.confidence import ConfidenceCheck, first_below
from spec.loop.engine import Engine
from spec.loop.verify import Sampling
from spec.race.run import run_race
from spec.race.settings import RaceSettings
from spec.target import load_target


def test_bins_count_the_slots_each_round_reached():
    check = ConfidenceCheck()
    check.add((0.95, 0.85, 0.35, 0.05), 4, 2)  # slots 1, 2 landed, slot 3 missed, slot 4 never reached
    check.add((0.15, 0.9), 2, 0)  # slot 1 missed
    check.add((), 0, 0)  # a plain step: nothing to check
    bins = {round(b["low"], 1): b for b in check.bins() if b["slots"]}
    assert {k: (b["slots"], b["landed"]) for k, b in bins.items()} == {0.9: (1, 1), 0.8: (1, 1), 0.3: (1, 0),
                                                                      0.1: (1, 0)}
    assert bins[0.9]["mean_estimate"] == 0.95 and len(check.bins()) == 10 and len(check.rounds) == 2


def test_the_cut_replayed_saves_rows_and_loses_landed_drafts():
    check = ConfidenceCheck()
    check.add((0.9, 0.6, 0.4, 0.2), 4, 3)  # ran without a cut: verified 4, landed 3
    check.add((0.9, 0.3), 2, 0)
    assert first_below((0.9, 0.6, 0.4, 0.2), 0.5) == 2
    cut = check.cut(0.5)  # keeps 2 then 1: saves 2 + 1 rows, loses the 3rd landed draft of round one
    assert (cut["verified"], cut["landed"], cut["saved"], cut["lost"], cut["unknown"]) == (6, 3, 3, 1, 0)
    assert check.cut(0.1)["saved"] == 0 and check.cut(0.95)["lost"] == 3
    ran_with_cut = ConfidenceCheck()
    ran_with_cut.add((0.9, 0.6, 0.4), 2, 2)  # the race's own cut at 0.5 kept 2: slot 3 never verified
    assert ran_with_cut.cut(0.3)["unknown"] == 1  # a lower threshold would have verified it: unknown
    assert ran_with_cut.cut(0.7)["unknown"] == 0 and ran_with_cut.cut(0.7)["saved"] == 1
    record = check.record(used=0.5)
    assert record["used"] == 0.5 and record["rounds"] == 2
    assert [c["threshold"] for c in record["cuts"]][:2] == [0.1, 0.2]


@pytest.fixture(scope="module")
def heads(tiny_dir):
    t = load_target(str(tiny_dir / "qwen3"))
    return t, load_dspark(str(tiny_dir / "dspark-qwen3"), t), load_dflash(str(tiny_dir / "dflash-qwen3"), t)


@pytest.mark.parametrize("threshold", [0.0, 0.9])  # the tiny head's estimates: ~0.8-0.96
def test_an_engine_records_every_drafted_slots_estimate_and_cuts_by_them(heads, threshold):
    t, dspark, _ = heads
    assert dspark.has_confidence
    res = Engine(t, dspark, max_draft=5, confidence_threshold=threshold).generate([12, 40, 33, 81, 9], 30)
    drafting = [(est, k) for est, k in zip(res.estimates, res.drafted) if est]
    assert drafting and all(0.0 <= x <= 1.0 for est, _ in drafting for x in est)
    assert max(len(est) for est, _ in drafting) == 5  # (the last rounds draft fewer: fewer tokens left)
    assert all(k == first_below(est, threshold) for est, k in drafting)  # cut ones have estimates too
    assert any(k < len(est) for est, k in drafting) == (threshold > 0)
    conf = res.confidence(threshold)
    assert conf["used"] == threshold
    assert sum(b["slots"] for b in conf["bins"]) == sum(min(n, k) for n, k in zip(res.accept_lengths, res.drafted)
                                                       if k)


def test_tree_rounds_carry_no_estimates_even_after_a_chain_left_some(heads):
    """The head keeps its last chain's estimates; a tree round (its drafts another shape) must not take them
    (a pocket race once read a probe's shorter estimates into a chain-shaped tree round)."""
    t, dspark, _ = heads
    cache = dspark.make_cache()
    _, taps = t(mx.array([[5, 6, 7]]), t.make_cache(), dspark.config.target_layer_ids)
    dspark.propose(cache, taps, 7, 2, Sampling(), None)  # leaves estimates of 2 slots on the head
    assert dspark.estimates.value is not None
    res = Engine(t, dspark, max_draft=3, tree=3).generate([12, 40, 33, 81, 9], 16)
    assert any(k for k in res.drafted) and all(est == () for est in res.estimates)
    assert res.confidence() is None


def test_the_race_reports_dsparks_confidence_and_not_dflashs(heads):
    t, dspark, dflash = heads
    settings = RaceSettings(max_new_tokens=16, dspark_max_draft=4, dflash_max_draft=4, dspark_threshold=0.3)
    events = list(run_race(t, {"dspark": dspark, "dflash": dflash}, "hello", settings))
    out = events[-1].outcome
    assert set(out.confidence) == {"dspark"} and out.confidence["dspark"]["used"] == 0.3
    live = [e.meter for e in events if e.kind == "round" and e.engine == "dspark"][-1]
    assert live.confidence.record(0.3) == out.confidence["dspark"]
    assert out.record()["confidence"] == out.confidence
