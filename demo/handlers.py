"""What the page's events do, over the Stage every session shares: race, replay, stop, sweep, load a
model, and the first start's preparation. UI only: the races and loads themselves live in spec.

demo/app.py builds the layout and wires each event under its components to a method here; the few
components a handler reads (the prompt, the knobs, the sweep's inputs) are handed over by `bind`.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

import gradio as gr

from demo.controls import RUN_LABEL, armed
from demo.download import download_question, to_download
from demo.export import save_results
from demo.exposure import REFUSED
from demo.knobs import DRAFT_KNOBS, head_blocks, lookup_on, page_values, settings_of
from demo.lanes import LANES, Lane, esc, meters_html, text_html
from demo.stage import Choice, Stage, describe, preparation_html, preset_note
from demo.status import error_html
from demo.story_panel import story_html
from demo.sweep_tab import busy, run_sweep
from demo.view import View, idle_lanes
from spec.errors import SpecError
from spec.race.file import race_record, read_race
from spec.race.repeat import repeat_count, repeated
from spec.race.run import replay as replayed
from spec.race.story import story_for
from spec.report import pairs_words, race_markdown, settings_words

STREAM_EVERY = 0.12  # seconds between page updates while racing (every round would flood the socket)
PREPARING = "still preparing the model: Run starts as soon as it is ready (the steps show above)"
WAITING = ('<div class="status queued"><span class="pulse wait"></span><b>Preparing the model</b>: Run starts '
           "as soon as it is ready (the steps show above).</div>")
READY = '<div class="status">Ready.</div>'
WAIT_LABEL = "Preparing…"
LIMITS = len(DRAFT_KNOBS) + 2  # knob_limits' updates: the draft-length sliders, the thinking and lookup boxes


class Handlers:
    def __init__(self, stage: Stage):
        self.stage = stage
        self.prompt = self.auto = None
        self.controls: dict[str, Any] = {}
        self.sweep_inputs: list = []
        self.plot_x: Any = None  # the chart's axis choice (round or race clock)
        self.prefill_rate = 0.0  # prompt tokens per second the last long enough prefill read (this model)

    def bind(self, prompt: Any, auto: Any, controls: dict[str, Any], sweep_inputs: list, plot_x: Any = None,
             repeat: Any = None) -> None:
        """The components whose values the handlers read from an event's `data`."""
        self.prompt, self.auto, self.controls, self.sweep_inputs = prompt, auto, controls, sweep_inputs
        self.plot_x, self.repeat = plot_x, repeat

    # -- the race ----------------------------------------------------------------------------------

    def message(self, status: str, error: str = "", reset: bool = False) -> tuple:
        """Status + error; the lanes keep the last race (or go back to idle when this one never began). The
        status line says the reason too: it is in view (the page brings it there), the error box may not be."""
        lanes = idle_lanes(self.stage) if reset else [gr.skip()] * (2 * len(LANES))
        said = f"{status.rstrip('.')}: {error}" if error else status
        return (f'<div class="status said">{esc(said)}</div>', error_html(error), *lanes, *(gr.skip(),) * 5)

    def arm(self, request: gr.Request) -> tuple:
        """Run clicked: forget a Stop pressed earlier while nothing of ours was queued; Run off, Stop on."""
        self.stage.cancelled.discard(request.session_hash)
        return armed(busy=self.stage.owner is not None)

    def run(self, data: dict, request: gr.Request) -> Iterator[tuple]:
        """Drain the arena's events into the page, a few updates a second (data: {component: value}); a
        repeat races the prompt again in turn, the lanes showing each race, then the repeat's medians."""
        stage, prompt_text = self.stage, data[self.prompt]
        sid = request.session_hash if request else None
        if sid in stage.cancelled:
            stage.cancelled.discard(sid)
            yield self.message("Stopped before it started.")
            return
        arena = stage.arena
        if arena is None:
            msg = stage.tell(PREPARING if stage.preparing else stage.error or
                             "no model is loaded: pick a preset in Settings")
            gr.Warning(msg, duration=10)
            yield self.message("Not run.", msg)
            return
        view: View | None = None
        try:
            settings = settings_of(page_values(data, self.auto, self.controls), arena)
            races = repeat_count(data.get(self.repeat, 1)) if self.repeat is not None else 1
            if not prompt_text or not prompt_text.strip():
                raise SpecError("the prompt is empty: type one or click an example")
            stage.owner, finishes = sid, []
            for i in range(races):
                if i and sid in stage.cancelled:  # Stop pressed between two races (the next race would reset
                    view.show_repeat(repeated(finishes, races))  # the arena's flag): the repeat ends here
                    yield view.outputs()
                    break
                view = View.for_arena(arena, settings)
                view.plot_x, view.race_no = data.get(self.plot_x, "round"), (i + 1, races)
                view.prefill_rate = self.prefill_rate
                yield view.outputs()
                last, recorded = 0.0, []
                for ev in arena.race(prompt_text, settings):
                    recorded.append(ev)
                    view.feed(ev)
                    view.stopping = arena.stopping
                    if ev.kind == "finish":
                        finishes.append(ev)
                        if races > 1 and (i + 1 == races or ev.outcome.stopped):
                            view.show_repeat(repeated(finishes, races))
                        self.keep(view, recorded, prompt_text, sid)
                    now = time.monotonic()
                    if ev.kind != "round" or now - last >= STREAM_EVERY:
                        last = now
                        yield view.outputs()
                if view.state != "finished":
                    break
        except Exception as e:  # a readable message in the page; the server keeps serving
            msg = stage.tell(e)
            gr.Warning(msg, duration=10)
            if view is None or view.state == "waiting":
                yield self.message("Not run.", msg, reset=view is not None)
            else:
                yield (*view.outputs()[:1], error_html(msg), *view.outputs()[2:])
        finally:
            if stage.owner == sid:
                stage.owner = None

    def keep(self, view: View, recorded: list, prompt_text: str, sid: str | None) -> None:
        """A finished race kept: for this session's Replay, as downloads and Markdown on the page, and its
        prefill's speed for the next long prompt's estimate."""
        finish = recorded[-1]
        when = datetime.now(timezone.utc)
        record = race_record(recorded, prompt_text, self.stage.names(), when)
        header = {k: v for k, v in record.items() if k != "events"}
        self.stage.record(sid, recorded, header)
        view.files = save_results(view, record, when)
        view.summary = race_markdown(finish, header, view.repeat)
        self.prefill_rate = prefill_rate(finish.outcome) or self.prefill_rate

    def replay_last(self, speed: str, plot_x: str, request: gr.Request) -> Iterator[tuple]:
        """The session's last race (run here or opened from a file) again, each lane's rounds at the moments
        its own engine reached them, at the chosen speed ("0.5x", "1x", "2x")."""
        sid = request.session_hash if request else None
        events = self.stage.recordings.get(sid)
        if not events:
            yield self.message("Nothing to replay yet: run a race to the end, or open a race file.")
            return
        yield from self.replayed(events, speed, self.stage.headers.get(sid, {}), plot_x)

    def open_race(self, file: Any, speed: str, plot_x: str, request: gr.Request) -> Iterator[tuple]:
        """A race file (the JSON download, someone else's too): replayed as it was raced, no model needed."""
        path = getattr(file, "name", file)
        try:
            events, header = read_race(str(path))
        except SpecError as e:
            gr.Warning(f"Not opened: {e}", duration=10)  # as a refused race says it
            yield self.message("Not opened.", str(e))
            return
        header["source"] = (f"Opened {Path(str(path)).name}: raced {header.get('timestamp', '?')} on "
                            f"{header.get('machine', 'an unknown machine')} ({pairs_words(header.get('versions'))}); "
                            f"prompt: “{' '.join(str(header.get('prompt', '')).split())[:160]}”. "
                            f"Models: {pairs_words(header.get('models')) or 'not recorded'}. "
                            f"Settings: {settings_words(header.get('settings') or {})}.")
        self.stage.record(request.session_hash if request else None, events, header)
        yield from self.replayed(events, speed, header, plot_x)

    def replayed(self, events: list, speed: str, header: dict, plot_x: str = "round") -> Iterator[tuple]:
        """A recorded race on the page at `speed`, a few updates a second (spec.race.run.replay times it)."""
        view = View.for_replay(events, getattr(self.stage.arena, "missing", {}))
        view.source, view.speed = header.get("source", ""), float(str(speed).rstrip("x") or 1)
        view.plot_x = plot_x or "round"
        view.summary = race_markdown(events[-1], header) if header else ""
        last = 0.0
        for ev in replayed(events, view.speed):
            view.feed(ev)
            now = time.monotonic()
            if ev.kind != "round" or now - last >= STREAM_EVERY:
                last = now
                yield view.outputs()

    def stop(self, request: gr.Request) -> None:
        """Stop our own race within one round (or our queued run before it starts, or a repeat between two
        of its races); never someone else's."""
        sid = request.session_hash
        if self.stage.owner == sid and self.stage.arena is not None:
            self.stage.arena.stop()
        self.stage.cancelled.add(sid)  # Run and the sweep's Run forget it when clicked again

    # -- the sweep ---------------------------------------------------------------------------------

    def arm_sweep(self, request: gr.Request) -> tuple:
        self.stage.cancelled.discard(request.session_hash)
        return busy(True)

    def sweep_page(self, data: dict, request: gr.Request) -> Iterator[tuple]:
        """The sweep tab's Run: its own prompts and length, the Settings' sampling and head knobs."""
        domains, per_domain, own, sweep_max_new = (data[c] for c in self.sweep_inputs)
        yield from run_sweep(self.stage, domains, per_domain, own, sweep_max_new,
                             page_values(data, self.auto, self.controls), request=request)

    # -- loading a model ---------------------------------------------------------------------------

    def settled(self, shown: str, err: str = "") -> tuple:
        """The Settings after a load, a refusal or a cancel: the error next to Load, no question open."""
        return (gr.skip(), gr.skip(), error_html(err), gr.Dropdown(value=shown), gr.Group(visible=shown == "custom"),
                preset_note(shown), gr.Group(visible=False), gr.skip(), gr.Button(visible=True),
                *(gr.skip(),) * (LIMITS + 2 * len(LANES) + 1))

    def ask_or_load(self, preset: str, target: str, dspark: str, dflash: str,
                    progress: gr.Progress = gr.Progress(track_tqdm=True)) -> tuple:
        """Load, unless that downloads from the hub first: then ask, with the size (nothing starts yet)."""
        if not self.stage.exposure.may_switch:
            return self.settled(self.stage.serving, REFUSED)
        choice = Choice.of(preset, target, dspark, dflash)
        repos = to_download(choice)
        if not repos:
            return self.load(preset, target, dspark, dflash, progress)
        ask = download_question(choice, repos)
        return (gr.skip(), gr.skip(), "", gr.skip(), gr.skip(), gr.skip(), gr.Group(visible=True),
                ask, gr.Button(visible=False), *(gr.skip(),) * (LIMITS + 2 * len(LANES) + 1))

    def cancel_load(self) -> tuple:
        return self.settled(self.stage.serving)

    def load(self, preset: str, target: str, dspark: str, dflash: str,
             progress: gr.Progress = gr.Progress(track_tqdm=True)) -> tuple:
        """Load a preset (or custom ids) next to the current arena; keep serving the old one on error.
        The error shows once, next to the Load controls (no toast: they piled up)."""
        stage = self.stage
        if not stage.exposure.may_switch:
            return self.settled(stage.serving, REFUSED)
        if stage.preparing is not None:
            return self.settled(stage.serving, f"{PREPARING}.")
        choice = Choice.of(preset, target, dspark, dflash)
        try:
            progress(0.0, desc=f"loading {choice.label}")
            stage.load(choice, lambda step, f: progress(f, desc=step))
            err, self.prefill_rate = "", 0.0  # another model reads at another speed
        except Exception as e:
            err = stage.failure(choice, e)
        shown = preset if not err or preset == "custom" else stage.serving  # a failed custom load stays open to fix
        lanes = [gr.skip()] * (2 * len(LANES)) if err else idle_lanes(stage)
        return (describe(stage), gr.skip() if err else "", error_html(err), gr.Dropdown(value=shown),
                gr.Group(visible=shown == "custom"), preset_note(shown), gr.Group(visible=False), gr.skip(),
                gr.Button(visible=True), *knob_limits(stage), *lanes, gr.skip() if err else self.story())

    @staticmethod
    def on_preset(preset: str) -> tuple:
        return gr.Group(visible=preset == "custom"), preset_note(preset)

    def story(self, mine: bool = False) -> str:
        """Who wins where for the models loaded: their last sweep here, else the shipped table (mine: the
        session that just swept, which sees its sweep even when it is too small to replace the table)."""
        return story_html(story_for(self.stage.names(), mine))

    # -- a first start -----------------------------------------------------------------------------

    def prepared(self) -> tuple:
        """Every tick while the model is prepared: the steps, and Run off. Once ready (or failed): the
        header, the lanes, the sliders' limits, Run on, the timer off, and who wins where for that model."""
        stage = self.stage
        if stage.preparing is not None:
            return (gr.HTML(preparation_html(stage), visible=True), describe(stage), gr.skip(), WAITING,
                    gr.Button(WAIT_LABEL, interactive=False), *(gr.skip(),) * LIMITS, *(gr.skip(),) * (2 * len(LANES)),
                    gr.skip(), gr.skip())
        return (gr.HTML("", visible=False), describe(stage), error_html(stage.error), READY,
                gr.Button(RUN_LABEL, interactive=True), *knob_limits(stage), *idle_lanes(stage),
                gr.Timer(active=False), self.story())


