"""Benchmarks: `python -m spec bench` (head to head) and `python -m spec bench --curve`.

Head to head: greedy (ours and mlx-lm's), DSpark caps 2 / 4 / full and DFlash caps 2 / full over the
held-out prompts of each domain, after a warm-up, several trials each (median tok/s); the table
"method x domain: accept / tok/s / speedup" as markdown, CSV, JSON and a PNG plot. At T = 0 every
row's tokens must equal the greedy baseline's, or the run fails.

Speculative decoding pays only if verifying T drafted tokens costs little more than one step.
The curve measures that: the target's forward time for T = 1, 2, 4, 8, 16 new tokens on a warm
~128-token KV cache, plus plain greedy tok/s, once with MLX's stock BLAS and once with the
optimized BLAS of spec.cpu. BLAS is fixed when a process starts, so each configuration runs in its
own child process (`python -m spec.bench --child ...`) and the parent joins the results.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from .sweep import grid, summarise
from .target import SpecError

CURVE_TS = (1, 2, 4, 8, 16)
CONTEXT_TOKENS = 128
GREEDY_TOKENS = 48
RESULT_TAG = "SPEC_BENCH_RESULT "

_CONTEXT_TEXT = (
    "The old lighthouse stood at the edge of the cliff, its white paint peeling after decades of salt "
    "and wind. Every evening the keeper climbed the spiral stairs, trimmed the wick and watched the beam "
    "sweep across the water. Ships passed far out at sea, and most of their crews never thought about "
    "the small light that kept them off the rocks. In the village below, children told stories about "
    "the keeper: that he talked to the gulls, that he had once been a sailor himself, that he kept a "
    "chest of foreign coins under his bed. None of it was true, but he liked the stories and never "
    "corrected them. When the storm of that winter came, the power failed across the whole coast, and "
    "for three nights the lighthouse was the only light anyone could see. "
)
_GREEDY_PROMPT = "Write a short story about a robot who learns to paint."


# -- measurements (run inside one process, on whatever BLAS it has) ------------------------------
def _context_ids(tokenizer: Any, n: int) -> list[int]:
    ids = list(tokenizer.encode(_CONTEXT_TEXT))
    while len(ids) < n + max(CURVE_TS):
        ids += ids
    return ids


def measure_curve(
    target: Any, ts: Sequence[int] = CURVE_TS, runs: int = 5, context: int = CONTEXT_TOKENS
) -> dict[int, float]:
    """Median ms of one forward of T new tokens on a warm `context`-token cache, for each T."""
    import mlx.core as mx

    ids = _context_ids(target.tokenizer, context)
    cache = target.make_cache()
    logits, _ = target(mx.array([ids[:context]]), cache)
    mx.eval(logits)
    out: dict[int, float] = {}
    for t in ts:
        new = mx.array([ids[context : context + t]])
        times = []
        for i in range(runs + 2):  # two warm-up runs per T
            start = time.perf_counter()
            logits, _ = target(new, cache)
            mx.eval(logits)
            elapsed = time.perf_counter() - start
            target.trim(cache, t)
            if i >= 2:
                times.append(elapsed * 1000)
        out[t] = statistics.median(times)
    return out


def measure_greedy(target: Any, n_tokens: int = GREEDY_TOKENS, prompt: str = _GREEDY_PROMPT) -> tuple[float, list[int]]:
    """Decode-only greedy tok/s (prefill excluded) over a fixed token count, and the tokens."""
    import mlx.core as mx

    cache = target.make_cache()
    logits, _ = target(mx.array([target.encode_chat(prompt)]), cache)
    tok = mx.argmax(logits[:, -1, :], axis=-1)
    mx.eval(tok)
    tokens = [int(tok.item())]
    start = time.perf_counter()
    for _ in range(n_tokens - 1):  # fixed count, eos ignored: we time steps, not text
        logits, _ = target(tok[:, None], cache)
        tok = mx.argmax(logits[:, -1, :], axis=-1)
        mx.eval(tok)
        tokens.append(int(tok.item()))
    elapsed = time.perf_counter() - start
    return (n_tokens - 1) / elapsed, tokens


def curve_child(model: str, runs: int, greedy_tokens: int, context: int) -> dict:
    """One configuration's whole measurement (in the current process's BLAS)."""
    from spec.cpu import blas_info
    from spec.target import load_target

    target = load_target(model)
    curve = measure_curve(target, runs=runs, context=context)
    tok_s, tokens = measure_greedy(target, greedy_tokens)
    return {"blas": blas_info(), "curve_ms": {str(k): v for k, v in curve.items()}, "greedy_tok_s": tok_s,
            "greedy_tokens": tokens, "threads": os.environ.get("OPENBLAS_NUM_THREADS")}


# -- orchestration (parent process: no MLX work here) -------------------------------------------
def curve_configs(threads: Sequence[int] | None = None) -> list[tuple[str, dict[str, str]]]:
    """(label, environment) for the stock BLAS and for the optimized one (one per thread count)."""
    from spec.cpu import ENV_GUARD, blas_env, find_openblas, stock_env

    base = dict(os.environ)
    base[ENV_GUARD] = "1"  # children never re-exec themselves
    configs = [("stock", stock_env(base))]
    lib = find_openblas(os.environ.get("SPEC_ARENA_BLAS"))
    if lib is not None:
        for n in threads or [None]:
            env = stock_env(base)
            env.pop("SPEC_ARENA_BLAS", None)
            env = blas_env(env, lib, n)
            configs.append((f"openblas {env['OPENBLAS_NUM_THREADS']}t", env))
    return configs


def run_child(model: str, env: dict[str, str], runs: int, greedy_tokens: int, context: int) -> dict:
    """One configuration in a fresh interpreter (its BLAS is fixed by `env` at start)."""
    cmd = [sys.executable, "-m", "spec.bench", "--child", "--model", model, "--runs", str(runs),
           "--greedy-tokens", str(greedy_tokens), "--context", str(context)]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # this checkout, installed or not
    env = {**env, "PYTHONPATH": os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)}
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(RESULT_TAG):
            return json.loads(line[len(RESULT_TAG):])
    tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
    raise RuntimeError(f"benchmark child failed (exit {proc.returncode}):\n{tail}")


def curve_table(results: list[tuple[str, dict]]) -> "Any":
    """One row per configuration: ms per forward with its ratio to T=1, greedy tok/s and speedup."""
    import pandas as pd

    stock = next((r for label, r in results if label == "stock"), None)
    rows = []
    for label, r in results:
        ms = {int(k): v for k, v in r["curve_ms"].items()}
        row: dict[str, Any] = {"config": label}
        for t in CURVE_TS:
            if t in ms:
                row[f"T={t} ms"] = f"{ms[t]:.1f} ({ms[t] / ms[1]:.2f}x)"
        row["T16/T1"] = f"{ms[16] / ms[1]:.2f}" if 16 in ms else ""
        row["greedy tok/s"] = f"{r['greedy_tok_s']:.1f}"
        row["vs stock"] = f"{r['greedy_tok_s'] / stock['greedy_tok_s']:.2f}x" if stock else ""
        rows.append(row)
    return pd.DataFrame(rows)


def to_markdown(df: Any) -> str:
    """GitHub markdown table (pandas' to_markdown needs `tabulate`, which we do not depend on)."""
    cols = [str(c) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines)


def machine_line() -> str:
    from .cpu import cpu_name

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


def combine(runs: list[dict]) -> dict:
    """Join repeated child results of one configuration: per-point medians across rounds."""
    if len(runs) == 1:
        return runs[0]
    curve = {k: statistics.median(r["curve_ms"][k] for r in runs) for k in runs[0]["curve_ms"]}
    return {**runs[0], "curve_ms": curve, "greedy_tok_s": statistics.median(r["greedy_tok_s"] for r in runs)}


def run_curve(model: str | None, runs: int, greedy_tokens: int, context: int,
              threads: Sequence[int] | None = None, rounds: int = 1) -> int:
    """Measure every configuration in its own child process and print one joined table."""
    from spec.target import SpecError

    pocket = model is None
    if pocket:
        from spec.pocket import POCKET_NAME, pocket_target_dir

        model, name = str(pocket_target_dir()), POCKET_NAME
    else:
        name = model
    print(f"verify-cost curve: {name}, warm {context}-token cache, median of {runs} runs"
          f"{f' x {rounds} interleaved rounds' if rounds > 1 else ''}; greedy = {greedy_tokens} tokens decode-only",
          flush=True)
    print(f"machine: {machine_line()}", flush=True)
    configs = curve_configs(threads)
    collected: dict[str, list[dict]] = {label: [] for label, _ in configs}
    for i in range(rounds):  # interleaved, so every configuration sees the same background load
        for label, env in configs:
            print(f"  measuring {label}{f' (round {i + 1}/{rounds})' if rounds > 1 else ''} ...", flush=True)
            try:
                collected[label].append(run_child(model, env, runs, greedy_tokens, context))
            except RuntimeError as e:
                raise SpecError(str(e)) from e
    results = [(label, combine(collected[label])) for label, _ in configs]
    print()
    print(to_markdown(curve_table(results)))
    print()
    for label, r in results:
        print(f"  {label}: {r['blas']}")
    ref = results[0][1]["greedy_tokens"]
    same = all(r["greedy_tokens"] == ref for rs in collected.values() for r in rs)
    print(f"  greedy tokens identical across configurations: {'yes' if same else 'NO'}")
    if len(results) == 1:
        print("  (no OpenBLAS found: apt-get install libopenblas0-pthread)")
    if pocket:
        print_cost_model()
    return 0


def print_cost_model(preset: str = "pocket") -> None:
    """The draft-length chooser's cost model of each head (spec.autodraft: measured once per machine and
    cached), in this process's BLAS: what `auto` weighs every round."""
    import pandas as pd

    from .autodraft import cached_costs
    from .race import load_preset_arena

    arena = load_preset_arena(preset)
    try:
        for kind, head in arena.heads.items():
            c = arena.call(lambda h=head: cached_costs(arena.target, h))
            print(f"\nauto's cost model, {kind} head ({preset}): ms per round verifying k drafts")
            rows = [{"k": k, "verify (k+1 rows) ms": round(c.verify[k], 2), "draft ms": round(c.draft[k], 2),
                     "round ms": round(c.verify[k] + c.draft[k], 2),
                     "prior a_k": round(c.prior[k - 1], 2) if k else "-"} for k in range(c.max_k + 1)]
            print(to_markdown(pd.DataFrame(rows)))
    finally:
        arena.close()


# -- head to head -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Method:
    name: str
    kind: str  # "greedy" | "mlx-lm" | "dspark" | "dflash"
    cap: int | str = 0  # drafts verified per round; 0 = the head's whole block; "auto": chosen every round
    whole_vocab: bool = False  # ignore the head's draft vocabulary (spec.vocab): the cost it saves


def methods(heads: dict, vocab_ablation: bool = False) -> list[Method]:
    """The original release's rows: greedy, mlx-lm, DSpark caps 2 / 4 / full, DFlash caps 2 / full;
    vocab_ablation adds the full caps drafting over the whole vocabulary (heads with a draft vocabulary)."""
    out = [Method("greedy (ours)", "greedy"), Method("greedy (mlx-lm)", "mlx-lm")]
    for kind, label, caps in (("dspark", "DSpark", (2, 4)), ("dflash", "DFlash", (2,))):
        if kind not in heads:
            continue
        full = heads[kind].max_drafts
        out += [Method(f"{label} cap {c}", kind, c) for c in caps if c < full]
        out.append(Method(f"{label} full ({full})", kind, full))
        if vocab_ablation and heads[kind].draft_vocab is not None:
            out.append(Method(f"{label} full, whole vocab", kind, full, whole_vocab=True))
        out.append(Method(f"{label} auto", kind, "auto"))
    return out


def mlx_lm_greedy(target: Any, prompt_ids: list[int], max_new_tokens: int) -> tuple[list[int], float, float]:
    """mlx-lm's own stream_generate (greedy): (token ids, end-to-end tok/s, decode tok/s), both from the
    rates it reports (its prompt rate gives the prefill's seconds)."""
    from mlx_lm.generate import stream_generate

    ids, r = [], None
    for r in stream_generate(target.model, target.tokenizer, prompt_ids, max_tokens=max_new_tokens):
        ids.append(r.token)
    if r is None or r.generation_tps <= 0:
        return ids, 0.0, 0.0
    seconds = r.prompt_tokens / r.prompt_tps + r.generation_tokens / r.generation_tps
    return ids, r.generation_tokens / seconds, r.generation_tps


def run_method(target: Any, heads: dict, m: Method, prompt_ids: list[int], max_new_tokens: int,
               sampling: Any, profile: bool = False) -> dict:
    """One generation: tokens, accept lengths, decode seconds (and the drafter's share if profiled)."""
    from .engine import Engine

    if m.kind == "mlx-lm":
        ids, tps, decode_tps = mlx_lm_greedy(target, prompt_ids, max_new_tokens)
        ids = ids[: next((i + 1 for i, t in enumerate(ids) if t in target.eos_ids), len(ids))]
        return {"ids": ids, "tok_s": tps, "decode_tok_s": decode_tps, "accept": [], "draft_s": 0.0, "decode_s": 0.0}
    head = heads.get(m.kind)
    eng = Engine(target, head, max_draft=m.cap, sampling=sampling, name=m.name, profile=profile)
    vocab = head.draft_vocab if head is not None else None
    if m.whole_vocab:
        head.draft_vocab = None
    try:
        r = eng.generate(prompt_ids, max_new_tokens)
    finally:
        if head is not None:
            head.draft_vocab = vocab
    return {"ids": r.token_ids, "tok_s": r.tokens_per_sec, "decode_tok_s": r.decode_tokens_per_sec,
            "accept": r.accept_lengths,
            "draft_s": r.draft_seconds, "decode_s": r.decode_seconds, "drafted": r.drafted}


def head_to_head(target: Any, heads: dict, prompts: list[dict], *, trials: int = 3, max_new_tokens: int = 96,
                 temperature: float = 0.0, seed: int = 0, progress: bool = True,
                 vocab_ablation: bool = False) -> "Any":
    """Every method on every prompt, `trials` times (median tok/s), after a warm-up. The trials take
    turns (every method once, then again): a machine whose speed drifts slows all of them alike.

    At T = 0 every method's tokens must equal our greedy baseline's: a mismatch raises."""
    import pandas as pd
    from tqdm import tqdm

    from .verify import Sampling

    sampling = Sampling(temperature, seed=seed)
    ms = methods(heads, vocab_ablation)
    encoded = [(p["domain"], target.encode_chat(p["prompt"])) for p in prompts]
    for m in ms:  # warm-up: compile paths, fill allocator caches
        run_method(target, heads, m, encoded[0][1], 16, sampling)
    rows = []
    bar = tqdm(total=len(encoded) * len(ms), desc="bench", unit="run", disable=not progress)
    for pi, (domain, ids) in enumerate(encoded):
        reference = None
        trial_runs = [[run_method(target, heads, m, ids, max_new_tokens, sampling) for m in ms] for _ in range(trials)]
        for mi, m in enumerate(ms):
            runs = [t[mi] for t in trial_runs]
            prof = run_method(target, heads, m, ids, max_new_tokens, sampling, profile=True) \
                if m.kind in ("dspark", "dflash") else runs[0]
            out = runs[0]["ids"]
            if m.kind == "greedy":
                reference = out
            elif temperature == 0 and reference is not None and out != reference:
                where = next((i for i, (a, b) in enumerate(zip(out, reference)) if a != b), min(len(out), len(reference)))
                raise SpecError(f"{m.name} differs from greedy on prompt {pi} ({domain}) at token {where}")
            verify_s = prof["decode_s"] - prof["draft_s"]
            trial_tok_s = [r["tok_s"] for r in runs]
            rows.append({
                "domain": domain, "method": m.name, "prompt": pi, "tokens": len(out),
                "rounds": len(runs[0]["accept"]), "committed": sum(runs[0]["accept"]),
                "tok_s": float(np.median(trial_tok_s)),
                "decode_tok_s": float(np.median([r["decode_tok_s"] for r in runs])),
                "tok_s_trials": " ".join(f"{x:.2f}" for x in trial_tok_s),
                "spread": spread(trial_tok_s),
                "draft_ms_per_round": 1000 * prof["draft_s"] / max(1, len(prof["accept"])),
                "draft_share": prof["draft_s"] / verify_s if prof["draft_s"] and verify_s > 0 else 0.0,
                "drafted": " ".join(map(str, runs[0].get("drafted", []))),
            })
            bar.update(1)
    bar.close()
    return pd.DataFrame(rows)


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
    """For each auto method and domain: how often each draft length was chosen (markdown lines)."""
    if "drafted" not in runs:
        return ""
    lines = []
    for (method, domain), g in runs[runs["method"].str.endswith(" auto")].groupby(["method", "domain"], sort=False):
        ks = [int(k) for text in g["drafted"].fillna("") for k in str(text).split()]
        if ks:
            share = {k: ks.count(k) / len(ks) for k in sorted(set(ks))}
            lines.append(f"- {method}, {domain}: " + ", ".join(f"{k}: {100 * v:.0f}%" for k, v in share.items()))
    return "\n".join(lines) + "\n" if lines else ""


def default_prompts(per_domain: int) -> list[dict]:
    """The held-out demo prompts (assets/prompts), then more held-out prompts from spec.prompts."""
    from .prompts import build_sets, load_prompts

    assets = Path(__file__).resolve().parent.parent / "assets" / "prompts"
    out = []
    for domain in ("chat", "code", "math"):
        pool = load_prompts(assets / f"{domain}.jsonl") if (assets / f"{domain}.jsonl").exists() else []
        pool += [p for p in build_sets(1, seed=0)[domain]["heldout"] if p["prompt"] not in {q["prompt"] for q in pool}]
        out += pool[:per_domain]
    return out


def race_vs_solo(target: Any, heads: dict, prompts: list[dict], *, trials: int = 3,
                 max_new_tokens: int = 96) -> "Any":
    """Each engine's decode tok/s alone and inside a race on the same prompt, interleaved per trial:
    a fair race bills every lane only for its own work, so the two agree within noise."""
    import pandas as pd

    from .engine import Engine
    from .race import RaceSettings, run_race

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

    from .race import RaceSettings, run_race

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


def on_arena(a: argparse.Namespace, work: Any) -> tuple[list[dict], Any]:
    """The prompts (--prompts, or the held-out ones) and work(arena, prompts) on the arena of --preset or
    the given target and heads, closed afterwards."""
    from .prompts import load_prompts
    from .race import load_preset_arena

    prompts = load_prompts(Path(a.prompts)) if a.prompts else default_prompts(a.per_domain)
    arena = load_preset_arena(a.preset, a.target, a.dspark, a.dflash)
    try:
        return prompts, work(arena, prompts)
    finally:
        arena.close()


def header_of(a: argparse.Namespace, what: str) -> str:
    """A results file's first lines: what ran, on which models, where and when."""
    from .cpu import blas_info

    return (f"# {a.preset if not a.target else a.target}: {what}\n{machine_line()}; BLAS {blas_info()}; "
            f"{time.strftime('%Y-%m-%d')}")


def run_sweep(a: argparse.Namespace) -> int:
    """The app's domain sweep from the command line: one race per prompt, the same table and files."""
    from .race import RaceSettings
    from .sweep import sweep

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
    header = header_of(a, f"race vs solo, {len(prompts)} prompts, {a.trials} trials, {a.max_new_tokens} new tokens, T=0")
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


def run_head_to_head(a: argparse.Namespace) -> int:
    prompts, runs = on_arena(a, lambda arena, prompts: arena.call(lambda: head_to_head(
        arena.target, arena.heads, prompts, trials=a.trials, max_new_tokens=a.max_new_tokens,
        temperature=a.temperature, vocab_ablation=a.vocab_ablation)))
    header = header_of(a, f"{len(prompts)} prompts, {a.trials} trials, {a.max_new_tokens} new tokens, "
                          f"T={a.temperature}")
    paths = write_outputs(runs, summarise(runs), Path(a.out), header)
    print(paths[0].read_text())
    print("written: " + ", ".join(str(p) for p in paths))
    return 0


def main(argv: list[str]) -> int:
    """`python -m spec bench ...`; returns the exit status."""
    p = argparse.ArgumentParser(prog="python -m spec bench", description=__doc__.splitlines()[0])
    p.add_argument("--curve", action="store_true", help="forward cost for 1..16 new tokens, stock vs optimized BLAS")
    p.add_argument("--model", default=None, help="model folder or hub id (default: the pocket target)")
    p.add_argument("--runs", type=int, default=5, help="timed runs per point (median)")
    p.add_argument("--greedy-tokens", type=int, default=GREEDY_TOKENS)
    p.add_argument("--context", type=int, default=CONTEXT_TOKENS, help="tokens in the warm KV cache")
    p.add_argument("--threads", default=None, help="OpenBLAS thread counts to compare, e.g. 1,2")
    p.add_argument("--rounds", type=int, default=1, help="repeat all configurations, interleaved (noisy machines)")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    h = p.add_argument_group("head to head (the default)")
    h.add_argument("--preset", default="pocket")
    h.add_argument("--target", default=None, help="target folder or hub id (overrides the preset)")
    h.add_argument("--dspark", default=None)
    h.add_argument("--dflash", default=None)
    h.add_argument("--prompts", default=None, help="jsonl of {domain, prompt} (default: held-out prompts)")
    h.add_argument("--per-domain", type=int, default=3)
    h.add_argument("--trials", type=int, default=3)
    h.add_argument("--max-new-tokens", type=int, default=96)
    h.add_argument("--temperature", type=float, default=0.0)
    h.add_argument("--out", default="bench-results")
    h.add_argument("--vocab-ablation", action="store_true",
                   help="also run the full-block rows drafting over the whole vocabulary (the drafter cost it saves)")
    h.add_argument("--sweep", action="store_true",
                   help="instead: the app's domain sweep (one race per prompt: DSpark, DFlash, greedy)")
    h.add_argument("--race-vs-solo", action="store_true",
                   help="instead: each engine's decode tok/s alone and inside a race, same prompts, interleaved")
    h.add_argument("--rollback", action="store_true",
                   help="instead: what taking rejected drafts back costs per draft length, on dense, hybrid and MoE "
                        "random targets (or --model)")
    h.add_argument("--noise", action="store_true",
                   help="instead: the same races run --trials times; the speedup's run-to-run spread and the tie "
                        "floor the page uses (writes assets/bench/noise/ with --out assets/bench/noise)")
    h.add_argument("--prefill", type=int, default=0, metavar="TOKENS",
                   help="instead: a race on a TOKENS-long prompt with the prefill shared vs one per engine")
    args = p.parse_args(argv)
    if args.runs < 1 or args.greedy_tokens < 2 or args.context < 1 or args.rounds < 1:
        p.error("--runs and --rounds must be >= 1, --greedy-tokens >= 2, --context >= 1")
    if args.child:
        result = curve_child(args.model, args.runs, args.greedy_tokens, args.context)
        print(RESULT_TAG + json.dumps(result), flush=True)
        return 0
    if args.curve:
        try:
            threads = [int(x) for x in args.threads.split(",")] if args.threads else None
        except ValueError:
            p.error(f"--threads expects comma-separated integers, got {args.threads!r}")
        if threads and min(threads) < 1:
            p.error("--threads: counts must be >= 1")
        return run_curve(args.model, args.runs, args.greedy_tokens, args.context, threads, args.rounds)
    if args.rollback:
        from .rollback_bench import run as run_rollback

        return run_rollback([args.model] if args.model else None, Path(args.out), args.runs)
    if args.sweep:
        return run_sweep(args)
    if args.noise:
        from .noise_bench import run as run_noise

        return run_noise(args)
    if args.prefill:
        return run_prefill(args)
    return run_race_vs_solo(args) if args.race_vs_solo else run_head_to_head(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
