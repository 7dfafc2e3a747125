"""What a head learns from: blocks anchored at random answer positions, each draft slot scored against the
target's greedy token there (cross-entropy weighted towards early slots, which decide the accept length),
optionally mixed with the target's top-K distribution; DSpark's confidence head learns which drafts land."""

from __future__ import annotations

import mlx.core as mx
import mlx.nn as nn
import numpy as np

from ..errors import SpecError
from ..heads.backbone import block_embed_ids, training_mask
from ..heads.dspark import DSparkDraftModel
from ..heads.vocab import DraftVocab
from ..target import softcapped
from .shards import Sequence_


def answer_vocab(data: list["Sequence_"]) -> np.ndarray:
    """Every token the target answered with: the softmax rows training scores (exact for every label;
    49152 x 576 full rows would be most of a step), shipped with the head as its draft vocabulary."""
    return np.unique(np.concatenate([s.ids[s.prompt_len:] for s in data]))


WEIGHTINGS = ("decay", "accept")  # how slot k's loss counts: exp(-k/gamma), or by what it adds to the accept length


def block_loss(head, ids: mx.array, taps: mx.array, anchors: mx.array, gamma: float,
               vocab: DraftVocab | None = None, soft: tuple[mx.array, mx.array] | None = None,
               soft_weight: float = 0.0, greedy: mx.array | None = None,
               weighting: str = "decay") -> tuple[mx.array, dict]:
    """Weighted CE over every draft slot of blocks anchored at `anchors` (+ DSpark confidence BCE).

    Draft i of a block anchored at a predicts token a+1+i (DFlash reads it from slot i+1, DSpark from
    slot i); its label and whether it counts: slot_labels. soft = the target's top-K (ids, log-probs)
    per position: with soft_weight w the CE is (1 - w) * CE(greedy token) + w * CE(target's
    distribution), which also says how close the runners-up were. weighting: slot_weights. Returns
    (loss, stats) with the running accept-length estimate of greedy drafting."""
    cfg = head.config
    T, bs, d, s0 = ids.shape[0], cfg.block_size, head.max_drafts, head.first_draft_slot
    ctx = head.fuse(taps[None].astype(mx.float32))
    block = head.embed(block_embed_ids(ids[anchors], bs, cfg.mask_token_id))
    h = head.train_blocks(block, ctx, anchors, training_mask(anchors, T, bs))[:, s0 : s0 + d]
    pos = anchors[:, None] + 1 + mx.arange(d)[None, :]
    prev = ids[mx.minimum(pos - 1, T - 1)]
    labels, valid = slot_labels(ids, ids if greedy is None else greedy, pos, vocab)
    dspark = isinstance(head, DSparkDraftModel)
    if vocab is None:
        logits = head.logits(h)
        if dspark and head.has_markov:
            logits = logits + head.markov_bias(prev)
    else:
        logits = softcapped(h @ vocab.weight.T, head.softcap if dspark else head.target.softcap)
        if dspark and head.has_markov:  # the live Markov weights (vocab.markov is a frozen copy)
            logits = logits + head.markov_head.markov_w1(prev) @ head.markov_head.markov_w2.weight[vocab.ids].T
    logq = logits - mx.logsumexp(logits, axis=-1, keepdims=True)
    hard = -mx.take_along_axis(logq, labels[..., None].astype(mx.int32), axis=-1)[..., 0]
    ce = hard if not (soft is not None and soft_weight) else (
        (1 - soft_weight) * hard + soft_weight * soft_cross_entropy(logq, pos, soft, vocab))
    w = slot_weights(weighting, gamma, valid, hard)
    loss = (ce * w).sum() / mx.maximum(w.sum(), 1e-6)
    hit = (mx.argmax(logits, axis=-1) == labels) & valid
    if dspark and head.has_confidence:
        feats = h if not cfg.confidence_with_markov else mx.concatenate([h, head.markov_head.markov_w1(prev)], axis=-1)
        conf = head.confidence_head(feats)
        bce = nn.losses.binary_cross_entropy(conf, mx.stop_gradient(hit.astype(mx.float32)), with_logits=True,
                                             reduction="none")
        loss = loss + (bce * w).sum() / mx.maximum(w.sum(), 1e-6)
    accepted = mx.cumprod(hit.astype(mx.int32), axis=1).sum(axis=1)
    return loss, {"tau": (accepted + 1).astype(mx.float32).mean(), "ce": (ce * w).sum() / mx.maximum(w.sum(), 1e-6)}


