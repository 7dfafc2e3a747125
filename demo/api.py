"""The app's API endpoints, built from the one knob table (demo.knobs) so they take every setting the page
has, with the page's defaults (draft lengths: auto), and typed so Gradio's "Use via API" page and
view_api() show named, described parameters and what comes back:
/race (one race to the end), /race_stream (the same race live), /replay (a race, then played again at
its measured speed), /load_race (a saved race's result, from its file) and /sweep (races over many
prompts, summed per method and domain).

No `from __future__ import annotations` here: Gradio reads these hints as objects to write the schema."""

import inspect
import json
from typing import Any, Callable, Iterator, Optional, TypedDict

import gradio as gr

from demo.knobs import described, echo, knob_params, name_api_inputs, settings_of
from demo.sweep_tab import sweep_api
from demo.view import View
from spec.errors import SpecError
from spec.race.file import read_race
from spec.race.repeat import repeat_count, repeat_race, repeated, shown_outcome
from spec.race.run import replay as replayed
from spec.report import results_table

ROUNDS_PER_UPDATE = 4  # /race_stream: one update per this many rounds (and at each lane's end)
KNOWN = ("start", "round", "done", "finish")  # event kinds the stream reads; others (e.g. "prefill") skipped


class Place(TypedDict):
    engine: str  # dspark | dflash | lookup (prompt lookup, when it raced) | greedy
    place: Optional[int]  # 1 = fastest; lanes that tie share a place; None in a stopped race
    tied: bool
    finish_seconds: float  # its end on the race clock (engine seconds: prefill + decode; a repeat: the median)
    speedup: Optional[float]  # end to end: tokens per engine second over the plain lane's (a repeat: the median)
    speedups: list[Optional[float]]  # each race's speedup, in the order raced (one race: [speedup])
    median: Optional[float]  # their median (one race: the speedup)


class RepeatResult(TypedDict):
    races: int  # races that ran to the end (asked: how many were asked for; a Stop ends the repeat)
    asked: int
    headline: str  # who won by the medians, each lane's range, or a tie within the spread seen
    winner: Optional[str]
    band: float  # relative difference of medians within which two lanes tie: the widest spread a lane showed,
    # or the races' own noise band (race_band, their median) if wider
    race_band: float
    same_rounds: bool  # every race committed the same rounds in every lane (only the times differ)
    lanes: list[dict[str, Any]]  # by place: {engine, speedups, median, spread ((max - min) / median),
    # finish_seconds (median), place, tied, same_rounds}


class RaceResult(TypedDict):
    headline: str  # who won and by how much, or a tie (within tie_band), or stopped
    winner: Optional[str]  # the one lane in first place; None for a tie at the top or a stopped race
    tie_band: float  # relative difference within which two lanes tie (this race's noise, at least the floor)
    table: list[dict[str, Any]]  # one row per engine, fastest first: place, speedup (end to end), tok/s, mean
    # accept, tokens, rounds, finish s, status, the lossless check, and as details decode tok/s, decode speedup
    columns: list[str]
    finish_order: list[Place]  # fastest first
    texts: dict[str, str]  # engine -> its text
    verdicts: dict[str, str]  # drafter -> "identical to greedy" | "DIFFERS from greedy at token i" | at T > 0
    # "identical to plain sampling" | "differs from plain sampling at token i" | "not checked: ..."
    wall_seconds: float
    race_clock_seconds: float  # engine seconds of the last finisher
    settings: dict[str, Any]  # what the race ran with (draft lengths "auto" or a number)
    models: dict[str, str]  # target / dspark / dflash -> the name of what is loaded
    positions: dict[str, list[dict[str, int]]]  # drafter -> per draft slot i (a depth of a tree): {"slot": i,
    # "reached": rounds that verified slot i after every earlier slot landed, "landed": rounds where it landed}
    confidence: dict[str, Any]  # DSpark with a confidence head: {"rounds" (chain rounds checked), "drafted_as_trees"
    # (drafting rounds left out: a tree carries no estimates), "used" (its threshold), "bins": [{"low",
    # "high", "slots", "landed", "mean_estimate"}], "cuts": [{"threshold", "verified", "landed", "saved", "lost",
    # "unknown"}]}: its estimates against what landed, and what each slider value would save or lose
    repeat: Optional[RepeatResult]  # repeat > 1: the races' speedups, medians and places (headline, winner,
    # tie_band, finish_order and the table then follow the medians; the texts and verdicts are the last race's)


