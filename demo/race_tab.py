"""The Race tab: the prompt and its buttons, the example prompts, the race bar, the lanes, the per-round
chart and the results, each part laid out by one function that returns what it made, and the race's
events (Run, Replay, Open a race file, Stop) wired to demo/handlers.py once the tab exists."""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from demo.controls import IN_VIEW_JS, PRIVATE, RUN_LABEL, SUBMIT_HINT, armed, released
from demo.handlers import READY, WAIT_LABEL, WAITING, Handlers
from demo.lanes import COLORS as LANE_COLORS
from demo.lanes import DRAFTERS, LANES, LIGHT, esc
from demo.slot_chart import slot_chart
from demo.stage import Stage, examples
from demo.story_panel import story_html
from demo.texts import LEGEND
from demo.view import CLOCK, DRAFTS, PLOT_ROUNDS, TABLE_COLUMNS, TABLE_LABEL, empty_table, idle_lanes
from spec.race.repeat import REPEATS
from spec.race.story import shipped_story

DOMAINS = {"code": "Code", "chat": "Chat", "math": "Math", "edit": "Edit"}  # edit: answers that quote the prompt
SERIES = {n: (LANES[n], LANES[n] + DRAFTS) for n in DRAFTERS}  # lane -> its two lines in the per-round chart
COLORS = {**{LANES[n]: LANE_COLORS[n] for n in DRAFTERS}, **{LANES[n] + DRAFTS: LIGHT[n] for n in DRAFTERS}}


@dataclass
class RaceInputs:
    """What starts a race or a replay: the prompt, Run, Repeat, Replay and its speed, Open a race file."""

    prompt: gr.Textbox
    run_btn: gr.Button
    repeat: gr.Radio
    replay_btn: gr.Button
    speed: gr.Radio
    open_btn: gr.UploadButton


@dataclass
class Race:
    """The Race tab's components (its inputs, the race bar, the lanes, the chart and the results)."""

    inputs: RaceInputs
    story: gr.HTML
    status: gr.HTML
    stop_btn: gr.Button
    lanes: list[gr.HTML]  # per lane: its meters, its text
    plot_x: gr.Radio
    plot: gr.LinePlot
    why: gr.HTML
    table: gr.DataFrame
    files: gr.File
    summary: gr.Textbox


def race_tab(stage: Stage, h: Handlers, errors: gr.HTML, knobs: list) -> Race:
    """The tab top to bottom, then its events; `errors` (the page's) and `knobs` (the Settings') are read
    and written by a race too."""
    inputs = race_inputs(stage)
    example_tabs(inputs.prompt)
    story = gr.HTML(story_html(shipped_story()), elem_id="story")  # who wins where, as measured
    with gr.Row(equal_height=False, elem_id="race-bar"):  # sticky while a race runs: status and Stop
        status = gr.HTML(WAITING if stage.preparing is not None else READY, elem_id="status", min_width=200)
        stop_btn = gr.Button("Stop", variant="stop", interactive=False, elem_id="stop", scale=0, min_width=84)
    gr.HTML(LEGEND)
    lanes = lane_cards(stage)
    plot_x, plot = round_chart()
    race = Race(inputs, story, status, stop_btn, lanes, plot_x, plot, *race_results())
    wire_race(h, race, errors, knobs)
    return race


def race_inputs(stage: Stage) -> RaceInputs:
    """The prompt beside a narrow column of buttons; Run waits (off) while a first start prepares the model."""
    with gr.Row(equal_height=False):
        with gr.Column(scale=5):
            prompt = gr.Textbox(label="Prompt", lines=3, max_lines=8, elem_id="prompt", info=SUBMIT_HINT,
                                placeholder="Ask anything, or pick an example below…")
        with gr.Column(scale=1, min_width=160):
            waiting = stage.preparing is not None  # a first start: Run waits for the model
            run_btn = gr.Button(WAIT_LABEL if waiting else RUN_LABEL, variant="primary", elem_id="run",
                                interactive=not waiting)
            repeat = gr.Radio([str(n) for n in REPEATS], value="1", label="Repeat", elem_id="repeat",
                              info="races in turn: medians, spread")
            replay_btn = gr.Button("Replay at measured speed", size="sm", elem_id="replay")
            speed = gr.Radio(["0.5x", "1x", "2x"], value="1x", label="Replay speed", elem_id="replay-speed",
                             info="for screen recordings")
            open_btn = gr.UploadButton("Open a race file", file_types=[".json"], size="sm", elem_id="open-race")
    return RaceInputs(prompt, run_btn, repeat, replay_btn, speed, open_btn)


def example_tabs(prompt: gr.Textbox) -> None:
    """Each domain's example prompts as buttons that fill the prompt (gr.Examples cuts them at 60 chars)."""
    with gr.Tabs(elem_id="examples"):
        for domain, title in DOMAINS.items():
            with gr.Tab(title):
                with gr.Row(elem_classes=["example-list"]):
                    for text in examples(domain):
                        pick = gr.Button(text, size="sm", elem_classes=["example"])
                        pick.click(lambda v: v, pick, prompt, queue=False, **PRIVATE)