def slot_labels(ids: mx.array, greedy: mx.array, pos: mx.array, vocab: DraftVocab | None) -> tuple[mx.array, mx.array]:
    """(labels, valid) of the slots predicting positions `pos` [blocks, d]: the target's greedy token there
    (Sequence_.greedy; an answer's own ids), as an index into the draft vocabulary when there is one.

    A slot counts only while the text before it followed the target's greedy path: in a corpus window,
    where the text and the target part ways, the later slots would be conditioned on tokens the drafter
    would never have drafted. A label outside the draft vocabulary (the answers never used it) does not count."""
    T = ids.shape[0]
    at = mx.minimum(pos, T - 1)
    labels = greedy[at]
    on_path = mx.cumprod((ids[at] == labels).astype(mx.int32), axis=1, inclusive=False)  # slot 0 always
    valid = (pos < T) & (on_path > 0)
    if vocab is None:
        return labels, valid
    idx = mx.minimum(vocab.index_of(labels), vocab.ids.shape[0] - 1)
    return idx, valid & (vocab.ids[idx] == labels.astype(mx.uint32))


def slot_weights(weighting: str, gamma: float, valid: mx.array, hard: mx.array) -> mx.array:
    """How much each slot's loss counts. "decay": exp(-k / gamma), fixed. "accept": what slot k adds to the
    expected accept length of greedy drafting, sum over m >= k of prod over j <= m of q_j, with q_j the
    head's own probability of slot j's label (held fixed for the gradient): a slot counts as much as the
    chain reaches it, so the weights move to later slots as the earlier ones learn."""
    if weighting == "decay":
        return mx.exp(-mx.arange(valid.shape[1]) / gamma)[None, :] * valid
    if weighting != "accept":
        raise SpecError(f"weighting is one of {', '.join(WEIGHTINGS)}, not {weighting!r}")
    v = valid.astype(mx.float32)
    unbroken = mx.cumsum(1 - v, axis=1) == 0  # every slot so far counts: the chain can reach this one
    logs = mx.cumsum(mx.where(valid, hard, 0.0), axis=1)  # -log of prod_{j <= m} q_j
    # chains less likely than e^-30 count as 0: their weights were denormal floats, and carried into the
    # backward pass they made a step three times slower on x86
    alive = mx.where(unbroken & (logs < 30.0), mx.exp(-logs), 0.0)
    return mx.stop_gradient(mx.cumsum(alive, axis=1, reverse=True) * v)  # sum over m >= k


def soft_cross_entropy(logq: mx.array, pos: mx.array, soft: tuple[mx.array, mx.array],
                       vocab: DraftVocab | None) -> mx.array:
    """-sum_k p_k log q(k) (logq: the head's log-softmax) against the target's top-K distribution for each
    label position `pos` (the target's row pos - 1); runners-up outside the draft vocabulary are dropped,
    p renormalised."""
    rows = mx.clip(pos - 1, 0, soft[0].shape[0] - 1)
    tok, p = soft[0][rows], mx.exp(soft[1][rows].astype(mx.float32))
    if vocab is not None:
        idx = mx.minimum(vocab.index_of(tok), vocab.ids.shape[0] - 1)
        p = p * (vocab.ids[idx] == tok.astype(mx.uint32))
        tok = idx
    return -(p * mx.take_along_axis(logq, tok.astype(mx.int32), axis=-1)).sum(-1) / mx.maximum(p.sum(-1), 1e-6)


def sample_anchors(rng: np.random.Generator, seq: Sequence_, n: int) -> np.ndarray:
    """Anchors whose next token is part of the answer (the prompt is context, never a label)."""
    lo, hi = max(0, seq.prompt_len - 1), len(seq.ids) - 1
    cand = np.arange(lo, hi)
    if len(cand) == 0:
        return cand
    return np.sort(rng.choice(cand, size=min(n, len(cand)), replace=False))
