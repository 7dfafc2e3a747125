"""`python -m spec bench tree-estimate RUNS_CSV`: what trees should add over chains on this machine.

By `auto`'s own arithmetic (spec.autodraft): the best chain against the best tree, in expected tokens per
millisecond, from this machine's measured costs and each head's measured acceptance: its first choice per
slot from the full-chain rows of a head-to-head run (RUNS_CSV, e.g. assets/bench/trees/runs.csv), how its
second and third choices fare from its calibration. Then again with each verified row costing 3% and 1% of a
plain step (as on a GPU, where a few more rows are nearly free), drafting as measured. An estimate at each
domain's average acceptance, not a bound: acceptance moves from round to round and auto follows it, and
where a head is sometimes sure and sometimes not, trees chosen round by round pay more than the average says.
"""

from __future__ import annotations

import statistics
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd

from ..heads.registry import load_dflash, load_dspark
from ..loop.autodraft import Costs, expected_tokens, round_ms, tree_tokens
from ..loop.calibrate import WarmPair, cached_costs, ms_of
from ..loop.slots import by_method_and_domain
from ..presets import get_preset, resolve
from ..progress import Console
from ..report import machine_line, to_markdown
from ..target import load_target

ROW_COSTS = (None, 0.03, 0.01)  # a verified row's cost as a share of a plain step (None: as measured)
FULL_ROWS = {"dspark": "DSpark full", "dflash": "DFlash full"}  # head-to-head rows: a whole chain every round
ROUND_RUNS = 21  # timed runs of each round kind (median)


@dataclass
class Estimate:
    chain_k: int  # the best chain's length (0: a plain step pays best)
    tree_n: int  # the best tree's size (0: no tree beats that chain)
    gain: float  # expected tokens per ms of the better of the two, over the chain's


def slot_rates(rows: list[dict[str, int]], depth: int) -> list[float]:
    """landed / reached per slot, `depth` slots; a slot never reached keeps the last measured rate."""
    rates = [r["landed"] / r["reached"] for r in rows if r["reached"]][:depth] or [0.0]
    return rates + [rates[-1]] * (depth - len(rates))


def with_row_cost(costs: Costs, share: float | None) -> Costs:
    """The same costs with each verified row at `share` of a plain step (None: unchanged)."""
    if share is None:
        return costs
    v0 = costs.verify[0]
    return replace(costs, verify=[v0 * (1 + share * k) for k in range(len(costs.verify))])


def estimate(costs: Costs, first: list[float], second: list[float]) -> Estimate:
    """The best chain and the best tree of at most the head's block, by expected tokens per ms."""
    K = costs.max_k
    chain = [(1.0 / round_ms(costs, 0), 0)] + [(expected_tokens(first, k) / round_ms(costs, k), k)
                                                for k in range(1, K + 1)]
    best_chain, k = max(chain)
    if not second:
        return Estimate(k, 0, 1.0)
    values = tree_tokens([[a, *second] for a in first[:K]], K)
    best_tree, n = max((values[n] / (round_ms(costs, n) + costs.tree_ms), n) for n in range(2, K + 1))
    return Estimate(k, n if best_tree > best_chain else 0, max(best_tree, best_chain) / best_chain)


def table(counts: dict[tuple[str, str], list[dict[str, int]]], costs: dict[str, Costs]) -> list[dict[str, Any]]:
    """One row per head and domain: slot 1's rate, the second choice's, and the estimate at each row cost;
    counts: a run's slot counts per (method, domain), as spec.slots.by_method_and_domain reads them."""
    out = []
    for kind, c in costs.items():
        for (method, domain), rows in counts.items():
            if not method.startswith(FULL_ROWS[kind]):
                continue
            first = slot_rates(rows, c.max_k)
            row = {"head": FULL_ROWS[kind].split()[0], "domain": domain, "slot 1": round(first[0], 2),
                   "2nd choice": round(c.second[0], 2) if c.second else None}
            for share in ROW_COSTS:
                got = estimate(with_row_cost(c, share), first, c.second)
                name = "measured rows" if share is None else f"rows at {100 * share:.0f}%"
                row[name] = f"chain {got.chain_k} / tree {got.tree_n or '-'}: x{got.gain:.3f}"
            out.append(row)
    return out


