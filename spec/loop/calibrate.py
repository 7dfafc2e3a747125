"""The measured costs that `auto` weighs (spec.loop.autodraft), once per target, head, machine, MLX and BLAS.

Measuring builds Engines; an Engine takes its costs: so this module sits above both, and callers that
run "auto" resolve the costs here first (`costs_for`).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import statistics
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable

import mlx.core as mx

from ..atomic import write_json
from ..cpu import blas_info, cpu_name
from ..pocket import cache_root
from ..progress import Progress, quiet
from .autodraft import RANKS, Acceptance, Costs
from .engine import Engine, draft_length
from .results import Round
from .verify import Sampling

HEAD_NAMES = {"dspark": "DSpark", "dflash": "DFlash", "lookup": "prompt lookup"}
# one per domain: a prior from one domain (code) was far too hopeful for chat
CALIBRATION_PROMPTS = ("Explain why the sky is blue to a ten-year-old.",
                       "Write a Python function that returns the n-th Fibonacci number, then explain it.",
                       "A train travels 180 km in 2.5 hours. What is its average speed? Show the steps.")
VERSION = 8  # bump when what calibrate() measures changes
LOOP_DRAFTS = 3  # the chain length whose rounds in real generations measure the loop's own cost (loop_ms)



def ms_of(fn: Any) -> float:
    """Milliseconds that fn() takes."""
    tic = time.perf_counter()
    fn()
    return 1000 * (time.perf_counter() - tic)


def calibrate(target: Any, head: Any, runs: int = 11, context: int = 64,
              progress: Callable[[float], None] = lambda f: None) -> Costs:
    """Measure the costs on a warm cache of `context` tokens and the acceptance prior (seconds).

    A drafting round is timed as the loop runs it, the head's drafts and their verify in one
    evaluation (timed apart, each with its own sync, they cost ~8% more); verify[k] is that round less
    the drafting alone. The machine's speed drifts while it measures, and what the chooser needs is the
    ratio of one cost to another: so every run times a bare 1-row forward, each drafting round, each
    draft length and a few pipelined plain steps in turn (the first run warms up), and each cost is the
    median of its runs. Eleven of them: with five, a drafting round's cost over a plain step moved 4-5%
    from one calibration to the next on pocket, and the result is kept: one that put DFlash's rounds of
    1 and 2 drafts 5% too dear left a math prompt parked for a day where cap 2 gains 7-12%.

    Last, what a round costs in a real generation beyond those parts (loop_extras): auto weighs it with
    them, and never its own generation's timings (spec.loop.autodraft), so a race repeats round for round."""
    n = len(CALIBRATION_PROMPTS)
    steps = runs + 1 + 2 * n  # the runs (one warms up), the prior's generations, the loop's
    runs_ms = timed_runs(target, head, runs, context, lambda i: progress((i + 1) / steps))
    rounds: list[Round] = []
    prior, second = acceptance_prior(target, head, lambda i: progress((runs + 2 + i) / steps), rounds.append)
    costs = costs_of(runs_ms, head.max_drafts, prior, second)
    for i, prompt in enumerate(CALIBRATION_PROMPTS):
        Engine(target, head, max_draft=min(LOOP_DRAFTS, head.max_drafts)).generate(prompt, 24, on_round=rounds.append)
        progress((runs + 2 + n + i) / steps)
    costs.loop_ms, costs.tree_loop_ms = loop_extras(costs, rounds)
    return costs


def loop_extras(costs: Costs, rounds: list[Round]) -> tuple[float, float]:
    """The median time a drafting round of a real generation took beyond its calibrated forward and
    drafting (and a tree's extra), chains and trees apart (a tree's: the chains' where there was none). It
    may be below 0: on a 2-core Xeon a pocket round of 3 drafts took 5-7 ms (4%) less in the loop than the
    calibration's bare one. A generation's prefill and first round (the head takes in the whole prompt)
    are left out."""
    extra: dict[bool, list[float]] = {False: [], True: []}
    for r in rounds:
        if r.index >= 2 and r.drafted:
            calibrated = costs.verify[r.drafted] + costs.draft[r.drafted] + (costs.tree_ms if r.is_tree else 0.0)
            extra[r.is_tree].append(1000 * r.seconds - calibrated)
    chain = statistics.median(extra[False]) if extra[False] else 0.0
    return chain, statistics.median(extra[True]) if extra[True] else chain


