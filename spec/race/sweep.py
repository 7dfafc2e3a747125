"""The domain sweep: races over many prompts, summed into the original release's table (method x domain:
accept / tok/s / speedup vs greedy, with a lossless verdict per cell), updated after every prompt. Its
tok/s and speedup are the race's one measure (spec.race.outcome): end to end, tokens per engine second.

One implementation for the app's sweep tab, its `/sweep` API and `python -m spec bench sweep`; the
per-prompt rows have the bench's schema, so the same summary (`summarise`) and cells (`grid`) serve both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator

from ..errors import SpecError
from ..loop.engine import GenResult
from ..loop.slots import as_columns
from .run import RaceEvent
from .settings import RaceSettings

METHODS = {"dspark": "DSpark", "dflash": "DFlash", "lookup": "lookup", "greedy": "greedy"}  # sweep rows' method names
DOMAINS = ("chat", "code", "math", "edit")  # edit: answers that quote the prompt, where lookup shines


@dataclass
class SweepUpdate:
    done: int  # prompts raced so far
    total: int
    domain: str  # of the prompt just raced
    rows: Any  # pandas: one row per prompt x engine (the bench's schema)
    table: Any  # pandas: method x domain summary (summarise)
    stopped: bool = False  # Stop ended the sweep: rows and table hold the races that finished


def race_rows(results: dict[str, GenResult], verdicts: dict[str, str], domain: str, prompt: int) -> list[dict]:
    """One race's rows: per engine its tokens, rounds, committed tokens, tok/s (end to end, the race's one
    measure; decode-only as a detail), lossless verdict and per-slot counts (spec.loop.slots.as_columns)."""
    return [{"domain": domain, "method": METHODS[n], "prompt": prompt, "tokens": len(r.token_ids),
             "rounds": r.rounds, "committed": sum(r.accept_lengths), "tok_s": r.tokens_per_sec,
             "decode_tok_s": r.decode_tokens_per_sec, "lossless": verdicts.get(n, "baseline"),
             **as_columns(r.positions)}
            for n, r in results.items()]


def sweep(race: Callable[[str, RaceSettings], Iterator[RaceEvent]], prompts: list[dict],
          settings: RaceSettings) -> Iterator[SweepUpdate]:
    """Race each {domain, prompt} in turn with `race` (Arena.race, or run_race bound to a target);
    after each, the rows so far and their summary. A race that was stopped ends the sweep with one more
    update (stopped=True) that keeps the races that finished."""
    import pandas as pd

    if not prompts:
        raise SpecError("the sweep has no prompts: pick a domain or type your own, one a line")
    rows: list[dict] = []
    for i, p in enumerate(prompts):
        last = None
        for last in race(p["prompt"], settings):
            pass
        if last is None or last.kind != "finish" or last.outcome.stopped:
            frame = pd.DataFrame(rows)
            yield SweepUpdate(i, len(prompts), p["domain"], frame,
                              summarise(frame, base="greedy") if rows else None, stopped=True)
            return
        rows += race_rows(last.results, last.verdicts, p["domain"], i)
        frame = pd.DataFrame(rows)
        yield SweepUpdate(i + 1, len(prompts), p["domain"], frame, summarise(frame, base="greedy"))


def summarise(runs: Any, base: str = "greedy (ours)") -> Any:
    """method x domain: accept (committed / rounds), median tok/s over prompts, speedup over `base`'s
    tok/s in the same domain, and (when the rows carry verdicts) the lossless verdict of the cell."""
    import pandas as pd

    g = runs.groupby(["method", "domain"], sort=False)
    out = pd.DataFrame({
        "accept": g["committed"].sum() / g["rounds"].sum().where(g["rounds"].sum() > 0),
        "tok/s": g["tok_s"].median(),
        **({"draft % of verify": 100 * g["draft_share"].median()} if "draft_share" in runs else {}),
    }).reset_index()
    ref = out[out["method"] == base].set_index("domain")["tok/s"]
    out["speedup"] = out["tok/s"] / out["domain"].map(ref)
    if "lossless" in runs:
        out["lossless"] = [cell_verdict(v) for v in g["lossless"].apply(list)]
    if "same_rounds" in runs:  # the bench's trials of one prompt: the same rounds each time (of the prompts)
        out["same rounds"] = [f"{sum(v)}/{len(v)}" for v in g["same_rounds"].apply(list)]
    return out


def cell_verdict(verdicts: list[str]) -> str:
    """One cell's verdicts: every race identical to the plain lane, how many differ at T = 0, how many
    sampled races came out identical (T > 0), or not checked."""
    if all(v == "baseline" for v in verdicts):
        return "baseline"
    if all(v.startswith("identical") for v in verdicts):
        return "identical"
    differ = sum(v.startswith("DIFFERS") for v in verdicts)
    if differ:
        return f"DIFFERS in {differ} of {len(verdicts)}"
    if any(v.startswith("differs") or "exact in distribution" in v for v in verdicts):
        same = sum(v.startswith("identical") for v in verdicts)
        return f"sampled: {same} of {len(verdicts)} identical (exact in distribution)"
    return "not checked"


def grid(table: Any) -> Any:
    """The release's layout: one row per method, one "accept / tok/s / speedup" cell per domain (with a
    mark for the lossless verdict when the table has one)."""
    mark = {"identical": " ✓", "baseline": ""}

    def cell(r: Any) -> str:
        acc = f"{r['accept']:.2f}" if r["accept"] == r["accept"] else "-"
        text = f"{acc} / {r['tok/s']:.1f} / {r['speedup']:.2f}x"
        if "lossless" in r:
            text += mark.get(r["lossless"], f" ({r['lossless']})")
        return text

    cells = table.assign(cell=table.apply(cell, axis=1))
    return cells.pivot(index="method", columns="domain", values="cell").loc[table["method"].unique()].reset_index()