def round_kinds(target: Any, head: Any, runs: int = ROUND_RUNS) -> dict[str, float]:
    """Median ms of three rounds of the head's whole block, in turn on one warm cache: a chain as the loop
    runs it (drafts and verify one evaluation), the same chain read to the host before its verify (as a
    tree must be: its shape is built from the drafts' values), and a tree of as many drafts."""
    pair, K = WarmPair(target, head), head.max_drafts
    kinds = {"chain": lambda: pair.chain_round(K), "chain, synced": lambda: pair.chain_round(K, sync=True),
             "tree": pair.tree_round}
    ms: dict[str, list[float]] = {k: [] for k in kinds}
    for i in range(runs + 1):  # the first run warms up
        for name, fn in kinds.items():
            took = ms_of(fn)
            if i:
                ms[name].append(took)
    return {k: statistics.median(v) for k, v in ms.items()}


def read_counts(runs_csv: str | Path) -> dict | None:
    """A head-to-head runs.csv's slot counts per (method, domain); None, said on stderr, when it is
    missing, not a bench's runs.csv, or has no full-chain rows."""
    try:
        counts = by_method_and_domain(pd.read_csv(runs_csv))
    except (OSError, ValueError, KeyError) as e:  # missing, unreadable, not a bench's runs.csv
        why = f"no column {e}" if isinstance(e, KeyError) else str(e)
        print(f"tree-estimate: cannot read {runs_csv} as a bench's runs.csv: {why}", file=sys.stderr)
        return None
    if not any(m.startswith(tuple(FULL_ROWS.values())) for m, _ in counts):
        print(f"tree-estimate: {runs_csv} has no '{FULL_ROWS['dspark']}' or '{FULL_ROWS['dflash']}' rows with "
              "per-slot counts (run `python -m spec bench head-to-head --methods full,tree` first)", file=sys.stderr)
        return None
    return counts


def run_tree_estimate(runs_csv: str | Path, *, preset: str = "pocket", target: str | None = None,
                      dspark: str | None = None, dflash: str | None = None) -> int:
    """Load the preset's pair (or the given models), read (or measure) its costs here, print the table;
    2 when `runs_csv` cannot serve (read_counts), before any model loads."""
    counts = read_counts(runs_csv)
    if counts is None:
        return 2
    p, progress = get_preset(preset), Console()  # a first run here measures each head's costs: say so
    loaded = load_target(target or resolve(p.target, "target", progress))
    refs = {"dspark": dspark or p.dspark, "dflash": dflash or p.dflash}
    heads = {k: (load_dspark if k == "dspark" else load_dflash)(resolve(ref, k, progress), loaded)
             for k, ref in refs.items() if ref}
    costs = {k: cached_costs(loaded, h, progress=progress) for k, h in heads.items()}
    print(machine_line())
    print(to_markdown(pd.DataFrame(table(counts, costs))))
    for k, c in costs.items():
        row_ms = (c.verify[-1] - c.verify[0]) / c.max_k
        rounds = round_kinds(loaded, heads[k])
        print(f"{FULL_ROWS[k].split()[0]}: a plain step {c.verify[0]:.1f} ms, a verified row {row_ms:.1f} ms "
              f"({100 * row_ms / c.verify[0]:.1f}% of a step), a tree's own cost {c.tree_ms:.1f} ms (calibrated). "
              f"Rounds of {c.max_k} drafts in turn, median of {ROUND_RUNS}: "
              + ", ".join(f"{name} {v:.1f} ms" for name, v in rounds.items())
              + f" (the tree {rounds['tree'] - rounds['chain']:+.1f} ms, of which reading the drafts to the host "
                f"{rounds['chain, synced'] - rounds['chain']:+.1f} ms)")
    return 0
