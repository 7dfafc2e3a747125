"""The app's race endpoints, typed so Gradio's "Use via API" page and view_api() show what comes back:
/race (one race to the end), /race_stream (the same race live, an update every few rounds) and
/replay (a race, then played again at its measured speed).

No `from __future__ import annotations` here: Gradio reads these hints as objects to write the schema."""

import inspect
import json
from typing import Any, Callable, Iterator, Optional, TypedDict

import gradio as gr

ROUNDS_PER_UPDATE = 4  # /race_stream: one update per this many rounds (and at each lane's end)
KNOWN = ("start", "round", "done", "finish")  # event kinds the stream reads; others (e.g. "prefill") skipped


class Winner(TypedDict):
    engine: str  # dspark | dflash | greedy: most tokens per engine second, prefill included
    speedup_end_to_end: dict[str, float]  # each engine's end-to-end tok/s over greedy's


class RaceResult(TypedDict):
    table: list[dict[str, Any]]  # one row per engine: tokens, rounds, mean accept, tok/s, speedup, lossless
    columns: list[str]
    texts: dict[str, str]  # engine -> its text
    verdicts: dict[str, str]  # head -> "identical to greedy" | "DIFFERS from greedy at token i" | at T > 0
    # "identical to plain sampling" | "differs from plain sampling at token i" | "not checked: ..."
    wall_seconds: float
    race_clock_seconds: float  # engine seconds of the last finisher
    finish_order: list[tuple[str, float]]  # (engine, finish time in engine seconds), first first
    winner: Optional[Winner]  # None for a stopped race
    models: dict[str, str]  # target / dspark / dflash -> the name of what is loaded


class LaneUpdate(TypedDict):
    text: str  # the lane's text so far
    tokens: int
    rounds: int
    mean_accept: float  # tokens committed per target forward
    decode_tok_s: float  # on the engine's own busy time
    engine_seconds: float  # this lane's own compute so far, prefill included
    draft_length: Optional[int]  # drafts verified in the last round (0 = a plain step); None for greedy
    done: bool


class StreamUpdate(TypedDict):
    state: str  # racing | finished | stopped
    wall_seconds: float
    race_clock_seconds: float
    lanes: dict[str, LaneUpdate]
    verdicts: dict[str, str]  # filled in the last update
    finish_order: list[tuple[str, float]]  # lanes finished so far, on the race clock
    winner: Optional[Winner]  # the last update's
    table: list[dict[str, Any]]  # the last update's results table


def race_events(stage: Any, prompt: str, knobs: tuple) -> Iterator[Any]:
    """The served arena's race events; bad input and failures become one readable gr.Error."""
    from demo.stage import settings_of
    from spec.target import SpecError

    arena = stage.arena
    if arena is None:
        raise gr.Error(stage.tell(stage.error or "no model is loaded"))
    try:
        settings = settings_of(*knobs)
        if not prompt or not prompt.strip():
            raise SpecError("the prompt is empty")
        yield from arena.race(prompt, settings)
    except Exception as e:
        raise gr.Error(stage.tell(e)) from e


def as_winner(win: Optional[tuple[str, dict[str, float]]]) -> Optional[Winner]:
    """spec.race.winner()'s answer as the API returns it."""
    return None if win is None else Winner(engine=win[0], speedup_end_to_end={n: round(r, 3) for n, r in
                                                                             win[1].items()})


def race_result(final: Any, models: dict[str, str], sampled: bool = False) -> RaceResult:
    from spec.race import results_table, standings, winner

    table = results_table(final.results, final.verdicts, sampled)

    return RaceResult(table=json.loads(table.to_json(orient="records")), columns=list(table.columns),
                      texts={n: r.text for n, r in final.results.items()}, verdicts=dict(final.verdicts),
                      wall_seconds=round(final.wall, 3), race_clock_seconds=round(final.clock, 3),
                      finish_order=[(n, round(t, 3)) for n, t in standings(final.results)],
                      winner=as_winner(winner(final.results)), models=models)


def stream_update(view: Any) -> StreamUpdate:
    """What a /race_stream client sees of the race so far (a demo.view.View)."""

    lanes = {}
    for name, lane in view.lanes.items():
        m = lane.meter
        lanes[name] = LaneUpdate(text=lane.text, tokens=m.tokens if m else 0, rounds=m.rounds if m else 0,
                                 mean_accept=round(m.mean_accept, 3) if m else 0.0,
                                 decode_tok_s=round(m.tok_s, 2) if m else 0.0,
                                 engine_seconds=round(m.clock, 3) if m else 0.0,
                                 draft_length=m.drafted[-1] if m and m.drafted and name != "greedy" else None,
                                 done=lane.done)
    table = json.loads(view.table.to_json(orient="records")) if view.table is not None else []
    return StreamUpdate(state=view.state if view.state != "waiting" else "racing", wall_seconds=round(view.wall, 3),
                        race_clock_seconds=round(view.clock, 3), lanes=lanes, verdicts=dict(view.verdicts),
                        finish_order=[(n, round(t, 3)) for n, t in view.order], winner=as_winner(view.winner),
                        table=table)


