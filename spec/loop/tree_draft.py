"""Drafting a tree from a block head (DSpark or DFlash): one block pass, then its slots' distributions.

Slot d's distribution is the head's logits there, plus for DSpark the Markov head's bias from the
token before it: so DFlash's slots do not depend on the path above them (one host sync for the whole
tree), DSpark's do (one small sync per depth, over the nodes that can still make the cut).
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np

from .tree import DraftTree, best_first, merge_chains
from .verify import Sampling, log_probs

TOP = 8  # the most children one node may get (a ninth choice is hardly ever worth a row)
CHAINS = 3  # drawn chains of a tree at T > 0


def chain_shape(nodes: int, k: int) -> tuple[int, int]:
    """(chains, depth) of a drawn tree of at most `nodes` nodes and depth k (T > 0)."""
    chains = max(1, min(CHAINS, nodes))
    return chains, max(1, min(k, nodes // chains))


def propose_tree(head, cache: list, new_taps: mx.array | None, anchor: int, k: int, nodes: int,
                 sampling: Sampling, key: mx.array | None) -> DraftTree:
    """A tree of at most `nodes` drafts, at most k deep: the best-first tree at T = 0, merged drawn
    chains at T > 0 (spec.loop.tree says why each)."""
    slot = head.first_draft_slot
    base = head.logits(head.block_hidden(cache, new_taps, anchor)[slot : slot + k])  # [k, V'] before Markov
    if sampling.greedy:
        return best_first(_levels(head, base, min(nodes, TOP)), k, nodes, anchor)
    chains, depth = chain_shape(nodes, k)
    keys = mx.random.split(key, depth)
    prev = mx.full((chains,), anchor, dtype=mx.uint32)
    drawn, qs = [], []
    for d in range(depth):
        lp = log_probs(head.next_logits(base[d], prev), sampling)
        tok, q = head.to_vocab(mx.random.categorical(lp, key=keys[d]), lp)
        drawn.append(tok)
        qs.append(q)
        prev = tok.astype(mx.uint32)
    tokens = mx.stack(drawn, axis=1)  # [chains, depth]
    q = mx.concatenate(qs)  # row d * chains + j: what chain j's token d was drawn from
    mx.eval(tokens, q)
    rows = [[d * chains + j for d in range(depth)] for j in range(chains)]
    return merge_chains(tokens.tolist(), rows, q)


def _levels(head, base: mx.array, m: int):
    """level(d, parent tokens) for best_first: each parent's m likeliest next tokens (log-probs)."""
    if head.parent_free:
        vals, toks = _top(head, base, m)  # every slot at once: [k, m]
        return lambda d, parents: (np.broadcast_to(vals[d], (len(parents), m)),
                                   np.broadcast_to(toks[d], (len(parents), m)))
    return lambda d, parents: _top(head, head.next_logits(base[d], mx.array(parents, dtype=mx.uint32)), m)


def _top(head, logits: mx.array, m: int) -> tuple[np.ndarray, np.ndarray]:
    """The m best of each row: (log-probs, token ids), best first, on the host."""
    lp = logits.astype(mx.float32) - mx.logsumexp(logits.astype(mx.float32), axis=-1, keepdims=True)
    idx = mx.argpartition(-lp, m - 1, axis=-1)[:, :m]
    vals = mx.take_along_axis(lp, idx, axis=-1)
    order = mx.argsort(-vals, axis=-1)
    idx, vals = mx.take_along_axis(idx, order, axis=-1), mx.take_along_axis(vals, order, axis=-1)
    tok, _ = head.to_vocab(idx, None)
    mx.eval(vals, tok)
    return np.array(vals), np.array(tok)
