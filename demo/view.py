"""One race as the page sees it: the lanes, the race and wall clocks, the finishing order and the
table, fed event by event from spec.race; outputs() gives what the page's components show."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import gradio as gr
import pandas as pd

from demo.confidence_chart import confidence_chart
from demo.knobs import lookup_on
from demo.lanes import DRAFTERS, LANES, Lane, meters_html, plural, text_html
from demo.notes import below_greedy_html
from demo.slot_chart import slot_chart
from demo.status import status_html
from spec.errors import SpecError
from spec.hub import hub_error
from spec.race.repeat import shown_outcome
from spec.race.run import lane_notes
from spec.report import results_table, shown

PLOT_ROUNDS = 32  # the per-round chart's x axis grows by this many rounds
CLOCK = "engine s"  # the chart's other x axis: each round's end on its lane's clock (engine seconds)
DRAFTS = " drafts"  # the chart's series of a drafter's chosen draft lengths: "DSpark drafts"
PLOT_EVERY = 1.0  # race-wall seconds between chart redraws while racing: every 0.12 s (the lanes' pace) the
# browser's redraws put the page 8-11 s behind a 10-15 s race on two cores and took CPU from the engines


@dataclass
class View:
    """Everything the page shows about one race, fed event by event."""

    lanes: dict[str, Lane]
    wall: float = 0.0
    clock: float = 0.0  # the race clock: engine seconds
    state: str = "waiting"  # waiting | racing | finished | stopped
    outcome: Any = None  # spec.outcome.Outcome, at the finish: every number the finished page shows
    max_new_tokens: int = 0  # the progress strip's full bar
    replay: bool = False  # a recorded race played again at measured speed
    table: Any = None
    verdicts: dict[str, str] = field(default_factory=dict)
    files: list[str] | None = None
    sampled: bool = False  # T > 0: the third lane samples
    prefilled: int = 0  # prompt tokens read by the shared prefill so far
    prompt_tokens: int = 0
    prefill_rate: float = 0.0  # prompt tokens per second of an earlier race's prefill: the wait, said up front
    stopping: bool = False  # Stop pressed, the race not ended yet
    rounds: dict[str, list[dict]] = field(default_factory=dict)  # engine -> its rounds, for the download
    plot_span: tuple = ()  # the chart's x and y ranges as last sent
    plot_sent: float | None = None  # the race's wall clock (self.wall) when the chart was last sent
    threshold: float = 0.0  # DSpark's confidence cut the race runs with (its confidence picture marks it)
    source: str = ""  # a race opened from a file: where and when it was raced
    speed: float = 1.0  # a replay's speed (1 = as the engines ran)
    summary: str = ""  # the finished race in Markdown (spec.report.race_markdown), for a chat or an issue
    plot_x: str = "round"  # the per-round chart against the round number or the race clock (CLOCK)
    race_no: tuple[int, int] = (1, 1)  # a repeat: this race's number and how many were asked for
    repeat: Any = None  # spec.repeat.Repeated once a repeat is over: the cards and table show its medians

    def ran_with(self, settings: Any) -> "View":
        """What the race runs with that the page shows: the confidence cut, a lane's ablation."""
        if settings is not None:
            self.threshold = settings.dspark_threshold
            for name, note in lane_notes(settings, cards=True).items():
                if name in self.lanes:
                    self.lanes[name].note = note
        return self
    absent: dict[str, str] = field(default_factory=dict)  # head kind -> why it is not in the race

    @classmethod
    def for_arena(cls, arena: Any, settings: Any) -> "View":
        names = ([n for n in ("dspark", "dflash") if n in arena.heads] + (["lookup"] if settings.lookup else [])
                 + (["greedy"] if settings.baseline else []))
        sampled = settings.sampling.temperature > 0
        return cls({n: Lane(n, sampled) for n in names}, sampled=sampled, absent=dict(getattr(arena, "missing", {})),
                   max_new_tokens=settings.max_new_tokens).ran_with(settings)

    @classmethod
    def for_replay(cls, events: list, absent: dict[str, str] | None = None) -> "View":
        """A view of a recorded race: its lanes and settings as the record holds them."""
        start = next(ev for ev in events if ev.kind == "start")
        sampled = start.temperature > 0
        names = dict.fromkeys(e.engine for e in events if e.kind == "round")
        return cls({n: Lane(n, sampled) for n in names}, sampled=sampled, replay=True, absent=dict(absent or {}),
                   max_new_tokens=start.settings.max_new_tokens if start.settings else 0).ran_with(start.settings)

    def feed(self, ev: Any) -> None:
        self.wall = ev.wall or self.wall
        self.clock = ev.clock or self.clock
        if ev.kind == "start":
            self.state = "racing"
            self.prompt_tokens = ev.prompt_tokens
        elif ev.kind == "prefill":
            self.prefilled, self.prompt_tokens = ev.prefilled, ev.prompt_tokens
            for lane in self.lanes.values():
                lane.progress = f"{ev.prefilled:,} of {ev.prompt_tokens:,} tokens"
        elif ev.kind == "round":
            lane = self.lanes[ev.engine]
            lane.add(ev.round)
            lane.meter = ev.meter
            self.rounds.setdefault(ev.engine, []).append(round_record(ev))
        elif ev.kind == "done":
            self.lanes[ev.engine].meter = ev.meter
            self.lanes[ev.engine].finish(ev.result)
        elif ev.kind == "finish":
            for name, res in ev.results.items():
                if name in self.lanes and not self.lanes[name].done:
                    self.lanes[name].finish(res)
            self.verdicts = dict(ev.verdicts)
            for name, v in ev.verdicts.items():
                self.lanes[name].verdict = v
            self.outcome = ev.outcome
            for name, o in ev.outcome.lanes.items():
                if name in self.lanes:
                    self.lanes[name].outcome = o
            self.state = "stopped" if ev.outcome.stopped else "finished"
            self.table = results_table(ev.outcome, ev.verdicts)  # numbers, as downloaded

    def show_repeat(self, rep: Any) -> None:
        """A repeat is over: its places, medians and band on the cards and in the table (spec.repeat), each
        card with its speedups' range; a stopped one, or one that ran a single race, keeps that race's
        numbers (the status adds the repeat's line)."""
        self.repeat = rep
        median, each = shown_outcome(self.outcome, rep)
        if each is None:  # stopped, or one race: the race's own numbers stand
            return
        self.outcome = median
        for name, o in median.lanes.items():
            if name in self.lanes:
                self.lanes[name].outcome = o
                if name != "greedy":  # the reference: ×1.00 in every race
                    self.lanes[name].races = f"{plural(rep.races, 'race')}: {rep.lanes[name].range_text}"
        self.table = results_table(median, self.verdicts, each)

    def speedup(self, name: str) -> float | None:
        """The one speedup (end to end): the outcome's once the race is over; while it runs, this lane's
        tokens per engine second so far over the plain lane's."""
        if self.outcome is not None and name in self.outcome.lanes:
            return self.outcome.lanes[name].speedup
        base, lane = self.lanes.get("greedy"), self.lanes[name]
        if base is None or base.meter is None or lane.meter is None or base.meter.e2e_tok_s <= 0:
            return None
        return lane.meter.e2e_tok_s / base.meter.e2e_tok_s

    def plot(self) -> pd.DataFrame | None:
        """Per round of each drafter (the heads, prompt lookup), its accept length and (a lighter line,
        "<name> drafts") the drafts it verified: the length chosen, 0 for a parked round, so the chart shows
        where auto parks and how much of each draft landed. None (never an empty frame, Gradio 6 LinePlot)
        until every drafter has a round or the race is over: the browser keeps the colours of the plot's
        first frame, so a lane missing from it would stay invisible for the whole race."""
        meters = {n: self.lanes[n].meter for n in DRAFTERS if n in self.lanes}
        if self.state == "racing" and not all(m is not None and m.accept_lengths for m in meters.values()):
            return None
        rows = []
        for n, m in meters.items():
            if m is None:
                continue
            clock = {r["round"]: r["lane_clock"] for r in self.rounds.get(n, [])}  # its end on the lane's clock
            for suffix, values in (("", m.accept_lengths), (DRAFTS, m.drafted)):
                rows += [{"round": i + 1, CLOCK: clock.get(i + 1), "tokens": v, "series": LANES[n] + suffix}
                         for i, v in enumerate(values)]
        return pd.DataFrame(rows) if rows else None

    def outputs(self) -> tuple:
        """What the race's components show now, in the order of the page's race outputs (demo/race_tab.py)."""
        cols = []
        for name in LANES:
            lane = self.lanes.get(name)
            cols += [meters_html(name, lane, self.speedup(name) if lane else None, self.absent.get(name, "")),
                     text_html(name, lane)]
        files = gr.File(value=self.files, visible=True) if self.files else gr.File(value=None, visible=False)
        shown_table = shown(self.table) if self.table is not None else empty_table()  # the cards' digits
        if "speedups (each race)" in shown_table:  # a repeat: its speedups in the place of the decode details
            shown_table = shown_table.drop(columns=["decode tok/s", "decode speedup"])
        table = gr.DataFrame(shown_table, column_widths=[f"{WIDTHS.get(c, 80)}px" for c in shown_table.columns],
                             label=STOPPED_TABLE_LABEL if self.state == "stopped" else
                             REPEAT_TABLE_LABEL.format(n=self.repeat.races) if self.repeat is not None and
                             self.repeat.races > 1 else TABLE_LABEL)
        summary = gr.Textbox(value=self.summary, visible=bool(self.summary and self.outcome is not None))
        return (status_html(self) + below_greedy_html(self), "", *cols, self.plot_update(), self.why_html(), table,
                files, summary)

    def why_html(self) -> str:
        """Why a lane wins: per draft slot, every drafter that raced side by side (demo.slot_chart), and
        DSpark's confidence head checked (demo.confidence_chart); the live meters' numbers while the race runs,
        the outcome's once it is over (the same numbers: spec.slots, spec.confidence)."""
        if self.outcome is not None:
            slots, conf = self.outcome.positions, self.outcome.confidence.get("dspark")
        else:
            meters = {n: lane.meter for n, lane in self.lanes.items() if n != "greedy" and lane.meter is not None}
            slots = {n: m.slots.rows() for n, m in meters.items()}
            conf = meters["dspark"].confidence.record(self.threshold) if "dspark" in meters else None
        return f'<div class="why-charts">{slot_chart(slots)}{confidence_chart(conf)}</div>'

    def plot_update(self) -> Any:
        """The chart's update: never None (an emptied chart throws on its next resize in Gradio 6), and
        an x axis of whole multiples of PLOT_ROUNDS rounds, so its ticks fall on whole rounds: a span of
        31+ over at most 35 ticks (a chart narrower than 1400 px) gives a tick step of 1 or more, where
        a span of 4 had ticks at halves, printed "1, 2, 2, 3, 3". Sent again only when it grows (each
        new x_lim redraws the chart). While racing, at most once every PLOT_EVERY seconds."""
        plot = self.plot()
        if plot is None or (self.state == "racing" and self.plot_sent is not None
                            and self.wall - self.plot_sent < PLOT_EVERY):
            return gr.skip()
        self.plot_sent = self.wall
        if self.plot_x == CLOCK:  # engine seconds: the lanes compare at the same moment of their compute
            if self.plot_span == (CLOCK,):
                return plot
            self.plot_span = (CLOCK,)
            return gr.LinePlot(value=plot, x=CLOCK, x_lim=None, x_axis_format=None)
        span = PLOT_ROUNDS * max(1, math.ceil(int(plot["round"].max()) / PLOT_ROUNDS))
        top = 4 * math.ceil((int(plot["tokens"].max()) + 1) / 4)  # room above the highest line (a full 15-draft
        if (span, top) == self.plot_span:                          # round once sat on the frame, unseen)
            return plot
        self.plot_span = (span, top)
        return gr.LinePlot(value=plot, x="round", x_lim=[1, span], y_lim=[0, top], x_axis_format="d")


