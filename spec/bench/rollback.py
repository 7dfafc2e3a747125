"""What taking a rejected draft back costs, per draft length: `python -m spec bench rollback`.

A verify runs [anchor + k drafts]; here half the drafts land (n = k // 2) and the other rows are taken
back: trimmed out of attention caches, replayed from the tape in recurrent layers (spec.caches). The
table puts that rollback next to the verify forward it follows, and next to what the simple exact
alternative would cost: restoring the pre-round state and running the n + 1 kept rows again (a second
forward). Targets: random models of the published configs in assets/bench/rollback/targets.json
(dense, hybrid, MoE; layer patterns as published, widths shrunk), or any model folder / hub id (--target).
"""

from __future__ import annotations

import json
import platform
import statistics
from pathlib import Path
from typing import Any, Sequence

import mlx.core as mx
import pandas as pd
from mlx_lm.utils import _get_classes

from ..cpu import blas_info, cpu_name
from ..loop.caches import copy_cache
from ..loop.calibrate import ms_of
from ..loop.tree import DraftTree
from ..report import to_markdown
from ..target import Target, check_tappable, load_target, target_family

TARGETS = Path(__file__).resolve().parents[2] / "assets" / "bench" / "rollback" / "targets.json"
KS = (1, 4, 8, 15)


def random_target(cfg: dict) -> Any:
    """A Target over a randomly initialised model of `cfg` (in memory, no tokenizer)."""
    check_tappable(cfg, target_family(cfg))
    model_cls, args_cls = _get_classes(cfg)
    return Target(model=model_cls(args_cls.from_dict(cfg)), tokenizer=None, config=cfg, name=cfg["model_type"])


def _arrays(cache: list) -> list:
    out = []
    for c in cache:
        out += [a for a in getattr(c, "cache", []) if a is not None]
        out += [a for a in (getattr(c, "keys", None), getattr(c, "values", None)) if a is not None]
    return out


def measure(target: Any, ks: Sequence[int] = KS, runs: int = 7, context: int = 64, seed: int = 0) -> list[dict]:
    """Median ms of the verify forward of k + 1 rows, of taking k - k // 2 of them back, and of the
    alternative (a second forward of the kept rows from a copy of the pre-round cache), per k."""
    ids = mx.random.randint(0, target.vocab_size, (context + max(ks) + 1,), key=mx.random.key(seed)).tolist()
    base = target.make_cache()
    target(mx.array([ids[:context]]), base)
    mx.eval(_arrays(base))
    rows = []
    for k in ks:
        n = k // 2
        verify, rollback, again = [], [], []
        for run in range(runs + 1):  # the first run warms up
            cache, alt = copy_cache(base), copy_cache(base)
            mx.eval(_arrays(cache), _arrays(alt))
            v = ms_of(lambda: mx.eval(target(mx.array([ids[context : context + k + 1]]), cache)[0], _arrays(cache)))
            r = ms_of(lambda: (target.trim(cache, k - n), mx.eval(_arrays(cache))))
            a = ms_of(lambda: mx.eval(target(mx.array([ids[context : context + n + 1]]), alt)[0], _arrays(alt)))
            if run:
                verify.append(v), rollback.append(r), again.append(a)
        v, r, a = (statistics.median(x) for x in (verify, rollback, again))
        shares = [x / y for x, y in zip(rollback, verify)]
        mid = statistics.median(shares)
        rows.append({"k": k, "kept": n + 1, "verify_ms": round(v, 3), "rollback_ms": round(r, 3),
                     "rollback_share": round(r / v, 4),
                     "share_spread": round(statistics.median(abs(x - mid) for x in shares), 4),
                     "second_forward_ms": round(a, 3)})
    return rows


# two 15-node trees: a spine of 11 with a second guess at each of its first 4 depths (5 paths of up to 12
# rows, as a confident head's best-first tree looks), and a bushy one (binary to depth 3, then one more:
# 8 paths of up to 5 rows)
TREES = {"spine": list(range(11)) + [0, 1, 2, 3], "bushy": [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7]}


