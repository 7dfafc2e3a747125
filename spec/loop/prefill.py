"""The prompt's prefill, chunk by chunk (one concept: shared by every generation and by a race)."""

from __future__ import annotations

import time
from typing import Sequence

import mlx.core as mx

from ..target import Target


class Prefill:
    """The prompt through the target in chunks, each evaluated before the next: a caller can report
    progress and stop between chunks of a long prompt, and several engines can share one prefill (a
    race runs the prompt once, with every engine's taps, and hands each a copy of the cache). Every
    generation prefills this way, alone or shared, so the numbers are the same either way."""

    def __init__(self, target: Target, ids: Sequence[int], taps: Sequence[int] = (), chunk: int | None = None,
                 cache: list | None = None):
        self.target, self.ids, self.taps = target, list(ids), tuple(taps)
        self.chunk = chunk or target.prefill_chunk
        self.cache = cache if cache is not None else target.make_cache()
        self.done_tokens = 0
        self.logits: mx.array | None = None  # the last row's, once done
        self.rows: list[mx.array] = []  # tapped hidden rows, chunk by chunk
        self.seconds = 0.0

    @property
    def done(self) -> bool:
        return self.done_tokens >= len(self.ids)

    def step(self) -> int:
        """Run the next chunk and wait for it; returns the prompt tokens done so far."""
        tic = time.perf_counter()
        end = min(len(self.ids), self.done_tokens + self.chunk)
        logits, taps = self.target(mx.array([self.ids[self.done_tokens : end]]), self.cache, self.taps,
                                   last_only=True)
        if taps is not None:
            self.rows.append(taps)
        mx.eval(logits, *([taps] if taps is not None else []))
        self.done_tokens, self.logits = end, logits
        self.seconds += time.perf_counter() - tic
        return end

    def run(self) -> "Prefill":
        while not self.done:
            self.step()
        return self

    def taps_of(self, layers: Sequence[int]) -> mx.array | None:
        """The rows of the prompt at `layers` (a subset of the taps this prefill ran with), in that order."""
        if not layers:
            return None
        rows = self.rows[0] if len(self.rows) == 1 else mx.concatenate(self.rows, axis=1)
        if tuple(layers) == self.taps:
            return rows
        h = rows.shape[-1] // len(self.taps)
        return mx.concatenate([rows[..., self.taps.index(i) * h : (self.taps.index(i) + 1) * h] for i in layers],
                              axis=-1)
