"""Each benchmark's flags (spec.bench.main builds one sub-command of each), and the old spellings.

A flag's dest is its benchmark's keyword: main hands the parsed flags over as they are, so the defaults
here match the functions' (tests/test_bench.py checks).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import Callable

from ..presets import add_model_flags
from .calibration import run_calibration
from .curve import CONTEXT_TOKENS, GREEDY_TOKENS, run_curve
from .head_to_head import run_head_to_head
from .noise import run_noise
from .race import run_prefill, run_race_vs_solo, run_sweep
from .rollback import run_rollback
from .tree_estimate import run_tree_estimate

DEFAULT = "head-to-head"  # what `python -m spec bench` runs with no benchmark named
TREE_CSV = "assets/bench/trees/runs.csv"  # the runs.csv the docs' tree estimate reads


# -- flag types ------------------------------------------------------------------------------------
def at_least(low: int) -> Callable[[str], int]:
    """An integer flag's type, refusing values below `low`."""
    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if n < low:
            raise argparse.ArgumentTypeError(f"must be >= {low}, got {n}")
        return n
    return parse


def words(text: str) -> list[str]:
    """'mlx-lm, auto' -> ['mlx-lm', 'auto']."""
    return [w.strip() for w in text.split(",") if w.strip()]


def thread_counts(text: str) -> list[int]:
    """'1,2' -> [1, 2] (each >= 1)."""
    return [at_least(1)(w) for w in words(text)]


