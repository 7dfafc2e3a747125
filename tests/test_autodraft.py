"""The draft-length chooser: known answers on synthetic costs and acceptance, learning, parking and
probing, the on-disk cache of measured costs, and losslessness with lengths that change every round."""

import mlx.core as mx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spec.errors import SpecError
from spec.heads.registry import load_dflash, load_dspark
from spec.loop import calibrate
from spec.loop.autodraft import Acceptance, AutoDraft, Costs, choose, expected_tokens
from spec.loop.calibrate import costs_for
from spec.loop.engine import Engine
from spec.loop.verify import Sampling


def test_the_chooser_picks_the_known_best_length():
    flat = Costs(verify=[10.0, 11.0, 12.0, 30.0], draft=[0.0, 1.0, 1.0, 1.0], prior=[0.9] * 3)
    # tokens per ms: k=0 1/10 = .100; k=1 1.9/12 = .158; k=2 2.71/13 = .208; k=3 3.439/31 = .111
    assert choose(flat, [0.9, 0.9, 0.9], 3) == 2
    assert choose(flat, [0.9, 0.9, 0.9], 1) == 1  # the cap bounds it
    assert choose(flat, [0.0, 0.0, 0.0], 3) == 0  # nothing accepted: park (a plain target step)
    cheap = Costs(verify=[10.0, 10.5, 11.0, 11.5], draft=[0.0, 0.5, 0.5, 0.5], prior=[1.0] * 3)
    assert choose(cheap, [1.0, 1.0, 1.0], 3) == 3  # everything accepted, verify nearly free: the whole block
    assert expected_tokens([0.5, 0.5], 2) == pytest.approx(1 + 0.5 + 0.25)
    # a weak first draft and a strong rest is still not worth a round that costs 1.5 plain steps
    assert choose(Costs([10.0, 15.0, 15.5], [0.0, 0.0, 0.0], [0.2, 1.0]), [0.2, 1.0], 2) == 0


def test_calibration_noise_is_smoothed_the_way_costs_and_acceptance_behave():
    from spec.loop.calibrate import monotone

    assert monotone([80.0, 85.0, 95.0, 93.0, 104.0], rising=True) == [80.0, 85.0, 95.0, 95.0, 104.0]
    assert monotone([0.86, 0.82, 0.56, 0.6, 1.0], rising=False) == [0.86, 0.82, 0.56, 0.56, 0.56]


def test_acceptance_is_learned_per_position():
    acc = Acceptance([0.5, 0.5, 0.5], strength=2.0)
    for _ in range(20):
        acc.observe(drafted=3, accepted=1)  # the first draft always survives, the second never
    rates = acc.rates()
    assert rates[0] > 0.9 and rates[1] < 0.1
    assert rates[2] == pytest.approx(rates[1])  # never tried: its prior moved with position 2's evidence
    untried = Acceptance([0.5, 0.4, 0.4], strength=2.0)
    for _ in range(20):
        untried.observe(drafted=1, accepted=1)  # position 1 lands more often than calibrated ...
    assert untried.rates()[2] == pytest.approx(0.4 * untried.rates()[0] / 0.5)  # ... and so, presumably, the rest
    weak = Acceptance([0.8, 0.8, 0.6], strength=4.0)
    for _ in range(16):
        weak.observe(drafted=1, accepted=0)  # position 1 never lands
    assert weak.rates()[0] < 0.2 and weak.rates()[1] < 0.2 and weak.rates()[2] < 0.15


def test_a_parked_generation_probes_in_the_shadow_and_comes_back_when_the_head_pays():
    costs = Costs(verify=[10.0, 11.0, 12.0], draft=[0.0, 1.0, 1.5], prior=[0.05, 0.05])
    auto = AutoDraft(costs, max_k=2, gaps=(2, 32))
    assert [auto.next() for _ in range(3)] == [0, 0, 0]  # the head lands nothing: parked
    assert [auto.probe(), auto.probe()] == [0, 2]  # a shadow probe of all it may draft, 2 parked rounds on
    for _ in range(6):
        auto.observe_probe(drafted=2, matched=2)  # the shadow drafts came true: the head now pays
    assert auto.next() == 2


