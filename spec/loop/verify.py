"""Acceptance rules that keep speculative decoding lossless, one walk for chains and trees.

Greedy: accept the longest path whose drafts are the target's argmax, then the target's own next token.
T > 0 (Leviathan et al. / Chen et al., and SpecInfer's multi-draft form for trees): accept draft x with
probability min(1, p(x)/q(x)); after a rejection sample from normalise(max(0, p - q)); if all pass, a
bonus token from p. Top-k / top-p truncation is applied to p and q the same way, so the output is an
exact sample from the truncated target distribution at temperature T. A plain step is `pick`.
"""

from __future__ import annotations

from dataclasses import dataclass

import mlx.core as mx
import numpy as np

from ..errors import SpecError
from .tree import DraftTree


@dataclass(frozen=True)
class Sampling:
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise SpecError("temperature must be >= 0")
        if not 0 < self.top_p <= 1:
            raise SpecError("top-p must be in (0, 1]")
        if self.top_k < 0:
            raise SpecError("top-k must be >= 0 (0 = off)")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


def log_probs(logits: mx.array, s: Sampling) -> mx.array:
    """Log-probabilities at temperature T after top-k then top-p truncation (rows of [..., V])."""
    x = logits.astype(mx.float32) / s.temperature
    if s.top_k and s.top_k < x.shape[-1]:
        kth = mx.sort(x, axis=-1)[..., -s.top_k][..., None]
        x = mx.where(x < kth, -mx.inf, x)
    x = x - mx.logsumexp(x, axis=-1, keepdims=True)
    if s.top_p < 1.0:
        order = mx.argsort(-x, axis=-1)
        sorted_p = mx.exp(mx.take_along_axis(x, order, axis=-1))
        # keep a token if the mass strictly before it is < top_p (the top token always stays)
        keep_sorted = (mx.cumsum(sorted_p, axis=-1) - sorted_p) < s.top_p
        keep = mx.put_along_axis(mx.zeros(x.shape, dtype=mx.bool_), order, keep_sorted, axis=-1)
        x = mx.where(keep, x, -mx.inf)
        x = x - mx.logsumexp(x, axis=-1, keepdims=True)
    return x


def pick(logits: mx.array, s: Sampling, key: mx.array | None) -> tuple[mx.array, mx.array | None]:
    """(token per row, log-probs per row or None when greedy)."""
    if s.greedy:
        return mx.argmax(logits, axis=-1), None
    lp = log_probs(logits, s)
    return mx.random.categorical(lp, key=key), lp


def walk(tree: DraftTree, target_logits: mx.array, s: Sampling,
         rng: np.random.Generator | None = None) -> tuple[list[int], list[int]]:
    """Verify a draft tree against the target's logits [R, V] (row r: the target after row r's path):
    (rows of the accepted path from the anchor, the committed tokens: the path's drafts + one of the
    target's own). One rule for chains and trees.

    T = 0: follow the child holding the target's argmax until there is none, then commit the argmax.
    T > 0: multi-draft speculative sampling (SpecInfer, Miao et al. 2023): at each node, its children's
    draws x_1, x_2, ... (independent draws from one q) are tested in turn, x_j accepted with probability
    min(1, p(x_j) / q(x_j)); after a rejection p becomes normalise(max(0, p - q)). Each test is the
    Leviathan/Chen rule for the current p, whose output (the accepted draw, else a sample of the
    residual, which is what the next test samples exactly) is distributed as p; by induction the
    node's token is an exact draw from the target, and the walk goes on in the child it chose. With
    one draw per node (a chain) this is the Leviathan/Chen rule itself. A grafted lookup's certain token
    (tree.certain) is one more independent trial, tested first, from a q that is all on it."""
    children = tree.children()
    path = [0]
    if s.greedy:
        best = np.array(mx.argmax(target_logits, axis=-1))
        while (nxt := children.get(path[-1], {}).get(int(best[path[-1]]))) is not None:
            path.append(nxt)
        final = int(best[path[-1]])
    else:
        p_log = log_probs(target_logits, s)
        certain = tree.certain or {}
        while True:
            row = path[-1]
            p = np.exp(np.array(p_log[row], dtype=np.float64))
            nxt = None
            if row in certain:  # a grafted lookup's token: q is all on it, so it lands with probability p(x)
                x = certain[row]
                if rng.random() < p[x]:
                    nxt = children[row][x]
                elif p[x] < 1.0:
                    p[x] = 0.0  # the residual max(0, p - q)
                    p /= p.sum()
            for x in tree.drawn(row) if nxt is None else ():
                q = np.exp(np.array(tree.q[tree.q_index[row]], dtype=np.float64))
                if rng.random() * q[x] < p[x]:
                    nxt = children[row][x]
                    break
                residual = np.maximum(p - q, 0.0)
                if residual.sum() > 1e-12:
                    p = residual / residual.sum()
            if nxt is None:
                final = int(rng.choice(p.shape[0], p=p / p.sum()))
                break
            path.append(nxt)
    tokens = tree.token_list()
    return path, [tokens[r - 1] for r in path[1:]] + [final]
