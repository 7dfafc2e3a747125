"""Drafts verified as a tree: its mask and positions, the cache after a path, lossless at T = 0 and exact
at T > 0 (spec.tree, spec.positions, spec.verify.walk)."""

import itertools
import json

import mlx.core as mx
import numpy as np
import pytest
import tiny
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import chisquare

from spec.errors import SpecError
from spec.heads.registry import load_dflash, load_dspark
from spec.heads.vocab import DraftVocab
from spec.loop.autodraft import Costs
from spec.loop.engine import Engine
from spec.loop.tree import DraftTree, best_first, merge_chains
from spec.loop.verify import Sampling, log_probs, walk
from spec.target import load_target

# rows: 0 anchor; 1, 2 under it; 3 under 1; 4 under 2; 5 under 3
HAND = DraftTree([11, 12, 13, 14, 15], [0, 0, 1, 2, 3])


def test_a_hand_built_tree_has_depths_mask_and_paths():
    assert HAND.depths == [0, 1, 1, 2, 2, 3]
    m = HAND.mask()
    assert m.tolist() == [
        [1, 0, 0, 0, 0, 0],
        [1, 1, 0, 0, 0, 0],
        [1, 0, 1, 0, 0, 0],
        [1, 1, 0, 1, 0, 0],
        [1, 0, 1, 0, 1, 0],
        [1, 1, 0, 1, 0, 1],
    ]
    assert HAND.path_to(5) == [0, 1, 3, 5] and HAND.path_to(4) == [0, 2, 4]
    assert HAND.children() == {0: {11: 1, 12: 2}, 1: {13: 3}, 2: {14: 4}, 3: {15: 5}}
    assert HAND.levels([0, 1, 3]) == [(1, 2), (1, 1), (0, 1)] and HAND.levels([0, 2, 4]) == [(2, 2), (1, 1)]
    assert HAND.levels([0]) == [(0, 2)]
    assert DraftTree.chain(mx.array([4, 5, 6])).levels([0, 1]) == [(1, 1), (0, 1)]
    assert not HAND.is_chain and DraftTree.chain(mx.array([1, 2, 3])).is_chain
    with pytest.raises(ValueError):
        DraftTree([1, 2], [0, 2])  # a parent must be an earlier row


def test_best_first_is_the_exact_top_n_of_path_probabilities():
    """Against brute force over every path of a small random head whose next-token choice depends on
    the previous token (as DSpark's Markov head makes it)."""
    rng = np.random.default_rng(0)
    vocab, depth = 5, 4
    table = np.log(rng.dirichlet(np.ones(vocab), size=(depth, vocab)))  # [d, prev, next]

    def level(d, parents):
        lp = table[d][[p % vocab for p in parents]]
        order = np.argsort(-lp, axis=1)[:, :3]
        return np.take_along_axis(lp, order, axis=1), order

    for nodes in (1, 3, 7, 12):
        tree = best_first(level, depth, nodes, anchor=2)
        assert tree.size == nodes
        score = {0: 0.0}
        toks = [2] + tree.token_list()
        for r in range(1, nodes + 1):
            p = tree.parents[r - 1]
            score[r] = score[p] + table[tree.depths[r] - 1][toks[p] % vocab][toks[r]]
        every = []  # all paths whose every step is among the 3 best of its parent
        for length in range(1, depth + 1):
            for path in itertools.product(range(vocab), repeat=length):
                s, prev, ok = 0.0, 2, True
                for d, t in enumerate(path):
                    ok &= t in np.argsort(-table[d][prev])[:3]
                    s, prev = s + table[d][prev][t], t
                if ok:
                    every.append(s)
        best = sorted(every, reverse=True)[:nodes]
        assert sorted(score[r] for r in range(1, nodes + 1)) == pytest.approx(sorted(best))


@pytest.fixture(scope="module")
def trio(tiny_dir):
    folder = tiny_dir / "qwen3"
    cfg = json.loads((folder / "config.json").read_text())
    if not (tiny_dir / "dflash-qwen3").exists():
        tiny.make_dflash_head(tiny_dir / "dflash-qwen3", cfg)
        tiny.make_dspark_head(tiny_dir / "dspark-qwen3", cfg)
    t = load_target(str(folder))
    return t, load_dflash(str(tiny_dir / "dflash-qwen3"), t), load_dspark(str(tiny_dir / "dspark-qwen3"), t)


