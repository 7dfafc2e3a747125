"""`python -m spec bench calibration`: what a first start's calibration costs, and what shortening it
would change.

For each head of a preset: one calibration's timed runs (spec.calibrate.timed_runs) and its acceptance
prior, timed by part: the drafting rounds and drafts (the head's own), the pipelined plain steps (the
target's alone: the part that two heads of one target could share), the prior's generations. Then, from
the same runs, what fewer runs would have decided: for random subsets of n runs, how far a round's cost
over a plain step moves (median absolute deviation from the all-runs value) and how often the draft
length `auto` chooses differs, over a grid of acceptance rates (constant rates 0.2..0.9 and the prior),
and what that costs: the expected tokens per ms of the length chosen, by the all-runs costs, against the
best length's (near-equal lengths trade places often and cost nothing).
Subsets of one calibration miss the drift between calibrations minutes apart, so they understate what
n runs would move: a shortening is safe only where even they say it changes nothing.
"""

from __future__ import annotations

import random
import statistics
import time
from pathlib import Path
from typing import Any

import pandas as pd

from ..heads.registry import load_dflash, load_dspark
from ..loop.autodraft import choose, expected_tokens, round_ms
from ..loop.calibrate import acceptance_prior, calibration_runs, costs_of, timed_runs
from ..presets import get_preset, resolve
from ..progress import Console
from ..report import header_of, to_markdown
from ..target import load_target

RATES = (0.2, 0.35, 0.5, 0.65, 0.8, 0.9)
SUBSETS = 300


def study(target: Any, head: Any, runs: int, ns: tuple[int, ...] = (3, 5, 7), seed: int = 0) -> list[dict]:
    """One calibration of `head`, timed by part, and what n of its runs would have decided."""
    K, marks = head.max_drafts, [time.perf_counter()]
    runs_ms = timed_runs(target, head, runs, done=lambda i: marks.append(time.perf_counter()))
    tic = time.perf_counter()
    prior, second = acceptance_prior(target, head)
    prior_s = time.perf_counter() - tic
    walls = [b - a for a, b in zip(marks[1:], marks[2:])]  # the runs after the warm-up
    head_s = sum(sum(r[1 : 2 * K + 1]) for r in runs_ms) / 1000  # drafting rounds and drafts
    target_s = sum(walls) - head_s - sum(r[0] for r in runs_ms) / 1000  # the plain steps, with their prefill
    full = costs_of(runs_ms, K, prior, second)
    grids = [[r] * K for r in RATES] + [prior]

    def ratios(c: Any) -> list[float]:
        return [(c.verify[k] + c.draft[k]) / c.verify[0] for k in range(1, K + 1)]

    def choices(c: Any) -> list[int]:
        return [choose(c, g, K) for g in grids]

    def pace(k: int, rates: list[float]) -> float:  # expected tokens per ms of a length, by the full costs
        return expected_tokens(rates, k) / round_ms(full, k)

    want_ratio, want_choice = ratios(full), choices(full)
    rng = random.Random(seed)
    rows = []
    for n in [n for n in ns if n < runs] + [runs]:
        moved, changed, lost = [], 0, []
        for _ in range(SUBSETS):
            pick = rng.sample(runs_ms, n) if n < runs else rng.choices(runs_ms, k=n)  # n = all: a bootstrap
            c = costs_of(pick, K, prior, second)
            moved.append(statistics.median(abs(a / b - 1) for a, b in zip(ratios(c), want_ratio)))
            got = choices(c)
            changed += sum(a != b for a, b in zip(got, want_choice))
            lost += [1 - pace(k, g) / pace(w, g) for k, w, g in zip(got, want_choice, grids)]
        rows.append({"head": head.kind, "runs": n,
                     "calibration s (est.)": round(n * statistics.mean(walls) + prior_s, 1),
                     "round/step ratio moves (median, %)": round(100 * statistics.median(moved), 1),
                     "auto's choice differs (% of rates)": round(100 * changed / (SUBSETS * len(grids)), 1),
                     "speed lost by it (mean / 95th pct, %)": f"{100 * statistics.mean(lost):.1f} / "
                                                               f"{100 * sorted(lost)[int(0.95 * len(lost))]:.1f}"})
    parts = {"head part s": round(head_s, 1), "target-only part s": round(target_s, 1),
             "prior s": round(prior_s, 1), "measured s": round(sum(walls) + prior_s, 1)}
    for row in rows:  # the parts belong to the one calibration measured: on its row (all runs) only
        row.update(parts if row is rows[-1] else dict.fromkeys(parts, ""))
    return rows


def run_calibration(*, preset: str = "pocket", target: str | None = None, dspark: str | None = None,
                    dflash: str | None = None, out: str | Path = "bench-results") -> int:
    """study() for each head of `preset` (or the given ones): prints the table, writes it to `out`."""
    p = get_preset(preset)
    progress = Console()
    loaded = load_target(target or resolve(p.target, "target", progress))
    rows = []
    for kind, ref, load in (("dspark", dspark, load_dspark), ("dflash", dflash, load_dflash)):
        ref = ref or (resolve(getattr(p, kind), kind, progress) if getattr(p, kind) else None)
        if ref:
            rows += study(loaded, load(ref, loaded), calibration_runs())
    table = pd.DataFrame(rows)
    md = (header_of("calibration: its parts, and what fewer runs would decide", preset=preset, target=target)
          + "\n\n" + to_markdown(table)
          + f"\n\nSubsets: {SUBSETS} per n, drawn from the same runs (n = all: a bootstrap of them); acceptance "
          f"grid: constant rates {', '.join(map(str, RATES))} and the measured prior.\n")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "table.md").write_text(md)
    table.to_csv(out / "table.csv", index=False)
    print(md)
    print(f"written: {out / 'table.md'}, {out / 'table.csv'}")
    return 0