def lane_cards(stage: Stage) -> list[gr.HTML]:
    """One column per lane: its meters and its text, as idle cards until a race begins."""
    out: list[gr.HTML] = []
    first = idle_lanes(stage)
    with gr.Row(equal_height=True, elem_id="lanes"):
        for i, name in enumerate(LANES):
            with gr.Column(min_width=240, elem_classes=["lane", name]):
                out.append(gr.HTML(first[2 * i], elem_id=f"meters-{name}"))
                out.append(gr.HTML(first[2 * i + 1], elem_id=f"text-{name}", max_height=420, autoscroll=True))
    return out


def round_chart() -> tuple[gr.Radio, gr.LinePlot]:
    """The per-round chart, its axis choice and its own legend."""
    plot_x = gr.Radio([("round", "round"), ("race clock (engine s)", CLOCK)], value="round", label="Chart against",
                      elem_id="plot-x", info="the race clock compares the lanes at the same moment of their own "
                      "compute")
    plot = gr.LinePlot(None, x="round", y="tokens", color="series", color_map=COLORS, colors_in_legend=[],
                       y_lim=[0, None], x_lim=[1, PLOT_ROUNDS], x_axis_format="d", elem_id="plot",
                       label="Per round: accept length (tokens committed per target forward) and, "
                             "lighter, drafts verified (the length chosen; 0 = parked, a plain step)")
    gr.HTML(plot_legend(), elem_id="plot-legend")  # the chart's own legend ran off a phone's edge
    plot_x.change(axis, plot_x, plot, queue=False, **PRIVATE)
    return plot_x, plot


def race_results() -> tuple[gr.HTML, gr.DataFrame, gr.File, gr.Textbox]:
    """Below the chart: why a lane wins (slots, confidence), the table, the downloads, the Markdown."""
    why = gr.HTML(f'<div class="why-charts">{slot_chart({})}</div>', elem_id="why")
    table = gr.DataFrame(empty_table(), label=TABLE_LABEL, interactive=False, wrap=True, elem_id="table",
                         column_widths=[f"{w}px" for w in TABLE_COLUMNS.values()])
    files = gr.File(label="Download the results (CSV, JSON)", file_count="multiple", interactive=False,
                    elem_id="files", visible=False)
    summary = gr.Textbox(label="The race in Markdown (copy it into a chat or an issue)", lines=6, max_lines=16,
                         buttons=["copy"], interactive=False, visible=False, elem_id="summary")
    return why, table, files, summary


def wire_race(h: Handlers, race: Race, errors: gr.HTML, knobs: list) -> None:
    """Run (or Enter in the prompt), Replay, Open a race file and Stop: Run off and Stop on while one goes."""
    inputs = race.inputs
    race_out = [race.status, errors, *race.lanes, race.plot, race.why, race.table, race.files, race.summary]
    buttons = [inputs.run_btn, race.stop_btn]
    gr.on([inputs.run_btn.click, inputs.prompt.submit], h.arm, None, [race.status, *buttons], queue=False,
          js=IN_VIEW_JS, **PRIVATE).then(
        h.run, {inputs.prompt, race.plot_x, inputs.repeat, *knobs}, race_out, concurrency_id="arena",
        concurrency_limit=1, show_progress="minimal", show_progress_on=[race.status], **PRIVATE).then(
        released, None, buttons, queue=False, **PRIVATE)
    replaying = inputs.replay_btn.click(lambda: armed(busy=False)[1:], None, buttons, queue=False, js=IN_VIEW_JS,
                                        **PRIVATE).then(
        h.replay_last, [inputs.speed, race.plot_x], race_out, show_progress="hidden", **PRIVATE)
    replaying.then(released, None, buttons, queue=False, **PRIVATE)
    opening = inputs.open_btn.upload(lambda: armed(busy=False)[1:], None, buttons, queue=False, js=IN_VIEW_JS,
                                     **PRIVATE).then(
        h.open_race, [inputs.open_btn, inputs.speed, race.plot_x], race_out, show_progress="hidden", **PRIVATE)
    opening.then(released, None, buttons, queue=False, **PRIVATE)
    race.stop_btn.click(h.stop, None, None, queue=False, cancels=[replaying, opening], **PRIVATE)


def axis(x: str) -> gr.LinePlot:
    """The per-round chart against the round number or the race clock (its data holds both)."""
    if x == CLOCK:
        return gr.LinePlot(x=CLOCK, x_lim=None, x_axis_format=None)
    return gr.LinePlot(x="round", x_lim=None, x_axis_format="d")


def plot_legend() -> str:
    """The per-round chart's series as swatches that wrap on a narrow screen, each lane's two side by side;
    a lane's swatches carry its name as a class, so the page hides the lookup's while that lane is off
    (style.css), as it hides the lane itself."""
    return '<div class="legend">' + "".join(
        f'<span class="{n}"><i class="sw" style="background:{COLORS[name]}"></i>{esc(name)}</span>'
        for n, names in SERIES.items() for name in names) + "</div>"
