"""Spec Arena: DSpark vs DFlash vs greedy, streamed live from ONE shared target (Gradio Blocks, UI only).

    python demo/app.py                                   # pocket preset, http://127.0.0.1:7860
    python demo/app.py --preset qwen3                    # downloads from the hub on first use
    python demo/app.py --target DIR --dspark DIR --dflash DIR
    python demo/app.py --host 0.0.0.0 --port 8080 --share

All model work lives in spec.race.Arena (its own MLX thread); the handlers here only drain its events
and turn them into HTML, numbers and a plot. The same race is a named API endpoint, `/race`:

    from gradio_client import Client
    Client("http://127.0.0.1:7860/").predict("Write a haiku about rain.", 64, api_name="/race")

and `/race_stream` streams the same race live (an update every few rounds). Served beyond this machine
(--host other than 127.0.0.1, or --share), visitors cannot switch models unless --allow-custom is given.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Iterator

# Before gradio / huggingface_hub are imported: they read these at import time.
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `python demo/app.py` from a checkout without `pip install -e .`
    sys.path.insert(0, str(ROOT))

if __name__ == "__main__":  # as early as possible: a re-exec (LD_PRELOAD) then skips loading gradio twice
    from spec.cpu import ensure_fast_blas

    ensure_fast_blas()

import gradio as gr  # noqa: E402

from demo.api import register  # noqa: E402
from demo.controls import IN_VIEW_JS, RUN_LABEL, SUBMIT_HINT, armed, released  # noqa: E402
from demo.download import download_question, to_download  # noqa: E402
from demo.exposure import REFUSED, Exposure  # noqa: E402
from demo.export import save_results  # noqa: E402
from demo.knobs import DRAFT_KNOBS, fixed_lengths, page_controls, page_values, settings_of  # noqa: E402
from demo.lanes import LANES, esc  # noqa: E402
from demo.stage import Choice, Stage, describe, examples, preset_choices, preset_note  # noqa: E402
from demo.status import error_html  # noqa: E402
from demo.sweep_tab import busy, run_sweep, sweep_tab  # noqa: E402
from demo.view import DRAFTS, PLOT_ROUNDS, TABLE_COLUMNS, View, empty_table, idle_lanes, readable  # noqa: E402
from spec.target import SpecError  # noqa: E402

DOMAINS = {"code": "Code", "chat": "Chat", "math": "Math"}
COLORS = {"DSpark": "#7c3aed", "DFlash": "#0891b2", "DSpark" + DRAFTS: "#c4b5fd", "DFlash" + DRAFTS: "#67e8f9"}
STREAM_EVERY = 0.12  # seconds between page updates while racing (every round would flood the socket)


# -- the page --------------------------------------------------------------------------------------

def build_demo(stage: Stage) -> gr.Blocks:
    """The Blocks layout and its handlers, over a Stage shared by every session."""

    def message(status: str, error: str = "", reset: bool = False) -> tuple:
        """Status + error; the lanes keep the last race (or go back to idle when this one never began)."""
        lanes = idle_lanes(stage) if reset else [gr.skip()] * (2 * len(LANES))
        return (f'<div class="status">{esc(status)}</div>', error_html(error), *lanes, gr.skip(), gr.skip(),
                gr.skip())

    def arm(request: gr.Request) -> tuple:
        """Run clicked: forget a Stop pressed earlier while nothing of ours was queued; Run off, Stop on."""
        stage.cancelled.discard(request.session_hash)
        return armed(busy=stage.owner is not None)

    def arm_sweep(request: gr.Request) -> tuple:
        stage.cancelled.discard(request.session_hash)
        return busy(True)

    def run(data: dict, request: gr.Request) -> Iterator[tuple]:
        """Drain the arena's events into the page, a few updates a second (data: {component: value})."""
        prompt_text = data[prompt]
        sid = request.session_hash if request else None
        if sid in stage.cancelled:
            stage.cancelled.discard(sid)
            yield message("Stopped before it started.")
            return
        arena = stage.arena
        if arena is None:
            msg = stage.tell(stage.error or "no model is loaded: pick a preset in Settings")
            gr.Warning(msg, duration=10)
            yield message("Not run.", msg)
            return
        view: View | None = None
        try:
            settings = settings_of(page_values(data, auto_length, controls))
            if not prompt_text or not prompt_text.strip():
                raise SpecError("the prompt is empty: type one or click an example")
            view = View.for_arena(arena, settings)
            yield view.outputs()
            stage.owner, last, recorded = sid, 0.0, []
            for ev in arena.race(prompt_text, settings):
                recorded.append(ev)
                if ev.kind == "finish":
                    stage.record(sid, recorded)
                view.feed(ev)
                view.stopping = arena.stopping
                now = time.monotonic()
                if ev.kind != "round" or now - last >= STREAM_EVERY:
                    last = now
                    if ev.kind == "finish":
                        view.files = save_results(view, prompt_text, settings, stage.names())
                    yield view.outputs()
        except Exception as e:  # a readable message in the page; the server keeps serving
            msg = stage.tell(e)
            gr.Warning(msg, duration=10)
            if view is None or view.state == "waiting":
                yield message("Not run.", msg, reset=view is not None)
            else:
                yield (*view.outputs()[:1], error_html(msg), *view.outputs()[2:])
        finally:
            if stage.owner == sid:
                stage.owner = None

    def replay_last(request: gr.Request) -> Iterator[tuple]:
        """The session's last race again, each lane's rounds at the moments its own engine reached them."""
        from spec.race import replay as replayed

        events = stage.recordings.get(request.session_hash if request else None)
        if not events:
            yield message("Nothing to replay yet: run a race to the end first.")
            return
        view = View.for_replay(events, getattr(stage.arena, "missing", {}))
        last = 0.0
        for ev in replayed(events):
            view.feed(ev)
            now = time.monotonic()
            if ev.kind != "round" or now - last >= STREAM_EVERY:
                last = now
                yield view.outputs()

    def stop(request: gr.Request) -> None:
        """Stop our own race within one round (or our queued run before it starts); never someone else's."""
        sid = request.session_hash
        if stage.owner == sid and stage.arena is not None:
            stage.arena.stop()
        else:
            stage.cancelled.add(sid)

    def sweep_handler(data: dict, request: gr.Request) -> Iterator[tuple]:
        """The sweep tab's Run: its own prompts and length, the Settings' sampling and head knobs."""
        domains, per_domain, own, sweep_max_new = (data[c] for c in sweep_inputs)
        yield from run_sweep(stage, domains, per_domain, own, sweep_max_new,
                             page_values(data, auto_length, controls), request=request)

    def settled(shown: str, err: str = "") -> tuple:
        """The Settings after a load, a refusal or a cancel: the error next to Load, no question open."""
        return (gr.skip(), gr.skip(), error_html(err), gr.Dropdown(value=shown), gr.Group(visible=shown == "custom"),
                preset_note(shown), gr.Group(visible=False), gr.skip(), gr.Button(visible=True),
                *(gr.skip(),) * (2 + 2 * len(LANES)))

    def ask_or_load(preset: str, target: str, dspark: str, dflash: str,
                    progress: gr.Progress = gr.Progress(track_tqdm=True)) -> tuple:
        """Load, unless that downloads from the hub first: then ask, with the size (nothing starts yet)."""
        if not stage.exposure.may_switch:
            return settled(stage.serving, REFUSED)
        choice = Choice.of(preset, target, dspark, dflash)
        repos = to_download(choice)
        if not repos:
            return load(preset, target, dspark, dflash, progress)
        ask = download_question(choice, repos)
        return (gr.skip(), gr.skip(), "", gr.skip(), gr.skip(), gr.skip(), gr.Group(visible=True),
                ask, gr.Button(visible=False), *(gr.skip(),) * (2 + 2 * len(LANES)))

    def cancel_load() -> tuple:
        return settled(stage.serving)

    def load(preset: str, target: str, dspark: str, dflash: str,
             progress: gr.Progress = gr.Progress(track_tqdm=True)) -> tuple:
        """Load a preset (or custom ids) next to the current arena; keep serving the old one on error.
        The error shows once, next to the Load controls (no toast: they piled up)."""
        if not stage.exposure.may_switch:
            return settled(stage.serving, REFUSED)
        choice = Choice.of(preset, target, dspark, dflash)
        try:
            progress(0.0, desc=f"loading {choice.label}")
            stage.load(choice, lambda f, d: progress(f, desc=d))
            err = ""
        except Exception as e:
            err = stage.failure(choice, e)
        shown = preset if not err or preset == "custom" else stage.serving  # a failed custom load stays open to fix
        lanes = [gr.skip()] * (2 * len(LANES)) if err else idle_lanes(stage)
        return (describe(stage), gr.skip() if err else "", error_html(err), gr.Dropdown(value=shown),
                gr.Group(visible=shown == "custom"), preset_note(shown), gr.Group(visible=False), gr.skip(),
                gr.Button(visible=True), *knob_limits(stage), *lanes)

    def on_preset(preset: str) -> tuple:
        return gr.Group(visible=preset == "custom"), preset_note(preset)

    with gr.Blocks(title="Spec Arena", analytics_enabled=False) as demo:
        gr.HTML(
            '<div class="hero"><h1>Spec Arena</h1><p>DSpark and DFlash, two <b>lossless</b> speculative decoders, '
            "race a plain greedy decoder on <b>one shared target model</b>. A small head drafts several tokens, "
            "the target checks them all in one forward pass: the text stays exactly the target's own, only the "
            "speed changes.</p></div>")
        header = gr.HTML(describe(stage), elem_id="header")
        errors = gr.HTML(error_html(stage.error), elem_id="errors")
        with gr.Accordion("Settings: model, max tokens, sampling, draft length", open=False,
                          elem_id="settings"):
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
            auto_length, controls = page_controls(*block_sizes(stage))
            auto_length.change(fixed_lengths, auto_length, [controls[n] for n in DRAFT_KNOBS], queue=False,
                               api_visibility="private")
        with gr.Tabs(elem_id="modes"):
            with gr.Tab("Race", elem_id="race-tab"):
                with gr.Row(equal_height=False):
                    with gr.Column(scale=5):
                        prompt = gr.Textbox(label="Prompt", lines=3, max_lines=8, elem_id="prompt", info=SUBMIT_HINT,
                                            placeholder="Ask anything, or pick an example below…")
                    with gr.Column(scale=1, min_width=160):
                        run_btn = gr.Button(RUN_LABEL, variant="primary", elem_id="run")
                        stop_btn = gr.Button("Stop", variant="stop", interactive=False, elem_id="stop")
                        replay_btn = gr.Button("Replay at measured speed", size="sm", elem_id="replay")
                with gr.Tabs(elem_id="examples"):
                    for domain, title in DOMAINS.items():
                        with gr.Tab(title):
                            with gr.Row(elem_classes=["example-list"]):  # buttons: gr.Examples cuts at 60 chars
                                for text in examples(domain):
                                    pick = gr.Button(text, size="sm", elem_classes=["example"])
                                    pick.click(lambda v: v, pick, prompt, queue=False, api_visibility="private")
                status = gr.HTML('<div class="status">Ready.</div>', elem_id="status")
                gr.HTML('<div class="legend"><span><i class="sw acc"></i>accepted draft tokens (came from the head, '
                        'checked by the target)</span><span><i class="sw own"></i>the target\'s own token '
                        '(one per round: the bonus or a correction)</span></div>')
                lane_out: list[gr.HTML] = []
                first = idle_lanes(stage)
                with gr.Row(equal_height=True, elem_id="lanes"):
                    for i, name in enumerate(LANES):
                        with gr.Column(min_width=240, elem_classes=["lane", name]):
                            lane_out.append(gr.HTML(first[2 * i], elem_id=f"meters-{name}"))
                            lane_out.append(gr.HTML(first[2 * i + 1], elem_id=f"text-{name}", max_height=420,
                                                    autoscroll=True))
                plot = gr.LinePlot(None, x="round", y="tokens", color="series", color_map=COLORS, colors_in_legend=[],
                                   y_lim=[0, None], x_lim=[1, PLOT_ROUNDS], x_axis_format="d", elem_id="plot",
                                   label="Per round: accept length (tokens committed per target forward) and, "
                                         "lighter, drafts verified (the length chosen; 0 = parked, a plain step)")
                gr.HTML(plot_legend(), elem_id="plot-legend")  # the chart's own legend ran off a phone's edge
                table = gr.DataFrame(empty_table(), label="Results, fastest first (speedup and tok/s: end to end, "
                                     "tokens per engine second; decode-only figures as details)",
                                     interactive=False, wrap=True, elem_id="table",
                                     column_widths=[f"{w}px" for w in TABLE_COLUMNS.values()])
                files = gr.File(label="Download the results (CSV, JSON)", file_count="multiple", interactive=False,
                                elem_id="files", visible=False)
            with gr.Tab("Domain sweep", elem_id="sweep-tab"):
                sweep_inputs, sweep_run, sweep_stop, sweep_out = sweep_tab()
        gr.HTML('<div class="foot">One clock: the engines share one MLX thread, and the one that has computed '
                "least so far always runs next, so at every moment each lane shows what that engine alone would "
                "have written after the same amount of its own compute (the race clock, in engine seconds; the "
                "wall clock is shared by all three). The speedup is end to end: tokens per engine second, prefill "
                "included, over the plain lane's; at T = 0, where every lane writes the same tokens, that is the "
                "plain lane's finish time over this lane's, so speedups, finish times and places agree. Lanes "
                "closer than the race's noise band tie and share a place. Accept length = tokens committed per "
                "target forward (the target's own token included, so always ≥ 1).</div>")

        knobs = [auto_length, *controls.values()]
        outputs = [status, errors, *lane_out, plot, table, files]
        private = dict(api_visibility="private")
        buttons = [run_btn, stop_btn]
        gr.on([run_btn.click, prompt.submit], arm, None, [status, *buttons], queue=False, js=IN_VIEW_JS,
              **private).then(
            run, {prompt, *knobs}, outputs, concurrency_id="arena", concurrency_limit=1,
            show_progress="minimal", show_progress_on=[status], **private).then(
            released, None, buttons, queue=False, **private)
        replaying = replay_btn.click(lambda: armed(busy=False)[1:], None, buttons, queue=False, js=IN_VIEW_JS,
                                     **private).then(
            replay_last, None, outputs, show_progress="hidden", **private)
        replaying.then(released, None, buttons, queue=False, **private)
        stop_btn.click(stop, None, None, queue=False, cancels=[replaying], **private)

        load_in = [preset, target_id, dspark_id, dflash_id]
        load_out = [header, errors, load_errors, preset, custom_box, note, confirm_box, confirm_md, load_btn,
                    *(controls[n] for n in DRAFT_KNOBS), *lane_out]
        load_args = dict(concurrency_id="arena", concurrency_limit=1, show_progress="full",
                         show_progress_on=[header], **private)
        preset.input(on_preset, preset, [custom_box, note], queue=False, **private).then(
            lambda p, *a: ask_or_load(p, *a) if p != "custom" else (gr.skip(),) * len(load_out), load_in, load_out,
            **load_args)
        load_btn.click(ask_or_load, load_in, load_out, **load_args)
        confirm_btn.click(load, load_in, load_out, **load_args)
        cancel_btn.click(cancel_load, None, load_out, queue=False, **private)
        sweep_buttons = [sweep_run, sweep_stop]
        sweeping = sweep_run.click(arm_sweep, None, sweep_buttons, queue=False, **private).then(
            sweep_handler, {*sweep_inputs, *knobs}, sweep_out, concurrency_id="arena",
            concurrency_limit=1, show_progress="minimal", **private)
        sweeping.then(lambda: busy(False), None, sweep_buttons, queue=False, **private)
        sweep_stop.click(stop, None, None, queue=False, **private)  # the sweep ends itself and says so
        register(demo, stage)
    return demo


