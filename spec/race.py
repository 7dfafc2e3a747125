"""The race: greedy, DSpark and DFlash on ONE loaded target, on one clock.

MLX work happens on one dedicated worker thread (MLX streams may not cross threads, and the shared
target must never run two forwards at once); callers get a stream of events through a queue. Each
engine is metered on its own busy time (engine seconds), not the wall clock that all three share, and
the scheduler always steps the live engine whose busy time is smallest: at every moment each lane
shows what that engine alone would have produced after the same amount of its own compute. At each
hand-over the previous lane's work still in flight (the plain decoder's pipelined next step) is waited
for and billed to it (Generation.settle()), so no engine's work is billed to another, and a lane
stepped twice in a row keeps its pipelining as when it runs alone.

  python -m spec race --prompt "Write a Python function that reverses a string."
"""

from __future__ import annotations

import argparse
import atexit
import queue
import sys
import threading
import time
import weakref
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterator

from .engine import Engine, GenResult, Prefill, Round
from .outcome import Outcome
from .target import SpecError, Target
from .verify import Sampling


@dataclass(frozen=True)
class RaceSettings:
    max_new_tokens: int = 128
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int = 0
    dspark_cap: int | str = "auto"  # "auto": chosen per round (spec.autodraft); 0 = the head's block
    dspark_threshold: float = 0.0
    dflash_len: int | str = "auto"  # "auto": chosen per round; 0 = the full block
    baseline: bool = True
    thinking: bool = False  # the chat template's enable_thinking (Qwen3's <think>)

    @property
    def sampling(self) -> Sampling:
        return Sampling(self.temperature, self.top_p, self.top_k, self.seed)


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
        """Tokens per engine second so far, prefill included: the race's one speed (spec.outcome)."""
        return self.tokens / self.clock if self.clock > 0 else 0.0

    def snapshot(self) -> "Meter":
        """A copy that later rounds leave alone: what a recorded event showed stays what it showed."""
        return replace(self, accept_lengths=list(self.accept_lengths), drafted=list(self.drafted))


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
    sampled = settings.temperature > 0
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
        engines["dspark"] = Engine(target, heads["dspark"], max_draft=settings.dspark_cap, sampling=s,
                                   confidence_threshold=settings.dspark_threshold, name="dspark")
    if "dflash" in heads:
        engines["dflash"] = Engine(target, heads["dflash"], max_draft=settings.dflash_len, sampling=s, name="dflash")
    if settings.baseline:
        engines["greedy"] = Engine(target, None, sampling=s, name="greedy")
    if not engines:
        raise SpecError("nothing to race: no head loaded and the baseline is off")
    ids = target.encode_chat(prompt, thinking=settings.thinking) if isinstance(prompt, str) else list(prompt)
    gens = {name: e.start(ids, settings.max_new_tokens) for name, e in engines.items()}  # validates first
    meters = {name: Meter() for name in gens}
    t0 = time.perf_counter()
    yield RaceEvent("start", prompt_tokens=len(ids), temperature=settings.temperature, settings=settings)
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
                    clock=race_clock(meters, []), outcome=Outcome.of(results, settings.temperature > 0))


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


def results_table(outcome: Outcome, verdicts: dict[str, str]) -> "Any":
    """One row per engine (pandas), fastest first: place, the one speedup (end to end), accept length,
    tokens, finish time, status, the lossless check; decode-only figures as labelled details."""
    import pandas as pd

    rows = []
    for o in outcome.order:
        rows.append({
            "place": o.place_text,
            "engine": "plain sampling" if outcome.sampled and o.engine == "greedy" else o.engine,
            "speedup": rnd(o.speedup, 2),
            "tok/s": round(o.tok_s, 1), "mean accept": rnd(o.mean_accept, 2), "tokens": o.tokens,
            "rounds": o.rounds, "finish s": round(o.finish_seconds, 2), "status": o.status,
            "vs plain sampling" if outcome.sampled else "lossless (vs greedy)":
                verdicts.get(o.engine, "its own sample" if outcome.sampled else "reference"),
            "decode tok/s": round(o.decode_tok_s, 1), "decode speedup": rnd(o.decode_speedup, 2),
            "prefill s": round(o.prefill_seconds, 3), "prompt tokens": o.prompt_tokens,
        })
    return pd.DataFrame(rows)


def rnd(x: float | None, digits: int) -> float | None:
    return None if x is None else round(x, digits)


