"""Prompt lookup as one more branch of a head's tree (spec.loop.lookup_branch): how it is grafted, what the
head's statistics keep of it, and that the one verify loop stays lossless with it (T = 0 identical to greedy,
T > 0 an exact sample)."""

import mlx.core as mx
import numpy as np
import pytest
from scipy.stats import chisquare
from test_sampling import expected_counts, later_tokens_law, vocab8_pair
from test_tree import HAND, P, Q, trio  # noqa: F401 (a fixture)

from spec.loop.autodraft import AutoDraft, Costs
from spec.loop.calibrate import build_engine
from spec.loop.engine import Engine
from spec.loop.lookup_branch import LookupBranch, graft, new_rows
from spec.loop.tree import DraftTree, merge_chains
from spec.loop.verify import Sampling, log_probs, walk


def test_the_branch_runs_through_the_rows_that_hold_its_prefix_then_adds_its_own():
    # HAND: rows 1 (11), 2 (12) under the anchor; 3 (13) under 1; 4 (14) under 2; 5 (15) under 3
    tree = graft(HAND, [11, 13, 99, 98])
    assert tree.token_list() == [11, 12, 13, 14, 15, 99, 98] and tree.parents == [0, 0, 1, 2, 3, 3, 6]
    assert tree.certain == {0: 11, 1: 13, 3: 99, 6: 98} and tree.head_rows == 5
    assert new_rows(HAND, [11, 13, 99, 98]) == [0, 0, 1, 2] and new_rows(HAND, [12, 14]) == [0, 0]
    assert graft(HAND, []) is HAND
    # the head's statistics: its own rows only; a path that leaves through a lookup row ends them there
    assert tree.levels([0, 1, 3, 5]) == HAND.levels([0, 1, 3, 5]) == [(1, 2), (1, 1), (1, 1)]
    assert tree.levels([0, 1, 3, 6, 7]) == [(1, 2), (1, 1), (0, 1)]  # T = 0: the head's 15 missed there
    assert tree.first_guesses(3) == [5] and tree.first_guesses(6) == []


def test_a_chain_grafted_at_t_gt_0_keeps_the_heads_draws_as_its_trials():
    q = mx.zeros((2, 6))
    chain = DraftTree.chain(mx.array([1, 2]), q)
    tree = graft(chain, [3, 4])
    assert tree.trials == {0: [1], 1: [2]} and tree.certain == {0: 3, 3: 4}
    assert tree.drawn(0) == [1] and sorted(tree.children()[0]) == [1, 3]


def first_tokens(s: Sampling, lookup: int, draws: int, n: int = 6000) -> np.ndarray:
    """The first committed token's counts over n walks of drawn trees with a certain lookup token at the
    root (and one below it), as tests/test_tree.py counts drawn trees alone."""
    rng = np.random.default_rng(s.seed)
    q_lp = np.array(log_probs(Q, s))
    q = np.exp(q_lp[0])
    counts = np.zeros(6, dtype=np.int64)
    for _ in range(n):
        first = rng.choice(6, size=draws, p=q / q.sum()).tolist()
        tree = graft(merge_chains([[a] for a in first], [[0]] * draws, mx.array(q_lp)), [lookup, 1])
        _, committed = walk(tree, mx.concatenate([P] * 3)[: tree.size + 1], s, rng)
        counts[committed[0]] += 1
    return counts


@pytest.mark.slow  # chi-square tests of the acceptance rule with a certain trial
@pytest.mark.parametrize("s, lookup, draws", [(Sampling(1.0), 0, 2), (Sampling(0.7, top_k=4, seed=1), 5, 1),
                                              (Sampling(1.0, seed=2), 3, 3)])
def test_a_certain_lookup_trial_before_the_heads_draws_samples_the_target(s, lookup, draws):
    p = np.array(mx.exp(log_probs(P[0], s)), dtype=np.float64)
    counts = first_tokens(s, lookup, draws)
    keep = p > 0
    assert counts[~keep].sum() == 0
    assert chisquare(counts[keep], p[keep] / p[keep].sum() * counts.sum()).pvalue > 1e-3


def echo_prompt(t):
    """A prompt that quotes itself, so the lookup has something to graft from the first round on."""
    return t.encode_chat("alpha beta gamma delta alpha beta gamma delta alpha beta")


@pytest.mark.parametrize("kind, max_draft, tree", [("dflash", 4, 0), ("dspark", 3, 0), ("dflash", 5, 9),
                                                    ("dspark", 4, 6), ("dflash", "auto", "auto")])
