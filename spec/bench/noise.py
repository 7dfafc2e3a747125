"""How much a race's speedup moves when the same race is run again: `python -m spec bench noise`.

The same prompts are raced `--trials` times (interleaved: prompt after prompt, trial after trial), at the
race's defaults (auto draft lengths). Per domain and head: the median speedup (end to end, spec.outcome)
and its run-to-run spread. The tie floor is twice the median of those spreads (about a 95% band for one
race's reading), rounded up to a whole percent, and written to assets/bench/noise/noise.json, which
spec.outcome reads: two lanes closer than that are called a tie, because a second run could well swap them.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

import pandas as pd

from ..race.settings import RaceSettings
from ..report import header_of, to_markdown
from .common import on_arena

NOISE = Path(__file__).resolve().parents[2] / "assets" / "bench" / "noise"


def measure(arena: Any, prompts: list[dict], trials: int, max_new_tokens: int) -> list[dict]:
    """One row per race and head: its speedup and accept length, and the race's own tie band."""
    rows = []
    for trial in range(trials):
        for i, p in enumerate(prompts):
            final = list(arena.race(p["prompt"], RaceSettings(max_new_tokens=max_new_tokens)))[-1]
            out = final.outcome
            for name, o in out.lanes.items():
                if name != "greedy":
                    rows.append({"domain": p["domain"], "prompt": i, "trial": trial, "head": name,
                                 "speedup": o.speedup, "accept": o.mean_accept, "race_band": out.band})
            print(f"trial {trial + 1}/{trials}, prompt {i + 1}/{len(prompts)}: {out.headline()}", flush=True)
    return rows


def summarise(rows: list[dict]) -> tuple[Any, float]:
    """Per domain and head: median speedup, spread (sd over races, % of the median), the widest
    deviation; and the floor: twice the median spread, rounded up to a whole percent."""
    df = pd.DataFrame(rows)
    out = []
    for (domain, head, prompt), g in df.groupby(["domain", "head", "prompt"], sort=False):
        med = g["speedup"].median()
        out.append({"domain": domain, "head": head, "prompt": prompt, "races": len(g),
                    "median speedup": round(med, 3), "accept": round(g["accept"].median(), 2),
                    "spread %": round(100 * statistics.pstdev(g["speedup"]) / med, 1),
                    "widest %": round(100 * max(abs(g["speedup"] / med - 1)), 1),
                    "race's own band %": round(100 * g["race_band"].median(), 1)})
    table = pd.DataFrame(out)
    floor = math.ceil(2 * table["spread %"].median()) / 100
    return table, floor


def run_noise(*, preset: str = "pocket", target: str | None = None, dspark: str | None = None,
              dflash: str | None = None, per_domain: int = 3, trials: int = 3, max_new_tokens: int = 96,
              out: str | Path = "bench-results") -> int:
    """The same races `trials` times: prints the spread and the tie floor, writes them to `out`."""
    prompts, rows = on_arena(lambda arena, chosen: measure(arena, chosen, trials, max_new_tokens), preset=preset,
                             target=target, dspark=dspark, dflash=dflash, per_domain=per_domain)
    table, floor = summarise(rows)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    header = header_of(f"the same race run {trials} times, {len(prompts)} prompts, {max_new_tokens} new tokens, "
                       "T=0, auto draft lengths (interleaved)", preset=preset, target=target)
    text = (header + "\n\nspeedup: end to end over greedy in the same race; spread: sd over the races, % of the "
            "median; widest: the largest deviation from the median; race's own band: what spec.outcome.tie_band "
            f"gave each race (median).\n\n{to_markdown(table)}\n\ntie floor (twice the median spread, rounded up): "
            f"**{100 * floor:.0f}%**\n")
    (out / "noise.md").write_text(text)
    (out / "noise.json").write_text(json.dumps({"tie_floor": floor, "header": header.splitlines()}, indent=2) + "\n")
    pd.DataFrame(rows).to_csv(out / "noise_runs.csv", index=False)
    print(text)
    print(f"written: {out / 'noise.md'}, {out / 'noise.json'}, {out / 'noise_runs.csv'}")
    return 0
