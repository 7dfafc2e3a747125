"""At T > 0 speculative decoding must be an exact sample from the target (chi-square tests through the whole
engine; the acceptance rule alone, for chains and trees, is checked in tests/test_tree.py)."""

import mlx.core as mx
import numpy as np
import pytest
from scipy.stats import chisquare

from spec.heads.registry import load_dspark
from spec.loop.engine import Engine
from spec.loop.verify import Sampling, log_probs


def expected_counts(p: np.ndarray, total: int) -> np.ndarray:
    p = p.astype(np.float64)
    return p / p.sum() * total


def vocab8_pair(tiny_dir):
    """A tiny target with an 8-token vocabulary (its law can be enumerated) and a DSpark head (block 3)."""
    import tiny

    from spec.target import load_target

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


@pytest.mark.slow  # an exact-sample (chi-square) test: 1500 generations
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