def test_a_parked_generation_drafts_again_only_for_a_clear_gain():
    costs = Costs(verify=[10.0, 11.0], draft=[0.0, 0.0], prior=[0.16])  # 1.16 / 11 ms: 6% above 1 / 10 ms
    auto = AutoDraft(costs, max_k=1)
    assert auto.next() == 1  # drafting (or starting): the better rate wins
    auto.chosen.append(0)  # ... but from a parked round, 6% is not worth leaving the pipeline
    assert auto.next() == 0
    strong = AutoDraft(Costs([10.0, 11.0], [0.0, 0.0], [0.3]), max_k=1, stay=1.1)
    strong.chosen.append(0)
    assert strong.next() == 1  # 18% is


def test_the_chooser_weighs_the_calibrated_loop_cost_and_never_its_own_timings():
    """Issue 39: the same acceptance gives the same choices whatever the rounds took; what a round in
    the loop costs beyond its parts comes from the calibration (loop_ms)."""
    rates = dict(verify=[10.0, 12.0], draft=[0.0, 1.0], prior=[0.9])
    quiet, busy = AutoDraft(Costs(**rates), max_k=1), AutoDraft(Costs(**rates), max_k=1)
    for auto, ms in ((quiet, 13.0), (busy, 90.0)):  # the same rounds, one machine 7x slower for a while
        for _ in range(6):
            auto.observe(drafted=0, accepted=0, ms=ms * 0.8)
            auto.observe(drafted=1, accepted=1, ms=ms)
    assert quiet.chosen == busy.chosen and quiet.next() == busy.next() == 1  # 1.9 / 13 beats 1 / 10
    assert (busy.speed, busy.extra) == (1.0, 0.0)
    dear = AutoDraft(Costs(**rates, loop_ms=7.0), max_k=1)  # a round in the loop costs 7 ms more than its parts
    assert dear.next() == 0  # 1.9 / 20 < 1 / 10: park
    tree = AutoDraft(Costs(**rates, loop_ms=1.0, tree_loop_ms=3.0), max_k=1)
    assert (tree.extra, tree.tree_extra) == (1.0, 3.0)


def test_the_adapting_chooser_before_issue_39_corrects_costs_with_its_own_rounds():
    """adapt=True (a benchmark row): measured round times correct the calibrated costs."""
    costs = Costs(verify=[10.0, 12.0], draft=[0.0, 1.0], prior=[0.5])
    auto = AutoDraft(costs, max_k=1, strength=2.0, adapt=True)
    assert auto.next() == 1  # 1.5 tokens / 13 ms beats 1 / 10 ms on paper
    for _ in range(6):
        auto.observe(drafted=1, accepted=0, ms=13.0)  # the head never lands, and the model's cost holds
    assert auto.next() == 0 and (auto.speed, auto.extra) == (1.0, 0.0)
    auto = AutoDraft(Costs(verify=[10.0, 12.0], draft=[0.0, 1.0], prior=[0.9]), max_k=1, strength=2.0, adapt=True)
    assert auto.next() == 1  # 1.9 / 13 beats 1 / 10
    for _ in range(6):
        auto.observe(drafted=0, accepted=0, ms=8.0)  # steady plain steps run 20% faster than calibrated
        auto.observe(drafted=0, accepted=0, ms=30.0, steady=False)  # (a pipeline's first round: not a step's time)
        auto.observe(drafted=1, accepted=1, ms=23.0)  # drafting rounds cost 10 ms more than calibrated
    assert auto.speed == pytest.approx((48 + 20) / 80)
    assert auto.extra == pytest.approx((6 * 23 - auto.speed * 6 * 13) / 8)
    assert auto.next() == 0  # 1.9 / 20.5 < 1 / 8.5: the measured loop says park


