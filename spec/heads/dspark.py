"""DSpark (DeepSeek): one backbone pass, then a cheap Markov head drafts the block left to right.

Every slot k of [anchor, mask, ...] predicts token anchor+k+1 through the head's own lm_head; the
Markov head adds a bias from the previous token (x_0 = the anchor, then each drafted token), which
makes drafting semi-autoregressive at almost no cost. A confidence head estimates the chance each
draft survives given its prefix did; the draft is cut at the first slot whose own estimate falls below
a threshold, as DeepSpec's released evaluation does.
"""

from __future__ import annotations

import mlx.core as mx
import mlx.nn as nn

from ..errors import SpecError
from ..loop.confidence import first_below
from ..loop.verify import Sampling, pick
from ..target import Target, softcapped
from .backbone import Backbone, BackboneConfig


class DSparkConfig(BackboneConfig):
    """A DSpark head's config: a copy of the target's config plus the head's own keys (top level)."""

    @property
    def markov_rank(self) -> int:
        return int(self.raw.get("markov_rank", 0))

    @property
    def confidence(self) -> bool:
        return bool(self.raw.get("enable_confidence_head", False))

    @property
    def confidence_with_markov(self) -> bool:
        return self.confidence and bool(self.raw.get("confidence_head_with_markov", False))

    @property
    def is_gemma4(self) -> bool:
        return "Gemma4DSparkModel" in (self.raw.get("architectures") or [])


def check_family(config: DSparkConfig, target: Target, who: str = "DSpark head") -> None:
    """A Gemma4DSparkModel head drafts only for a Gemma-4 target, a Qwen3DSparkModel head only for
    the others (its layers, embedding scale and softcap belong to its family), whatever the sizes."""
    if config.is_gemma4 and not target.is_gemma4:
        raise SpecError(f"{who} is a Gemma-4 head (Gemma4DSparkModel) but the target is a "
                        f"{target.model_type or 'non-Gemma'} model; use the DSpark head made for this target")
    if target.is_gemma4 and not config.is_gemma4:
        arch = (config.raw.get("architectures") or ["Qwen3DSparkModel"])[0]
        raise SpecError(f"{who} is a {arch} head but the target is Gemma-4 ({target.model_type}); "
                        "a Gemma-4 target needs a Gemma4DSparkModel head (e.g. deepseek-ai/dspark_gemma4_12b_block7)")


class MarkovHead(nn.Module):
    """Vanilla Markov head: logits_k += w2(w1[x_{k-1}]), a rank-r bigram correction (w2 has one row per
    output row: the whole vocabulary, or a draft vocabulary shipped already cut)."""

    def __init__(self, vocab: int, rank: int, rows: int | None = None):
        super().__init__()
        self.markov_w1 = nn.Embedding(vocab, rank)
        self.markov_w2 = nn.Linear(rank, rows or vocab, bias=False)

    def __call__(self, prev: mx.array) -> mx.array:
        return self.markov_w2(self.markov_w1(prev))


class ConfidenceHead(nn.Module):
    """sigmoid(proj([h_k ; w1[x_{k-1}]])) = chance draft k survives given its prefix did."""

    def __init__(self, dim: int):
        super().__init__()
        self.proj = nn.Linear(dim, 1)

    def __call__(self, features: mx.array) -> mx.array:
        return self.proj(features)[..., 0]


class Estimates:
    """The last propose's survival estimate of each drafted slot (lazy; spec.loop.confidence checks them): a
    plain holder, so the array stays out of the head's parameter tree."""

    value: mx.array | None = None