def block_sizes(stage: Stage) -> tuple[int, int]:
    """Where the heads' draft-length sliders end (the API checks the same ends: demo.knobs.head_blocks)."""
    ends = head_blocks(stage.arena)
    return ends["dspark_max_draft"], ends["dflash_max_draft"]


def prefill_rate(outcome: Any) -> float:
    """Prompt tokens per second of a finished race's shared prefill (0 for a prompt too short to tell)."""
    lane = next(iter(outcome.lanes.values()), None)
    if lane is None or lane.prompt_tokens < 64 or lane.prefill_seconds <= 0:
        return 0.0
    return lane.prompt_tokens / lane.prefill_seconds


def can_think(stage: Stage) -> bool:
    """Whether the loaded target's chat template has the thinking switch (Qwen3's <think>)."""
    return bool(stage.arena is not None and getattr(stage.arena.target, "can_think", False))


def knob_limits(stage: Stage) -> tuple:
    """What the loaded model changes in the Settings (LIMITS updates): where the draft-length sliders end,
    whether "Let the model think" is offered (off where the template has no such switch), and the lookup
    lane's box, ticked where the preset misses a head (demo.knobs.lookup_on)."""
    think = can_think(stage)
    return (*(gr.Slider(maximum=end) for end in head_blocks(stage.arena).values()),
            gr.Checkbox(visible=True) if think else gr.Checkbox(value=False, visible=False),
            gr.Checkbox(value=lookup_on(stage.arena)))


def lookup_lane(on: bool, status: str) -> tuple:
    """The lookup box ticked or unticked before any race: its idle card comes and goes with it, so the lanes
    shown are the lanes Run will race; once a race is on the page its lanes stay as they raced."""
    if status != READY:
        return gr.skip(), gr.skip()
    lane = Lane("lookup") if on else None
    return meters_html("lookup", lane, None), text_html("lookup", lane, idle=True)