def test_the_calibration_measures_the_loops_own_cost():
    from spec.loop.calibrate import loop_extras
    from spec.loop.results import Round

    costs = Costs(verify=[10.0, 12.0, 13.0], draft=[0.0, 1.0, 2.0], prior=[0.5, 0.4], tree_ms=1.0)

    def rnd(index, drafted, ms, tree=False):
        return Round("x", index, [1], 0, drafted, "", ms / 1000, parents=(0, 0) if tree else tuple(range(drafted)))

    rounds = [rnd(0, 0, 500), rnd(1, 2, 90), rnd(2, 0, 10), rnd(2, 1, 15), rnd(3, 2, 17), rnd(4, 2, 18),
              rnd(5, 2, 21, tree=True)]
    assert loop_extras(costs, rounds) == (2.0, 5.0)  # chains 2, 2, 3 ms over (first round left out); tree 21-16
    assert loop_extras(costs, rounds[:-1]) == (2.0, 2.0)  # no tree rounds: the chains' extra
    assert loop_extras(costs, [rnd(2, 1, 9)]) == (-4.0, -4.0)  # faster in the loop than its bare parts: said so


def test_parked_steps_pipeline_probe_in_the_shadow_and_keep_every_tap_for_the_drafter(tiny_dir, qwen3, monkeypatch):
    """Parked rounds run as pipelined plain decoding (the next step in flight); their shadow probes
    draft from the newest token, are compared with what the target commits, and are never verified;
    the taps of every committed token reach the drafter once, in order."""
    head = load_dspark(str(tiny_dir / "dspark-qwen3"), qwen3)
    taken, anchors, propose = [], [], head.propose

    def spy(cache, new_taps, anchor, *args, **kw):
        taken.extend([] if new_taps is None else [new_taps])
        anchors.append((anchor, sum(t.shape[1] for t in taken)))
        return propose(cache, new_taps, anchor, *args, **kw)

    monkeypatch.setattr(head, "propose", spy)
    prompt = [9, 8, 7, 6, 5]
    gen = Engine(qwen3, head, max_draft="auto", costs=Costs([1.0, 5.0], [0.0, 1.0], [0.0])).start(prompt, 12)
    flight = [(gen.step(), gen.in_flight)[1] for _ in range(8)]  # prefill + 7 parked rounds
    assert gen.drafted == [0] * 7 and all(flight)
    assert len(anchors) >= 2 and gen.policy.acceptance.tried[0] > 1  # probes drafted and were judged (discounted since)
    for anchor, before in anchors:  # each drafted after a committed token, from the taps of all before it
        assert (prompt + gen.ids)[before] == anchor
    seen = prompt + gen.ids  # the last token's step is in flight: its taps are kept already
    _, want = qwen3(mx.array([seen]), qwen3.make_cache(), head.config.target_layer_ids)
    np.testing.assert_allclose(np.array(mx.concatenate(taken + gen.pending, axis=1)), np.array(want), atol=1e-4)
    assert list(gen)[-1].done and gen.result.token_ids == Engine(qwen3).generate(prompt, 12).token_ids


def test_a_probe_is_judged_draft_by_draft_as_the_target_commits():
    auto = AutoDraft(Costs(verify=[10.0, 11.0, 12.0], draft=[0.0, 1.0, 1.5], prior=[0.05, 0.05]), max_k=2)
    auto.next(), auto.probe(), auto.probe()
    auto.observe_probe(drafted=1, matched=1, final=False)  # its first draft came true, the second is not known yet
    assert auto.acceptance.tried == [1, 0] and auto.acceptance.accepted == [1, 0] and auto.gap == 2
    auto.observe_probe(drafted=2, matched=1, start=1)  # the second missed: positions before `start` not counted again
    assert auto.acceptance.tried == [1, 1] and auto.acceptance.accepted == [1, 0] and auto.gap == 4  # still parked


def test_probes_that_leave_it_parked_come_less_often():
    costs = Costs(verify=[10.0, 11.0, 12.0], draft=[0.0, 1.0, 1.5], prior=[0.05, 0.05])
    auto = AutoDraft(costs, max_k=2, gaps=(2, 16))
    probed_at = []
    for i in range(80):
        assert auto.next() == 0
        if auto.probe():
            probed_at.append(i)
            auto.observe_probe(drafted=1, matched=0)  # nothing came true
    assert [b - a for a, b in zip(probed_at, probed_at[1:])][:5] == [4, 8, 16, 16, 16]  # doubled, up to 16
    for _ in range(6):
        auto.observe(drafted=2, accepted=2)  # the head pays again (rounds it verified): it drafts ...
    assert auto.next() == 2 and auto.gap == 2  # ... and the next parked run probes soon again