class DSparkDraftModel(Backbone):
    kind, title = "dspark", "DSpark"
    first_draft_slot = 0

    def __init__(self, config: DSparkConfig, own_embed: bool = True, own_head: bool = True,
                 rows: int | None = None):
        """own_embed / own_head: the checkpoint ships its frozen copies (deepseek-ai's do); a head
        packaged without them shares the target's, as DFlash does. rows: output rows when the head
        ships only its draft vocabulary's (speculators' layout), else the whole vocabulary."""
        super().__init__(config)
        if config.markov_rank and config.raw.get("markov_head_type", "vanilla") != "vanilla":
            raise SpecError(f"markov_head_type {config.raw['markov_head_type']!r} is not supported (only vanilla)")
        if own_embed:
            self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        if own_head:
            self.lm_head = nn.Linear(config.hidden_size, rows or config.vocab_size, bias=False)
        if config.markov_rank:
            self.markov_head = MarkovHead(config.vocab_size, config.markov_rank, rows if own_head else None)
        if config.confidence:
            extra = config.markov_rank if config.confidence_with_markov else 0
            self.confidence_head = ConfidenceHead(config.hidden_size + extra)
        self.softcap = config.final_logit_softcapping
        self.estimates = Estimates()
        self.markov_on = True  # off: every slot drafts from the backbone alone, in parallel (an ablation)

    @classmethod
    def from_weights(cls, config: DSparkConfig, weights: dict) -> "DSparkDraftModel":
        head = weights.get("lm_head.weight")
        rows = head.shape[0] if head is not None and head.shape[0] != config.vocab_size else None
        return cls(config, own_embed="embed_tokens.weight" in weights, own_head=head is not None, rows=rows)

    @property
    def max_drafts(self) -> int:
        return self.config.block_size

    @property
    def has_markov(self) -> bool:
        return "markov_head" in self

    @property
    def parent_free(self) -> bool:
        return not (self.has_markov and self.markov_on)

    def next_logits(self, base: mx.array, prev: mx.array) -> mx.array:
        return base[None] + self.markov_bias(prev)

    @property
    def has_confidence(self) -> bool:
        return "confidence_head" in self

    @classmethod
    def check_target(cls, config: DSparkConfig, target: Target, who: str) -> None:
        check_family(config, target, who)
        super().check_target(config, target, who)

    def embed(self, ids: mx.array) -> mx.array:
        return self.embed_tokens(ids) if "embed_tokens" in self else super().embed(ids)

    def output_layer(self):
        return self.lm_head if "lm_head" in self else super().output_layer()

    def logits(self, h: mx.array) -> mx.array:
        """Logits over the draft vocabulary (the whole vocabulary when there is none), before Markov."""
        if "lm_head" not in self:
            return super().logits(h)
        v = self.draft_vocab
        if v is None and self.lm_head.weight.shape[0] != self.config.vocab_size:
            raise SpecError("this DSpark head ships only its draft vocabulary's rows: bind it to its target first")
        return softcapped(self.lm_head(h) if v is None else h @ v.weight.T, self.softcap)

    def markov_bias(self, prev: mx.array) -> mx.array:
        """The Markov head's bias from the previous tokens, over the same rows as logits()."""
        if not (self.has_markov and self.markov_on):
            return 0.0
        v = self.draft_vocab
        return self.markov_head(prev) if v is None else self.markov_head.markov_w1(prev) @ v.markov.T

    def survival(self, h: mx.array, prev: mx.array) -> mx.array:
        """Per-slot survival probability sigmoid(confidence) for hidden rows h and previous tokens."""
        feats = h
        if self.config.confidence_with_markov:
            feats = mx.concatenate([h, self.markov_head.markov_w1(prev).astype(h.dtype)], axis=-1)
        return mx.sigmoid(self.confidence_head(feats))

    def propose(self, cache: list, new_taps: mx.array | None, anchor: int, k: int, sampling: Sampling,
                key: mx.array | None, threshold: float = 0.0) -> tuple[mx.array, mx.array | None]:
        """One backbone pass, then the Markov head left to right over the first k slots; with a
        confidence threshold, the draft ends before the first slot whose own survival is below it
        (DeepSpec's released rule), one sync."""
        h = self.block_hidden(cache, new_taps, anchor)[:k]
        base = self.logits(h)
        keys = mx.random.split(key, k) if key is not None else [None] * k
        prev = mx.array([anchor], dtype=mx.uint32)
        tokens, logprobs = [], []
        for i in range(k):
            tok, lp = self.to_vocab(*pick(base[i : i + 1] + self.markov_bias(prev), sampling, keys[i]))
            tokens.append(tok)
            logprobs.append(lp)
            prev = tok.astype(mx.uint32)
        draft = mx.concatenate(tokens)
        q = None if sampling.greedy else mx.concatenate(logprobs)
        self.estimates.value = None
        if self.has_confidence:  # every slot's estimate, kept (lazy) for the page's reliability check
            est = self.survival(h, mx.concatenate([mx.array([anchor], dtype=draft.dtype), draft[:-1]]))
            self.estimates.value = est
            if threshold > 0:
                keep = confident_prefix(est, threshold)
                draft, q = draft[:keep], (q[:keep] if q is not None else None)
        return draft, q


def confident_prefix(survival: mx.array, threshold: float) -> int:
    """Drafts kept: those before the first slot whose own survival probability is below the threshold
    (the rule the page replays on recorded estimates: spec.loop.confidence.first_below)."""
    return first_below(survival.tolist(), threshold)
