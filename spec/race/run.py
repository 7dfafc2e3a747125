"""The race: greedy, DSpark, DFlash (and prompt lookup) on ONE loaded target, on one clock.

A race runs on the Arena's MLX thread (spec.race.arena) and yields events: the app, the API and the CLI
(spec.race.cli) only show them. Each engine is metered on its own busy time (engine seconds), not the
wall clock that all three share, and the scheduler always steps the live engine whose busy time is
smallest: at every moment each lane shows what that engine alone would have produced after the same
amount of its own compute. At each hand-over the previous lane's work still in flight (the plain
decoder's pipelined next step) is waited for and billed to it (Generation.settle()), so no engine's work
is billed to another, and a lane stepped twice in a row keeps its pipelining as when it runs alone.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterator

from ..errors import SpecError
from ..heads.lookup import PromptLookup
from ..loop.calibrate import build_engine
from ..loop.confidence import ConfidenceCheck
from ..loop.engine import Engine, GenResult, Round
from ..loop.prefill import Prefill
from ..loop.slots import SlotCounts
from ..target import Target
from .outcome import Outcome
from .settings import RaceSettings


@dataclass
class Meter:
    """Live numbers of one engine."""

    tokens: int = 0
    rounds: int = 0
    accepted: int = 0
    busy: float = 0.0  # seconds of its own rounds (decode only)
    prefill: float = 0.0
    accept_lengths: list[int] = field(default_factory=list)
    drafted: list[int] = field(default_factory=list)  # drafts verified per round (the chosen length)
    last: Round | None = None  # the latest drafting round (its tree, the path it committed)
    last_tree: Round | None = None  # the latest round verified as a tree
    tree_rounds: int = 0  # rounds verified as a tree
    slots: SlotCounts = field(default_factory=SlotCounts)  # per draft slot: rounds that reached / landed it
    confidence: ConfidenceCheck = field(default_factory=ConfidenceCheck)  # DSpark: its estimates vs what landed

    def add(self, r: Round) -> None:
        self.tokens += len(r.tokens)
        if r.index == 0:
            self.prefill = r.seconds
            return
        self.rounds += 1
        self.busy += r.seconds
        self.accepted += r.accepted
        self.accept_lengths.append(len(r.tokens))
        self.drafted.append(r.drafted)
        self.slots.add(r.levels)
        self.confidence.add(r.estimates, r.drafted, r.accepted)  # chain rounds carry estimates
        if r.drafted:
            self.last = r
        if r.is_tree:
            self.last_tree, self.tree_rounds = r, self.tree_rounds + 1

    @property
    def mean_accept(self) -> float:
        return sum(self.accept_lengths) / len(self.accept_lengths) if self.accept_lengths else 0.0

    @property
    def tok_s(self) -> float:
        """Decode tok/s on this engine's own busy time (the first token belongs to the prefill)."""
        return (self.tokens - 1) / self.busy if self.busy > 0 else 0.0

    @property
    def clock(self) -> float:
        """Engine seconds so far: this engine's own compute, prefill included (the race clock)."""
        return self.prefill + self.busy

    @property
    def e2e_tok_s(self) -> float:
        """Tokens per engine second so far, prefill included: the race's one speed (spec.race.outcome)."""
        return self.tokens / self.clock if self.clock > 0 else 0.0

    def snapshot(self) -> "Meter":
        """A copy that later rounds leave alone: what a recorded event showed stays what it showed."""
        return replace(self, accept_lengths=list(self.accept_lengths), drafted=list(self.drafted),
                       slots=self.slots.copy(), confidence=self.confidence.copy())


@dataclass
class RaceEvent:
    kind: str  # "start" | "prefill" | "round" | "done" | "finish"
    engine: str = ""
    round: Round | None = None
    meter: Meter | None = None
    result: GenResult | None = None
    wall: float = 0.0
    clock: float = 0.0  # the race clock (engine seconds): how far the slowest live lane has computed
    lane_clock: float = 0.0  # a round's end on its own lane's clock (its meter's, hand-over waits included)
    results: dict[str, GenResult] = field(default_factory=dict)
    verdicts: dict[str, str] = field(default_factory=dict)
    prefilled: int = 0  # "prefill": prompt tokens through the target so far
    prompt_tokens: int = 0
    temperature: float = 0.0  # "start": the race's (T > 0: the third lane samples)
    outcome: Outcome | None = None  # "finish": places, speedups, ties and headline, computed once
    settings: RaceSettings | None = None  # "start": what the race was run with