def test_costs_are_measured_once_and_cached(tiny_dir, qwen3, tmp_path, monkeypatch):
    head = load_dflash(str(tiny_dir / "dflash-qwen3"), qwen3)
    calls = []
    real = calibrate.calibrate
    monkeypatch.setattr(calibrate, "calibrate", lambda *a, **k: calls.append(1) or real(*a, **k))
    monkeypatch.setenv("SPEC_ARENA_CALIBRATION", str(tmp_path))
    first = calibrate.cached_costs(qwen3, head)
    again = calibrate.cached_costs(qwen3, head, tmp_path)
    assert calls == [1] and first == again and len(list(tmp_path.glob("dflash-*.json"))) == 1
    assert len(first.verify) == head.max_drafts + 1 and len(first.draft) == head.max_drafts + 1
    assert first.draft[0] == 0 and all(v > 0 for v in first.verify) and all(0 <= p <= 1 for p in first.prior)
    other = load_dspark(str(tiny_dir / "dspark-qwen3"), qwen3)
    assert calibrate.calibration_key(qwen3, head) != calibrate.calibration_key(qwen3, other)


# costs under which the chosen length moves with the acceptance seen so far
FLIPPING = Costs(verify=[1.0, 1.45, 1.5, 1.55, 1.6, 1.65, 1.7, 1.75], draft=[0.0] + [0.1] * 7, prior=[0.6] * 7)


@settings(max_examples=10, deadline=None)
@given(prompt=st.lists(st.integers(min_value=4, max_value=259), min_size=1, max_size=30), n=st.integers(1, 24))
def test_auto_is_lossless_at_t0(tiny_dir, qwen3, prompt, n):
    want = Engine(qwen3).generate(prompt, n).token_ids
    for head in (load_dflash(str(tiny_dir / "dflash-qwen3"), qwen3), load_dspark(str(tiny_dir / "dspark-qwen3"), qwen3)):
        res = Engine(qwen3, head, max_draft="auto", costs=costs_for(qwen3, head, "auto")).generate(prompt, n)
        assert res.token_ids == want and all(0 <= d <= head.max_drafts for d in res.drafted)


def test_auto_is_lossless_with_lengths_that_move(tiny_dir, qwen3):
    head = load_dspark(str(tiny_dir / "dspark-qwen3"), qwen3)
    prompt = [9, 8, 7, 6, 5]
    want = Engine(qwen3).generate(prompt, 40).token_ids
    res = Engine(qwen3, head, max_draft="auto", costs=FLIPPING).generate(prompt, 40)
    assert res.token_ids == want and len(set(res.drafted)) >= 2  # the length changed during the generation


@pytest.mark.slow  # an exact-sample (chi-square) test: 1200 generations
def test_auto_samples_the_targets_law_at_t_gt_0(tiny_dir):
    """The first three tokens through the engine with auto lengths, against the target's own joint law."""
    from scipy.stats import chisquare
    from test_sampling import expected_counts, later_tokens_law, vocab8_pair

    t, head = vocab8_pair(tiny_dir)
    prompt = [1, 4, 6]
    exp = later_tokens_law(t, prompt, Sampling(1.0))
    n, counts, lengths = 1200, np.zeros((8, 8)), set()
    for seed in range(n):
        res = Engine(t, head, max_draft="auto", sampling=Sampling(1.0, seed=seed), costs=FLIPPING).generate(prompt, 3)
        counts[res.token_ids[1], res.token_ids[2]] += 1
        lengths.update(res.drafted)
    assert chisquare(counts.ravel(), expected_counts(exp.ravel(), n)).pvalue > 1e-3
    assert len(lengths) >= 2


def test_auto_without_costs_says_where_to_get_them(tiny_dir, qwen3):
    head = load_dspark(str(tiny_dir / "dspark-qwen3"), qwen3)
    with pytest.raises(SpecError, match="costs_for"):
        Engine(qwen3, head, max_draft="auto")
    assert costs_for(qwen3, head, 3) is None and costs_for(qwen3, None, "auto") is None
