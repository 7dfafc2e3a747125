"""Benchmarks of the race itself: a race against each engine alone (what sharing one target costs),
the shared prefill against one per engine, and the domain sweep's files."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd

from ..errors import SpecError
from ..loop.calibrate import build_engine
from ..loop.verify import Sampling
from ..race.run import run_race
from ..race.settings import RaceSettings
from ..race.sweep import sweep
from ..report import header_of, to_markdown, write_outputs
from .common import on_arena


def race_vs_solo(target: Any, heads: dict, prompts: list[dict], *, trials: int = 3,
                 max_new_tokens: int = 96) -> "Any":
    """Each engine's decode tok/s alone and inside a race on the same prompt, interleaved per trial:
    a fair race bills every lane only for its own work, so the two agree within noise."""
    engines = {n: build_engine(target, heads.get(n), name=n) for n in ("dspark", "dflash") if n in heads}
    engines["greedy"] = build_engine(target, None, name="greedy")
    settings = RaceSettings(max_new_tokens=max_new_tokens)
    for _ in run_race(target, heads, prompts[0]["prompt"], settings):  # warm-up
        pass
    rows = []
    for p in prompts:
        for trial in range(trials):
            solo = {n: e.generate(p["prompt"], max_new_tokens) for n, e in engines.items()}
            *_, last = run_race(target, heads, p["prompt"], settings)
            for n, res in solo.items():
                raced = last.results[n]
                if raced.token_ids != res.token_ids:
                    raise SpecError(f"{n}: the race and the solo run differ on {p['prompt'][:40]!r}")
                rows.append({"domain": p["domain"], "prompt": p["prompt"][:60], "trial": trial, "engine": n,
                             "solo tok/s": res.decode_tokens_per_sec, "race tok/s": raced.decode_tokens_per_sec})
    return pd.DataFrame(rows)


def prefill_work(target: Any, heads: dict, texts: list[str], prompt_tokens: int, trials: int = 2) -> "Any":
    """A long prompt raced with its prefill shared (one pass for every lane) and per engine (each lane
    reads the prompt itself, as races did before), interleaved per trial: prompt rows through the
    target, and wall seconds until every lane has its first token."""
    ids = target.tokenizer.encode("\n\n".join(texts * (prompt_tokens // 20 + 1)))[:prompt_tokens]
    prompt = target.decode(ids)
    settings = RaceSettings(max_new_tokens=4)
    cls, real, widths = type(target), type(target).__call__, []

    def counted(self: Any, x: Any, *args: Any, **kw: Any) -> Any:
        if kw.get("last_only"):  # a prefill chunk (verify forwards want every row's logits)
            widths.append(x.shape[1])
        return real(self, x, *args, **kw)

    rows = []
    cls.__call__ = counted
    try:
        for trial in range(trials):
            for shared in (False, True):
                widths.clear()
                t0, first = time.perf_counter(), {}
                for ev in run_race(target, heads, prompt, settings, share_prefill=shared):
                    if ev.kind == "start":
                        n = ev.prompt_tokens
                    if ev.kind == "round" and ev.round.index == 0:
                        first[ev.engine] = time.perf_counter() - t0
                rows.append({"prefill": "shared (one pass)" if shared else "per engine (before)", "trial": trial,
                             "lanes": len(first), "prompt tokens": n,
                             "prompt rows through the target": sum(widths),
                             "wall s to every lane's first token": max(first.values()),
                             "race wall s": time.perf_counter() - t0})
    finally:
        cls.__call__ = real
    return pd.DataFrame(rows)


def race_table(runs: "Any") -> "Any":
    """engine x domain: median solo tok/s, median race tok/s, and race / solo."""
    g = runs.groupby(["engine", "domain"], sort=False)[["solo tok/s", "race tok/s"]].median().reset_index()
    g["race / solo"] = (g["race tok/s"] / g["solo tok/s"]).round(3)
    return g.round({"solo tok/s": 1, "race tok/s": 1})


def run_sweep(*, preset: str = "pocket", target: str | None = None, dspark: str | None = None,
              dflash: str | None = None, prompts: str | Path | None = None, per_domain: int = 3,
              max_new_tokens: int = 96, temperature: float = 0.0, out: str | Path = "bench-results") -> int:
    """The app's domain sweep from the command line: one race per prompt, the same table and files."""
    def work(arena: Any, chosen: list[dict]) -> Any:
        last = None
        settings = RaceSettings(max_new_tokens=max_new_tokens, sampling=Sampling(temperature))
        for last in sweep(arena.race, chosen, settings):
            print(f"# {last.done}/{last.total} raced ({last.domain})", file=sys.stderr)
        return last

    chosen, last = on_arena(work, preset=preset, target=target, dspark=dspark, dflash=dflash, prompts=prompts,
                            per_domain=per_domain)
    header = header_of(f"sweep, {len(chosen)} races, {max_new_tokens} new tokens, T={temperature} "
                       "(tok/s end to end, on each engine's own engine seconds)", preset=preset, target=target)
    paths = write_outputs(last.rows, last.table, Path(out), header)
    print(paths[0].read_text())
    return 0


def run_race_vs_solo(*, preset: str = "pocket", target: str | None = None, dspark: str | None = None,
                     dflash: str | None = None, prompts: str | Path | None = None, per_domain: int = 3,
                     trials: int = 3, max_new_tokens: int = 96, out: str | Path = "bench-results") -> int:
    """Each engine alone and in a race (race_vs_solo): prints the table, writes it and the runs to `out`."""
    chosen, runs = on_arena(lambda arena, chosen: arena.call(lambda: race_vs_solo(
        arena.target, arena.heads, chosen, trials=trials, max_new_tokens=max_new_tokens)),
        preset=preset, target=target, dspark=dspark, dflash=dflash, prompts=prompts, per_domain=per_domain)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    header = header_of(f"race vs solo, {len(chosen)} prompts, {trials} trials, {max_new_tokens} new tokens, T=0",
                       preset=preset, target=target)
    (out / "race_vs_solo.md").write_text(header + "\n\n" + to_markdown(race_table(runs)) + "\n")
    runs.to_csv(out / "race_vs_solo_runs.csv", index=False)
    print((out / "race_vs_solo.md").read_text())
    return 0


def run_prefill(*, tokens: int = 1500, preset: str = "pocket", target: str | None = None, dspark: str | None = None,
                dflash: str | None = None, prompts: str | Path | None = None, per_domain: int = 3, trials: int = 3,
                out: str | Path = "bench-results") -> int:
    """A race on a `tokens`-long prompt, its prefill shared vs one per engine (prefill_work)."""
    def work(arena: Any, chosen: list[dict]) -> Any:
        return arena.call(lambda: prefill_work(arena.target, arena.heads, [p["prompt"] for p in chosen], tokens,
                                               trials))

    chosen, runs = on_arena(work, preset=preset, target=target, dspark=dspark, dflash=dflash, prompts=prompts,
                            per_domain=per_domain)
    table = runs.groupby("prefill", sort=False).median(numeric_only=True).drop(columns="trial").round(2)
    counts = ["lanes", "prompt tokens", "prompt rows through the target"]
    table[counts] = table[counts].astype(int)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    header = header_of(f"prefill work per race, a {tokens}-token prompt, {trials} trials, interleaved (medians)",
                       preset=preset, target=target)
    (out / "prefill.md").write_text(header + "\n\n" + to_markdown(table.reset_index()) + "\n")
    runs.to_csv(out / "prefill_runs.csv", index=False)
    print((out / "prefill.md").read_text())
    return 0
