"""Tables and result files, one writer for the race, the benches and training: markdown, the
machine line, the spread of trials, and the files a bench leaves behind."""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from .cpu import blas_info, cpu_name
from .loop.slots import by_method_and_domain, shares_text
from .race.outcome import Outcome
from .race.repeat import shown_outcome
from .race.settings import upgraded
from .race.sweep import grid


def results_table(outcome: Outcome, verdicts: dict[str, str], each: dict[str, list] | None = None) -> "Any":
    """One row per engine (pandas), fastest first: place, the one speedup (end to end), accept length,
    tokens, finish time, status, the lossless check; decode-only figures as labelled details. `each`: a
    repeat's speedups per lane (spec.race.repeat), as a column beside the speedup (then their median)."""
    import pandas as pd

    rows = []
    for o in outcome.order:
        rows.append({
            "place": o.place_text,
            "engine": ("plain sampling" if outcome.sampled and o.engine == "greedy" else o.engine)
            + (f" ({outcome.notes[o.engine]})" if o.engine in outcome.notes else ""),
            "speedup": rnd(o.speedup, 2),
            **({"speedups (each race)": " ".join("–" if x is None else f"{x:.2f}" for x in each.get(o.engine, []))}
               if each is not None else {}),
            "tok/s": round(o.tok_s, 1), "mean accept": rnd(o.mean_accept, 2), "tokens": o.tokens,
            "rounds": o.rounds, "finish s": round(o.finish_seconds, 2), "status": o.status,
            "vs plain sampling" if outcome.sampled else "lossless (vs greedy)":
                verdicts.get(o.engine, "its own sample" if outcome.sampled else "reference"),
            "decode tok/s": round(o.decode_tok_s, 1), "decode speedup": rnd(o.decode_speedup, 2),
            "prefill s": round(o.prefill_seconds, 3), "prompt tokens": o.prompt_tokens,
        })
    return pd.DataFrame(rows)


SHOWN = {"speedup": "×{:.2f}", "decode speedup": "×{:.2f}", "tok/s": "{:.1f}", "decode tok/s": "{:.1f}",
         "mean accept": "{:.2f}", "finish s": "{:.2f}", "prefill s": "{:.3f}"}  # as the page's lane cards write them


def shown(table: Any) -> Any:
    """A results table as the page and the Markdown write it: each figure with the digits the lane cards
    give it (greedy's speedup "×1.00", as its card says, never "1"), "–" where there is none. The API and
    the downloads keep the numbers."""
    out = table.copy()
    for col, form in SHOWN.items():
        if col in out:
            out[col] = ["–" if v is None or v != v else form.format(v) for v in out[col]]
    return out


def race_markdown(final: Any, header: dict, repeat: Any = None) -> str:
    """A finished race as Markdown for a chat or an issue: the headline, the table, the verdicts, each
    head's per-slot shares, the settings, models, machine and versions it ran with (header: the race
    file's, spec.race.file.race_record). `repeat` (spec.race.repeat.Repeated, its last race `final`): its
    headline, and its medians and each race's speedups in the table."""
    out, each = shown_outcome(final.outcome, repeat)
    title = f"Spec Arena, one prompt raced {repeat.races} times" if each is not None else "Spec Arena race"
    prompt = " ".join(str(header.get("prompt", "")).split())
    cols = ["place", "engine", "speedup", "speedups (each race)", "tok/s", "mean accept", "tokens", "finish s",
            "status"]
    table = shown(results_table(out, final.verdicts, each))
    headline = repeat.headline() if each is not None else out.headline()
    lines = [f"**{title}**: {headline}", "", f"> {prompt[:300]}{'…' if len(prompt) > 300 else ''}", "",
             to_markdown(table[[c for c in cols if c in table.columns]]), ""]
    lines += [f"- {out.label(n)}: {v}" for n, v in final.verdicts.items()]
    lines += [f"- {out.label(n)} per draft slot (landed / reached): {shares_text(rows)}"
              for n, rows in out.positions.items() if rows]
    lines += ["", "Speedup: end to end, tokens per engine second (prefill included); ties within "
              f"{100 * out.band:.0f}%. Settings: {settings_words(header.get('settings') or {})}."]
    models = pairs_words(header.get("models"))
    if models:
        lines.append(f"Models: {models}.")
    lines.append(f"{header.get('machine', '')}; {pairs_words(header.get('versions'))}; {header.get('timestamp', '')}.")
    return "\n".join(lines) + "\n"


def pairs_words(pairs: dict | None) -> str:
    """A race header's models or versions as words: "target X, dspark Y" ("" when none are recorded)."""
    return ", ".join(f"{k} {v}" for k, v in (pairs or {}).items())


def settings_words(settings: dict) -> str:
    """A race's settings (spec.race.run.RaceSettings as a dict) in a few words, as the page and Markdown say them."""
    if not settings:
        return "not recorded"
    s = upgraded(settings)
    t = s.get("temperature", 0.0)
    words = [f"{s.get('max_new_tokens', '?')} new tokens",
             "T = 0 (greedy)" if not t else f"T = {t}, top-p {s.get('top_p', 1.0)}, top-k {s.get('top_k', 0)}, "
                                            f"seed {s.get('seed', 0)}"]
    tree = s.get("tree")
    trees = {None: "", "auto": "", 0: ", chains only"}.get(tree, f", trees of at most {tree} drafts")
    cap = s.get("dspark_max_draft", "auto")
    words.append(f"DSpark draft length {'the whole block' if cap == 0 else cap}{trees}"
                 + ("" if s.get("dspark_markov", True) else ", without its Markov head")
                 + (f", confidence cut {s['dspark_threshold']}" if s.get("dspark_threshold") else ""))
    length = s.get("dflash_max_draft", "auto")
    words.append(f"DFlash draft length {'the whole block' if length == 0 else length}{trees}")
    if s.get("lookup_branch", False):  # a file from before the branch existed raced without it
        words.append("the heads' rounds with prompt lookup's guess as one more branch")
    if s.get("lookup"):
        words.append(f"a prompt-lookup lane (draft length {s.get('lookup_max_draft', 'auto')})")
    if not s.get("baseline", True):
        words.append("no greedy lane")
    if s.get("thinking"):
        words.append("thinking on")
    return ", ".join(words)


