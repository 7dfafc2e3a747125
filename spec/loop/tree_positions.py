"""Rows at positions of our choosing: what a tree verify needs from the target's rotary embeddings.

mlx-lm's attention layers rope a forward's rows at cache.offset, cache.offset + 1, ... A tree's rows
sit at the anchor's position + their depth instead (siblings share a position). We do not rewrite the
layers: `install` gives each rope module of the model a subclass (the instance and the module tree stay
as they are, as spec.loop.caches does for conv layers) that, inside `rows_at(depths)`, ropes row i at
offset + depths[i]. mx.fast.rope takes one offset per batch entry, so the rows become the batch for
the call. Outside `rows_at` every call is the module's own.

A family that ropes without a module (or not at all where it should) would silently get the wrong
positions: Target.check_trees compares a tree forward with its paths fed one by one before any tree
is verified.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator

import mlx.core as mx
import mlx.nn as nn

_active = threading.local()  # .depths: mx.array [R] while a tree forward builds its graph
_classes: dict[type, type] = {}


def _positioned(cls: type) -> type:
    """cls with a __call__ that ropes each row at its own position inside rows_at()."""
    if cls not in _classes:
        def __call__(self, x: mx.array, offset: int | mx.array = 0) -> mx.array:
            depths = getattr(_active, "depths", None)
            if depths is None or x.ndim != 4 or x.shape[0] != 1 or x.shape[2] != depths.shape[0]:
                return cls.__call__(self, x, offset=offset)
            rows = x.swapaxes(0, 2)  # [R, heads, 1, D]: one batch entry per row, each at its own offset
            return cls.__call__(self, rows, offset=offset + depths).swapaxes(0, 2)

        _classes[cls] = type(f"Positioned{cls.__name__}", (cls,), {"__call__": __call__})
    return _classes[cls]


def is_rope(module: nn.Module) -> bool:
    """mlx's RoPE and mlx-lm's scaled variants (Llama3RoPE, YarnRoPE, SuScaledRoPE, ...)."""
    return isinstance(module, nn.RoPE) or "rope" in type(module).__name__.lower()


def install(model: nn.Module) -> int:
    """Make every rope module of `model` positionable (idempotent); returns how many there are."""
    count = 0
    for _, module in model.named_modules():
        if is_rope(module):
            if type(module) not in _classes.values():
                module.__class__ = _positioned(type(module))
            count += 1
    return count


@contextmanager
def rows_at(depths: mx.array | None) -> Iterator[None]:
    """While the graph of a forward is built: its rows are at offset + depths[i] (depths [R] int;
    None: at their usual positions)."""
    _active.depths = depths
    try:
        yield
    finally:
        _active.depths = None
