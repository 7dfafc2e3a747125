"""`python -m spec bench curve`: what a verify of T drafts costs against one step.

Speculative decoding pays only if verifying T drafted tokens costs little more than one step. The
curve measures that: the target's forward time for T = 1, 2, 4, 8, 16 new tokens on a warm ~128-token
KV cache, plus plain greedy tok/s, once with MLX's stock BLAS and once with the optimized BLAS of
spec.cpu. BLAS is fixed when a process starts, so each configuration runs in its own child process
(`python -m spec bench curve --child ...`) and the parent joins the results.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import mlx.core as mx
import pandas as pd

from .. import cpu  # by module: tests stand in for its OpenBLAS finder
from ..errors import SpecError
from ..pocket import POCKET_NAME, pocket_target_dir
from ..report import machine_line, to_markdown
from ..target import load_target
from .head_to_head import print_cost_model

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
    target = load_target(model)
    curve = measure_curve(target, runs=runs, context=context)
    tok_s, tokens = measure_greedy(target, greedy_tokens)
    return {"blas": cpu.blas_info(), "curve_ms": {str(k): v for k, v in curve.items()}, "greedy_tok_s": tok_s,
            "greedy_tokens": tokens, "threads": os.environ.get("OPENBLAS_NUM_THREADS")}


# -- orchestration (parent process: no MLX work here) -------------------------------------------
def curve_configs(threads: Sequence[int] | None = None) -> list[tuple[str, dict[str, str]]]:
    """(label, environment) for the stock BLAS and for the optimized one (one per thread count)."""
    base = dict(os.environ)
    base[cpu.ENV_GUARD] = "1"  # children never re-exec themselves
    configs = [("stock", cpu.stock_env(base))]
    lib = cpu.find_openblas(os.environ.get("SPEC_ARENA_BLAS"))
    if lib is not None:
        for n in threads or [None]:
            env = cpu.stock_env(base)
            env.pop("SPEC_ARENA_BLAS", None)
            env = cpu.blas_env(env, lib, n)
            configs.append((f"openblas {env['OPENBLAS_NUM_THREADS']}t", env))
    return configs


def run_child(model: str, env: dict[str, str], runs: int, greedy_tokens: int, context: int) -> dict:
    """One configuration in a fresh interpreter (its BLAS is fixed by `env` at start)."""
    cmd = [sys.executable, "-m", "spec", "bench", "curve", "--child", "--target", model, "--runs", str(runs),
           "--greedy-tokens", str(greedy_tokens), "--context", str(context)]
    root = str(Path(__file__).resolve().parents[2])  # this checkout, installed or not
    env = {**env, "PYTHONPATH": os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)}
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(RESULT_TAG):
            return json.loads(line[len(RESULT_TAG):])
    tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
    raise RuntimeError(f"benchmark child failed (exit {proc.returncode}):\n{tail}")


def curve_table(results: list[tuple[str, dict]]) -> "Any":
    """One row per configuration: ms per forward with its ratio to T=1, greedy tok/s and speedup."""
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


def combine(runs: list[dict]) -> dict:
    """Join repeated child results of one configuration: per-point medians across rounds."""
    if len(runs) == 1:
        return runs[0]
    curve = {k: statistics.median(r["curve_ms"][k] for r in runs) for k in runs[0]["curve_ms"]}
    return {**runs[0], "curve_ms": curve, "greedy_tok_s": statistics.median(r["greedy_tok_s"] for r in runs)}


def run_curve(*, target: str | None = None, runs: int = 5, greedy_tokens: int = GREEDY_TOKENS,
              context: int = CONTEXT_TOKENS, threads: Sequence[int] | None = None, rounds: int = 1,
              child: bool = False) -> int:
    """Measure every configuration in its own child process and print one joined table (default: the
    pocket target, then its heads' cost models). child: measure `target` in this process only and print
    the tagged result (what run_child starts)."""
    if child:
        print(RESULT_TAG + json.dumps(curve_child(target, runs, greedy_tokens, context)), flush=True)
        return 0
    pocket = target is None
    model, name = (str(pocket_target_dir()), POCKET_NAME) if pocket else (target, target)
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