def test_every_row_of_a_tree_forward_is_its_path_fed_alone(trio):
    t = trio[0]
    assert t.check_trees() == ""
    prompt = [30, 31, 32, 33]
    cache = t.make_cache()
    t(mx.array([prompt]), cache)
    logits, _ = t(mx.array([[40] + HAND.token_list()]), cache, tree=HAND)
    toks = [40] + HAND.token_list()
    for row in range(len(HAND.depths)):
        ids = prompt + [toks[r] for r in HAND.path_to(row)]
        ref, _ = t(mx.array([ids]), t.make_cache())
        assert mx.allclose(logits[0, row], ref[0, -1], atol=1e-4), row


@pytest.mark.parametrize("leaf", range(6))
def test_after_any_path_the_cache_is_the_cache_of_that_path(trio, leaf):
    t = trio[0]
    prompt, toks = [30, 31, 32, 33], [40] + HAND.token_list()
    cache = t.make_cache()
    t(mx.array([prompt]), cache)
    t(mx.array([toks]), cache, tree=HAND)
    path = HAND.path_to(leaf)
    t.keep(cache, path, len(toks))
    fed = t.make_cache()
    t(mx.array([prompt + [toks[r] for r in path]]), fed)
    for a, b in zip(cache, fed):
        assert a.offset == b.offset
        assert mx.allclose(a.keys[..., : a.offset, :], b.keys[..., : b.offset, :], atol=1e-5)
        assert mx.allclose(a.values[..., : a.offset, :], b.values[..., : b.offset, :], atol=1e-5)
    after = [t(mx.array([[50, 51]]), c)[0] for c in (cache, fed)]
    assert mx.allclose(*after, atol=1e-4)


prompts = st.lists(st.integers(min_value=4, max_value=259), min_size=1, max_size=30)


def tree_costs(k: int) -> Costs:
    """Costs under which trees pay: verifying is nearly free, second choices land often."""
    return Costs(verify=[10.0 + 0.1 * i for i in range(k + 1)], draft=[0.0] + [0.5] * k, prior=[0.5] * k,
                 second=[0.6, 0.5, 0.4])


@settings(max_examples=8, deadline=None)
@given(prompt=prompts, nodes=st.integers(1, 20), cap=st.integers(1, 7), n=st.integers(1, 20))
def test_trees_of_both_heads_are_lossless(trio, prompt, nodes, cap, n):
    t, dflash, dspark = trio
    want = Engine(t).generate(prompt, n).token_ids
    for head in (dflash, dspark):
        res = Engine(t, head, max_draft=min(cap, head.max_drafts), tree=nodes).generate(prompt, n)
        assert res.token_ids == want, (head.kind, nodes, cap)
        assert all(d <= nodes and 1 <= a <= min(cap, d) + 1 for a, d in zip(res.accept_lengths, res.drafted))
        auto = Engine(t, head, max_draft="auto", costs=tree_costs(head.max_drafts), tree=nodes).generate(prompt, n)
        assert auto.token_ids == want, (head.kind, nodes, "auto")


def test_auto_picks_a_tree_where_second_choices_pay_and_a_chain_where_they_do_not():
    from spec.loop.autodraft import AutoDraft, tree_tokens

    # a 2-node tree: the first choice at depth 1 and either its child or the second choice beside it
    assert tree_tokens([[0.5, 0.6], [0.5, 0.0]], 2) == pytest.approx([1.0, 1.5, 1.5 + 0.3])
    assert tree_tokens([[0.9, 0.1]] * 3, 3)[-1] == pytest.approx(1 + 0.9 + 0.81 + 0.729)  # here a chain is best
    auto = AutoDraft(tree_costs(7), max_k=7, max_nodes=7)
    assert auto.next() == 7 and auto.nodes == 7  # rows are nearly free and second choices land: the widest tree
    never = tree_costs(7)
    never.second = [0.0, 0.0, 0.0]  # calibrated: second choices never land
    auto = AutoDraft(never, max_k=7, max_nodes=7)
    auto.next()
    assert auto.nodes == 0
    for _ in range(30):
        auto.observe(2, 1, levels=[(2, 2)])  # ... but here the first choice misses and the second lands
    auto.next()
    assert auto.nodes >= 2
    chains = AutoDraft(tree_costs(7), max_k=7, max_nodes=0)  # trees not allowed
    assert chains.next() > 0 and chains.nodes == 0
    hybrid = AutoDraft(Costs([10.0, 10.1], [0.0, 0.5], [0.5]), max_k=1, max_nodes=4)  # calibrated without trees
    assert hybrid.max_nodes == 0