class LaneUpdate(TypedDict):
    text: str  # the lane's text so far
    tokens: int
    rounds: int
    mean_accept: Optional[float]  # tokens committed per target forward (None before the first round)
    tok_s: float  # tokens per engine second so far, prefill included
    speedup: Optional[float]  # tok_s over the plain lane's (end to end); the outcome's once finished
    engine_seconds: float  # this lane's own compute so far, prefill included
    draft_length: Optional[int]  # drafts verified in the last round (0 = a plain step); None for greedy
    positions: Optional[list[dict[str, int]]]  # per draft slot so far: {"slot", "reached", "landed"}; None for greedy
    done: bool


class StreamUpdate(TypedDict):
    state: str  # racing | finished | stopped
    race: int  # which race of a repeat this is (1-based); races: how many were asked for
    races: int
    wall_seconds: float
    race_clock_seconds: float
    lanes: dict[str, LaneUpdate]  # engine (as in Place) -> its lane so far
    result: Optional[RaceResult]  # the last update's: exactly what /race returns


class ReplayUpdate(TypedDict):
    wall: float  # seconds since the replay began
    engine: Optional[str]  # the lane this round belongs to (None in the last update)
    tokens: int  # that lane's tokens so far
    text: str  # that lane's text so far
    result: Optional[RaceResult]  # the last update's: the race's result, unchanged by the replay


class SweepResult(TypedDict):
    table: list[dict[str, Any]]  # method x domain: accept, tok/s, speedup (end to end), lossless
    grid: list[dict[str, Any]]  # the release's layout: one row per method, "accept / tok/s / speedup" per domain
    rows: list[dict[str, Any]]  # one row per race and engine
    prompts: list[dict[str, str]]  # {domain, prompt} in the order raced
    settings: dict[str, Any]
    models: dict[str, str]
    positions: dict[str, dict[str, list[dict[str, int]]]]  # domain -> drafter -> per draft slot: {"slot", "reached",
    # "landed"}, summed over the domain's races
    versions: dict[str, str]
    timestamp: str
    stopped: bool


def race_events(stage: Any, prompt: str, knobs: dict[str, Any]) -> Iterator[Any]:
    """One race's events on the served arena (repeated_events with one race)."""
    return (ev for _, _, ev in repeated_events(stage, prompt, 1, knobs))


def race_result(events: list, models: dict[str, str], rep: Any = None) -> RaceResult:
    """A finished race's record as the API gives it: every number from its outcome (spec.outcome); with a
    repeat (spec.repeat.Repeated), the places, headline and band from its medians."""
    final, start = events[-1], events[0]
    out = final.outcome
    shown, each = shown_outcome(out, rep)  # a repeat's table follows its medians, as the page's does
    table = results_table(shown, final.verdicts, each)
    r3 = lambda x: None if x is None else round(x, 3)  # noqa: E731
    if rep is not None and rep.races:
        head, winner, band = rep.headline(), rep.winner, rep.band
        order = [Place(engine=o.engine, place=o.place, tied=o.tied, finish_seconds=r3(o.finish_seconds),
                       speedup=r3(o.median), speedups=[r3(x) for x in o.speedups], median=r3(o.median))
                 for o in rep.order]
    else:
        head, winner, band = out.headline(), out.winner, out.band
        order = [Place(engine=o.engine, place=o.place, tied=o.tied, finish_seconds=r3(o.finish_seconds),
                       speedup=r3(o.speedup), speedups=[r3(o.speedup)], median=r3(o.speedup)) for o in out.order]
    return RaceResult(
        headline=head, winner=winner, tie_band=round(band, 4),
        table=json.loads(table.to_json(orient="records")), columns=list(table.columns),
        finish_order=order, repeat=RepeatResult(**rep.record()) if rep is not None else None,
        texts={n: r.text for n, r in final.results.items()}, verdicts=dict(final.verdicts),
        wall_seconds=round(final.wall, 3), race_clock_seconds=round(final.clock, 3),
        settings=echo(start.settings) if start.settings else {}, models=models, positions=out.positions,
        confidence=out.confidence)


