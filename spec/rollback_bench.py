"""What taking a rejected draft back costs, per draft length: `python -m spec bench --rollback`.

A verify runs [anchor + k drafts]; here half the drafts land (n = k // 2) and the other rows are taken
back: trimmed out of attention caches, replayed from the tape in recurrent layers (spec.caches). The
table puts that rollback next to the verify forward it follows, and next to what the simple exact
alternative would cost: restoring the pre-round state and running the n + 1 kept rows again (a second
forward). Targets: random models of the published configs in assets/bench/rollback/targets.json
(dense, hybrid, MoE; layer patterns as published, widths shrunk), or any model folder / hub id.
"""

from __future__ import annotations

import json
import platform
import statistics
import time
from pathlib import Path
from typing import Any, Sequence

TARGETS = Path(__file__).resolve().parents[1] / "assets" / "bench" / "rollback" / "targets.json"
KS = (1, 4, 8, 15)


def random_target(cfg: dict) -> Any:
    """A Target over a randomly initialised model of `cfg` (in memory, no tokenizer)."""
    from mlx_lm.utils import _get_classes

    from .target import Target, check_tappable, target_family

    check_tappable(cfg, target_family(cfg))
    model_cls, args_cls = _get_classes(cfg)
    return Target(model=model_cls(args_cls.from_dict(cfg)), tokenizer=None, config=cfg, name=cfg["model_type"])


def _arrays(cache: list) -> list:
    out = []
    for c in cache:
        out += [a for a in getattr(c, "cache", []) if a is not None]
        out += [a for a in (getattr(c, "keys", None), getattr(c, "values", None)) if a is not None]
    return out


def _ms(fn: Any) -> float:
    tic = time.perf_counter()
    fn()
    return 1000 * (time.perf_counter() - tic)


def measure(target: Any, ks: Sequence[int] = KS, runs: int = 7, context: int = 64, seed: int = 0) -> list[dict]:
    """Median ms of the verify forward of k + 1 rows, of taking k - k // 2 of them back, and of the
    alternative (a second forward of the kept rows from a copy of the pre-round cache), per k."""
    import mlx.core as mx

    from .caches import copy_cache

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
            v = _ms(lambda: mx.eval(target(mx.array([ids[context : context + k + 1]]), cache)[0], _arrays(cache)))
            r = _ms(lambda: (target.trim(cache, k - n), mx.eval(_arrays(cache))))
            a = _ms(lambda: mx.eval(target(mx.array([ids[context : context + n + 1]]), alt)[0], _arrays(alt)))
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


def run(models: Sequence[str] | None, out: Path, runs: int = 7) -> int:
    """Measure the shipped random targets (or `models`), print and write the table."""
    import mlx.core as mx
    import pandas as pd

    from .cpu import blas_info, cpu_name
    from .report import to_markdown
    from .target import load_target

    if models:
        targets = {m: (m, lambda m=m: load_target(m)) for m in models}
    else:
        spec = json.loads(TARGETS.read_text())["targets"]
        targets = {name: (t["source"], lambda c=t["config"]: random_target(c)) for name, t in spec.items()}
    table = []
    for name, (source, build) in targets.items():
        target = build()
        recurrent = len(target.recurrent)
        for row in measure(target, runs=runs):
            table.append({"target": name, "config of": source, "family": target.family,
                          "recurrent layers": f"{recurrent} / {target.num_layers}", **row})
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
    (out / "rollback.md").write_text(header + "\n\n" + to_markdown(shown) + "\n")
    df.to_csv(out / "rollback.csv", index=False)
    print(to_markdown(shown))
    print(f"written: {out / 'rollback.md'}, {out / 'rollback.csv'}")
    return 0