def rnd(x: float | None, digits: int) -> float | None:
    return None if x is None else round(x, digits)


def to_markdown(df: Any) -> str:
    """GitHub markdown table (pandas' to_markdown needs `tabulate`, which we do not depend on)."""
    cols = [str(c) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines)



def machine_line() -> str:
    cpu = cpu_name()
    try:
        from importlib.metadata import version

        mlx = f"mlx {version('mlx')}"
    except Exception:
        mlx = "mlx"
    try:
        load = f", load average {os.getloadavg()[0]:.2f} at start"
    except (AttributeError, OSError):
        load = ""
    return f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores ({cpu}), {mlx}{load}"



def spread(values: list[float]) -> float:
    """How far one trial's figure strays: the median absolute deviation from the median, as a share of
    it (NaN for one trial). The bench's resolution: a difference between two rows smaller than about
    this is the machine's noise, not the methods'."""
    if len(values) < 2:
        return float("nan")
    mid = float(np.median(values))
    return float(np.median([abs(v - mid) for v in values])) / mid



def write_outputs(runs: "Any", table: "Any", out: Path, header: str) -> list[Path]:
    """table.md / table.csv / table.json / runs.csv and speedup.png in `out`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    wide = table.pivot(index="method", columns="domain", values=["accept", "tok/s", "speedup"])
    md = (header + "\n\naccept / tok/s / speedup vs our greedy (end to end: tokens per second, prefill included)\n\n"
          + to_markdown(grid(table)) + "\n")
    mix = length_mix(runs)
    if mix:
        md += "\nchosen draft lengths of the auto rows, share of rounds (0 = parked: a plain target step):\n" + mix
    slots = slot_lines(runs)
    if slots:
        md += ("\nper draft slot, all prompts of a domain: the share of rounds that landed slot i among those that "
               "reached it (every earlier slot landed), and landed / reached:\n" + slots)
    if "spread" in runs and runs["spread"].notna().any():
        by_domain = runs.groupby("domain", sort=False)["spread"].median()
        md += ("\ntrial-to-trial spread of a run's tok/s (median absolute deviation of its trials, % of "
               "their median; median over the runs): " + ", ".join(f"{d} {100 * v:.1f}%" for d, v in by_domain.items())
               + "\n")
    cost = table.groupby("method", sort=False)["draft % of verify"].median().dropna() \
        if "draft % of verify" in table else None  # a sweep's races do not profile the drafter
    if cost is not None and len(cost[cost > 0]):
        md += "\ndrafter cost, median % of the verify forward: " + ", ".join(
            f"{m} {v:.1f}%" for m, v in cost.items() if v > 0) + "\n"
    paths = [out / "table.md", out / "table.csv", out / "table.json", out / "runs.csv", out / "speedup.png"]
    paths[0].write_text(md)
    table.to_csv(paths[1], index=False)
    table.to_json(paths[2], orient="records", indent=1)
    runs.to_csv(paths[3], index=False)
    ax = wide["speedup"].loc[table["method"].unique()].plot.bar(figsize=(9, 4.5), rot=20)
    ax.axhline(1.0, color="gray", lw=0.8)
    ax.set_ylabel("speedup vs greedy (end to end)")
    ax.set_title(header.splitlines()[0].lstrip("# "))
    plt.tight_layout()
    plt.savefig(paths[4], dpi=120)
    plt.close()
    return paths



def length_mix(runs: "Any") -> str:
    """For each auto method and domain: how often each draft length was chosen (markdown lines; "t5":
    a tree of 5 drafts)."""
    if "drafted" not in runs:
        return ""
    lines = []
    for (method, domain), g in runs[runs["method"].str.contains(" auto")].groupby(["method", "domain"], sort=False):
        ks = [k for text in g["drafted"].fillna("") for k in str(text).split()]
        if ks:
            share = {k: ks.count(k) / len(ks) for k in sorted(set(ks), key=lambda k: (k[0] == "t", int(k.strip("t"))))}
            lines.append(f"- {method}, {domain}: " + ", ".join(f"{k}: {100 * v:.0f}%" for k, v in share.items()))
    return "\n".join(lines) + "\n" if lines else ""



def slot_lines(runs: "Any") -> str:
    """For each drafting method and domain: each slot's landed share and counts, summed over its prompts."""
    lines = [f"- {method}, {domain}: {shares_text(rows)}"
             for (method, domain), rows in by_method_and_domain(runs).items()]
    return "\n".join(lines) + "\n" if lines else ""


def header_of(what: str, settings: Mapping[str, Any] | None = None, **models: Any) -> str:
    """A results file's first lines: what ran, on which models (`target`, else `preset`, from the
    settings dict or keywords; other keys ignored, so a bench can pass all of its own), where and when."""
    s = {**(settings or {}), **models}
    return (f"# {s.get('target') or s.get('preset') or 'pocket'}: {what}\n{machine_line()}; BLAS {blas_info()}; "
            f"{time.strftime('%Y-%m-%d')}")
