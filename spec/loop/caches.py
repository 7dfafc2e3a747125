"""The target's per-layer caches, and how a verify's rejected rows are taken back out of them.

A verify runs [anchor + k drafts] through the target; when only n drafts land, every layer must be left
as if the n + 1 committed tokens alone had gone through. Attention layers keep K/V rows, so dropping
the newest rows is enough (mlx-lm's KVCache; WindowKVCache below for sliding windows, which mlx-lm's
RotatingKVCache refuses to trim once it has wrapped). Recurrent layers (gated DeltaNet in Qwen3.5 and
Qwen3-Next, LFM2's short convolution, Mamba-2 mixers) fold every row into one state, so rows cannot
be dropped: each forward leaves a *tape* on the layer's cache instead, the rows its convolution read
and the inputs and incoming state of its recurrence, as mlx-lm's own layer computed them. Taking rows
back re-slices the conv state from the tape and runs mlx-lm's recurrence over the kept rows from the
incoming state: element-wise work, no matmul, and the same function on the same rows as the verify.

The tape is recorded by two hooks, installed once per model by `install_taps`: the layer's Conv1d
records its input (the class of that one instance is swapped for a recording subclass; the weights
and the module tree stay as they are), and the recurrence function the layer's module calls
(`gated_delta_update`, `ssm_update`) is wrapped to record its arguments. Both record only while the
target's own walk runs that layer on a RecurrentCache, so mlx-lm's code elsewhere is unaffected.
"""

from __future__ import annotations

import copy
import inspect
import sys
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

import mlx.core as mx
import mlx.nn as nn
from mlx_lm.models.cache import ArraysCache, KVCache, RotatingKVCache

# Recurrences mlx-lm's recurrent layers call by module-global name: their per-row arguments (time on
# axis 1), and the argument holding the state they start from.
RECURRENCES: dict[str, tuple[tuple[str, ...], str]] = {
    "gated_delta_update": (("q", "k", "v", "a", "b", "mask"), "state"),  # Qwen3.5, Qwen3-Next
    "ssm_update": (("hidden_states", "B", "C", "dt", "mask"), "state"),  # Mamba-2 mixers
}


class WindowKVCache:
    """Sliding-window K/V that can be trimmed after a verify, unlike mlx-lm's RotatingKVCache.

    A RotatingKVCache overwrites old rows in place once it is full and then refuses to trim, so
    rejected draft rows could not be rolled back. Here rows stay in temporal order: `start` is the
    absolute position of row 0 and `offset` the position after the last row. Rows that no query of
    the current or a later chunk can see (position <= offset - window) are dropped only when the
    buffer must grow, so memory stays near window + step rows and a trim of the newest rows is
    always possible (the engine only trims rows of the chunk it just verified).
    """

    step = 256

    def __init__(self, window: int):
        self.window = int(window)
        self.keys = self.values = None
        self.start = self.offset = 0

    def reserve(self, n: int) -> None:
        """Make room for n new rows; when the buffer must grow, first drop the rows outside every
        future query's window (position <= offset - window)."""
        used = self.offset - self.start
        if self.keys is None or used + n <= self.keys.shape[2]:
            return
        drop = max(0, min(used, self.offset - self.window + 1 - self.start))
        keep = used - drop
        cap = (keep + n + self.step - 1) // self.step * self.step
        B, H, _, D = self.keys.shape
        new_k = mx.zeros((B, H, cap, D), self.keys.dtype)
        new_v = mx.zeros((B, H, cap, self.values.shape[3]), self.values.dtype)
        new_k[..., :keep, :] = self.keys[..., drop:used, :]
        new_v[..., :keep, :] = self.values[..., drop:used, :]
        self.keys, self.values, self.start = new_k, new_v, self.start + drop

    def update_and_fetch(self, keys: mx.array, values: mx.array) -> tuple[mx.array, mx.array]:
        n = keys.shape[2]
        if self.keys is None:
            B, H, _, D = keys.shape
            cap = (n + self.step - 1) // self.step * self.step
            self.keys = mx.zeros((B, H, cap, D), keys.dtype)
            self.values = mx.zeros((B, H, cap, values.shape[3]), values.dtype)
        self.reserve(n)
        used = self.offset - self.start
        self.keys[..., used : used + n, :] = keys
        self.values[..., used : used + n, :] = values
        self.offset += n
        return self.keys[..., : used + n, :], self.values[..., : used + n, :]

    def mask(self, n: int) -> mx.array:
        """Boolean [n, rows] for n new queries: causal, and each sees only its last `window` keys.
        Call after reserve(n): the rows are those update_and_fetch will return."""
        q = mx.arange(self.offset, self.offset + n)[:, None]
        k = mx.arange(self.start, self.offset + n)[None]
        return (k <= q) & (k > q - self.window)

    def tree_mask(self, seen: mx.array, depths: mx.array) -> mx.array:
        """Boolean [R, rows] for a tree's R rows at offset + depths (seen: their ancestor mask [R, R]):
        the context keys within each row's window, and the row's ancestors within it. Call after
        reserve(R)."""
        q = self.offset + depths[:, None]
        context = mx.arange(self.start, self.offset)[None] > q - self.window
        return mx.concatenate([context, seen & (depths[:, None] - depths[None] < self.window)], axis=1)

    def size(self) -> int:
        return self.offset - self.start

    def empty(self) -> bool:
        return self.keys is None

    def is_trimmable(self) -> bool:
        return True

    def trim(self, n: int) -> int:
        n = min(self.offset - self.start, n)
        self.offset -= n
        return n

    @property
    def nbytes(self) -> int:
        return 0 if self.keys is None else self.keys.nbytes + self.values.nbytes