class MLXThread:
    """A daemon thread that runs the calls given to it, in order, and never ends: idle ones wait in a
    pool for the next Arena. MLX keeps per-thread state (mx.compile's cache) whose destructor takes the
    GIL, so a worker thread that ended while the interpreter shut down aborted the process ("terminate
    called without an active exception", exit 134) after every script that raced."""

    _idle: list["MLXThread"] = []
    _idle_lock = threading.Lock()

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        threading.Thread(target=self._serve, name="mlx", daemon=True).start()

    @classmethod
    def take(cls) -> "MLXThread":
        with cls._idle_lock:
            return cls._idle.pop() if cls._idle else cls()

    def release(self) -> None:
        with self._idle_lock:
            self._idle.append(self)

    def submit(self, fn: Callable, *args: Any) -> Future:
        fut: Future = Future()
        self._jobs.put((fut, fn, args))
        return fut

    def _serve(self) -> None:
        while True:
            fut, fn, args = self._jobs.get()
            if fut.set_running_or_notify_cancel():
                try:
                    fut.set_result(fn(*args))
                except BaseException as e:  # handed to whoever waits on the future
                    fut.set_exception(e)


class Arena:
    """One target and its heads, owned by ONE worker thread; every MLX call goes through it.

    A Gradio handler (or any thread) calls race(); events come back through a queue. stop() is
    honoured within one round and leaves the target ready for the next race."""

    def __init__(self, loader: Callable[[], tuple[Target, dict[str, Any], dict[str, str]]]):
        self._worker: MLXThread | None = MLXThread.take()
        _OPEN.add(self)
        self._stop = threading.Event()
        self._lock = threading.Lock()  # one race at a time on the shared target
        self.missing: dict[str, str] = {}  # head kind -> why this arena has none (a preset's gap)
        try:
            self.target, self.heads, self.info = self.call(loader)
        except BaseException:
            self.close()
            raise

    def call(self, fn: Callable, *args: Any) -> Any:
        """Run fn on the MLX thread and wait for it (exceptions are re-raised here)."""
        return self._submit(fn, *args).result()

    def _submit(self, fn: Callable, *args: Any) -> Future:
        if self._worker is None:
            raise SpecError("this arena was closed")
        return self._worker.submit(fn, *args)

    def stop(self) -> None:
        self._stop.set()

    @property
    def stopping(self) -> bool:
        """Stop was pressed and the race has not ended yet."""
        return self._stop.is_set() and self._lock.locked()

    def race(self, prompt: str, settings: RaceSettings) -> Iterator[RaceEvent]:
        with self._lock:
            self._stop.clear()
            events: queue.Queue = queue.Queue()
            done = object()

            def work() -> None:
                try:
                    for ev in run_race(self.target, self.heads, prompt, settings, self._stop):
                        events.put(ev)
                except BaseException as e:  # handed to the caller's thread
                    events.put(e)
                finally:
                    events.put(done)

            fut = self._submit(work)
            try:
                while (ev := events.get()) is not done:
                    if isinstance(ev, BaseException):
                        raise ev
                    yield ev
            finally:  # the caller went away (cancelled, closed): stop the worker and wait for it
                self._stop.set()
                fut.result()

    def close(self) -> None:
        """Stop a race in progress, wait for the MLX thread to be idle, and hand it back to the pool."""
        self._stop.set()
        if self._worker is not None:
            worker, self._worker = self._worker, None
            worker.submit(lambda: None).result()
            worker.release()


_OPEN: "weakref.WeakSet[Arena]" = weakref.WeakSet()


@atexit.register
def _close_open_arenas() -> None:
    """At exit, stop the races scripts left running (an abandoned generator): a daemon thread caught
    inside MLX while the interpreter shuts down would abort the process."""
    for arena in list(_OPEN):
        arena.close()


