"""Recurrent layers in a tree verify: each root-to-leaf path runs as its own batch entry.

Attention layers take a tree's rows in one sequence with an ancestor mask (spec.target). A recurrent
layer cannot: a row's state must be its parent's, and a recurrence folds rows in sequence order. So
inside `paths_of(tree)` a recurrent layer's mixer gets its input regrouped as one path per leaf
[P, L, C] (shorter paths padded with their last row; padding comes after a path's rows, so it changes
none of them), starting from P copies of the layer's state, and every row's output is read back from
one path that holds it (every path through a row shares the row's prefix, so any of them gives it).
The layer's tape then holds P paths (RecurrentCache.paths); Target.keep asks the cache to keep the
committed path, which picks the batch entry holding it and re-runs the recurrence over its kept rows.

Only the mixer runs per path (its projections see P x L rows); the layer's MLP or experts see the
tree's rows once. The mixer's class is swapped for a subclass, as spec.loop.caches does for conv layers;
outside `paths_of` every call is the mixer's own.
"""

from __future__ import annotations

import inspect
import threading
from contextlib import contextmanager
from typing import Any, Iterator

import mlx.core as mx
import mlx.nn as nn
import numpy as np

from .caches import active_cache
from .tree import DraftTree

_active = threading.local()  # .layout: the tree's Layout while its forward builds its graph
_classes: dict[type, type] = {}


class Layout:
    """A tree's rows as padded leaf paths: index [P, L] (rows per path) and, for every row, the flat
    position (path * L + step) of one path holding it."""

    def __init__(self, tree: DraftTree):
        leaves = [r for r in range(1, tree.size + 1) if r not in tree.kids] or [0]
        self.paths = [tree.path_to(leaf) for leaf in leaves]
        self.rows = tree.size + 1
        self.length = max(len(p) for p in self.paths)
        index = np.array([p + [p[-1]] * (self.length - len(p)) for p in self.paths])
        where = np.zeros(self.rows, dtype=np.int64)
        for i, path in enumerate(self.paths):
            where[path] = i * self.length + np.arange(len(path))
        self.index, self.where = mx.array(index), mx.array(where)


def _branching(cls: type) -> type:
    """cls with a __call__ that runs a tree's rows path by path inside paths_of()."""
    if cls not in _classes:
        first = next(iter(list(inspect.signature(cls.__call__).parameters)[1:]), "x")  # its input's name

        def __call__(self, *args: Any, **kwargs: Any) -> mx.array:
            layout, cache = getattr(_active, "layout", None), active_cache()
            x = args[0] if args else kwargs.get(first)
            if layout is None or cache is None or x is None or x.shape[0] != 1 or x.shape[1] != layout.rows:
                return cls.__call__(self, *args, **kwargs)
            rest = {k: v for k, v in kwargs.items() if k != first}
            if any(isinstance(a, mx.array) for a in (*args[1:], *rest.values())):
                raise RuntimeError("a padding mask cannot be regrouped into a tree's paths")
            n = len(layout.paths)
            cache.cache = [None if a is None else mx.repeat(a, n, axis=0) for a in cache.cache]
            cache.rows, cache.paths = layout.length, layout.paths
            out = cls.__call__(self, x[0][layout.index], *args[1:], **rest)  # [P, L, C]
            return out.reshape(-1, out.shape[-1])[layout.where][None]

        _classes[cls] = type(f"Branching{cls.__name__}", (cls,), {"__call__": __call__})
    return _classes[cls]


def install(mixer: nn.Module) -> None:
    """Make a recurrent mixer run trees path by path (idempotent)."""
    if type(mixer) not in _classes.values():
        mixer.__class__ = _branching(type(mixer))


def installed(mixer: nn.Module) -> bool:
    return type(mixer) in _classes.values()


@contextmanager
def paths_of(tree: DraftTree | None) -> Iterator[None]:
    """While the graph of a tree forward is built: recurrent mixers run its rows path by path (None:
    as one sequence)."""
    _active.layout = Layout(tree) if tree is not None else None
    try:
        yield
    finally:
        _active.layout = None
