"""What a target must pass before it races, run once at load (trees: at the first engine that wants them).

Our layer walk, our rollback of recurrent layers and our tree rows are our reading of mlx-lm's layers; each
check compares them with the model's own forward on a few tokens, so a family that differs is refused (or
verifies chains) with one line saying why, instead of producing wrong tokens.
"""

from __future__ import annotations

from typing import Any, Sequence

import mlx.core as mx

from .errors import SpecError
from .loop import tree_positions as positions
from .loop.tree import DraftTree

Target = Any  # a spec.target.Target (not imported: spec.target imports these checks)


def _differs(ours: mx.array, ref: mx.array) -> str:
    """Empty when two forwards agree (relative to the reference's scale), else their max difference."""
    err = float(mx.abs(ours - ref).max())
    return "" if err <= 1e-3 * max(1.0, float(mx.abs(ref).max())) else f"max difference {err:.3g}"


def check_walk(target: Target, ids: Sequence[int] = (1, 2, 3, 4)) -> None:
    """Our layer walk must reproduce the model's own logits, or the taps and the cache are not its."""
    x = mx.array([[int(i) % target.vocab_size for i in ids]])
    try:
        ours, _ = target(x, target.make_cache())
        ref = target.model(x)
    except Exception as e:
        raise SpecError(f"target family {target.family!r}: its layers cannot be walked and tapped ({e})") from e
    if err := _differs(ours, ref):
        raise SpecError(f"target family {target.family!r}: walking its layers does not reproduce its own "
                        f"logits ({err}); it cannot be tapped")


def check_rollback(target: Target, ids: Sequence[int] = (1, 2, 3, 4, 5, 6)) -> None:
    """Rows taken back out of recurrent layers must leave them as if the rows had never run: a
    forward of 6 tokens less its last 3, then one more token, must give what 3 + 1 tokens give."""
    if not target.recurrent:
        return
    x = [int(i) % target.vocab_size for i in ids]
    mixers = ", ".join(sorted(set(target.recurrent.values())))
    rolled, plain = target.make_cache(), target.make_cache()
    try:
        target(mx.array([x]), rolled)
        target.trim(rolled, 3)
        ours, _ = target(mx.array([x[3:4]]), rolled)
        target(mx.array([x[:3]]), plain)
        ref, _ = target(mx.array([x[3:4]]), plain)
    except Exception as e:
        raise SpecError(f"target family {target.family!r}: its recurrent layers ({mixers}) cannot be rolled "
                        f"back ({e})") from e
    if err := _differs(ours, ref):
        raise SpecError(f"target family {target.family!r}: rolling back its recurrent layers ({mixers}) is not "
                        f"exact ({err})")


def tree_check(target: Target) -> str:
    """Why this target cannot verify drafts as trees ("" when it can): a small tree's rows must equal its
    paths fed alone, and the cache after keeping a path must be that path's."""
    chains = "drafts are verified as chains"
    if not positions.install(target.model):
        return f"{target.family}: no rotary embedding module found to place tree rows: {chains}"
    v = target.vocab_size
    prompt, tree = [1 % v, 2 % v, 3 % v], DraftTree([5 % v, 6 % v, 7 % v, 8 % v], [0, 0, 1, 2])
    try:
        cache = target.make_cache()
        target(mx.array([prompt]), cache)
        ours, _ = target(mx.array([[4 % v] + tree.token_list()]), cache, tree=tree)
        for leaf in (3, 4):
            rows = tree.path_to(leaf)
            alone = target.make_cache()
            ref, _ = target(mx.array([prompt + [4 % v] + [tree.tokens[r - 1] for r in rows[1:]]]), alone)
            if err := _differs(ours[0, mx.array(rows)], ref[0, len(prompt):]):
                return f"{target.family}: a tree's rows do not reproduce their paths ({err}): {chains}"
        target.keep(cache, rows, tree.size + 1)  # the last leaf's path, then one more token on each cache
        if err := _differs(*(target(mx.array([[9 % v]]), c)[0] for c in (cache, alone))):
            return f"{target.family}: the cache after a tree's path is not that path's ({err}): {chains}"
    except Exception as e:  # a layer that cannot take a tree's mask or batch of paths
        return f"{target.family}: its layers cannot run a tree's rows ({type(e).__name__}: {e}): {chains}"
    return ""
