"""Spec Arena: DSpark vs DFlash vs greedy, streamed live from ONE shared target (Gradio Blocks, UI only).

    python demo/app.py                                # pocket preset, http://127.0.0.1:7860
    python -m demo                                    # the same, as a package
    python demo/app.py --preset qwen3                 # downloads from the hub on first use
    python demo/app.py --target DIR --dspark DIR --dflash DIR
    python demo/app.py --host 0.0.0.0 --port 8080 --share

The server answers at once; the model is prepared in the background (a first start converts the pocket
target and measures auto's costs) while the page and the console show the steps, and Run waits for it.
All model work lives in spec.arena.Arena (its own MLX thread); the handlers (demo/handlers.py) only
drain its events and turn them into HTML, numbers and a plot. The same race is a named API endpoint,
`/race`:

    from gradio_client import Client
    Client("http://127.0.0.1:7860/").predict("Write a haiku about rain.", 64, api_name="/race")

and `/race_stream` streams the same race live (an update every few rounds). Served beyond this machine
(--host other than 127.0.0.1, or --share), visitors cannot switch models unless --allow-custom is given.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if not __package__:  # `python demo/app.py`: the same start as `python -m demo` (fast BLAS first, then this
    sys.path[0] = str(Path(__file__).resolve().parents[1])  # module as demo.app); the project folder, not demo/
    from demo.__main__ import run

    sys.exit(run())

import gradio as gr  # noqa: E402 (and the imports below: the guard runs first)

from demo.api import register
from demo.controls import IN_VIEW_JS, PAGE_JS, RUN_LABEL, SUBMIT_HINT, armed, released
from demo.exposure import REFUSED, Exposure
from demo.handlers import READY, WAIT_LABEL, WAITING, Handlers, block_sizes, can_think
from demo.knobs import AUTO_KNOBS, fixed_lengths, page_controls
from demo.lanes import LANES, esc
from demo.slot_chart import slot_chart
from demo.stage import Choice, Stage, describe, examples, preparation_html, preset_choices, preset_note
from demo.status import error_html
from demo.story_panel import story_html
from demo.sweep_tab import busy, sweep_tab
from demo.texts import FOOT, HERO, LEGEND
from demo.view import CLOCK, DRAFTS, PLOT_ROUNDS, TABLE_COLUMNS, TABLE_LABEL, empty_table, idle_lanes
from spec.race.repeat import REPEATS
from spec.race.story import shipped_story

DOMAINS = {"code": "Code", "chat": "Chat", "math": "Math"}
COLORS = {"DSpark": "#7c3aed", "DFlash": "#0891b2", "DSpark" + DRAFTS: "#c4b5fd", "DFlash" + DRAFTS: "#67e8f9"}


# -- the page --------------------------------------------------------------------------------------

def build_demo(stage: Stage) -> gr.Blocks:
    """The Blocks layout, each event wired under its components to a handler in demo/handlers.py."""
    h = Handlers(stage)
    private = dict(api_visibility="private")
    with gr.Blocks(title="Spec Arena", analytics_enabled=False) as demo:
        gr.HTML(HERO)
        header = gr.HTML(describe(stage), elem_id="header")
        errors = gr.HTML(error_html(stage.error), elem_id="errors")
        preparing = gr.HTML(preparation_html(stage), visible=stage.preparing is not None, elem_id="preparing")
        ticks = gr.Timer(0.5, active=stage.preparing is not None)  # a first start: the steps, until ready
        with gr.Accordion("Settings: model, max tokens, sampling, draft length", open=False, elem_id="settings"):
            with gr.Row():
                first_preset = stage.choice.preset if stage.choice else "pocket"
                may = stage.exposure.may_switch
                preset = gr.Dropdown(preset_choices(), value=first_preset, label="Preset", elem_id="preset", scale=3,
                                     interactive=may)
                load_btn = gr.Button("Load", elem_id="load", scale=1, interactive=may)
            note = gr.Markdown(preset_note(first_preset), elem_id="preset-note")
            if not may:
                gr.Markdown(f"{REFUSED[0].upper()}{REFUSED[1:]}.", elem_id="switch-off")
            with gr.Group(visible=False, elem_id="confirm-load") as confirm_box:
                confirm_md = gr.Markdown("", elem_id="confirm-text")
                with gr.Row():
                    confirm_btn = gr.Button("Download and load", variant="primary", elem_id="confirm-yes")
                    cancel_btn = gr.Button("Cancel", elem_id="confirm-no")
            load_errors = gr.HTML("", elem_id="load-errors")
            with gr.Group(visible=bool(may and stage.choice and stage.choice.preset == "custom")) as custom_box:
                with gr.Row():
                    c = (stage.choice if not stage.exposure.public else None) or Choice()  # no server paths
                    target_id = gr.Textbox(c.target or "", label="Target (hub id or folder)", elem_id="target")
                    dspark_id = gr.Textbox(c.dspark or "", label="DSpark head", elem_id="dspark")
                    dflash_id = gr.Textbox(c.dflash or "", label="DFlash head", elem_id="dflash")
            auto_length, controls = page_controls(*block_sizes(stage), can_think=can_think(stage))
            knobs = [auto_length, *controls.values()]
            lengths = [controls[n] for n in AUTO_KNOBS]
            auto_length.change(fixed_lengths, auto_length, lengths, queue=False, **private)
            limited = [*lengths, controls["thinking"]]  # what a loaded model changes (handlers.knob_limits)
        with gr.Tabs(elem_id="modes"):
            with gr.Tab("Race", elem_id="race-tab"):
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
                        open_btn = gr.UploadButton("Open a race file", file_types=[".json"], size="sm",
                                                   elem_id="open-race")
                with gr.Tabs(elem_id="examples"):
                    for domain, title in DOMAINS.items():
                        with gr.Tab(title):
                            with gr.Row(elem_classes=["example-list"]):  # buttons: gr.Examples cuts at 60 chars
                                for text in examples(domain):
                                    pick = gr.Button(text, size="sm", elem_classes=["example"])
                                    pick.click(lambda v: v, pick, prompt, queue=False, **private)
                story = gr.HTML(story_html(shipped_story()), elem_id="story")  # who wins where, as measured
                with gr.Row(equal_height=False, elem_id="race-bar"):  # sticky while a race runs: status and Stop
                    status = gr.HTML(WAITING if waiting else READY, elem_id="status", min_width=200)
                    stop_btn = gr.Button("Stop", variant="stop", interactive=False, elem_id="stop", scale=0,
                                         min_width=84)
                gr.HTML(LEGEND)
                lane_out: list[gr.HTML] = []
                first = idle_lanes(stage)
                with gr.Row(equal_height=True, elem_id="lanes"):
                    for i, name in enumerate(LANES):
                        with gr.Column(min_width=240, elem_classes=["lane", name]):
                            lane_out.append(gr.HTML(first[2 * i], elem_id=f"meters-{name}"))
                            lane_out.append(gr.HTML(first[2 * i + 1], elem_id=f"text-{name}", max_height=420,
                                                    autoscroll=True))
                plot_x = gr.Radio([("round", "round"), ("race clock (engine s)", CLOCK)], value="round",
                                  label="Chart against", elem_id="plot-x", info="the race clock compares the lanes "
                                  "at the same moment of their own compute")
                plot = gr.LinePlot(None, x="round", y="tokens", color="series", color_map=COLORS, colors_in_legend=[],
                                   y_lim=[0, None], x_lim=[1, PLOT_ROUNDS], x_axis_format="d", elem_id="plot",
                                   label="Per round: accept length (tokens committed per target forward) and, "
                                         "lighter, drafts verified (the length chosen; 0 = parked, a plain step)")
                gr.HTML(plot_legend(), elem_id="plot-legend")  # the chart's own legend ran off a phone's edge
                plot_x.change(axis, plot_x, plot, queue=False, **private)
                why = gr.HTML(f'<div class="why-charts">{slot_chart({})}</div>', elem_id="why")  # slots, confidence
                table = gr.DataFrame(empty_table(), label=TABLE_LABEL, interactive=False, wrap=True, elem_id="table",
                                     column_widths=[f"{w}px" for w in TABLE_COLUMNS.values()])
                files = gr.File(label="Download the results (CSV, JSON)", file_count="multiple", interactive=False,
                                elem_id="files", visible=False)

                summary = gr.Textbox(label="The race in Markdown (copy it into a chat or an issue)", lines=6,
                                     max_lines=16, buttons=["copy"], interactive=False, visible=False,
                                     elem_id="summary")
                race_out, buttons = [status, errors, *lane_out, plot, why, table, files, summary], [run_btn, stop_btn]
                gr.on([run_btn.click, prompt.submit], h.arm, None, [status, *buttons], queue=False, js=IN_VIEW_JS,
                      **private).then(
                    h.run, {prompt, plot_x, repeat, *knobs}, race_out, concurrency_id="arena", concurrency_limit=1,
                    show_progress="minimal", show_progress_on=[status], **private).then(
                    released, None, buttons, queue=False, **private)
                replaying = replay_btn.click(lambda: armed(busy=False)[1:], None, buttons, queue=False,
                                             js=IN_VIEW_JS, **private).then(
                    h.replay_last, [speed, plot_x], race_out, show_progress="hidden", **private)
                replaying.then(released, None, buttons, queue=False, **private)
                opening = open_btn.upload(lambda: armed(busy=False)[1:], None, buttons, queue=False, js=IN_VIEW_JS,
                                          **private).then(
                    h.open_race, [open_btn, speed, plot_x], race_out, show_progress="hidden", **private)
                opening.then(released, None, buttons, queue=False, **private)
                stop_btn.click(h.stop, None, None, queue=False, cancels=[replaying, opening], **private)
            with gr.Tab("Domain sweep", elem_id="sweep-tab"):
                sweep_inputs, sweep_run, sweep_stop, sweep_out = sweep_tab()
                sweep_buttons = [sweep_run, sweep_stop]
                sweeping = sweep_run.click(h.arm_sweep, None, sweep_buttons, queue=False, **private).then(
                    h.sweep_page, {*sweep_inputs, *knobs}, sweep_out, concurrency_id="arena",
                    concurrency_limit=1, show_progress="minimal", **private)
                sweeping.then(lambda: busy(False), None, sweep_buttons, queue=False, **private)
                sweeping.then(lambda: h.story(mine=True), None, story, queue=False,
                              **private)  # a finished sweep is the story now (a small one: for this visitor only)
                sweep_stop.click(h.stop, None, None, queue=False, **private)  # the sweep ends itself and says so
        gr.HTML(FOOT)
        h.bind(prompt, auto_length, controls, sweep_inputs, plot_x, repeat)

        # Loading a model reaches across the page: the header, the Settings, the sliders' limits, the lanes.
        load_in = [preset, target_id, dspark_id, dflash_id]
        load_out = [header, errors, load_errors, preset, custom_box, note, confirm_box, confirm_md, load_btn,
                    *limited, *lane_out, story]
        load_args = dict(concurrency_id="arena", concurrency_limit=1, show_progress="full",
                         show_progress_on=[header], **private)
        preset.input(h.on_preset, preset, [custom_box, note], queue=False, **private).then(
            lambda p, *a: h.ask_or_load(p, *a) if p != "custom" else (gr.skip(),) * len(load_out), load_in, load_out,
            **load_args)
        load_btn.click(h.ask_or_load, load_in, load_out, **load_args)
        confirm_btn.click(h.load, load_in, load_out, **load_args)
        cancel_btn.click(h.cancel_load, None, load_out, queue=False, **private)
        # The page as built shows the server's first moments; each visit and tick brings it up to date.
        now = [preparing, header, errors, status, run_btn, *limited, *lane_out, ticks, story]
        demo.load(h.prepared, None, now, queue=False, **private)
        ticks.tick(h.prepared, None, now, queue=False, **private)
        register(demo, stage)
    return demo


def axis(x: str) -> gr.LinePlot:
    """The per-round chart against the round number or the race clock (its data holds both)."""
    if x == CLOCK:
        return gr.LinePlot(x=CLOCK, x_lim=None, x_axis_format=None)
    return gr.LinePlot(x="round", x_lim=None, x_axis_format="d")


def plot_legend() -> str:
    """The per-round chart's series as swatches that wrap on a narrow screen."""
    return '<div class="legend">' + "".join(
        f'<span><i class="sw" style="background:{c}"></i>{esc(name)}</span>' for name, c in COLORS.items()) + "</div>"


