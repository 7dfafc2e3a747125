"""`python -m spec bench ...`: one entry point for every benchmark (docs/benchmarks.md lists them).

The head to head (spec.head_to_head) by default; --curve (spec.curve_bench), --race-vs-solo, --prefill
and --sweep (spec.race_bench), --rollback (spec.rollback_bench), --noise (spec.noise_bench),
--calibration (spec.calibration_bench), --tree-estimate (spec.tree_estimate).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .curve import CONTEXT_TOKENS, GREEDY_TOKENS, RESULT_TAG, curve_child, run_curve
from .head_to_head import run_head_to_head
from .race import run_prefill, run_race_vs_solo, run_sweep


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
    h.add_argument("--methods", default="", metavar="WORDS",
                   help="only the rows whose name holds one of these comma-separated words (e.g. 'mlx-lm,auto'); "
                        "our greedy, the reference, always runs")
    h.add_argument("--vocab-ablation", action="store_true",
                   help="also run the full-block rows drafting over the whole vocabulary (the drafter cost it saves)")
    h.add_argument("--adapting", action="store_true",
                   help="also run auto as it was before issue 39, its choices following each generation's own round "
                        "times (rows 'auto, adapting'), beside today's auto (calibration and acceptance alone)")
    h.add_argument("--sweep", action="store_true",
                   help="instead: the app's domain sweep (one race per prompt: DSpark, DFlash, greedy)")
    h.add_argument("--race-vs-solo", action="store_true",
                   help="instead: each engine's decode tok/s alone and inside a race, same prompts, interleaved")
    h.add_argument("--rollback", action="store_true",
                   help="instead: what taking rejected drafts back costs per draft length, on dense, hybrid and MoE "
                        "random targets (or --model)")
    h.add_argument("--calibration", action="store_true",
                   help="instead: what a first start's calibration costs by part, and what fewer runs would change "
                        "(each head of --preset; $SPEC_ARENA_CALIBRATION_RUNS runs, default 11)")
    h.add_argument("--noise", action="store_true",
                   help="instead: the same races run --trials times; the speedup's run-to-run spread and the tie "
                        "floor the page uses (writes assets/bench/noise/ with --out assets/bench/noise)")
    h.add_argument("--tree-estimate", default=None, metavar="RUNS_CSV",
                   help="instead: what trees should add over chains here, by auto's arithmetic from this machine's "
                        "costs and the full-chain rows' acceptance in RUNS_CSV (e.g. assets/bench/trees/runs.csv)")
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
        from .rollback import run as run_rollback

        return run_rollback([args.model] if args.model else None, Path(args.out), args.runs)
    if args.sweep:
        return run_sweep(args)
    if args.calibration:
        from .calibration import run as run_calibration

        return run_calibration(args)
    if args.noise:
        from .noise import run as run_noise

        return run_noise(args)
    if args.tree_estimate:
        from .tree_estimate import run as run_tree_estimate

        return run_tree_estimate(args)
    if args.prefill:
        return run_prefill(args)
    return run_race_vs_solo(args) if args.race_vs_solo else run_head_to_head(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