def plot_legend() -> str:
    """The per-round chart's series as swatches that wrap on a narrow screen."""
    return '<div class="legend">' + "".join(
        f'<span><i class="sw" style="background:{c}"></i>{esc(name)}</span>' for name, c in COLORS.items()) + "</div>"


def block_sizes(stage: Stage) -> tuple[int, int]:
    heads = stage.arena.heads if stage.arena is not None else {}
    return (int(getattr(heads.get("dspark"), "max_drafts", 16) or 16),
            int(getattr(heads.get("dflash"), "max_drafts", 16) or 16))


def knob_limits(stage: Stage) -> tuple:
    cap_max, len_max = block_sizes(stage)
    return gr.Slider(maximum=cap_max), gr.Slider(maximum=len_max)


def theme() -> gr.themes.Base:
    return gr.themes.Soft(primary_hue="violet", secondary_hue="cyan", neutral_hue="slate").set(
        button_primary_background_fill="*primary_600", button_primary_background_fill_hover="*primary_700",
        button_primary_text_color="white", button_primary_text_color_hover="white",
        button_cancel_background_fill="#dc2626", button_cancel_background_fill_hover="#b91c1c",
        button_cancel_text_color="white", button_cancel_text_color_hover="white")  # Stop: red while it can act


def launch_kwargs() -> dict:
    """Gradio 6 takes theme and CSS at launch()."""
    return {"theme": theme(), "css": (Path(__file__).parent / "style.css").read_text()}


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
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    from spec.cpu import ensure_fast_blas

    blas = ensure_fast_blas()  # first (a no-op if the script's top already did it): OpenBLAS for MLX
    args = parse_args(argv)
    custom = bool(args.target or args.dspark or args.dflash)
    choice = Choice("custom", args.target, args.dspark, args.dflash) if custom else Choice(args.preset)
    stage = Stage(exposure=Exposure.of(args.host, args.share, args.allow_custom))
    print(f"spec-arena: {blas}", file=sys.stderr)
    try:
        stage.load(choice)
    except Exception as e:  # serve anyway: the page shows why and lets the user pick another preset
        stage.error = stage.tell(f"could not load {choice.label}: {readable(e)}")
        stage.choice = choice
        print(f"spec-arena: {stage.error}", file=sys.stderr)
    demo = build_demo(stage)
    demo.queue(default_concurrency_limit=1)
    demo.launch(server_name=args.host, server_port=args.port, share=args.share, footer_links=["api"],
                **launch_kwargs())
    return 0


if __name__ == "__main__":
    sys.exit(main())