class TargetFlag(argparse.Action):
    """--target; --model too, as the curve and rollback benches called it, with a note."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        if option_string == "--model":
            print("note: --model is deprecated, use --target", file=sys.stderr)
        setattr(namespace, self.dest, values)


# -- flags shared by several benchmarks --------------------------------------------------------------
def prompts(p: argparse.ArgumentParser, from_file: bool = True) -> None:
    if from_file:
        p.add_argument("--prompts", default=None, help="jsonl of {domain, prompt} (default: held-out prompts)")
    p.add_argument("--per-domain", type=at_least(1), default=3, help="held-out prompts per domain")


def generation(p: argparse.ArgumentParser, trials: bool = True, temperature: bool = False) -> None:
    if trials:
        p.add_argument("--trials", type=at_least(1), default=3, help="runs of each (median)")
    p.add_argument("--max-new-tokens", type=at_least(1), default=96)
    if temperature:
        p.add_argument("--temperature", type=float, default=0.0)


def out(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default="bench-results", help="folder for the table and its files")


# -- each benchmark's flags ------------------------------------------------------------------------
def head_to_head_flags(p: argparse.ArgumentParser) -> None:
    add_model_flags(p)
    prompts(p)
    generation(p, temperature=True)
    out(p)
    p.add_argument("--methods", dest="only", type=words, default=(), metavar="WORDS",
                   help="only the rows whose name holds one of these comma-separated words (e.g. 'mlx-lm,auto'); "
                        "our greedy, the reference, always runs")
    p.add_argument("--vocab-ablation", action="store_true",
                   help="also run the full-block rows drafting over the whole vocabulary (the drafter cost it saves)")
    p.add_argument("--adapting", action="store_true",
                   help="also run auto as it was before issue 39, its choices following each generation's own round "
                        "times (rows 'auto, adapting'), beside today's auto (calibration and acceptance alone)")
    p.set_defaults(_run=run_head_to_head)


def curve_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target", "--model", action=TargetFlag, default=None,
                   help="target: hub id or folder (default: the pocket target, then its heads' cost models); "
                        "--model: its old name")
    p.add_argument("--runs", type=at_least(1), default=5, help="timed runs per point (median)")
    p.add_argument("--greedy-tokens", type=at_least(2), default=GREEDY_TOKENS, help="tokens of the greedy decode")
    p.add_argument("--context", type=at_least(1), default=CONTEXT_TOKENS, help="tokens in the warm KV cache")
    p.add_argument("--threads", type=thread_counts, default=None, help="OpenBLAS thread counts to compare, e.g. 1,2")
    p.add_argument("--rounds", type=at_least(1), default=1,
                   help="repeat all configurations, interleaved (noisy machines)")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)  # one configuration, for the parent
    p.set_defaults(_run=run_curve)


def race_vs_solo_flags(p: argparse.ArgumentParser) -> None:
    add_model_flags(p)
    prompts(p)
    generation(p)
    out(p)
    p.set_defaults(_run=run_race_vs_solo)


def prefill_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tokens", type=at_least(1), default=1500, help="the prompt's length in tokens")
    add_model_flags(p)
    prompts(p)
    out(p)
    p.add_argument("--trials", type=at_least(1), default=3, help="races of each kind, interleaved (median)")
    p.set_defaults(_run=run_prefill)


def sweep_flags(p: argparse.ArgumentParser) -> None:
    add_model_flags(p)
    prompts(p)
    generation(p, trials=False, temperature=True)
    out(p)
    p.set_defaults(_run=run_sweep)


def rollback_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target", "--model", action=TargetFlag, default=None,
                   help="target: hub id or folder (default: random dense, hybrid and MoE targets of published "
                        "configs); --model: its old name")
    p.add_argument("--runs", type=at_least(1), default=5, help="timed runs per point (median)")
    out(p)
    p.set_defaults(_run=run_rollback)


def noise_flags(p: argparse.ArgumentParser) -> None:
    add_model_flags(p)
    prompts(p, from_file=False)
    generation(p)
    out(p)
    p.set_defaults(_run=run_noise)


def calibration_flags(p: argparse.ArgumentParser) -> None:
    add_model_flags(p)
    out(p)
    p.set_defaults(_run=run_calibration)


def tree_estimate_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("runs_csv", nargs="?", default=None, metavar="RUNS_CSV",
                   help=f"a head-to-head run's runs.csv with its full-chain rows, e.g. {TREE_CSV}")
    add_model_flags(p)
    p.set_defaults(_run=run_tree_estimate)


# name -> (its one line in `python -m spec bench --help`, its flags)
COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None]]] = {
    "head-to-head": ("greedy, mlx-lm, both heads at fixed caps, trees and auto, per domain (the default)",
                     head_to_head_flags),
    "curve": ("the target's forward cost for 1..16 new tokens, stock vs optimized BLAS", curve_flags),
    "race-vs-solo": ("each engine's decode tok/s alone and inside a race, same prompts, interleaved",
                     race_vs_solo_flags),
    "prefill": ("a race on a long prompt with the prefill shared vs one per engine", prefill_flags),
    "sweep": ("the app's domain sweep: one race per prompt (DSpark, DFlash, greedy)", sweep_flags),
    "rollback": ("what taking rejected drafts back costs per draft length, dense, hybrid and MoE", rollback_flags),
    "noise": ("the same races run again: the speedup's run-to-run spread and the page's tie floor", noise_flags),
    "calibration": ("what a first start's calibration costs by part, and what fewer runs would change",
                    calibration_flags),
    "tree-estimate": ("what trees should add over chains here, by auto's arithmetic, from a run's runs.csv",
                      tree_estimate_flags),
}


# -- the old spellings -------------------------------------------------------------------------------
# the flags that picked a benchmark before the sub-commands, in the order the old parser tried them
OLD = {"--curve": "curve", "--rollback": "rollback", "--sweep": "sweep", "--calibration": "calibration",
       "--noise": "noise", "--tree-estimate": "tree-estimate", "--prefill": "prefill", "--race-vs-solo": "race-vs-solo"}
WITH_VALUE = {"--tree-estimate", "--prefill"}


def pull(argv: list[str], flag: str) -> tuple[list[str], str | None] | None:
    """argv without `flag` (and its value, for the flags that took one), and that value; None: not there."""
    for i, a in enumerate(argv):
        if flag in WITH_VALUE and a.startswith(flag + "="):
            return argv[:i] + argv[i + 1:], a.split("=", 1)[1]
        if a == flag:
            if flag in WITH_VALUE and i + 1 < len(argv) and not argv[i + 1].startswith("-"):
                return argv[:i] + argv[i + 2:], argv[i + 1]
            return argv[:i] + argv[i + 1:], None
    return None


def modern(argv: list[str]) -> list[str]:
    """argv with a sub-command first: the head to head when none is named (as before); an old selector
    flag becomes its sub-command, said in one note on stderr."""
    if argv and (argv[0] in COMMANDS or argv[0] in ("-h", "--help")):
        return argv
    for flag, command in OLD.items():
        found = pull(argv, flag)
        if found is None:
            continue
        rest, value = found
        if flag == "--prefill" and value == "0":  # was: no prefill bench
            argv = rest
            continue
        if command in ("curve", "rollback"):  # their --model is --target now
            rest = [("--target" + a[7:]) if a == "--model" or a.startswith("--model=") else a for a in rest]
        head = [command] + ([value] if value and command == "tree-estimate" else []) \
            + (["--tokens", value] if value and command == "prefill" else [])
        print(f"note: {flag} is deprecated, use: python -m spec bench {shlex.join(head + rest)}", file=sys.stderr)
        return head + rest
    return [DEFAULT, *argv]