@pytest.mark.parametrize("corrupt", [0.0, 0.3])
def test_paths_through_later_siblings_are_lossless(trio, corrupt):
    """An oracle tree hides the true path among decoys: accepted paths leave through any sibling."""
    t, dflash, dspark = trio
    prompt = [10, 20, 30, 40, 50]
    want = Engine(t).generate(prompt, 40).token_ids
    for head in (dflash, dspark):
        lengths = set()
        for seed in range(3):
            eng = Engine(t, tiny.OracleHead(head, want, len(prompt), corrupt, seed), max_draft=6, tree=16)
            res = eng.generate(prompt, 40)
            assert res.token_ids == want
            lengths.update(res.accept_lengths)
        assert max(lengths) >= (4 if corrupt else 6)


def test_tree_settings_are_checked(trio):
    t, dflash, _ = trio
    for bad in (-1, 65, 2.5):
        with pytest.raises(SpecError, match="tree"):
            Engine(t, dflash, max_draft=3, tree=bad)


# -- T > 0: the multi-draft rule samples the target exactly ------------------------------------------
P = mx.array([[2.0, 1.0, 0.0, -1.0, 0.5, 1.5], [0.0, 1.0, 2.0, 0.3, -1.0, 1.0], [1.0, 0.2, 1.0, 0.0, 1.0, 0.0],
              [0.5, 0.5, 0.0, 1.0, 1.0, 2.0]])
Q = mx.array([[1.0, 2.0, 0.0, 0.0, 0.5, 1.0]])


def drawn_tree(rng: np.random.Generator, q_lp: np.ndarray, draws: int) -> DraftTree:
    """The anchor's children: `draws` independent draws from q (repeats merged into one node), each
    with one grandchild drawn from q too (one draw: a chain of two, the Leviathan/Chen case)."""
    q = np.exp(q_lp[0])
    first = rng.choice(6, size=draws, p=q / q.sum()).tolist()
    second = rng.choice(6, size=draws, p=q / q.sum()).tolist()
    return merge_chains([[a, b] for a, b in zip(first, second)], [[0, 0]] * draws, mx.array(q_lp))


def first_token_counts(s: Sampling, draws: int, n: int = 6000, residual: bool = True,
                       q_lp: np.ndarray | None = None) -> np.ndarray:
    rng = np.random.default_rng(s.seed)
    q_lp = np.array(log_probs(Q, s)) if q_lp is None else q_lp
    counts = np.zeros(6, dtype=np.int64)
    for _ in range(n):
        tree = drawn_tree(rng, q_lp, draws)
        logits = mx.concatenate([P] * 3)[: tree.size + 1]  # a row per node (up to 8 drawn) and the anchor
        if residual:
            _, committed = walk(tree, logits, s, rng)
        else:
            committed = [wrong_walk(tree, logits, s, rng)]
        counts[committed[0]] += 1
    return counts


def wrong_walk(tree: DraftTree, logits: mx.array, s: Sampling, rng: np.random.Generator) -> int:
    """Tests every draw against the target's own p, never its residual: biased towards the draws."""
    p = np.exp(np.array(log_probs(logits[0], s), dtype=np.float64))
    q = np.exp(np.array(tree.q[0], dtype=np.float64))
    for x in tree.drawn(0):
        if rng.random() * q[x] < p[x]:
            return x
    return int(rng.choice(6, p=p / p.sum()))


@pytest.mark.slow  # the chi-square tests of the acceptance rule
@pytest.mark.parametrize("s, draws", [(Sampling(1.0), 3), (Sampling(0.7, top_k=4, seed=1), 2),
                                      (Sampling(1.3, top_p=0.8, seed=2), 4), (Sampling(1.0, seed=3), 1)])
def test_the_multi_draft_rule_samples_the_target(s, draws):
    p = np.array(mx.exp(log_probs(P[0], s)), dtype=np.float64)
    counts = first_token_counts(s, draws)
    keep = p > 0
    assert counts[~keep].sum() == 0
    assert chisquare(counts[keep], p[keep] / p[keep].sum() * counts.sum()).pvalue > 1e-3


@pytest.mark.slow
@pytest.mark.parametrize("draws", [1, 3])
def test_a_rule_without_the_residual_is_caught(draws):
    s = Sampling(1.0, seed=4)
    p = np.array(mx.exp(log_probs(P[0], s)), dtype=np.float64)
    counts = first_token_counts(s, draws, residual=False)
    assert chisquare(counts, p / p.sum() * counts.sum()).pvalue < 1e-6