def test_heads_with_a_lookup_branch_are_identical_to_greedy(trio, kind, max_draft, tree):  # noqa: F811
    t, dflash, dspark = trio
    head = dflash if kind == "dflash" else dspark
    prompt = echo_prompt(t)
    want = Engine(t).generate(prompt, 48).token_ids
    eng = build_engine(t, head, max_draft, tree=tree, lookup_branch=True)
    assert eng.lookup_branch
    gen = eng.start(prompt, 48)
    rounds = list(gen)
    assert gen.result.token_ids == want
    grafted = gen.branch.grafted
    if max_draft != "auto":  # a fixed length grafts every proposal, and the text repeats: some were verified
        assert sum(grafted) > 0 and any(r.drafted > (tree or max_draft) for r in rounds)
        # each round says which of its rows the lookup added: the head's own stay what was set (the page's badge)
        drafting = [r for r in rounds if r.drafted]
        assert all(r.drafted - r.copied <= (tree or max_draft) for r in drafting), [(r.drafted, r.copied) for r in drafting]
        assert sum(r.copied for r in drafting) == sum(grafted) and any(r.copied for r in drafting)


def test_auto_grafts_what_lands_and_stops_grafting_what_does_not():
    """The choice of how many lookup tokens to graft follows their landing rate."""
    costs = Costs(verify=[10.0 + i for i in range(8)], draft=[0.0] + [2.0] * 7, prior=[0.5] * 7)
    policy = AutoDraft(costs, max_k=7)
    policy.next()
    head = DraftTree.chain(mx.array([1, 2, 3][: policy.chosen[-1]]))
    branch = LookupBranch()
    branch.see([5, 6, 7, 8, 9, 5, 6])  # "5 6" occurred before: the lookup proposes 7 8 9 5 6
    assert branch.extend(head, 7, policy).size > head.size  # a neutral prior: worth a few rows
    for _ in range(30):
        branch.matched, branch.proposed = 2, [7, 8, 9]
        branch.judge([4])  # every proposal after a match of two missed at once
    assert branch.extend(head, 7, policy) is head and branch.grafted[-1] == 0
    branch.see([1, 5, 6, 7])  # "5 6 7" occurred before: a match of three, whose landing is its own
    assert branch.matched == 2 and branch.extend(head, 7, policy).size > head.size and branch.matched == 3


@pytest.mark.slow  # an exact-sample (chi-square) test: 1500 generations
def test_trees_with_a_lookup_branch_sample_the_targets_law(tiny_dir):
    t, head = vocab8_pair(tiny_dir)
    prompt = [1, 4, 6, 2, 1, 4]  # "1 4" occurred before: the lookup proposes 6 2 ...
    exp = later_tokens_law(t, prompt, Sampling(1.0, seed=0))
    n, grafted = 1500, 0
    counts = np.zeros((8, 8))
    for seed in range(n):
        gen = Engine(t, head, max_draft=2, tree=4, sampling=Sampling(1.0, seed=seed), lookup_branch=True).start(prompt, 3)
        for _ in gen:
            pass
        ids = gen.result.token_ids
        counts[ids[1], ids[2]] += 1
        grafted += sum(gen.branch.grafted)
    assert grafted > n / 2  # the lookup's tokens were in the trees (and tested against the target)
    assert chisquare(counts.ravel(), expected_counts(exp.ravel(), n)).pvalue > 1e-3


def test_rows_past_the_calibrated_block_cost_its_mean_row():
    """BLAS pads row counts, so the calibrated steps alternate flat and steep: a lookup branch that goes past
    the head's block is charged the block's mean cost of a row, never its last (flat) step."""
    costs = Costs(verify=[10.0, 12.0, 14.0, 14.0], draft=[0.0, 1.0, 1.0, 1.0], prior=[0.5] * 3)
    policy = AutoDraft(costs, max_k=3)
    assert policy.round_cost(3, False) == 14.0 + 1.0 + costs.loop_ms
    assert policy.round_cost(5, False, drafted=3) == 14.0 + 2 * 1.0 + 1.0 + costs.loop_ms


def test_rounds_with_lookup_rows_carry_no_confidence_estimates(trio):  # noqa: F811
    """DSpark's confidence scores the slots of its own chain: a round the lookup added rows to is a tree round
    for the confidence check (counted, not checked), so the check never reads past the head's slots."""
    from spec.loop.confidence import ConfidenceCheck

    t, _, dspark = trio
    check, grown = ConfidenceCheck(), 0
    for r in Engine(t, dspark, max_draft=3, tree=0, lookup_branch=True).start(echo_prompt(t), 48):
        grown += r.drafted > 3
        assert not r.estimates or len(r.estimates) >= r.drafted
        check.add(r.estimates, r.drafted, r.accepted)
    assert grown and check.drafted_as_trees >= grown
    assert check.record()["rounds"] == len(check.rounds)