def verdict(result: GenResult, baseline: GenResult | None, settings: RaceSettings) -> str:
    """The text checked against the plain lane's, token by token (up to where the first of the two
    stopped). At T = 0 that is the lossless check against greedy; at T > 0 both are exact samples of
    the target's distribution (by construction), so a difference says they are different draws."""
    sampled = settings.sampling.temperature > 0
    if baseline is None:
        return ("exact in distribution by construction (not compared: baseline off)" if sampled
                else "not checked (baseline off)")
    other = "plain sampling" if sampled else "greedy"
    a, b = result.token_ids, baseline.token_ids
    stopped = result.finish_reason == "stopped" or baseline.finish_reason == "stopped"
    if stopped:
        n = min(len(a), len(b))
        a, b = a[:n], b[:n]
        if n == 0:
            return "not checked: stopped before the first token"
    where = next((f"at token {i}" for i, (x, y) in enumerate(zip(a, b)) if x != y),
                 f"in length ({len(a)} vs {len(b)} tokens)" if len(a) != len(b) else None)
    if where is None:
        return f"identical to {other}" + (f" over the first {len(a)} tokens" if stopped else "")
    return f"differs from {other} {where}" if sampled else f"DIFFERS from {other} {where}"


def shared_prefill(target: Target, engines: dict[str, Engine], ids: list[int], stop: threading.Event | None,
                   t0: float) -> Iterator[RaceEvent]:
    """The prompt through the target ONCE for every engine, with all their taps, chunk by chunk: a
    "prefill" event per chunk (the race clock is the prefill's time: every lane would have spent it
    alone), Stop honoured between chunks. Returns the Prefill (None when stopped)."""
    pre = Prefill(target, ids, sorted({t for e in engines.values() for t in e.taps}))
    while not pre.done:
        if stop is not None and stop.is_set():
            return None
        pre.step()
        yield RaceEvent("prefill", wall=time.perf_counter() - t0, clock=pre.seconds, prefilled=pre.done_tokens,
                        prompt_tokens=len(ids))
    return pre


def run_race(target: Target, heads: dict[str, Any], prompt: str | list[int], settings: RaceSettings,
             stop: threading.Event | None = None, share_prefill: bool = True) -> Iterator[RaceEvent]:
    """One prefill shared by all engines, then step the engine with the least busy time, one round at
    a time, until all are done (or stop is set). Runs on the caller's thread. share_prefill=False: each
    engine prefills on its own (the bench measures what sharing saves)."""
    s = settings.sampling
    engines: dict[str, Engine] = {}
    if "dspark" in heads:
        engines["dspark"] = build_engine(target, heads["dspark"], settings.dspark_max_draft, sampling=s, name="dspark",
                                         confidence_threshold=settings.dspark_threshold, tree=settings.tree,
                                         markov=settings.dspark_markov, lookup_branch=settings.lookup_branch)
    if "dflash" in heads:
        engines["dflash"] = build_engine(target, heads["dflash"], settings.dflash_max_draft, sampling=s, name="dflash",
                                         tree=settings.tree, lookup_branch=settings.lookup_branch)
    if settings.lookup:
        lookup = heads.get("lookup") or PromptLookup().bind(target)
        engines["lookup"] = build_engine(target, lookup, settings.lookup_max_draft, sampling=s, name="lookup")
    if settings.baseline:
        engines["greedy"] = Engine(target, None, sampling=s, name="greedy")
    if not engines:
        raise SpecError("nothing to race: no head loaded and the baseline is off")
    ids = target.encode_chat(prompt, thinking=settings.thinking) if isinstance(prompt, str) else list(prompt)
    gens = {name: e.start(ids, settings.max_new_tokens) for name, e in engines.items()}  # validates first
    meters = {name: Meter() for name in gens}
    t0 = time.perf_counter()
    yield RaceEvent("start", prompt_tokens=len(ids), temperature=settings.sampling.temperature, settings=settings)
    live, last = list(gens), None
    pre = (yield from shared_prefill(target, engines, ids, stop, t0)) if share_prefill else None
    if pre is not None:
        for g in gens.values():
            g.share(pre)
    while live:
        if stop is not None and stop.is_set():
            for g in gens.values():
                g.stop()
            break
        name = next_lane(live, meters)
        if last is not None and last != name:  # hand-over: the last lane's work in flight is its own
            meters[last].busy += gens[last].settle()
        last = name
        r = gens[name].step()
        if r is None:
            live.remove(name)
            continue
        meters[name].add(r)
        if r.done:
            live.remove(name)
        clock = race_clock(meters, live)
        yield RaceEvent("round", name, r, meters[name].snapshot(), wall=time.perf_counter() - t0, clock=clock,
                        lane_clock=meters[name].clock)
        if r.done:
            yield RaceEvent("done", name, meter=meters[name].snapshot(), result=gens[name].result,
                            wall=time.perf_counter() - t0, clock=clock)
    results = {name: g.result for name, g in gens.items()}
    base = results.get("greedy")
    verdicts = {n: verdict(r, base, settings) for n, r in results.items() if n != "greedy"}
    yield RaceEvent("finish", results=results, verdicts=verdicts, wall=time.perf_counter() - t0,
                    clock=race_clock(meters, []),
                    outcome=Outcome.of(results, settings.sampling.temperature > 0, settings.dspark_threshold,
                                       lane_notes(settings)))