def theme() -> gr.themes.Base:
    return gr.themes.Soft(primary_hue="violet", secondary_hue="cyan", neutral_hue="slate").set(
        button_primary_background_fill="*primary_600", button_primary_background_fill_hover="*primary_700",
        button_primary_text_color="white", button_primary_text_color_hover="white",
        button_cancel_background_fill="#dc2626", button_cancel_background_fill_hover="#b91c1c",
        button_cancel_text_color="white", button_cancel_text_color_hover="white")  # Stop: red while it can act


def launch_kwargs() -> dict:
    """Gradio 6 takes theme, CSS and the page's own script at launch()."""
    return {"theme": theme(), "css": (Path(__file__).parent / "style.css").read_text(), "js": PAGE_JS}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python demo/app.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default="127.0.0.1", help="address to bind (default: this machine only)")
    ap.add_argument("--port", type=int, default=7860)
    ap.add_argument("--share", action="store_true", help="also open a public gradio.live link")
    ap.add_argument("--allow-custom", action="store_true", help="served beyond this machine (--host, --share), "
                    "still let visitors switch presets (downloads) and load folders or hub ids of their own")
    ap.add_argument("--preset", default="pocket", help="pocket (offline), qwen3, qwen3-8b, qwen3.5, gemma4")
    ap.add_argument("--target", help="target hub id or folder; with --dspark / --dflash it replaces the preset "
                    "(a head not given is left out)")
    ap.add_argument("--dspark", help="DSpark head hub id or folder")
    ap.add_argument("--dflash", help="DFlash head hub id or folder")
    args = ap.parse_args(argv)
    if not (args.target or args.dspark or args.dflash):  # an unknown preset: one line and exit 2, before serving
        from spec.errors import SpecError
        from spec.presets import get_preset

        try:
            get_preset(args.preset)
        except SpecError as e:
            ap.exit(2, f"error: {e}\n")
    return args


def main(argv: list[str] | None = None) -> int:
    from spec.cpu import ensure_fast_blas

    blas = ensure_fast_blas()  # first (a no-op if `python -m demo` did it): OpenBLAS for MLX
    args = parse_args(argv)
    custom = bool(args.target or args.dspark or args.dflash)
    choice = Choice("custom", args.target, args.dspark, args.dflash) if custom else Choice(args.preset)
    stage = Stage(exposure=Exposure.of(args.host, args.share, args.allow_custom))
    print(f"spec-arena: {blas}", file=sys.stderr)
    print(f"spec-arena: preparing {choice.label} in the background; the page shows the steps, Run waits for them",
          file=sys.stderr)
    stage.start(choice)
    demo = build_demo(stage)
    demo.queue(default_concurrency_limit=1)
    demo.launch(server_name=args.host, server_port=args.port, share=args.share, footer_links=["api"],
                **launch_kwargs())
    return 0


if __name__ == "__main__":
    sys.exit(main())