class WarmPair:
    """A target and a head with a calibration prompt's first `context` tokens in their caches, and the
    rounds that are timed on them: each leaves both caches as it found them."""

    def __init__(self, target: Any, head: Any, context: int = 64):
        self.target, self.head, self.context = target, head, context
        self.layers = head.config.target_layer_ids
        ids = [int(i) % target.vocab_size for i in target.encode_chat(CALIBRATION_PROMPTS[1])]
        # the prompt's start, repeated every half context: a drafter that copies from the text (lookup) finds
        # its next block there, as it must to be timed on k drafts; what the tokens say costs a head nothing
        period = ids[: max(context // 2, head.max_drafts + 1)]
        self.ids = (period * (2 * context // len(period) + 2))[: context + head.max_drafts + 1]
        self.anchor = self.ids[context]
        self.cache = target.make_cache()
        _, taps = target(mx.array([self.ids[:context]]), self.cache, self.layers)
        mx.eval(taps)
        self.dcache = head.make_cache()
        head.see(self.dcache, self.ids[: context + 1])  # a drafter that reads tokens (lookup) sees the context too
        mx.eval(head.propose(self.dcache, taps, self.anchor, 1, Sampling(), None)[0])  # context into the head's cache

    def forward(self) -> None:
        """A bare one-row target forward."""
        mx.eval(self.target(mx.array([[self.anchor]]), self.cache, self.layers)[0])
        self.target.trim(self.cache, 1)

    def draft(self, k: int) -> mx.array:
        """k drafts (lazy)."""
        return self.head.propose(self.dcache, None, self.anchor, k, Sampling(), None)[0]

    def chain_round(self, k: int, sync: bool = False) -> None:
        """A round verifying k drafts as the loop runs it: drafts and verify one evaluation (`sync`: the
        drafts read to the host first, as a tree's must be)."""
        d = self.draft(k)
        if sync:
            mx.eval(d)
        mx.eval(self.target(mx.concatenate([mx.array([self.anchor], dtype=d.dtype), d])[None], self.cache,
                            self.layers)[0])
        self.target.trim(self.cache, k + 1)

    def tree_round(self) -> None:
        """A round verifying a tree of the head's whole block of drafts."""
        K = self.head.max_drafts
        tree = self.head.propose_tree(self.dcache, None, self.anchor, K, K, Sampling(), None)
        mx.eval(self.target(mx.array([[self.anchor] + tree.token_list()]), self.cache, self.layers, tree=tree)[0])
        self.target.keep(self.cache, [], K + 1)  # every row back out (recurrent layers: out of every path)


def timed_runs(target: Any, head: Any, runs: int = 11, context: int = 64,
               done: Callable[[int], None] = lambda i: None) -> list[list[float]]:
    """`runs` runs (after one that warms up), each: a bare forward, drafting rounds 1..K, drafts 1..K, a
    pipelined plain step and, where the target can branch, a round verifying a tree of K drafts, in ms
    (spec.bench.calibration reads them raw)."""
    K, branches = head.max_drafts, target.check_trees() == ""
    pair = WarmPair(target, head, context)

    def plain_step() -> float:  # a parked round runs pipelined, like plain decoding: its steady rounds (the
        rounds = list(Engine(target).start(pair.ids[:context], 10))  # prefill, the pipeline's first and last left out)
        return 1000 * statistics.median(r.seconds for r in rounds[2:-1])

    def one_run() -> list[float]:  # a bare forward, rounds 1..K, drafts 1..K, a plain step, a tree round
        return ([ms_of(pair.forward)] + [ms_of(lambda k=k: pair.chain_round(k)) for k in range(1, K + 1)]
                + [ms_of(lambda k=k: mx.eval(pair.draft(k))) for k in range(1, K + 1)] + [plain_step()]
                + ([ms_of(pair.tree_round)] if branches else []))

    runs_ms = []
    for i in range(runs + 1):
        runs_ms.append(one_run())
        done(i)
    return runs_ms[1:]  # the first one warms up


def costs_of(runs_ms: list[list[float]], K: int, prior: list[float], second: list[float] = ()) -> Costs:
    """Each cost the median of its runs; verify[k] a drafting round less its drafting alone; a tree
    round's cost beyond the chain round of as many drafts (never below 0: noise)."""
    med = [statistics.median(column) for column in zip(*runs_ms)]
    drafts = [0.0] + med[K + 1 : 2 * K + 1]
    verify = [m - d for m, d in zip(med[: K + 1], drafts)]
    verify[0] = min(verify[0], med[2 * K + 1])
    tree_ms = max(0.0, med[2 * K + 2] - med[K]) if len(med) > 2 * K + 2 else 0.0
    return Costs(monotone(verify, rising=True), monotone(drafts, rising=True), prior,
                 list(second) if len(med) > 2 * K + 2 else [], tree_ms)


def acceptance_prior(target: Any, head: Any, done: Callable[[int], None] = lambda i: None,
                     on_round: Callable[[Round], Any] = lambda r: None) -> tuple[list[float], list[float]]:
    """How often each draft position lands on the calibration prompts (one per domain), smoothed; and
    where the target can branch (the rounds then verify trees of the head's block), how often its
    second, third, ... choice lands where the ones before it missed (all positions together). Each
    round goes to `on_round` too."""
    K = head.max_drafts
    branches = target.check_trees() == ""
    seen = Acceptance([0.0] * K, strength=0.0, second=[0.0] * (RANKS - 1) if branches else ())
    for i, prompt in enumerate(CALIBRATION_PROMPTS):
        Engine(target, head, tree=K if branches else 0).generate(
            prompt, 32, on_round=lambda r: (on_round(r), r.levels and seen.observe_levels(list(r.levels))))
        done(i)
    prior = monotone([(a + 1) / (t + 2) for a, t in zip(seen.accepted, seen.tried)], rising=False)
    second = [(sum(a[r] for a in seen.accepted_r) + 1) / (sum(t[r] for t in seen.tried_r) + 2)
              for r in range(len(seen.second))]
    return prior, monotone(second, rising=False)


def monotone(values: list[float], rising: bool) -> list[float]:
    """Timing noise and sparse counts smoothed the way the quantities behave: a wider verify or a longer
    draft never costs less (running max); a later draft is not more likely to survive than an earlier
    one once they did (running min; the counts behind the prior get a uniform Beta(1, 1) first)."""
    out, edge = [], None
    for v in values:
        edge = v if edge is None else (max(edge, v) if rising else min(edge, v))
        out.append(edge)
    return out


def calibration_key(target: Any, head: Any) -> str:
    """What the costs depend on: the target, the head, the machine, MLX and the BLAS."""
    cpu = cpu_name()
    facts = {"version": VERSION, "target": target.name, "target_config": target.config,
             "head": head.config.raw, "draft_vocab": None if head.draft_ids is None else len(head.draft_ids),
             "machine": [platform.machine(), cpu], "device": str(mx.default_device()), "mlx": mx.__version__,
             "blas": blas_info()}
    return hashlib.sha256(json.dumps(facts, sort_keys=True, default=str).encode()).hexdigest()[:20]


def calibration_dir() -> Path:
    """Where measured costs are kept: $SPEC_ARENA_CALIBRATION, else calibration/ in the model cache.
    (The test suite points it at a temporary folder: its random models would pile up there.)"""
    env = os.environ.get("SPEC_ARENA_CALIBRATION")
    return Path(env).expanduser() if env else cache_root() / "calibration"


def calibration_runs() -> int:
    """Runs per cost: 11, or $SPEC_ARENA_CALIBRATION_RUNS (at least 3; the test suite uses 3, where the
    costs only need to exist, not to be this machine's best estimate)."""
    return max(3, int(os.environ.get("SPEC_ARENA_CALIBRATION_RUNS") or 11))


def cached_costs(target: Any, head: Any, folder: Path | None = None, progress: Progress = quiet) -> Costs:
    """The costs of this pair on this machine: read from the cache, or calibrated and written there
    (reported to `progress` as "calibrating DSpark" / "calibrating DFlash")."""
    path = (folder or calibration_dir()) / f"{head.kind}-{calibration_key(target, head)}.json"
    if path.exists():
        try:
            return Costs(**json.loads(path.read_text()))
        except (ValueError, TypeError):
            pass  # a damaged file: measure again
    step = f"calibrating {HEAD_NAMES.get(head.kind, head.kind)}"
    progress(step, 0.0)
    costs = calibrate(target, head, runs=calibration_runs(), progress=lambda f: progress(step, f))
    write_json(path, asdict(costs))
    return costs


def costs_for(target: Any, head: Any, max_draft: int | str, progress: Progress = quiet) -> Costs | None:
    """The costs an Engine needs for `max_draft` ("auto": this pair's measured costs), else None."""
    if head is None or max_draft != "auto":  # parsed where it entered (build_engine, the page's knobs, the CLI)
        return None
    return cached_costs(target, head, progress=progress)


def build_engine(target: Any, head: Any = None, max_draft: int | str = 0, progress: Progress = quiet,
                 **settings: Any) -> Engine:
    """The one way to build an Engine for a target and head: the draft length parsed once, and the costs
    `auto` weighs measured (or read from the cache) first. `settings` are Engine's other keywords."""
    max_draft = draft_length(max_draft)
    return Engine(target, head, max_draft=max_draft, costs=costs_for(target, head, max_draft, progress), **settings)