def lane_notes(settings: RaceSettings, cards: bool = False) -> dict[str, str]:
    """How a lane runs unlike its usual self, as its label says it: {"dspark": "Markov off"}; on the page's
    cards (`cards`) also the heads' lanes with prompt lookup's guess in their rounds ("+ lookup branch", the
    default: results tables and the API keep the engine names plain, and echo the setting)."""
    notes = {} if settings.dspark_markov else {"dspark": "Markov off"}
    if cards and settings.lookup_branch:
        for name in ("dspark", "dflash"):
            notes[name] = ", ".join(filter(None, (notes.get(name), "+ lookup branch")))
    return notes


def replay(events: list[RaceEvent], speed: float = 1.0, sleep: Callable[[float], None] = time.sleep,
           clock: Callable[[], float] = time.perf_counter) -> Iterator[RaceEvent]:
    """A recorded race again, on one wall clock: each lane's rounds appear when its own engine time
    reached them (prefill included), so the lanes move at their measured speeds. The recorded events
    themselves, in that order, only their wall time new (seconds since the replay began): every
    number they carry (meters, race clock, outcome) is the race's own. speed 2.0 plays twice as fast."""
    if speed <= 0:
        raise SpecError("replay speed must be > 0")
    last = next((ev for ev in reversed(events) if ev.kind == "finish"), None)
    if last is None or not any(ev.kind == "round" for ev in events):
        raise SpecError("nothing to replay: run a race to the end first")
    at = {"round": lambda ev: ev.lane_clock, "done": lambda ev: ev.meter.clock}
    timeline = sorted((ev for ev in events if ev.kind in at), key=lambda ev: (at[ev.kind](ev), ev.kind == "done"))
    first = next((ev for ev in events if ev.kind == "start"), RaceEvent("start"))
    t0 = clock()
    yield replace(first, wall=0.0)
    for ev in timeline:
        wait = at[ev.kind](ev) / speed - (clock() - t0)
        if wait > 0:
            sleep(wait)
        yield replace(ev, wall=clock() - t0)
    yield replace(last, wall=clock() - t0)


def next_lane(live: list[str], meters: dict[str, "Meter"]) -> str:
    """The live lane that has computed least so far (ties: the first listed)."""
    return min(live, key=lambda n: meters[n].clock)


def race_clock(meters: dict[str, "Meter"], live: list[str]) -> float:
    """Engine seconds the race has reached: the least-advanced live lane's, or the last finisher's."""
    return min(meters[n].clock for n in live) if live else max(m.clock for m in meters.values())