def lane_update(view: Any, name: str) -> LaneUpdate:
    lane, m = view.lanes[name], view.lanes[name].meter
    speedup = view.speedup(name)
    return LaneUpdate(text=lane.text, tokens=m.tokens if m else 0, rounds=m.rounds if m else 0,
                      mean_accept=round(m.mean_accept, 3) if m and m.rounds else None,
                      tok_s=round(m.e2e_tok_s, 2) if m else 0.0,
                      speedup=None if speedup is None else round(speedup, 3),
                      engine_seconds=round(m.clock, 3) if m else 0.0,
                      draft_length=m.drafted[-1] if m and m.drafted and name != "greedy" else None,
                      positions=(m.slots.rows() if m else []) if name != "greedy" else None, done=lane.done)


PROMPT = ("prompt", str, inspect.Parameter.empty, "the user's message (the chat template is applied)")
SPEED = ("speed", float, 1.0, "1 = as fast as the engines ran, 2 = twice as fast")
LOAD = ("race_json", str, inspect.Parameter.empty, "the text of a race file (the race's JSON download)")
REPEAT = ("repeat", int, 1, "races of the prompt, in turn: 1, 3 or 5 (each lane's speedups, their median and spread; "
          "places by the medians, ties within the spread the races showed)")


def repeated_events(stage: Any, prompt: str, repeat: Any, knobs: dict[str, Any]) -> Iterator[tuple[int, int, Any]]:
    """(race, races, event) of `repeat` races of the prompt on the served arena, in turn (spec.repeat); bad
    input and failures become one readable gr.Error (no traceback in the server's log: the message is the
    whole story)."""
    arena = stage.arena
    if arena is None:
        raise gr.Error(stage.tell(stage.error or "no model is loaded"), print_exception=False)
    try:
        n = repeat_count(repeat)
        settings = settings_of(knobs, arena)
        if not prompt or not prompt.strip():
            raise SpecError("the prompt is empty")
        for i, ev in repeat_race(arena, prompt, settings, n):
            yield i + 1, n, ev
    except Exception as e:
        raise gr.Error(stage.tell(e), print_exception=False) from None


def race(stage: Any, /, prompt: str, repeat: int = 1, **values: Any) -> RaceResult:
    """/race: one race (or a repeat) to the end."""
    events, finishes = [], []
    for _, n, ev in repeated_events(stage, prompt, repeat, values):
        events = [] if ev.kind == "start" else events
        events.append(ev)
        finishes += [ev] if ev.kind == "finish" else []
    return race_result(events, stage.names(), repeated(finishes, n) if n > 1 else None)


def race_stream(stage: Any, /, prompt: str, repeat: int = 1, **values: Any) -> Iterator[StreamUpdate]:
    """/race_stream: the same race live, an update every ROUNDS_PER_UPDATE rounds and at each lane's end."""
    view, since, events, finishes = None, 0, [], []
    for i, races, ev in repeated_events(stage, prompt, repeat, values):
        if ev.kind == "start":
            view, events = None, []  # each race of a repeat streams from its start
        events.append(ev)
        if ev.kind not in KNOWN:
            continue
        view = view or View.for_arena(stage.arena, ev.settings)  # the first event read is "start"
        view.feed(ev)
        since += ev.kind == "round"
        finishes += [ev] if ev.kind == "finish" else []
        if ev.kind in ("done", "finish") or since >= ROUNDS_PER_UPDATE:
            since = 0
            last = ev.kind == "finish" and (i == races or ev.outcome.stopped)
            rep = repeated(finishes, races) if last and races > 1 else None
            yield StreamUpdate(state=view.state if view.state != "waiting" else "racing", race=i, races=races,
                               wall_seconds=round(view.wall, 3), race_clock_seconds=round(view.clock, 3),
                               lanes={n: lane_update(view, n) for n in view.lanes},
                               result=race_result(events, stage.names(), rep) if last else None)


def replay(stage: Any, /, prompt: str, speed: float = 1.0, **values: Any) -> Iterator[ReplayUpdate]:
    """/replay: one race, then its rounds again at the moments its engines reached them."""
    events = list(race_events(stage, prompt, values))
    texts: dict[str, str] = {}
    try:
        for ev in replayed(events, speed):
            if ev.kind == "round":
                texts[ev.engine] = texts.get(ev.engine, "") + ev.round.text
                yield ReplayUpdate(wall=round(ev.wall, 3), engine=ev.engine, tokens=ev.meter.tokens,
                                   text=texts[ev.engine], result=None)
            elif ev.kind == "finish":
                yield ReplayUpdate(wall=round(ev.wall, 3), engine=None, tokens=0, text="",
                                   result=race_result(events, stage.names()))
    except SpecError as e:
        raise gr.Error(str(e), print_exception=False) from None


