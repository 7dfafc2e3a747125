"""Draft length chosen by measurement (`max_draft="auto"`): what pays is committed tokens per second of
round cost, not acceptance.

A round that verifies k drafts costs the target's forward over k + 1 rows plus the head's drafting for k;
it commits 1 + a_1 + a_1 a_2 + ... tokens on average, where a_i is the chance draft i is accepted once
the drafts before it were. The costs are measured once per target, head, machine, MLX and BLAS (a short
calibration cached on disk: spec.loop.calibrate); the acceptance is learned within each generation from what its verify
rounds and probes report, starting from a prior measured at calibration. Each round takes the k with the most
expected tokens per millisecond, k = 0 being a plain target step (parking) when no draft length beats it;
a parked generation lets the head draft in the shadow of its plain steps now and then and compares the
drafts with what the target commits, so a head that starts paying is picked up again.

Where the target can branch, a round may verify a tree instead (spec.loop.tree): n drafts, the head's
likeliest paths, for the cost of n + 1 rows. What it commits on average follows from how often the
head's first, second, ... choice lands at each depth (`tree_tokens`), learned the same way; each round
takes the chain or tree with the most expected tokens per millisecond. The verify rule is unchanged, so
every choice is lossless.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

RANKS = 4  # children per node whose landing is learned (a fifth choice hardly ever lands)


@dataclass
class Costs:
    """Measured milliseconds on a warm cache: verify[k] = the target's share of a round verifying k
    drafts (the round, drafting and verify in one evaluation, less draft[k]; verify[0]: a plain
    decoding step, pipelined as parked rounds run, when that is cheaper than a bare one); draft[k] =
    the head drafting k tokens (draft[0] = 0); prior[i] = the chance draft i + 1 is accepted once the
    drafts before it were, measured on calibration generations (a chat, a code and a math prompt);
    second[r] = the chance the head's choice r + 2 lands where its choices before it missed, measured on
    the same generations verified as trees (empty: the target cannot branch, trees are never chosen);
    tree_ms = what drafting and verifying a tree costs beyond a chain with as many drafts; loop_ms and
    tree_loop_ms = what a chain or tree round costs in a real generation beyond its timed parts (graph
    building, the host sync, the head taking in the taps), measured on calibration generations."""

    verify: list[float]
    draft: list[float]
    prior: list[float]
    second: list[float] = field(default_factory=list)
    tree_ms: float = 0.0
    loop_ms: float = 0.0
    tree_loop_ms: float = 0.0

    @property
    def max_k(self) -> int:
        return len(self.draft) - 1


def expected_tokens(rates: list[float], k: int) -> float:
    """Tokens a round commits on average when it verifies k drafts (the target's own token included)."""
    total = 1.0
    for alive in chain_reach(rates, k):
        total += alive
    return total


def chain_reach(rates: list[float], k: int) -> list[float]:
    """The chance a chain of k drafts commits past draft 1, 2, ..., k."""
    out, alive = [], 1.0
    for a in rates[:k]:
        alive *= a
        out.append(alive)
    return out


def tree_tokens(rates: list[list[float]], nodes: int) -> list[float]:
    """Tokens a round commits on average when it verifies the best tree of n = 0..nodes drafts (the
    target's own token included). rates[d][r]: the chance choice r + 1 lands at depth d + 1 where the
    choices before it missed. The tree holds the n likeliest paths, found best first: a node's chance
    is its parent's times its own choice's, a child never beats its parent nor a sibling an earlier
    one once each depth's choices are sorted."""
    out = [1.0]
    for chance, _ in best_nodes(rates, nodes):
        out.append(out[-1] + chance)
    return out + [out[-1]] * (nodes + 1 - len(out))


def tree_reach(rates: list[list[float]], nodes: int) -> list[float]:
    """The chance the committed path of the best tree of `nodes` drafts reaches depth 1, 2, ... (a
    depth's nodes are exclusive events: their chances add up)."""
    out: list[float] = []
    for chance, depth in best_nodes(rates, nodes):
        out += [0.0] * (depth + 1 - len(out))
        out[depth] += chance
    return out


def best_nodes(rates: list[list[float]], nodes: int) -> list[tuple[float, int]]:
    """(chance of landing, depth from 0) of the best tree's nodes, best first (tree_tokens says how)."""
    land = []
    for depth in rates:
        missed, row = 1.0, []
        for c in depth:
            row.append(missed * c)
            missed *= 1.0 - c
        land.append(sorted(row, reverse=True))
    out, heap = [], [(-land[0][0], 0, 0, 1.0)] if land and land[0] else []
    while heap and len(out) < nodes:
        neg, d, r, parent = heapq.heappop(heap)
        out.append((-neg, d))
        if r + 1 < len(land[d]):
            heapq.heappush(heap, (-parent * land[d][r + 1], d, r + 1, parent))
        if d + 1 < len(land) and land[d + 1]:
            heapq.heappush(heap, (neg * land[d + 1][0], d + 1, 0, -neg))
    return out


def round_ms(costs: Costs, k: int, speed: float = 1.0, extra: float = 0.0) -> float:
    """What a round verifying k drafts costs: the calibrated forward and drafting at the speed measured
    now (1.0 = as calibrated), plus a drafting round's own extra time in the loop."""
    return speed * (costs.verify[k] + costs.draft[k]) + (extra if k else 0.0)


def choose(costs: Costs, rates: list[float], max_k: int, speed: float = 1.0, extra: float = 0.0,
           parking: bool = True, stay: float = 1.0) -> int:
    """The draft length (0 = a plain target step, unless parking is off) with the most expected tokens
    per millisecond; a parked generation resumes drafting only for a gain of `stay` (1.1 = 10%)."""
    best, best_rate = 0, stay / round_ms(costs, 0, speed) if parking else 0.0
    for k in range(1, min(max_k, costs.max_k) + 1):
        rate = expected_tokens(rates, k) / round_ms(costs, k, speed, extra)
        if rate > best_rate:
            best, best_rate = k, rate
    return best


class Acceptance:
    """Per-position acceptance, learned from verify rounds: position i's drafts that were tried and
    accepted, on top of a prior worth `strength` rounds. Later positions are tried only when the earlier
    ones landed, so they learn slowly: each position's prior moves with what the position before it has
    shown (a head that lands half as often as calibrated at position 2 is assumed to do so further on
    too; a position never tried carries that on from the last one that was). A tree round also tells how
    the head's second, third... choices fare where the first missed (`ranks`).

    What a head lands drifts within an answer (a restated question, then a formula it knows): each
    verified round and each probe discounts the evidence before it by `decay` (`discount`), so recent
    rounds and probes count more, and a generation parked by its first rounds comes back when its probes
    land again. (Discounting every parked round instead would wear the probes' evidence away between
    them, leaving the prior in charge: a head calibrated as weak could then never come back.)"""

    def __init__(self, prior: list[float], strength: float = 4.0, second: list[float] = (), decay: float = 1.0):
        self.prior, self.strength, self.second, self.decay = list(prior), strength, list(second), decay
        self.tried = [0.0] * len(prior)
        self.accepted = [0.0] * len(prior)
        self.tried_r = [[0.0] * len(self.second) for _ in prior]  # choices 2.. at each position
        self.accepted_r = [[0.0] * len(self.second) for _ in prior]

    def discount(self) -> None:
        if self.decay < 1.0:
            for counts in (self.tried, self.accepted, *self.tried_r, *self.accepted_r):
                counts[:] = [c * self.decay for c in counts]

    def observe(self, drafted: int, accepted: int, start: int = 0) -> None:
        """A round verified `drafted` drafts and accepted the first `accepted`: positions 1..accepted
        were accepted, position accepted + 1 (if drafted) was tried and rejected, later ones not tried.
        `start`: positions before it were reported already (a probe judged as the target commits)."""
        self.observe_levels([(1, 1)] * min(accepted, drafted) + [(0, 1)] * (accepted < drafted), start)

    def observe_levels(self, levels: list[tuple[int, int]], start: int = 0) -> None:
        """A round's (rank that landed or 0, choices verified) per position (spec.loop.tree.DraftTree.levels)."""
        for i, (rank, width) in enumerate(levels[start : len(self.tried)], start):
            self.tried[i] += 1
            self.accepted[i] += rank == 1
            for r in range(min(rank - 1 if rank else width - 1, len(self.second))):
                self.tried_r[i][r] += 1
                self.accepted_r[i][r] += rank == r + 2

    def rates(self) -> list[float]:
        s, out, scale = self.strength, [], 1.0
        for a, t, p in zip(self.accepted, self.tried, self.prior):
            out.append((a + s * min(1.0, p * scale)) / (t + s))
            if p > 0:
                scale = out[-1] / p
        return out

    def ranks(self) -> list[list[float]]:
        """Per position: the chance each choice lands where the ones before it missed (first choice: rates)."""
        s = self.strength
        return [[first] + [(a + s * p) / (t + s) for a, t, p in zip(acc, tried, self.second)]
                for first, acc, tried in zip(self.rates(), self.accepted_r, self.tried_r)]


class AutoDraft:
    """One generation's chooser: the measured costs, its own acceptance and round overheads, parking and
    probing.

    A parked generation still learns: now and then (`probe()`) the head drafts in the shadow of a plain
    step, its drafts are not verified but compared with the tokens the target then commits (the
    acceptance rule keeps exactly those at T = 0; at T > 0 a match is rarer than an acceptance,
    p q <= min(p, q), so a shadow errs towards parking). A shadow probe costs the head's drafting alone
    (~12 ms on pocket), where a verified probe cost a drafting round for about one token (~40 ms more
    than the plain step). So a parked generation probes soon, and each probe that leaves it parked
    doubles the wait before the next (2, 4, 8, 16 parked rounds: a head that lands little early on may
    pay later, a weak one costs ~1%). Each verified round or probe discounts older evidence (`decay`),
    so what the head lands now outweighs its first rounds.

    Leaving a run of parked rounds costs more than one round shows (the first drafting round is not
    pipelined, the head takes in the taps it missed), so a parked generation drafts again only when
    that is expected to pay `stay` times (10%) more than parking.

    Every choice follows from the calibrated costs and the acceptance seen so far, never from this
    generation's own timings: the same prompt with the same settings then gives the same rounds, whatever
    else the machine is doing (issue 39: a busy moment early in a race parked a head that drafted all
    the way in the next race of the same prompt). A drafting round in the loop costs more than its timed
    parts (graph building, the host sync, the head taking in the taps): the calibration measured that
    too, on real generations (Costs.loop_ms, tree_loop_ms). A machine that is uniformly slower changes
    every cost by one factor, which changes no choice.

    adapt=True is the chooser before issue 39, kept for the benchmark that compares the two: parked
    rounds in the steady state of the pipeline measure the speed now, as a factor on every calibrated
    cost, and drafting rounds their extra time on top, both from the calibration with the weight of
    `strength` rounds (the extra from 0, as it was)."""

    def __init__(self, costs: Costs, max_k: int, gaps: tuple[int, int] = (2, 16), strength: float = 4.0,
                 stay: float = 1.1, max_nodes: int = 0, decay: float = 0.95, adapt: bool = False):
        self.costs, self.max_k, self.gaps, self.stay = costs, min(max_k, costs.max_k), gaps, stay
        self.adapt = adapt
        self.acceptance = Acceptance(costs.prior[: self.max_k], second=costs.second if max_nodes else (),
                                     decay=decay)
        # trees of up to max_nodes drafts, where the calibration measured how second choices fare (verify
        # costs are known for as many rows as the head's block)
        self.max_nodes = min(max_nodes, costs.max_k) if costs.second else 0
        self.nodes = 0  # the next round's tree size (0: a chain of the chosen length)
        self.gap, self.waited = gaps[0], 0  # parked rounds between shadow probes, and since the last
        self.chosen: list[int] = []
        self.strength = strength
        self.plain = [0.0, 0]  # steady parked rounds: summed ms, count
        self.drafting = [0.0, 0.0, 0]  # chain rounds: summed ms, summed calibrated ms, count
        self.tree_rounds = [0.0, 0]  # tree rounds: summed ms beyond calibrated, count (their own extra)

    @property
    def speed(self) -> float:
        """Measured / calibrated time of a plain step (1.0 unless adapting and parked rounds say otherwise)."""
        if not self.adapt:
            return 1.0
        v0, (ms, n) = self.costs.verify[0], self.plain
        return (ms + self.strength * v0) / ((n + self.strength) * v0)

    @property
    def extra(self) -> float:
        """A chain round's time beyond its calibrated forward and drafting (adapting: its mean so far, at
        today's speed)."""
        if not self.adapt:
            return self.costs.loop_ms
        ms, calibrated, n = self.drafting
        return (ms - self.speed * calibrated) / (n + self.strength)

    @property
    def tree_extra(self) -> float:
        """The same for tree rounds, which may cost more in the loop than calibrated (DSpark syncs once per
        depth): calibrated; adapting, measured on tree rounds, from a prior of the drafting rounds' extra
        worth `strength` rounds."""
        if not self.adapt:
            return self.costs.tree_loop_ms
        over, n = self.tree_rounds
        return (over + self.strength * self.extra) / (n + self.strength)

    def _choose(self, parking: bool = True) -> tuple[int, int]:
        """The next round's (draft length or a tree's depth, the tree's size or 0 for a chain)."""
        parked = bool(self.chosen) and self.chosen[-1] == 0
        stay = self.stay if parked else 1.0
        rates = self.acceptance.rates()
        k = choose(self.costs, rates, self.max_k, self.speed, self.extra, parking=parking, stay=stay)
        if self.max_nodes < 2:
            return k, 0
        best = (expected_tokens(rates, k) / round_ms(self.costs, k, self.speed, self.extra) if k
                else stay / round_ms(self.costs, 0, self.speed))
        values, nodes = tree_tokens(self.acceptance.ranks(), self.max_nodes), 0
        for n in range(2, self.max_nodes + 1):
            rate = values[n] / self.round_cost(n, tree=True)
            if rate > best:
                best, nodes = rate, n
        return (self.max_k, nodes) if nodes else (k, 0)

    def reach(self) -> list[float]:
        """The chance the round just chosen (next()) commits past depth 1, 2, ... of its drafts (their
        sum + 1: the tokens it commits on average)."""
        if self.nodes:
            return tree_reach(self.acceptance.ranks(), self.nodes)
        return chain_reach(self.acceptance.rates(), self.chosen[-1] if self.chosen else 0)

    def round_cost(self, rows: int, tree: bool, drafted: int | None = None) -> float:
        """What a round costs that verifies `rows` drafts (as a tree or a chain) of which the head drafted
        `drafted` (default: all); verify costs past the calibrated block grow by its mean cost of a row
        (not its last step's: BLAS pads row counts, so steps alternate between flat and steep)."""
        v, top = self.costs.verify, self.costs.max_k
        per_row = (v[top] - v[1]) / (top - 1) if top > 1 else v[top] - v[0]
        verify = v[rows] if rows <= top else v[top] + (rows - top) * max(per_row, 0.0)
        drafted = min(rows if drafted is None else drafted, top)
        ms = self.speed * (verify + self.costs.draft[drafted]) + (self.tree_extra if tree else self.extra)
        return ms + (self.speed * self.costs.tree_ms if tree else 0.0)

    def next(self) -> int:
        """The next round's draft length or tree depth (0 = a plain target step); self.nodes: the tree's
        size (0: a chain)."""
        k, self.nodes = self._choose()
        if k:
            self.gap, self.waited = self.gaps[0], 0
        self.chosen.append(k)
        return k

    def probe(self) -> int:
        """Asked in each parked round: drafts to make in the shadow of its plain step (0 = not now).
        All it may draft: a longer draft costs the head little more, and tells about every position."""
        self.waited += 1
        if self.waited < self.gap:
            return 0
        self.waited = 0
        return self.max_k

    def observe(self, drafted: int, accepted: int, ms: float | None = None, steady: bool = True,
                levels: list[tuple[int, int]] | None = None) -> None:
        """A round verified `drafted` drafts, `accepted` of them survived, and it took `ms` (if timed: read
        only when adapting); `levels`: a tree round's (rank that landed, choices) per depth. A parked round
        times a plain step
        only when `steady`: it dispatched exactly one step and no probe (pipelining puts two steps in
        the first round of a parked run, none in its last)."""
        if not self.adapt:
            ms = None  # the choices follow the calibration and the acceptance alone
        if drafted:
            self.acceptance.discount()
            tree = levels is not None and any(width > 1 for _, width in levels)
            if levels is not None:
                self.acceptance.observe_levels(list(levels))
            else:
                self.acceptance.observe(drafted, accepted)
            if ms is not None:
                calibrated = round_ms(self.costs, drafted) + (self.costs.tree_ms if tree else 0.0)
                if tree:
                    self.tree_rounds = [self.tree_rounds[0] + ms - self.speed * calibrated, self.tree_rounds[1] + 1]
                else:
                    self.drafting = [self.drafting[0] + ms, self.drafting[1] + calibrated, self.drafting[2] + 1]
        elif ms is not None and steady:
            self.plain = [self.plain[0] + ms, self.plain[1] + 1]

    def observe_probe(self, drafted: int, matched: int, start: int = 0, final: bool = True) -> None:
        """Of a shadow probe's drafts the target has committed past (`drafted`), the first `matched` came
        true; those before `start` were reported already. Reported as the target commits (a head that
        lands its first drafts is picked up before its probe is over); once `final`, a probe that leaves
        the generation parked doubles the wait for the next."""
        if start == 0:
            self.acceptance.discount()
        self.acceptance.observe(drafted, matched, start)
        if final and self._choose()[0] == 0:
            self.gap = min(2 * self.gap, self.gaps[1])
