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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # `python demo/app.py` (or -m demo.app): the same start as `python -m demo`, fast
    if not __package__:  # BLAS before anything imports MLX, then this module as demo.app; as a script, the
        sys.path[0] = str(Path(__file__).resolve().parents[1])  # project folder on the path, not demo/
    from demo.__main__ import run

    sys.exit(run())

import gradio as gr  # noqa: E402 (and the imports below: the guard runs first)

from demo.api import register
from demo.controls import PAGE_JS, PRIVATE
from demo.exposure import REFUSED, Exposure
from demo.handlers import Handlers, block_sizes, can_think, lookup_lane
from demo.knobs import AUTO_KNOBS, DRAFT_KNOBS, fixed_lengths, page_controls
from demo.lanes import LANES
from demo.race_tab import Race, race_tab
from demo.stage import (
    Choice,
    Stage,
    describe,
    preparation_html,
    preset_choices,
    preset_note,
)
from demo.status import error_html
from demo.sweep_tab import busy, sweep_tab
from demo.texts import FOOT, HERO
from spec.cpu import ensure_fast_blas
from spec.errors import SpecError
from spec.presets import add_model_flags, get_preset

# -- the page --------------------------------------------------------------------------------------
# build_demo reads top to bottom as the page does: each part is laid out by one function below, which
# returns the components it made and wires the events that stay inside it; events that reach across
# parts (loading a model, a first start) are wired once every part exists.


def build_demo(stage: Stage) -> gr.Blocks:
    """The Blocks layout, each event wired under its components to a handler in demo/handlers.py."""
    h = Handlers(stage)
    with gr.Blocks(title="Spec Arena", analytics_enabled=False) as demo:
        head = page_head(stage)
        settings = settings_panel(stage)
        with gr.Tabs(elem_id="modes"):
            with gr.Tab("Race", elem_id="race-tab"):
                race = race_tab(stage, h, head.errors, settings.knobs)
            with gr.Tab("Domain sweep", elem_id="sweep-tab"):
                sweep_inputs = sweep_panel(h, settings.knobs, race.story)
        gr.HTML(FOOT)
        h.bind(race.inputs.prompt, settings.auto_length, settings.controls, sweep_inputs, race.plot_x,
               race.inputs.repeat)
        wire_loading(h, head, settings, race)
        wire_lookup_lane(settings, race)
        wire_first_start(demo, h, head, settings, race)
        register(demo, stage)
    return demo


@dataclass
class Head:
    """The page's top: what is loaded, errors, and a first start's steps with the timer that shows them."""

    header: gr.HTML
    errors: gr.HTML
    preparing: gr.HTML
    ticks: gr.Timer


def page_head(stage: Stage) -> Head:
    """As the server is now: a first start shows its steps and ticks until the model is ready."""
    gr.HTML(HERO)
    header = gr.HTML(describe(stage), elem_id="header")
    errors = gr.HTML(error_html(stage.error), elem_id="errors")
    preparing = gr.HTML(preparation_html(stage), visible=stage.preparing is not None, elem_id="preparing")
    ticks = gr.Timer(0.5, active=stage.preparing is not None)  # a first start: the steps, until ready
    return Head(header, errors, preparing, ticks)


@dataclass
class Settings:
    """The Settings accordion: the model picker (preset, Load, its question, custom ids) and the knobs."""

    preset: gr.Dropdown
    load_btn: gr.Button
    note: gr.Markdown
    confirm_box: gr.Group
    confirm_md: gr.Markdown
    confirm_btn: gr.Button
    cancel_btn: gr.Button
    load_errors: gr.HTML
    custom_box: gr.Group
    ids: list[gr.Textbox]  # target, DSpark head, DFlash head
    auto_length: gr.Checkbox
    controls: dict[str, Any]

    @property
    def knobs(self) -> list:
        """Every setting a race or a sweep reads."""
        return [self.auto_length, *self.controls.values()]

    @property
    def limited(self) -> list:
        """What a loaded model changes (handlers.knob_limits, LIMITS of them): where the draft-length sliders
        end, the thinking box, and the lookup box's default (the tree slider's end is the same for every model)."""
        return [*(self.controls[n] for n in DRAFT_KNOBS), self.controls["thinking"], self.controls["lookup"]]