def load_race(stage: Any, /, race_json: str) -> RaceResult:
    """/load_race: a saved race's result from its file's text (no model runs; `stage` is unused)."""
    if not str(race_json).lstrip().startswith("{"):  # the file's text only: never a path on this server
        raise gr.Error("race_json must be a race file's text (JSON), as the race's download holds it",
                       print_exception=False)
    try:
        events, header = read_race(race_json)
    except SpecError as e:
        raise gr.Error(str(e), print_exception=False) from None
    return race_result(events, header.get("models") or {})


def sweep(stage: Any, /, domains: str = "chat,code,math,edit", per_domain: int = 2, prompts: str = "",
          **values: Any) -> SweepResult:
    """/sweep: the domain sweep to the end (demo.sweep_tab, as the page's tab runs it)."""
    return sweep_api(stage, domains, per_domain, prompts, values)


def endpoint_params() -> dict[str, list]:
    """api name -> its parameters (name, type, default, description); the knobs as the page's Settings."""
    knobs = knob_params()
    race_params = [PROMPT, *knobs, REPEAT]
    return {"race": race_params, "race_stream": race_params, "replay": [PROMPT, *knobs, SPEED], "load_race": [LOAD],
            "sweep": [("domains", str, "chat,code,math,edit", "comma-separated: chat, code, math, edit (their example "
                       "prompts; edit: texts to change, where prompt lookup shines)"),
                      ("per_domain", int, 2, "example prompts per domain, 1 to 6"),
                      ("prompts", str, "", "your own prompts instead, one a line (domain: custom)"),
                      *[(n, t, 48 if n == "max_new_tokens" else d, desc) for n, t, d, desc in knobs]]}


ENDPOINTS: dict[str, tuple[Callable, str, Any]] = {  # api name -> (endpoint over a stage, what it says, what it gives)
    "race": (race, "Run one race to the end: the outcome (headline, winner, places with finish times and the one "
             "speedup, end to end), the results table, the texts, the lossless verdicts and the settings it ran "
             "with; repeat 3 or 5: the prompt raced that many times in turn, each lane's speedups and median, places "
             "by the medians.", RaceResult),
    "race_stream": (race_stream, "Run one race and stream it live: an update every few rounds with each lane's text "
                    "and meters; the last update's `result` is what /race returns.", StreamUpdate),
    "replay": (replay, "Run one race, then stream it again at its measured speed: one update per round (that lane's "
               "text so far); the last carries the race's result, unchanged.", ReplayUpdate),
    "load_race": (load_race, "Open a saved race (the app's JSON download): its result as /race returned it, "
                  "recomputed from the file without running a model.", RaceResult),
    "sweep": (sweep, "The domain sweep to the end: races of the example prompts (or yours), summed per method and "
              "domain (accept, tok/s, speedup end to end, lossless), with the prompts, settings, models and versions "
              "it ran with.", SweepResult),
}


def on_stage(fn: Callable, stage: Any) -> Callable:
    """`fn` with the stage bound, keeping its name and whether it streams (knobs.described reads both)."""
    if inspect.isgeneratorfunction(fn):
        def bound(*args: Any, **kwargs: Any) -> Any:
            yield from fn(stage, *args, **kwargs)
    else:
        def bound(*args: Any, **kwargs: Any) -> Any:
            return fn(stage, *args, **kwargs)
    bound.__name__ = fn.__name__
    return bound


def endpoints(stage: Any) -> dict[str, tuple[Callable, list]]:
    """api name -> (endpoint, its parameters) over `stage`; parameters as the page's Settings."""
    params = endpoint_params()
    return {name: (described(on_stage(fn, stage), params[name], doc, returns), params[name])
            for name, (fn, doc, returns) in ENDPOINTS.items()}


def register(demo: gr.Blocks, stage: Any) -> None:
    """The endpoints on `demo`, one race at a time on the shared arena, each input named and described."""
    for name, (fn, params) in endpoints(stage).items():
        gr.api(fn, api_name=name, concurrency_id="arena", concurrency_limit=1)
        name_api_inputs(demo, name, params)