def load_preset_arena(preset: str = "pocket", target: str | None = None, dspark: str | None = None,
                      dflash: str | None = None, drafter_bits: int | None = None) -> Arena:
    """An Arena over a preset (or explicit target / head ids or folders)."""

    def loader() -> tuple[Target, dict[str, Any], dict[str, str]]:
        from .autodraft import cached_costs
        from .dflash import load_dflash
        from .dspark import load_dspark
        from .presets import PRESETS, get_preset, resolve
        from .target import load_target

        p = get_preset(preset) if (target is None or preset in PRESETS) else None
        t_ref = target or resolve(p.target, "target")
        t = load_target(t_ref)
        heads: dict[str, Any] = {}
        info = {"target": t_ref}
        for kind, ref, load in (("dspark", dspark, load_dspark), ("dflash", dflash, load_dflash)):
            ref = ref or (resolve(getattr(p, kind), kind) if p else None)
            if ref:
                try:
                    heads[kind] = load(ref, t, drafter_bits=drafter_bits)
                except SpecError as e:  # the head's fault, not the target's: say which head and why
                    raise SpecError(head_error(kind, ref, e)) from e
                info[kind] = ref
                cached_costs(t, heads[kind])  # the draft-length chooser's costs, measured once per machine
        return t, heads, info

    from .presets import PRESETS

    arena = Arena(loader)
    if target is None and preset in PRESETS:  # heads the preset has none of, and not given here
        arena.missing = {k: why for k, why in PRESETS[preset].absent().items() if not {"dspark": dspark,
                                                                                       "dflash": dflash}[k]}
    return arena


def head_error(kind: str, ref: str, e: Exception) -> str:
    """'DFlash head 'x': why' (the loaders' own messages may or may not name the head already)."""
    name = {"dspark": "DSpark head", "dflash": "DFlash head"}[kind]
    why = str(e)
    return why if why.startswith(name) else f"{name} {ref!r} could not be loaded: {why}"


def side_by_side(texts: dict[str, str], width: int = 40) -> str:
    """Columns of wrapped text for a terminal."""
    import textwrap

    cols = {n: textwrap.wrap(t.replace("\n", " / "), width) or [""] for n, t in texts.items()}
    depth = max(len(c) for c in cols.values())
    lines = [" | ".join(n.ljust(width) for n in cols), "-+-".join("-" * width for _ in cols)]
    for i in range(depth):
        lines.append(" | ".join((c[i] if i < len(c) else "").ljust(width) for c in cols.values()))
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m spec race", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prompt", required=True)
    ap.add_argument("--preset", default="pocket")
    ap.add_argument("--target")
    ap.add_argument("--dspark")
    ap.add_argument("--dflash")
    ap.add_argument("--json", action="store_true", help="print the results table as JSON")
    ap.add_argument("--replay", type=float, default=0.0, metavar="SPEED",
                    help="then replay the race at its measured speed (1 = as fast as the engines ran, 2 = twice as "
                         "fast): each lane's rounds printed when its own engine time reached them")
    for f in RaceSettings.__dataclass_fields__.values():
        if isinstance(f.default, bool):
            if f.name != "baseline":
                ap.add_argument("--" + f.name.replace("_", "-"), action="store_true")
        else:
            ap.add_argument("--" + f.name.replace("_", "-"), type=type(f.default), default=f.default)
    ap.add_argument("--no-baseline", action="store_true")
    a = ap.parse_args(argv)
    settings = RaceSettings(**{k: getattr(a, k) for k in RaceSettings.__dataclass_fields__ if k != "baseline"},
                            baseline=not a.no_baseline)
    arena = load_preset_arena(a.preset, a.target, a.dspark, a.dflash)
    try:
        events = []
        for ev in arena.race(a.prompt, settings):
            if ev.kind == "done":
                print(f"# {ev.engine} done: {ev.meter.tokens} tokens, accept {ev.meter.mean_accept:.2f}, "
                      f"{ev.meter.tok_s:.1f} tok/s, finished at {ev.meter.clock:.2f} s of engine time", file=sys.stderr)
            events.append(ev)
        final = events[-1]
        table = results_table(final.outcome, final.verdicts)
        if a.json:
            print(table.to_json(orient="records"))
        else:
            print(side_by_side({n: r.text for n, r in final.results.items()}))
            print()
            print(table.to_string(index=False))
            print(f"\n{final.outcome.headline()}  Speedup: end to end (tokens per engine second, prefill included); "
                  f"ties: within {100 * final.outcome.band:.0f}%.")
        if a.replay:
            print(f"\n# replay at {a.replay:g}x the measured speed")
            for ev in replay(events, a.replay):
                if ev.kind == "round":
                    print(f"{ev.wall:7.2f} s  {ev.engine:<6} {ev.meter.tokens:4d} tokens  {ev.round.text!r}",
                          flush=True)
                elif ev.kind == "done":
                    print(f"{ev.wall:7.2f} s  {ev.engine} finished", flush=True)
    finally:
        arena.close()
    return 0
