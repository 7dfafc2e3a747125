"""DSpark without its Markov head (an ablation a viewer can run live): every slot drafts from the backbone
alone, in parallel as DFlash's do. Lossless like every path, different drafts, said in the lane and table."""

import mlx.core as mx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spec.heads.registry import load_dspark
from spec.loop.engine import Engine
from spec.loop.verify import Sampling
from spec.race.run import run_race
from spec.race.settings import RaceSettings
from spec.report import results_table
from spec.target import load_target


@pytest.fixture(scope="module")
def pair(tiny_dir):
    t = load_target(str(tiny_dir / "qwen3"))
    return t, load_dspark(str(tiny_dir / "dspark-qwen3"), t)


@settings(max_examples=10, deadline=None)
@given(prompt=st.lists(st.integers(min_value=4, max_value=259), min_size=1, max_size=24),
       cap=st.sampled_from([2, 5, 0]), tree=st.sampled_from([0, 6]))
def test_without_markov_every_path_is_lossless(pair, prompt, cap, tree):
    t, head = pair
    want = Engine(t).generate(prompt, 20).token_ids
    got = Engine(t, head, max_draft=cap, tree=tree, markov=False).generate(prompt, 20)
    assert got.token_ids == want
    assert head.has_markov and head.markov_on  # switched off for that engine's drafts only: shared heads find it on


def test_the_switch_changes_the_drafts(pair):
    """The same context drafted with and without the Markov bias: different tokens somewhere."""
    t, head = pair
    differ = 0
    for seed in range(4):
        prompt = [(seed * 37 + 11 * i) % 250 + 4 for i in range(12)]
        drafts = []
        for on in (True, False):
            cache = t.make_cache()
            _, taps = t(mx.array([prompt]), cache, head.config.target_layer_ids)
            head.markov_on = on
            draft, _ = head.propose(head.make_cache(), taps, prompt[-1], 6, Sampling(), None)
            drafts.append(draft.tolist())
        differ += drafts[0] != drafts[1]
    head.markov_on = True
    assert differ >= 2
    head.markov_on = False
    assert head.parent_free  # without Markov a tree drafts every depth from one pass
    head.markov_on = True
    assert not head.parent_free


def test_a_race_without_markov_says_so_and_stays_lossless(pair):
    t, head = pair
    events = list(run_race(t, {"dspark": head}, "hello", RaceSettings(max_new_tokens=16, dspark_max_draft=4,
                                                                      dspark_markov=False)))
    final = events[-1]
    assert final.verdicts == {"dspark": "identical to greedy"}
    assert final.outcome.label("dspark") == "DSpark (Markov off)"
    assert "dspark (Markov off)" in set(results_table(final.outcome, final.verdicts)["engine"])
    plain = list(run_race(t, {"dspark": head}, "hello", RaceSettings(max_new_tokens=16, dspark_max_draft=4)))[-1]
    assert plain.outcome.label("dspark") == "DSpark"
