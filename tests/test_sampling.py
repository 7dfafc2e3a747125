"""At T > 0 speculative decoding must be an exact sample from the target (chi-square tests)."""

import mlx.core as mx
import numpy as np
import pytest
from scipy.stats import chisquare

from spec.dspark import load_dspark
from spec.engine import Engine
from spec.verify import Sampling, accept_sampled, log_probs
from spec.vocab import DraftVocab

P_LOGITS = mx.array([[2.0, 1.0, 0.0, -1.0, 0.5, 1.5], [0.0, 1.0, 2.0, 0.3, -1.0, 1.0], [1.0, 1.0, 1.0, 1.0, 1.0, 0.0]])
Q_LOGITS = mx.array([[1.0, 2.0, 0.0, 0.0, 0.5, 1.0], [1.0, 0.0, 2.0, 0.3, 0.0, 1.0]])


def wrong_rule(draft, q_logprobs, target_logits, s, key):
    """Accept by the ratio test but resample from p instead of the residual: biased."""
    k = draft.shape[0]
    p = mx.exp(log_probs(target_logits, s))
    a, b = mx.random.split(key)
    if k == 0:
        return mx.array(0), mx.random.categorical(mx.log(p), key=b)
    q = mx.exp(q_logprobs)
    ok = (mx.random.uniform(shape=(k,), key=a) * q[mx.arange(k), draft] < p[mx.arange(k), draft]).astype(mx.int32)
    n = mx.cumprod(ok).sum()
    fix = mx.random.categorical(mx.log(p[n]), key=b)
    return n, mx.where(mx.arange(k + 1) < n, mx.concatenate([draft, fix[None]]), fix)


def expected_counts(p: np.ndarray, total: int) -> np.ndarray:
    p = p.astype(np.float64)
    return p / p.sum() * total


def first_token_counts(rule, s: Sampling, n_samples: int = 40000, q_lp: mx.array | None = None) -> np.ndarray:
    """Counts of the first committed token over many independent rounds (vectorised with vmap)."""
    q_lp = log_probs(Q_LOGITS, s) if q_lp is None else q_lp

    def one(key):
        a, b = mx.random.split(key)
        draft = mx.random.categorical(q_lp, key=a)  # drafts are samples from q
        return rule(draft, q_lp, P_LOGITS, s, b)[1][0]

    firsts = mx.vmap(one)(mx.random.split(mx.random.key(s.seed), n_samples))
    return np.bincount(np.array(firsts), minlength=P_LOGITS.shape[1])


@pytest.mark.parametrize("s", [Sampling(1.0), Sampling(0.7, top_k=4), Sampling(1.3, top_p=0.8, seed=3)])
def test_rule_samples_the_target(s):
    p = np.array(mx.exp(log_probs(P_LOGITS[0], s)))
    counts = first_token_counts(accept_sampled, s)
    keep = p > 0
    assert counts[~keep].sum() == 0  # never a token that top-k / top-p removed
    assert chisquare(counts[keep], expected_counts(p[keep], counts.sum())).pvalue > 1e-3


def test_rule_with_a_draft_vocabulary_samples_the_target():
    """q over a subset of the vocabulary (a draft vocabulary), zero elsewhere: still exact."""
    s = Sampling(1.0, seed=1)
    subset = mx.array([1, 2, 4], dtype=mx.uint32)
    vocab = DraftVocab(subset, mx.zeros((3, 1)), None, P_LOGITS.shape[1])
    _, q_lp = vocab.to_vocab(mx.array([0, 0]), log_probs(Q_LOGITS[:, subset], s))
    assert np.isinf(np.array(q_lp)[:, [0, 3, 5]]).all()
    p = np.array(mx.exp(log_probs(P_LOGITS[0], s)))
    counts = first_token_counts(accept_sampled, s, q_lp=q_lp)
    assert chisquare(counts, expected_counts(p, counts.sum())).pvalue > 1e-3


def test_a_wrong_rule_is_caught():
    s = Sampling(1.0)
    p = np.array(mx.exp(log_probs(P_LOGITS[0], s)))
    counts = first_token_counts(wrong_rule, s)
    assert chisquare(counts, expected_counts(p, counts.sum())).pvalue < 1e-6


def vocab8_pair(tiny_dir):
    """A tiny target with an 8-token vocabulary (its law can be enumerated) and a DSpark head (block 3)."""
    from spec.target import load_target
    import tiny

    folder = tiny_dir / "vocab8"
    if not folder.exists():
        tiny.make_target(folder, vocab=8, hidden=32, layers=4, scale=1.0, seed=5)
        cfg = __import__("json").loads((folder / "config.json").read_text())
        tiny.make_dspark_head(tiny_dir / "dspark-vocab8", cfg, block_size=3, rank=4, seed=7)
    t = load_target(str(folder))
    t.eos_ids = set()
    return t, load_dspark(str(tiny_dir / "dspark-vocab8"), t)


def later_tokens_law(t, prompt, s):
    """The target's own law of tokens 2 and 3 of a sample (summed over token 1): an 8 x 8 array."""
    def dist(prefix):
        logits, _ = t(mx.array([prompt + prefix]), t.make_cache())
        return np.array(mx.exp(log_probs(logits[0, -1], s)))

    exp = np.zeros((8, 8))
    p1 = dist([])
    for a in range(8):
        p2 = dist([a])
        for b in range(8):
            exp[b] += p1[a] * p2[b] * dist([a, b])
    return exp


def test_end_to_end_joint_distribution(tiny_dir):
    """First three tokens sampled through the whole engine (DSpark, cap 2) vs the target's own law,
    bucketed by (x2, x3) after x1: the drafted and verified tokens."""
    t, head = vocab8_pair(tiny_dir)
    prompt = [1, 4, 6]
    exp = later_tokens_law(t, prompt, Sampling(1.0, seed=0))
    n = 1500
    counts = np.zeros((8, 8))
    for seed in range(n):
        eng = Engine(t, head, max_draft=2, sampling=Sampling(1.0, seed=seed))
        ids = eng.generate(prompt, 3).token_ids
        counts[ids[1], ids[2]] += 1
    assert chisquare(counts.ravel(), expected_counts(exp.ravel(), n)).pvalue > 1e-3