TABLE_COLUMNS = {"place": 60, "engine": 88, "speedup": 76, "tok/s": 64, "mean accept": 72, "tokens": 68, "rounds": 68,
                 "finish s": 80, "status": 128, "lossless (vs greedy)": 180, "decode tok/s": 72,
                 "decode speedup": 80, "prefill s": 84, "prompt tokens": 72}  # px: a header never breaks inside a
# word, and the whole table (1,192 px) fits the page's column at 1440 px (1,376 px had the last two clipped);
# a repeat shows its speedups beside the median instead of the decode-only details (1,164 px)
WIDTHS = {**TABLE_COLUMNS, "vs plain sampling": 180, "speedups (each race)": 124}
REPEAT_TABLE_LABEL = ("Results of {n} races, fastest first by the median speedup (speedup, tok/s, finish s: the "
                      "races' medians; each race's speedup beside it; decode-only details in the download)")


TABLE_LABEL = ("Results, fastest first (speedup and tok/s: end to end, tokens per engine second; decode-only "
               "figures as details)")
STOPPED_TABLE_LABEL = ("Results of a stopped race: no places; the lane ahead first, by tokens per engine second "
                       "when stopped (speedup and tok/s: end to end; decode-only figures as details)")


def empty_table() -> pd.DataFrame:
    return pd.DataFrame(columns=list(TABLE_COLUMNS))


