"""Prompt lookup: the head-free drafter every serving stack ships (vLLM's and llama.cpp's `ngram`).

The next tokens are guessed by finding the newest committed tokens earlier in the prompt or the text so
far and copying what followed them there: the longest n-gram first (max_ngram down to min_ngram), its most
recent earlier occurrence. No model, no taps, nearly free to draft; it shines where the answer quotes the
prompt (edits, summaries, code rewrites) and drafts nothing where it does not. Its drafts are certain
(q is one token with probability 1), so the one verify rule stays exact at T > 0: a draft x lands with
probability p(x), and after a miss the target samples from p with x taken out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import mlx.core as mx

from ..errors import SpecError
from ..loop.tree import DraftTree
from ..loop.verify import Sampling
from ..target import Target


@dataclass(frozen=True)
class LookupConfig:
    """The lookup's settings; `raw` is what the calibration cache keys on, as a head's config.json is."""

    max_ngram: int = 4
    min_ngram: int = 1
    block_size: int = 16  # drafts at most block_size - 1 tokens a round, as a DFlash block does
    target_layer_ids: tuple[int, ...] = ()  # reads no taps

    def __post_init__(self) -> None:
        if not 1 <= self.min_ngram <= self.max_ngram:
            raise SpecError(f"lookup n-gram sizes must satisfy 1 <= min <= max (got {self.min_ngram}, {self.max_ngram})")
        if self.block_size < 2:
            raise SpecError(f"a lookup block drafts block_size - 1 tokens: block_size must be >= 2, not {self.block_size}")

    @property
    def raw(self) -> dict:
        return {"kind": "lookup", "max_ngram": self.max_ngram, "min_ngram": self.min_ngram,
                "block_size": self.block_size}


@dataclass
class LookupCache:
    """The committed tokens (prompt, then answer) and, for each n-gram size, where each n-gram last ended
    before the newest token (so the newest suffix never finds itself)."""

    sizes: tuple[int, ...]
    tokens: list[int] = field(default_factory=list)
    last_end: dict[tuple[int, ...], int] = field(default_factory=dict)

    def __iter__(self):
        """No model layers, so no layer caches for MLX to evaluate (the loop iterates a head's)."""
        return iter(())

    def extend(self, tokens: list[int]) -> None:
        for tok in tokens:
            end = len(self.tokens)  # the previous newest token's index becomes indexable now
            for n in self.sizes:
                if end >= n:
                    self.last_end[tuple(self.tokens[end - n : end])] = end
            self.tokens.append(int(tok))

    def continuation(self, k: int) -> list[int]:
        """Up to k tokens that followed the longest suffix's most recent earlier occurrence ([] if none)."""
        return self.match(k)[1]

    def match(self, k: int) -> tuple[int, list[int]]:
        """(the length of the longest suffix that occurred before, up to k tokens that followed its most
        recent earlier occurrence); (0, []) when none did."""
        for n in self.sizes:
            if len(self.tokens) >= n and (end := self.last_end.get(tuple(self.tokens[-n:]))) is not None:
                return n, self.tokens[end : end + k]
        return 0, []


class PromptLookup:
    """The lookup drafter (spec.loop.engine.Drafter). `bind(target)` sizes its certain q to the vocabulary."""

    kind, title = "lookup", "Prompt lookup"
    draft_ids = draft_vocab = None  # copies tokens from the text: any of the vocabulary

    def __init__(self, config: LookupConfig = LookupConfig()):
        self.config = config
        self.vocab_size: int | None = None

    def bind(self, target: Target) -> "PromptLookup":
        self.vocab_size = target.vocab_size
        return self

    @property
    def max_drafts(self) -> int:
        return self.config.block_size - 1

    def make_cache(self) -> LookupCache:
        return LookupCache(tuple(range(self.config.max_ngram, self.config.min_ngram - 1, -1)))

    def see(self, cache: LookupCache, tokens: list[int]) -> None:
        """The tokens the generation committed (the prompt first): what lookups search."""
        cache.extend(tokens)

    def propose(self, cache: LookupCache, new_taps: mx.array | None, anchor: int, k: int, sampling: Sampling,
                key: mx.array | None, threshold: float = 0.0) -> tuple[mx.array, mx.array | None]:
        """At most k drafts copied from the text (none when the newest tokens never occurred before)."""
        if cache.tokens and cache.tokens[-1] != anchor:
            raise SpecError("the lookup drafter was not shown the committed tokens (Drafter.see)")
        draft = cache.continuation(k)
        return mx.array(draft, dtype=mx.uint32), None if sampling.greedy else self.certain(draft)

    def propose_tree(self, cache: LookupCache, new_taps: mx.array | None, anchor: int, k: int, nodes: int,
                     sampling: Sampling, key: mx.array | None) -> DraftTree:
        """A lookup has one guess per position: its tree is its chain."""
        return DraftTree.chain(*self.propose(cache, new_taps, anchor, min(k, nodes), sampling, key))

    def certain(self, draft: list[int]) -> mx.array:
        """Log-probabilities [k, V] of drafts drawn with certainty: 0 at each draft, -inf elsewhere."""
        if self.vocab_size is None:
            raise SpecError("the lookup drafter is not bound to a target: call bind(target) first")
        q = mx.full((len(draft), self.vocab_size), -mx.inf)
        if draft:
            q[mx.arange(len(draft)), mx.array(draft)] = 0.0
        return q
