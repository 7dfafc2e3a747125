"""Benchmarks of the race itself: a race against each engine alone (what sharing one target costs),
the shared prefill against one per engine, and the domain sweep's files."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from ..errors import SpecError
from ..race.arena import on_arena
from ..report import header_of, to_markdown, write_outputs


def race_vs_solo(target: Any, heads: dict, prompts: list[dict], *, trials: int = 3,
                 max_new_tokens: int = 96) -> "Any":
    """Each engine's decode tok/s alone and inside a race on the same prompt, interleaved per trial:
    a fair race bills every lane only for its own work, so the two agree within noise."""
    import pandas as pd

    from ..loop.engine import Engine
    from ..race.run import RaceSettings, run_race

    engines = {n: Engine(target, heads.get(n), name=n) for n in ("dspark", "dflash") if n in heads}
    engines["greedy"] = Engine(target, None, name="greedy")
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
    import pandas as pd

    from ..race.run import RaceSettings, run_race

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



def run_sweep(a: argparse.Namespace) -> int:
    """The app's domain sweep from the command line: one race per prompt, the same table and files."""
    from ..race.run import RaceSettings
    from ..race.sweep import sweep

    def work(arena: Any, prompts: list[dict]) -> Any:
        last = None
        for last in sweep(arena.race, prompts, RaceSettings(max_new_tokens=a.max_new_tokens,
                                                            temperature=a.temperature)):
            print(f"# {last.done}/{last.total} raced ({last.domain})", file=sys.stderr)
        return last

    prompts, last = on_arena(a, work)
    header = header_of(a, f"sweep, {len(prompts)} races, {a.max_new_tokens} new tokens, T={a.temperature} "
                          "(tok/s end to end, on each engine's own engine seconds)")
    paths = write_outputs(last.rows, last.table, Path(a.out), header)
    print(paths[0].read_text())
    return 0



def run_race_vs_solo(a: argparse.Namespace) -> int:
    prompts, runs = on_arena(a, lambda arena, prompts: arena.call(lambda: race_vs_solo(
        arena.target, arena.heads, prompts, trials=a.trials, max_new_tokens=a.max_new_tokens)))
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    header = header_of(a, f"race vs solo, {len(prompts)} prompts, {a.trials} trials, {a.max_new_tokens} new tokens, "
                          "T=0")
    (out / "race_vs_solo.md").write_text(header + "\n\n" + to_markdown(race_table(runs)) + "\n")
    runs.to_csv(out / "race_vs_solo_runs.csv", index=False)
    print((out / "race_vs_solo.md").read_text())
    return 0



def run_prefill(a: argparse.Namespace) -> int:
    def work(arena: Any, prompts: list[dict]) -> Any:
        return arena.call(lambda: prefill_work(arena.target, arena.heads, [p["prompt"] for p in prompts], a.prefill,
                                               a.trials))

    prompts, runs = on_arena(a, work)
    table = runs.groupby("prefill", sort=False).median(numeric_only=True).drop(columns="trial").round(2)
    counts = ["lanes", "prompt tokens", "prompt rows through the target"]
    table[counts] = table[counts].astype(int)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    header = header_of(a, f"prefill work per race, a {a.prefill}-token prompt, {a.trials} trials, interleaved "
                          "(medians)")
    (out / "prefill.md").write_text(header + "\n\n" + to_markdown(table.reset_index()) + "\n")
    runs.to_csv(out / "prefill_runs.csv", index=False)
    print((out / "prefill.md").read_text())
    return 0