@pytest.mark.slow
@pytest.mark.parametrize("draws", [1, 2])
def test_a_draft_vocabulary_that_cannot_draw_some_tokens_still_samples_the_target(draws):
    """q over a subset of the vocabulary (a draft vocabulary maps it back), zero elsewhere."""
    s = Sampling(1.0, seed=5)
    subset = mx.array([1, 2, 4], dtype=mx.uint32)
    vocab = DraftVocab(subset, mx.zeros((3, 1)), None, P.shape[1])
    _, q_lp = vocab.to_vocab(mx.array([0]), log_probs(Q[:, subset], s))
    assert np.isinf(np.array(q_lp)[:, [0, 3, 5]]).all()
    p = np.array(mx.exp(log_probs(P[0], s)), dtype=np.float64)
    counts = first_token_counts(s, draws, q_lp=np.array(q_lp))
    assert chisquare(counts, p / p.sum() * counts.sum()).pvalue > 1e-3


def test_sampled_trees_of_both_heads_run_and_stay_in_the_vocabulary(trio):
    t, dflash, dspark = trio
    for head in (dflash, dspark):
        res = Engine(t, head, max_draft=5, tree=9, sampling=Sampling(0.8, seed=5)).generate([7, 8, 9], 24)
        assert len(res.token_ids) == 24 or res.finish_reason == "eos"
        assert all(0 <= i < t.vocab_size for i in res.token_ids)
        assert all(d <= 9 for d in res.drafted) and max(res.drafted) > 5  # several chains: more than one deep


@pytest.mark.slow
def test_end_to_end_trees_sample_the_targets_joint_law(tiny_dir):
    """Tokens 2 and 3 sampled through the whole engine with drawn trees (DSpark, 3 chains) vs the
    target's own law, as tests/test_sampling.py checks chains."""
    from test_sampling import expected_counts, later_tokens_law, vocab8_pair

    t, head = vocab8_pair(tiny_dir)
    prompt = [1, 4, 6]
    exp = later_tokens_law(t, prompt, Sampling(1.0, seed=0))
    n = 1500
    counts = np.zeros((8, 8))
    for seed in range(n):
        ids = Engine(t, head, max_draft=2, tree=6, sampling=Sampling(1.0, seed=seed)).generate(prompt, 3).token_ids
        counts[ids[1], ids[2]] += 1
    assert chisquare(counts.ravel(), expected_counts(exp.ravel(), n)).pvalue > 1e-3


def test_tree_rounds_that_cost_more_in_the_loop_than_calibrated_lose_to_chains():
    from dataclasses import replace

    from spec.loop.autodraft import AutoDraft

    auto = AutoDraft(tree_costs(7), max_k=7, max_nodes=7)
    assert auto.next() == 7 and auto.nodes == 7
    dear = AutoDraft(replace(tree_costs(7), tree_loop_ms=29.0), max_k=7, max_nodes=7)  # calibrated: ~3x its 11 ms
    assert dear.next() and dear.nodes == 0 and dear.extra == 0.0  # chains, whose own loop cost is not the trees'
    auto = AutoDraft(tree_costs(7), max_k=7, max_nodes=7, adapt=True)  # the chooser before issue 39: it learned
    assert auto.next() == 7 and auto.nodes == 7  # the same from its own rounds
    for _ in range(20):
        auto.observe(7, 2, ms=40.0, levels=[(1, 2), (1, 2), (0, 2)])  # each tree round: ~3x its calibrated 11 ms
    assert auto.tree_extra > 20 and auto.extra == 0.0  # the chains' own extra is not theirs to pay
    auto.next()
    assert auto.nodes == 0


def test_a_round_that_missed_says_what_the_head_had_drafted(trio):
    """Round.missed: where a draft was rejected, the text of the head's guess from there on (a chain: its
    drafts after the accepted ones; a tree: the first guesses below the last accepted node)."""
    t, dflash, _ = trio
    assert HAND.first_guesses(0) == [1, 3, 5] and HAND.first_guesses(2) == [4] and HAND.first_guesses(5) == []

    class Recording(tiny.OracleHead):
        def propose(self, *a, **kw):
            self.last = super().propose(*a, **kw)[0].tolist()
            return mx.array(self.last, dtype=mx.uint32), None

    prompt = [12, 40, 33, 81, 9, 100, 27]
    want = Engine(t).generate(prompt, 40).token_ids
    head = Recording(dflash, want, len(prompt), corrupt=0.3, seed=2)
    missed = 0
    for r in Engine(t, head, max_draft=4, tree=0).start(prompt, 40):
        if r.index == 0:
            continue
        assert r.missed == (t.decode(head.last[r.accepted:]) if r.accepted < r.drafted else "")
        missed += bool(r.missed)
    assert missed >= 2