def settings_panel(stage: Stage) -> Settings:
    """Closed by default; switching models is off when served beyond this machine (demo.exposure), and a
    public page never shows the server's own folders in the custom fields."""
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
                ids = [gr.Textbox(c.target or "", label="Target (hub id or folder)", elem_id="target"),
                       gr.Textbox(c.dspark or "", label="DSpark head", elem_id="dspark"),
                       gr.Textbox(c.dflash or "", label="DFlash head", elem_id="dflash")]
        auto_length, controls = page_controls(*block_sizes(stage), can_think=can_think(stage))
        auto_length.change(fixed_lengths, auto_length, [controls[n] for n in AUTO_KNOBS], queue=False, **PRIVATE)
    return Settings(preset, load_btn, note, confirm_box, confirm_md, confirm_btn, cancel_btn, load_errors,
                    custom_box, ids, auto_length, controls)


def sweep_panel(h: Handlers, knobs: list, story: gr.HTML) -> list:
    """The Domain sweep tab (demo/sweep_tab.py) and its events; its inputs, for Handlers.bind."""
    sweep_inputs, sweep_run, sweep_stop, sweep_out = sweep_tab()
    sweep_buttons = [sweep_run, sweep_stop]
    sweeping = sweep_run.click(h.arm_sweep, None, sweep_buttons, queue=False, **PRIVATE).then(
        h.sweep_page, {*sweep_inputs, *knobs}, sweep_out, concurrency_id="arena", concurrency_limit=1,
        show_progress="minimal", **PRIVATE)
    sweeping.then(lambda: busy(False), None, sweep_buttons, queue=False, **PRIVATE)
    sweeping.then(lambda: h.story(mine=True), None, story, queue=False,
                  **PRIVATE)  # a finished sweep is the story now (a small one: for this visitor only)
    sweep_stop.click(h.stop, None, None, queue=False, **PRIVATE)  # the sweep ends itself and says so
    return sweep_inputs


def wire_loading(h: Handlers, head: Head, settings: Settings, race: Race) -> None:
    """Loading a model reaches across the page: the header, the Settings, the sliders' limits, the lanes."""
    s = settings
    load_in = [s.preset, *s.ids]
    load_out = [head.header, head.errors, s.load_errors, s.preset, s.custom_box, s.note, s.confirm_box, s.confirm_md,
                s.load_btn, *s.limited, *race.lanes, race.story]
    load_args = dict(concurrency_id="arena", concurrency_limit=1, show_progress="full",
                     show_progress_on=[head.header], **PRIVATE)
    s.preset.input(h.on_preset, s.preset, [s.custom_box, s.note], queue=False, **PRIVATE).then(
        lambda p, *a: h.ask_or_load(p, *a) if p != "custom" else (gr.skip(),) * len(load_out), load_in, load_out,
        **load_args)
    s.load_btn.click(h.ask_or_load, load_in, load_out, **load_args)
    s.confirm_btn.click(h.load, load_in, load_out, **load_args)
    s.cancel_btn.click(h.cancel_load, None, load_out, queue=False, **PRIVATE)


def wire_lookup_lane(settings: Settings, race: Race) -> None:
    """The lookup box, ticked by hand before any race, shows or hides its lane at once (handlers.lookup_lane)."""
    box, i = settings.controls["lookup"], 2 * list(LANES).index("lookup")
    box.input(lookup_lane, [box, race.status], race.lanes[i:i + 2], queue=False, **PRIVATE)


def wire_first_start(demo: gr.Blocks, h: Handlers, head: Head, settings: Settings, race: Race) -> None:
    """The page as built shows the server's first moments; each visit and tick brings it up to date."""
    now = [head.preparing, head.header, head.errors, race.status, race.inputs.run_btn, *settings.limited,
           *race.lanes, head.ticks, race.story]
    demo.load(h.prepared, None, now, queue=False, **PRIVATE)
    head.ticks.tick(h.prepared, None, now, queue=False, **PRIVATE)


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
    add_model_flags(ap)
    args = ap.parse_args(argv)
    if not (args.target or args.dspark or args.dflash):  # an unknown preset: one line and exit 2, before serving
        try:
            get_preset(args.preset)
        except SpecError as e:
            ap.exit(2, f"error: {e}\n")
    return args


def main(argv: list[str] | None = None) -> int:
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