@dataclass
class Tape:
    """What one forward of a recurrent layer read: its conv input (the K-1 rows of conv state it
    started from, then the new rows) and its recurrence call (function, arguments, state it returned)."""

    convs: list[mx.array] = field(default_factory=list)
    calls: list[tuple[Callable, dict, mx.array]] = field(default_factory=list)


class RecurrentCache(ArraysCache):
    """mlx-lm's ArraysCache (a recurrent layer's conv state and recurrent state) plus the tape of the
    latest forward, so that `trim(n)` can take that forward's last n rows back exactly. After a tree
    forward (spec.loop.tree_recurrent) the tape holds one batch entry per leaf path (`paths`): `keep_path` then
    keeps a path's first rows."""

    def __init__(self, size: int):
        super().__init__(size)
        self.tape: Tape | None = None
        self.rows = 0  # rows of the forward the tape holds (per path after a tree forward)
        self.paths: list[list[int]] | None = None  # a tree forward's leaf paths, in batch order

    def is_trimmable(self) -> bool:
        return True

    def trim(self, n: int) -> int:
        """Leave the layer as if only the first rows - n rows of its latest forward had run."""
        if n <= 0:
            return 0
        if self.paths is not None:
            raise RuntimeError("after a tree forward a recurrent layer keeps a path (keep_path), not a prefix")
        if n > self.rows:
            raise RuntimeError(f"a recurrent layer can only take back rows of its latest forward "
                               f"({self.rows} rows, {n} asked)")
        self._replay(self.rows - n, 0)
        return n

    def keep_path(self, rows: list[int]) -> None:
        """After a tree forward: leave the layer as if only `rows` (a root-to-node path) had run."""
        if self.paths is None:
            self.trim(self.rows - len(rows))
            return
        entry = next((i for i, p in enumerate(self.paths) if p[: len(rows)] == rows), None)
        if entry is None:
            raise RuntimeError(f"rows {rows} are not a path of the latest tree forward")
        self.paths = None
        self._replay(len(rows), entry)

    def _replay(self, keep: int, entry: int) -> None:
        """Set the states to those after the first `keep` rows of the tape's batch entry `entry`."""
        tape, self.tape = self.tape, None
        if tape is None:
            raise RuntimeError("a recurrent layer can only take back rows of its latest forward (no tape)")
        if len(tape.convs) > 1 or len(tape.calls) > 1 or not (tape.convs or tape.calls):
            raise RuntimeError(f"one forward of this layer ran {len(tape.convs)} convolutions and {len(tape.calls)} "
                               "recurrences; the tape takes back one of each")
        one = slice(entry, entry + 1)
        state_slot = None
        if tape.calls:
            fn, args, out_state = tape.calls[0]
            state_slot = next((i for i, a in enumerate(self.cache) if a is out_state), None)
            if state_slot is None:
                raise RuntimeError("the recurrence's state is not in the layer's cache")
            rows, state_arg = RECURRENCES[fn.__name__]  # fn: the function the tape wrapped
            start = args.get(state_arg)
            start = start[one] if start is not None and start.shape[0] > 1 else start
            if keep == 0:
                self.cache[state_slot] = start
            else:
                kept = {k: (v[one, :keep] if k in rows and v is not None else v) for k, v in args.items()}
                kept[state_arg] = start
                self.cache[state_slot] = fn(**kept)[1]
        if tape.convs:
            conv_slot = [i for i in range(len(self.cache)) if i != state_slot]
            if len(conv_slot) != 1:
                raise RuntimeError("the conv state's slot in the layer's cache is ambiguous")
            x = tape.convs[0]  # [B, K-1 + rows, C]
            width = x.shape[1] - self.rows
            self.cache[conv_slot[0]] = x[one, keep : keep + width]
        self.rows = keep


