"""Draft length chosen by measurement (`max_draft="auto"`): what pays is committed tokens per second of
round cost, not acceptance.

A round that verifies k drafts costs the target's forward over k + 1 rows plus the head's drafting for k;
it commits 1 + a_1 + a_1 a_2 + ... tokens on average, where a_i is the chance draft i is accepted once
the drafts before it were. The costs are measured once per target, head, machine, MLX and BLAS (a short
calibration, cached on disk); the acceptance is learned within each generation from what its verify
rounds report, starting from a prior measured at calibration. Each round takes the k with the most
expected tokens per millisecond, k = 0 being a plain target step (parking) when no draft length beats it;
a parked generation probes its best draft length now and then, so a head that starts paying is picked up
again. The verify rule is unchanged, so every choice is lossless.
"""

from __future__ import annotations

import hashlib
import json
import platform
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import mlx.core as mx

# one per domain: a prior from one domain (code) was far too hopeful for chat
CALIBRATION_PROMPTS = ("Explain why the sky is blue to a ten-year-old.",
                       "Write a Python function that returns the n-th Fibonacci number, then explain it.",
                       "A train travels 180 km in 2.5 hours. What is its average speed? Show the steps.")
VERSION = 3  # bump when what calibrate() measures changes


@dataclass
class Costs:
    """Measured milliseconds: verify[k] = the target's forward over k + 1 new rows on a warm cache
    (verify[0]: a plain decoding step, pipelined as parked rounds run, when that is cheaper); draft[k] =
    the head drafting k tokens (draft[0] = 0); prior[i] = the chance draft i + 1 is accepted once the
    drafts before it were, measured on calibration generations (a chat, a code and a math prompt)."""

    verify: list[float]
    draft: list[float]
    prior: list[float]

    @property
    def max_k(self) -> int:
        return len(self.draft) - 1


def expected_tokens(rates: list[float], k: int) -> float:
    """Tokens a round commits on average when it verifies k drafts (the target's own token included)."""
    total, alive = 1.0, 1.0
    for a in rates[:k]:
        alive *= a
        total += alive
    return total


def round_ms(costs: Costs, k: int, overhead: tuple[float, float] = (0.0, 0.0)) -> float:
    """What a round verifying k drafts costs: the calibrated forward and drafting, plus the loop's own
    overhead as measured so far (overhead[0] for plain steps, overhead[1] for drafting rounds)."""
    return costs.verify[k] + costs.draft[k] + overhead[k > 0]


def choose(costs: Costs, rates: list[float], max_k: int, overhead: tuple[float, float] = (0.0, 0.0),
           parking: bool = True, stay: float = 1.0) -> int:
    """The draft length (0 = a plain target step, unless parking is off) with the most expected tokens
    per millisecond; a parked generation resumes drafting only for a gain of `stay` (1.1 = 10%)."""
    best, best_rate = 0, stay / round_ms(costs, 0, overhead) if parking else 0.0
    for k in range(1, min(max_k, costs.max_k) + 1):
        rate = expected_tokens(rates, k) / round_ms(costs, k, overhead)
        if rate > best_rate:
            best, best_rate = k, rate
    return best


class Acceptance:
    """Per-position acceptance, learned from verify rounds: position i's drafts that were tried and
    accepted, on top of a prior worth `strength` rounds. Later positions are tried only when the earlier
    ones landed, so they learn slowly: until they have their own evidence, their prior moves with what
    position 1 has shown (a head that lands half as often as calibrated at position 1 is assumed to do
    so further on too)."""

    def __init__(self, prior: list[float], strength: float = 4.0):
        self.prior, self.strength = list(prior), strength
        self.tried = [0.0] * len(prior)
        self.accepted = [0.0] * len(prior)

    def observe(self, drafted: int, accepted: int) -> None:
        """A round verified `drafted` drafts and accepted the first `accepted`: positions 1..accepted
        were accepted, position accepted + 1 (if drafted) was tried and rejected, later ones not tried."""
        for i in range(min(drafted, accepted + 1, len(self.tried))):
            self.tried[i] += 1
            self.accepted[i] += i < accepted

    def rates(self) -> list[float]:
        if not self.prior:
            return []
        s = self.strength
        first = (self.accepted[0] + s * self.prior[0]) / (self.tried[0] + s)
        scale = first / self.prior[0] if self.prior[0] > 0 else 1.0
        priors = [self.prior[0]] + [min(1.0, p * scale) for p in self.prior[1:]]
        return [(a + s * p) / (t + s) for a, t, p in zip(self.accepted, self.tried, priors)]