def idle_lanes(stage: Any) -> list[str]:
    """Lane cards before the first race: the engines this arena will race with the page's defaults (the
    lookup lane where the preset misses a head: demo.knobs.lookup_on), nothing measured yet."""
    a = stage.arena
    present = ({n for n in ("dspark", "dflash") if a is not None and n in a.heads} | ({"greedy"} if a else set())
               | ({"lookup"} if lookup_on(a) else set()))
    out = []
    for name in LANES:
        lane = Lane(name) if name in present else None
        out += [meters_html(name, lane, None, absent=getattr(a, "missing", {}).get(name, "")),
                text_html(name, lane, idle=True)]
    return out


def round_record(ev: Any) -> dict:
    """One round of one lane as the download keeps it (round 0 is the prefill's first token)."""
    r = ev.round
    return {"round": r.index, "tokens": len(r.tokens), "accepted": r.accepted, "drafted": r.drafted,
            "seconds": round(r.seconds, 6), "lane_clock": round(ev.lane_clock, 6), "wall": round(ev.wall, 6)}


def readable(e: BaseException) -> str:
    """One line a user can act on; SpecError messages are already written for people, the hub
    library's own (a stack of causes: "LocalEntryNotFoundError: ... Got: ConnectError ...") are not."""
    if isinstance(e, SpecError):
        return str(e).strip().splitlines()[0] if str(e).strip() else "error"
    text = (str(e).strip().splitlines() or [type(e).__name__])[0]
    if type(e).__module__.split(".")[0] in ("huggingface_hub", "httpx", "httpcore", "requests"):
        return hub_error(getattr(e, "repo_id", None) or "the model", e)
    if "memory" in text.lower() or isinstance(e, MemoryError):
        return f"out of memory: {text}. Try a smaller preset or fewer max new tokens."
    return f"{type(e).__name__}: {text}"