# -- recording -------------------------------------------------------------------------------------
_recording = threading.local()  # .cache: the RecurrentCache whose layer the target's walk is running


class recording:
    """Context for one layer call of the target's walk: hooks record onto `cache` (when recurrent)."""

    def __init__(self, cache: Any, rows: int):
        self.cache = cache if isinstance(cache, RecurrentCache) else None
        if self.cache is not None:
            self.cache.tape, self.cache.rows, self.cache.paths = Tape(), rows, None

    def __enter__(self) -> None:
        _recording.cache = self.cache

    def __exit__(self, *exc: Any) -> None:
        _recording.cache = None


def active_cache() -> RecurrentCache | None:
    """The RecurrentCache of the layer the target's walk is running (None outside it)."""
    return getattr(_recording, "cache", None)


_taped_classes: dict[type, type] = {}


def _taped_conv_class(cls: type) -> type:
    """A subclass of a conv module class whose calls record their input on the active tape."""
    if cls not in _taped_classes:
        def __call__(self, x: mx.array) -> mx.array:
            c = active_cache()
            if c is not None:
                c.tape.convs.append(x)
            return cls.__call__(self, x)

        _taped_classes[cls] = type(f"Taped{cls.__name__}", (cls,), {"__call__": __call__})
    return _taped_classes[cls]


def _taped_recurrence(fn: Callable) -> Callable:
    sig = inspect.signature(fn)

    def taped(*args: Any, **kwargs: Any) -> Any:
        out = fn(*args, **kwargs)
        c = active_cache()
        if c is not None:
            c.tape.calls.append((fn, dict(sig.bind(*args, **kwargs).arguments), out[1]))
        return out

    taped.taped, taped.__name__ = True, fn.__name__  # type: ignore[attr-defined]
    return taped


def mixer_of(layer: nn.Module) -> nn.Module | None:
    """The recurrent mixer inside a decoder layer: the module that owns its Conv1d."""
    for _, module in layer.named_modules():
        if any(isinstance(child, nn.Conv1d) for child in module.children().values()):
            return module
    return None


def install_taps(layer: nn.Module) -> str:
    """Make a recurrent layer record its tape; returns its mixer's class name (for messages)."""
    mixer = mixer_of(layer)
    if mixer is None:
        raise ValueError(f"{type(layer).__name__} keeps a recurrent state but has no Conv1d we can tape")
    for name, child in mixer.children().items():
        if isinstance(child, nn.Conv1d) and not type(child).__name__.startswith("Taped"):
            child.__class__ = _taped_conv_class(type(child))
    scope = sys.modules[type(mixer).__module__].__dict__
    for name in RECURRENCES:
        fn = scope.get(name)
        if callable(fn) and not getattr(fn, "taped", False):
            scope[name] = _taped_recurrence(fn)
    return type(mixer).__name__


# -- building a target's caches --------------------------------------------------------------------
def rollback_caches(caches: list) -> list:
    """mlx-lm's caches for a model, each replaced by one that can take back a verify's rows; raises
    ValueError naming the cache type where we have none."""
    out = []
    for c in caches:
        kind = type(c)
        if kind is KVCache:
            out.append(c)
        elif kind is RotatingKVCache and not c.keep:
            out.append(WindowKVCache(c.max_size))
        elif kind is ArraysCache:
            out.append(RecurrentCache(len(c.cache)))
        else:
            raise ValueError(f"{kind.__name__}" + (f" (keep={c.keep})" if kind is RotatingKVCache else ""))
    return out


def copy_cache(cache: list) -> list:
    """A cache with its own arrays: an mx.array written in place (K/V updates) changes for every
    holder, and a recurrent cache's slots live in a list, so engines that share a prefill each get
    copies. A copy has no tape: its first forward is its own."""
    out = []
    for c in cache:
        d = copy.copy(c)
        for k, v in vars(c).items():
            if isinstance(v, mx.array):
                setattr(d, k, mx.array(v))
            elif isinstance(v, list):
                setattr(d, k, [mx.array(a) if isinstance(a, mx.array) else a for a in v])
        if isinstance(d, RecurrentCache):
            d.tape, d.rows, d.paths = None, 0, None
        out.append(d)
    return out