class AutoDraft:
    """One generation's chooser: the measured costs, its own acceptance and round overheads, parking and
    probing.

    A probe costs a drafting round for about one token; one that lands nothing doubles the wait before
    the next (8, 16, ... 64 parked rounds), one that lands resets it: a weak head parked for good costs
    about 1% instead of 5%.

    Leaving a run of parked rounds costs more than one round shows (the first drafting round is not
    pipelined, the head takes in the taps it missed), so a parked generation drafts again only when
    that is expected to pay `stay` times (10%) more than parking; probes try it anyway.

    The calibration times bare forwards; a round in the loop costs more (graph building, the host sync,
    the drafter taking in the target's taps), and a parked round is pipelined like plain decoding, which
    a bare forward is not. So each round's measured time corrects the model: the mean of (measured -
    calibrated) over the rounds seen, one figure for parked rounds and one for drafting rounds, starting
    from 0 with the weight of `strength` rounds."""

    def __init__(self, costs: Costs, max_k: int, probe_every: int = 8, strength: float = 4.0, stay: float = 1.1):
        self.costs, self.max_k, self.probe_every, self.stay = costs, min(max_k, costs.max_k), probe_every, stay
        self.acceptance = Acceptance(costs.prior[: self.max_k])
        self.gap, self.waited, self.probing = probe_every, 0, False  # parked rounds between probes
        self.chosen: list[int] = []
        self.excess = [0.0, 0.0]  # summed (measured - calibrated) ms: parked rounds, drafting rounds
        self.timed = [strength, strength]

    @property
    def overhead(self) -> tuple[float, float]:
        return self.excess[0] / self.timed[0], self.excess[1] / self.timed[1]

    def next(self) -> int:
        rates, overhead = self.acceptance.rates(), self.overhead
        parked = bool(self.chosen) and self.chosen[-1] == 0
        k = choose(self.costs, rates, self.max_k, overhead, stay=self.stay if parked else 1.0)
        self.probing = False
        if k == 0:
            self.waited += 1
            if self.waited >= self.gap:  # probe: the best positive length once
                self.waited, self.probing = 0, True
                k = choose(self.costs, rates, self.max_k, overhead, parking=False)
        self.chosen.append(k)
        return k

    def observe(self, drafted: int, accepted: int, ms: float | None = None) -> None:
        """A round verified `drafted` drafts, `accepted` of them survived, and it took `ms` (if timed)."""
        if drafted:
            self.acceptance.observe(drafted, accepted)
            if self.probing:  # a probe that lands nothing waits twice as long for the next (up to 8x)
                self.gap = self.probe_every if accepted else min(2 * self.gap, 8 * self.probe_every)
                self.probing = False
        if ms is not None:
            self.excess[drafted > 0] += ms - round_ms(self.costs, drafted)
            self.timed[drafted > 0] += 1


# -- calibration ------------------------------------------------------------------------------------

def _median_ms(fn: Any, runs: int) -> float:
    times = []
    for i in range(runs + 1):  # one warm-up
        tic = time.perf_counter()
        fn()
        if i:
            times.append(1000 * (time.perf_counter() - tic))
    return statistics.median(times)


def calibrate(target: Any, head: Any, runs: int = 3, context: int = 64) -> Costs:
    """Measure the costs on a warm cache of `context` tokens and the acceptance prior (seconds)."""
    from .engine import Engine
    from .verify import Sampling

    K = head.max_drafts
    ids = [int(i) % target.vocab_size for i in target.encode_chat(CALIBRATION_PROMPTS[1])]
    ids = (ids * (context // len(ids) + 1))[: context + K + 1]
    cache = target.make_cache()
    _, taps = target(mx.array([ids[:context]]), cache, head.config.target_layer_ids)
    mx.eval(taps)

    def forward(w: int) -> None:
        logits, _ = target(mx.array([ids[context : context + w]]), cache, head.config.target_layer_ids)
        mx.eval(logits)
        target.trim(cache, w)

    verify = [_median_ms(lambda w=w: forward(w), runs) for w in range(1, K + 2)]
    dcache = head.make_cache()
    mx.eval(head.propose(dcache, taps, ids[context], 1, Sampling(), None)[0])  # context into the head's cache

    def draft(k: int) -> None:
        out, _ = head.propose(dcache, None, ids[context], k, Sampling(), None)
        mx.eval(out)

    drafts = [0.0] + [_median_ms(lambda k=k: draft(k), runs) for k in range(1, K + 1)]
    plain = Engine(target).generate(CALIBRATION_PROMPTS[0], 24)  # a parked round runs pipelined, like this
    verify[0] = min(verify[0], 1000 * plain.decode_seconds / max(1, len(plain.token_ids) - 1))
    seen = Acceptance([0.0] * K, strength=0.0)
    for prompt in CALIBRATION_PROMPTS:
        res = Engine(target, head).generate(prompt, 32)
        for d, a in zip(res.drafted, res.accept_lengths):
            seen.observe(d, a - 1)
    return Costs(monotone(verify, rising=True), monotone(drafts, rising=True),
                 monotone([(a + 1) / (t + 2) for a, t in zip(seen.accepted, seen.tried)], rising=False))


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
    from .cpu import blas_info, cpu_name

    cpu = cpu_name()
    facts = {"version": VERSION, "target": target.name, "target_config": target.config,
             "head": head.config.raw, "draft_vocab": None if head.draft_ids is None else len(head.draft_ids),
             "machine": [platform.machine(), cpu], "device": str(mx.default_device()), "mlx": mx.__version__,
             "blas": blas_info()}
    return hashlib.sha256(json.dumps(facts, sort_keys=True, default=str).encode()).hexdigest()[:20]


def cached_costs(target: Any, head: Any, folder: Path | None = None) -> Costs:
    """The costs of this pair on this machine: read from the cache, or calibrated and written there."""
    from .pocket import cache_root

    path = (folder or cache_root() / "calibration") / f"{head.kind}-{calibration_key(target, head)}.json"
    if path.exists():
        try:
            return Costs(**json.loads(path.read_text()))
        except (ValueError, TypeError):
            pass  # a damaged file: measure again
    costs = calibrate(target, head)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(costs)))
    tmp.replace(path)
    return costs