def endpoints(stage: Any) -> tuple[Callable[..., RaceResult], Callable[..., Iterator[StreamUpdate]],
                                   Callable[..., Iterator[dict]]]:
    """/race, /race_stream and /replay over `stage` (parameters as the page's Settings, same limits)."""

    def race(prompt: str, max_new_tokens: int = 128, temperature: float = 0.0, top_p: float = 1.0,
             top_k: int = 0, seed: int = 0, dspark_cap: int = 0, dspark_threshold: float = 0.0,
             dflash_len: int = 0, baseline: bool = True, thinking: bool = False) -> RaceResult:
        """Run one race to the end. Returns the results table (records, one row per engine), the texts,
        the lossless verdicts, the finishing order on the race clock (engine seconds), the winner with
        its end-to-end speedups and the loaded models' names. max_new_tokens: 1 to 2048 (the page's
        limit). thinking: the chat template's enable_thinking (Qwen3's <think>), off by default."""
        knobs = (max_new_tokens, temperature, top_p, top_k, seed, dspark_cap, dspark_threshold, dflash_len,
                 baseline, thinking)
        final = list(race_events(stage, prompt, knobs))[-1]
        return race_result(final, stage.names(), float(temperature) > 0)

    def race_stream(prompt: str, max_new_tokens: int = 128, temperature: float = 0.0, top_p: float = 1.0,
                    top_k: int = 0, seed: int = 0, dspark_cap: int = 0, dspark_threshold: float = 0.0,
                    dflash_len: int = 0, baseline: bool = True, thinking: bool = False) -> Iterator[StreamUpdate]:
        """Run one race and stream it live, while it runs: an update every few rounds with each lane's
        text and meters (tokens, rounds, mean accept, decode tok/s, engine seconds, draft length) and
        the race and wall clocks; the last update (state "finished" or "stopped") adds the verdicts, the
        finishing order, the winner and the results table. Parameters as /race."""
        from demo.stage import settings_of
        from demo.view import View

        knobs = (max_new_tokens, temperature, top_p, top_k, seed, dspark_cap, dspark_threshold, dflash_len,
                 baseline, thinking)
        view, since = None, 0
        for ev in race_events(stage, prompt, knobs):
            if ev.kind not in KNOWN:
                continue
            view = view or View.for_arena(stage.arena, settings_of(*knobs))
            view.feed(ev)
            since += ev.kind == "round"
            if ev.kind in ("done", "finish") or since >= ROUNDS_PER_UPDATE:
                since = 0
                yield stream_update(view)

    def replay(prompt: str, max_new_tokens: int = 128, temperature: float = 0.0, top_p: float = 1.0,
               top_k: int = 0, seed: int = 0, dspark_cap: int = 0, dspark_threshold: float = 0.0,
               dflash_len: int = 0, baseline: bool = True, thinking: bool = False,
               speed: float = 1.0) -> Iterator[dict]:
        """Run one race, then stream it again at its measured speed (speed 2 = twice as fast): one update
        per round, {"wall", "engine", "tokens", "text"} with that lane's text so far; the last update
        also carries "verdicts" and "finish_order"."""
        from spec.race import replay as replayed, standings
        from spec.target import SpecError

        events = list(race_events(stage, prompt, (max_new_tokens, temperature, top_p, top_k, seed, dspark_cap,
                                                  dspark_threshold, dflash_len, baseline, thinking)))
        texts: dict[str, str] = {}
        try:
            for ev in replayed(events, speed):
                if ev.kind == "round":
                    texts[ev.engine] = texts.get(ev.engine, "") + ev.round.text
                    yield {"wall": round(ev.wall, 3), "engine": ev.engine, "tokens": ev.meter.tokens,
                           "text": texts[ev.engine]}
                elif ev.kind == "finish":
                    yield {"wall": round(ev.wall, 3), "texts": texts, "verdicts": ev.verdicts,
                           "finish_order": [[n, round(t, 3)] for n, t in standings(ev.results)]}
        except SpecError as e:
            raise gr.Error(str(e)) from e

    # Gradio types an endpoint by its function's return annotation: a generator's is its item's.
    race_stream.__signature__ = inspect.signature(race_stream).replace(return_annotation=StreamUpdate)
    return race, race_stream, replay