def measure_trees(target: Any, runs: int = 7, context: int = 64, seed: int = 0) -> list[dict]:
    """Median ms of verifying 15 drafts as a chain and as each tree of TREES (the same 16 rows), and of
    keeping the tree's last path afterwards (spec.branches replays recurrent layers from that path)."""
    ids = mx.random.randint(0, target.vocab_size, (context + 16,), key=mx.random.key(seed)).tolist()
    base = target.make_cache()
    target(mx.array([ids[:context]]), base)
    mx.eval(_arrays(base))
    rows = []
    for shape, parents in TREES.items():
        tree = DraftTree(ids[context + 1 :], parents)
        path = tree.path_to(tree.size)
        chain, verify, keep = [], [], []
        for run in range(runs + 1):  # the first run warms up
            plain, cache = copy_cache(base), copy_cache(base)
            mx.eval(_arrays(plain), _arrays(cache))
            c = ms_of(lambda: mx.eval(target(mx.array([ids[context:]]), plain)[0], _arrays(plain)))
            v = ms_of(lambda: mx.eval(target(mx.array([ids[context:]]), cache, tree=tree)[0], _arrays(cache)))
            k = ms_of(lambda: (target.keep(cache, path, 16), mx.eval(_arrays(cache))))
            if run:
                chain.append(c), verify.append(v), keep.append(k)
        c, v, k = (statistics.median(x) for x in (chain, verify, keep))
        ratios = [x / y for x, y in zip(verify, chain)]
        mid = statistics.median(ratios)
        rows.append({"tree": shape, "paths x rows": f"{len(tree.parents) - len(set(tree.parents)) + 1} x "
                     f"{max(tree.depths) + 1}", "chain_ms": round(c, 3), "tree_ms": round(v, 3),
                     "keep_ms": round(k, 3), "tree / chain": round(mid, 3),
                     "spread": round(statistics.median(abs(x - mid) for x in ratios), 3)})
    return rows


def run_rollback(*, target: str | None = None, out: str | Path = "bench-results", runs: int = 5) -> int:
    """Measure the shipped random targets (or `target`, a folder or hub id), print and write the table."""
    out = Path(out)
    if target:
        targets = {target: (target, lambda: load_target(target))}
    else:
        spec = json.loads(TARGETS.read_text())["targets"]
        targets = {name: (t["source"], lambda c=t["config"]: random_target(c)) for name, t in spec.items()}
    table, trees = [], []
    for name, (source, build) in targets.items():
        model = build()
        recurrent = len(model.recurrent)
        for row in measure(model, runs=runs):
            table.append({"target": name, "config of": source, "family": model.family,
                          "recurrent layers": f"{recurrent} / {model.num_layers}", **row})
        if model.check_trees() == "":
            trees += [{"target": name, **row} for row in measure_trees(model, runs=runs)]
        print(f"measured {name}", flush=True)
    df = pd.DataFrame(table)
    shown = df.assign(**{"rollback share": (df["rollback_share"] * 100).map("{:.1f}%".format),
                         "spread": (df["share_spread"] * 100).map("±{:.1f}".format)}).drop(
        columns=["rollback_share", "share_spread", "config of"])
    header = (f"# Rollback cost per draft length (n = k // 2 drafts kept)\n\n{platform.machine()} {cpu_name()}, "
              f"MLX {mx.__version__} ({mx.default_device()}), {blas_info()}; medians of {runs} runs on a 64-token "
              "cache. rollback: rejected rows taken back (attention: trimmed; recurrent layers: replayed from the "
              "tape); spread: median absolute deviation of the per-run share, in points; second forward: the kept "
              "rows run again from a copy of the pre-round cache, the simple exact alternative.")
    out.mkdir(parents=True, exist_ok=True)
    tree_header = ("## 15 drafts verified as a tree against the same rows as a chain\n\nchain / tree: the verify "
                   "forward of 16 rows; keep: leaving the caches as the tree's last path alone would (recurrent "
                   "layers replay it from its batch entry); tree / chain: median of the per-run ratios, spread: "
                   "their median absolute deviation.")
    tree_md = to_markdown(pd.DataFrame(trees)) if trees else "(no target here verifies trees)"
    (out / "rollback.md").write_text(header + "\n\n" + to_markdown(shown) + "\n\n" + tree_header + "\n\n"
                                     + tree_md + "\n")
    df.to_csv(out / "rollback.csv", index=False)
    print(to_markdown(shown) + "\n\n" + tree_md)
    print(f"written: {out / 'rollback.md'}, {out / 'rollback.csv'}")
    return 0
