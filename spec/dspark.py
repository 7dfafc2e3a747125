"""DSpark (DeepSeek): one backbone pass, then a cheap Markov head drafts the block left to right.

Every slot k of [anchor, mask, ...] predicts token anchor+k+1 through the head's own lm_head; the
Markov head adds a bias from the previous token (x_0 = the anchor, then each drafted token), which
makes drafting semi-autoregressive at almost no cost. A confidence head estimates the chance each
draft survives; the draft is cut where the running product falls below a threshold.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
import mlx.nn as nn

from .drafter import Backbone, BackboneConfig, build_head, check_against_target, load_head_folder
from .target import SpecError, Target, softcapped
from .verify import Sampling, pick


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
    """Vanilla Markov head: logits_k += w2(w1[x_{k-1}]), a rank-r bigram correction."""

    def __init__(self, vocab: int, rank: int):
        super().__init__()
        self.markov_w1 = nn.Embedding(vocab, rank)
        self.markov_w2 = nn.Linear(rank, vocab, bias=False)

    def __call__(self, prev: mx.array) -> mx.array:
        return self.markov_w2(self.markov_w1(prev))


class ConfidenceHead(nn.Module):
    """sigmoid(proj([h_k ; w1[x_{k-1}]])) = chance draft k survives given its prefix did."""

    def __init__(self, dim: int):
        super().__init__()
        self.proj = nn.Linear(dim, 1)

    def __call__(self, features: mx.array) -> mx.array:
        return self.proj(features)[..., 0]


class DSparkDraftModel(Backbone):
    kind = "dspark"
    first_draft_slot = 0

    def __init__(self, config: DSparkConfig):
        super().__init__(config)
        if config.markov_rank and config.raw.get("markov_head_type", "vanilla") != "vanilla":
            raise SpecError(f"markov_head_type {config.raw['markov_head_type']!r} is not supported (only vanilla)")
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        if config.markov_rank:
            self.markov_head = MarkovHead(config.vocab_size, config.markov_rank)
        if config.confidence:
            extra = config.markov_rank if config.confidence_with_markov else 0
            self.confidence_head = ConfidenceHead(config.hidden_size + extra)
        self.softcap = config.raw.get("final_logit_softcapping")

    @property
    def max_drafts(self) -> int:
        return self.config.block_size

    @property
    def has_markov(self) -> bool:
        return "markov_head" in self

    @property
    def has_confidence(self) -> bool:
        return "confidence_head" in self

    def bind(self, target: Target) -> "DSparkDraftModel":
        check_family(self.config, target)
        check_against_target(self.config, target, "DSpark head")
        self.use_draft_vocab(self.draft_ids)
        return self

    def embed(self, ids: mx.array) -> mx.array:
        return self.embed_tokens(ids)

    def output_layer(self):
        return self.lm_head

    def logits(self, h: mx.array) -> mx.array:
        """Logits over the draft vocabulary (the whole vocabulary when there is none), before Markov."""
        v = self.draft_vocab
        return softcapped(self.lm_head(h) if v is None else h @ v.weight.T, self.softcap)

    def markov_bias(self, prev: mx.array) -> mx.array:
        """The Markov head's bias from the previous tokens, over the same rows as logits()."""
        if not self.has_markov:
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
        confidence threshold, cut where the predicted prefix survival drops below it (one sync)."""
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
        if threshold > 0 and self.has_confidence:
            prevs = mx.concatenate([mx.array([anchor], dtype=draft.dtype), draft[:-1]])
            keep = int((mx.cumprod(self.survival(h, prevs)) >= threshold).sum().item())
            draft, q = draft[:keep], (q[:keep] if q is not None else None)
        return draft, q


def load_dspark(path_or_repo: str, target: Target | None = None, drafter_bits: int | None = None) -> DSparkDraftModel:
    """Load a deepseek-ai DSpark head (config.json + safetensors, strict names, no remote code):
    Qwen3DSparkModel here, Gemma4DSparkModel through spec.gemma4."""
    folder, cfg, weights = load_head_folder(path_or_repo)
    arch = cfg.get("architectures") or []
    if not any(a.endswith("DSparkModel") for a in arch):
        raise SpecError(f"{path_or_repo} is not a DSpark head (architectures {arch or 'missing'})")
    config_cls, model_cls = DSparkConfig, DSparkDraftModel
    if "Gemma4DSparkModel" in arch:
        from .gemma4 import GEMMA4_HEAD_TYPES, Gemma4DSparkConfig, Gemma4DSparkDraftModel

        if cfg.get("model_type") not in GEMMA4_HEAD_TYPES:
            raise SpecError(f"Gemma4DSparkModel head with model_type {cfg.get('model_type')!r} "
                            f"(expected {' or '.join(GEMMA4_HEAD_TYPES)})")
        config_cls, model_cls = Gemma4DSparkConfig, Gemma4DSparkDraftModel
    elif cfg.get("model_type") not in ("qwen3",):
        raise SpecError(f"DSpark head backbone {cfg.get('model_type')!r} is not supported (qwen3, or a "
                        "Gemma4DSparkModel head)")
    overrides: dict[str, Any] = {}
    config = config_cls.from_dict(cfg, **overrides)
    if target is not None:
        check_family(config, target)
    return build_head(model_cls, config, weights, target, f"DSpark head {path_or_repo}", drafter_bits, folder)
