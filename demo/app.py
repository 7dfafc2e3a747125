"""Spec Arena: DSpark vs DFlash vs greedy, streamed live from ONE shared target (Gradio Blocks, UI only).

    python demo/app.py                                   # pocket preset, http://127.0.0.1:7860
    python demo/app.py --preset qwen3                    # downloads from the hub on first use
    python demo/app.py --target DIR --dspark DIR --dflash DIR
    python demo/app.py --host 0.0.0.0 --port 8080 --share

All model work lives in spec.race.Arena (its own MLX thread); the handlers here only drain its events
and turn them into HTML, numbers and a plot. The same race is a named API endpoint, `/race`:

    from gradio_client import Client
    Client("http://127.0.0.1:7860/").predict("Write a haiku about rain.", 64, api_name="/race")
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Iterator

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

from demo.controls import RUN_LABEL, SUBMIT_HINT, armed, released  # noqa: E402
from demo.lanes import LANES, Lane, esc  # noqa: E402
from demo.stage import Choice, Stage, describe, examples, preset_choices, preset_note, settings_of  # noqa: E402,E501
from demo.status import error_html  # noqa: E402
from demo.sweep_tab import run_sweep, sweep_api, sweep_tab  # noqa: E402
from demo.view import PLOT_ROUNDS, View, empty_table, idle_lanes, readable, save_results  # noqa: E402
from spec.target import SpecError  # noqa: E402

DOMAINS = {"code": "Code", "chat": "Chat", "math": "Math"}
COLORS = {"DSpark": "#7c3aed", "DFlash": "#0891b2"}
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

    def run(prompt: str, max_new_tokens: float, temperature: float, top_p: float, top_k: float, seed: float,
            dspark_cap: float, dspark_threshold: float, dflash_len: float, baseline: bool, thinking: bool,
            auto_length: bool, request: gr.Request) -> Iterator[tuple]:
        """Drain the arena's events into the page, a few updates a second."""
        knobs = (max_new_tokens, temperature, top_p, top_k, seed, dspark_cap, dspark_threshold, dflash_len,
                 baseline, thinking, auto_length)
        sid = request.session_hash if request else None
        if sid in stage.cancelled:
            stage.cancelled.discard(sid)
            yield message("Stopped before it started.")
            return
        arena = stage.arena
        if arena is None:
            msg = stage.error or "no model is loaded: pick a preset in Settings"
            gr.Warning(msg, duration=10)
            yield message("Not run.", msg)
            return
        view: View | None = None
        try:
            settings = settings_of(*knobs)
            if not prompt or not prompt.strip():
                raise SpecError("the prompt is empty: type one or click an example")
            view = View.for_arena(arena, settings)
            yield view.outputs()
            stage.owner, last, recorded = sid, 0.0, []
            for ev in arena.race(prompt, settings):
                recorded.append(ev)
                if ev.kind == "finish":
                    stage.record(sid, recorded)
                view.feed(ev)
                now = time.monotonic()
                if ev.kind != "round" or now - last >= STREAM_EVERY:
                    last = now
                    if ev.kind == "finish":
                        view.files = save_results(view, prompt, settings, dict(arena.info))
                    yield view.outputs()
        except Exception as e:  # a readable message in the page; the server keeps serving
            msg = readable(e)
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
        view, last = View({n: Lane(n) for n in dict.fromkeys(e.engine for e in events if e.kind == "round")}), 0.0
        view.replay = True
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

    def raced(prompt: str, *knobs: Any) -> list:
        """One race to the end on the served arena (for the API); errors become one readable gr.Error."""
        arena = stage.arena
        if arena is None:
            raise gr.Error(stage.error or "no model is loaded")
        try:
            settings = settings_of(*knobs)
            if not prompt or not prompt.strip():
                raise SpecError("the prompt is empty")
            return list(arena.race(prompt, settings))
        except Exception as e:
            raise gr.Error(readable(e)) from e

    def race_api(prompt: str, max_new_tokens: int = 128, temperature: float = 0.0, top_p: float = 1.0,
                 top_k: int = 0, seed: int = 0, dspark_cap: int = 0, dspark_threshold: float = 0.0,
                 dflash_len: int = 0, baseline: bool = True, thinking: bool = False) -> dict:
        """Run one race to the end; returns the results table (records), the texts, the verdicts, the
        finishing order on the race clock (engine seconds) and the winner with its speedups.
        thinking: the chat template's enable_thinking (Qwen3's <think>), off by default."""
        from spec.race import results_table, standings, winner

        final = raced(prompt, max_new_tokens, temperature, top_p, top_k, seed, dspark_cap, dspark_threshold,
                      dflash_len, baseline, thinking)[-1]
        table = results_table(final.results, final.verdicts)
        win = winner(final.results)
        return {"table": json.loads(table.to_json(orient="records")), "columns": list(table.columns),
                "texts": {n: r.text for n, r in final.results.items()}, "verdicts": final.verdicts,
                "wall_seconds": round(final.wall, 3), "race_clock_seconds": round(final.clock, 3),
                "finish_order": [[n, round(t, 3)] for n, t in standings(final.results)],
                "winner": None if win is None else {"engine": win[0], "speedup_end_to_end": {
                    n: round(r, 3) for n, r in win[1].items()}}, "models": dict(stage.arena.info)}

    def replay_api(prompt: str, max_new_tokens: int = 128, temperature: float = 0.0, top_p: float = 1.0,
                   top_k: int = 0, seed: int = 0, dspark_cap: int = 0, dspark_threshold: float = 0.0,
                   dflash_len: int = 0, baseline: bool = True, thinking: bool = False,
                   speed: float = 1.0) -> Iterator[dict]:
        """Run one race, then stream it again at its measured speed (speed 2 = twice as fast): one update
        per round, {"wall", "engine", "tokens", "text"} with that lane's text so far; the last update
        also carries "verdicts" and "finish_order"."""
        from spec.race import replay as replayed, standings

        events = raced(prompt, max_new_tokens, temperature, top_p, top_k, seed, dspark_cap, dspark_threshold,
                       dflash_len, baseline, thinking)
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

    def sweep_handler(domains: list[str], per_domain: float, own: str, sweep_max_new: float, max_new_tokens: float,
                      temperature: float, top_p: float, top_k: float, seed: float, dspark_cap: float,
                      dspark_threshold: float, dflash_len: float, baseline: bool, thinking: bool,
                      auto_length: bool, request: gr.Request) -> Iterator[tuple]:
        """The sweep tab's Run: its own prompts and length, the Settings' sampling and head knobs."""
        yield from run_sweep(stage, domains, per_domain, own, sweep_max_new, max_new_tokens, temperature, top_p,
                             top_k, seed, dspark_cap, dspark_threshold, dflash_len, baseline, thinking,
                             auto_length, request=request)

    def sweep_endpoint(domains: str = "chat,code,math", per_domain: int = 2, prompts: str = "",
                       max_new_tokens: int = 48, temperature: float = 0.0) -> dict:
        """The domain sweep to the end: races of the example prompts of `domains` (comma-separated), or
        of your own `prompts` (one a line); returns the table method x domain (accept, tok/s, speedup,
        lossless), its release layout and the per-race rows."""
        return sweep_api(stage, domains, per_domain, prompts, max_new_tokens, temperature)

    def load(preset: str, target: str, dspark: str, dflash: str,
             progress: gr.Progress = gr.Progress(track_tqdm=True)) -> tuple:
        """Load a preset (or custom ids) next to the current arena; keep serving the old one on error."""
        choice = (Choice("custom", target.strip() or None, dspark.strip() or None, dflash.strip() or None)
                  if preset == "custom" else Choice(preset))
        try:
            progress(0.0, desc=f"loading {choice.label}")
            stage.load(choice, lambda f, d: progress(f, desc=d))
            err = ""
        except Exception as e:
            keep = f" Still serving {stage.choice.label}." if stage.arena is not None and stage.choice else ""
            err = f"could not load {choice.label}: {readable(e)}{keep}"
            gr.Warning(err, duration=10)
        current = stage.choice.preset if stage.choice else preset
        shown = preset if not err or preset == "custom" else current  # a failed custom load stays open to fix
        lanes = [gr.skip()] * (2 * len(LANES)) if err else idle_lanes(stage)
        return (describe(stage), error_html(err), gr.Dropdown(value=shown), gr.Group(visible=shown == "custom"),
                preset_note(shown), *knob_limits(stage), *lanes)

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
                preset = gr.Dropdown(preset_choices(), value=first_preset, label="Preset", elem_id="preset", scale=3)
                load_btn = gr.Button("Load", elem_id="load", scale=1)
            note = gr.Markdown(preset_note(first_preset), elem_id="preset-note")
            with gr.Group(visible=bool(stage.choice and stage.choice.preset == "custom")) as custom_box:
                with gr.Row():
                    c = stage.choice or Choice()
                    target_id = gr.Textbox(c.target or "", label="Target (hub id or folder)", elem_id="target")
                    dspark_id = gr.Textbox(c.dspark or "", label="DSpark head", elem_id="dspark")
                    dflash_id = gr.Textbox(c.dflash or "", label="DFlash head", elem_id="dflash")
            with gr.Row():
                max_new = gr.Slider(1, 2048, value=128, step=1, label="Max new tokens", elem_id="max-new")
                temperature = gr.Slider(0, 2, value=0, step=0.05, label="Temperature (0 = greedy)")
                top_p = gr.Slider(0.05, 1, value=1, step=0.01, label="Top-p")
                top_k = gr.Slider(0, 200, value=0, step=1, label="Top-k (0 = off)")
                seed = gr.Number(0, precision=0, label="Seed")
            with gr.Row():
                cap_max, len_max = block_sizes(stage)
                auto_length = gr.Checkbox(True, label="Auto draft length (chosen every round from measured "
                                          "costs and acceptance; off: the fixed lengths)", elem_id="auto-length")
                dspark_cap = gr.Slider(0, cap_max, value=0, step=1, label="DSpark cap (0 = the head's block)")
                dspark_thr = gr.Slider(0, 0.95, value=0, step=0.05, label="DSpark confidence threshold (0 = off)")
                dflash_len = gr.Slider(0, len_max, value=0, step=1, label="DFlash draft length (0 = full block)")
                baseline = gr.Checkbox(True, label="Run the greedy baseline", elem_id="baseline")
                thinking = gr.Checkbox(False, label="Let the model think (enable_thinking)",
                                       elem_id="thinking")
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
                plot = gr.LinePlot(None, x="round", y="accept length", color="engine", color_map=COLORS,
                                   y_lim=[0, None], x_lim=[1, PLOT_ROUNDS], x_axis_format="d", elem_id="plot",
                                   label="Accept length per round (tokens committed per target forward)")
                table = gr.DataFrame(empty_table(), label="Results (decode tok/s uses each engine's own busy time)",
                                     interactive=False, elem_id="table")
                files = gr.File(label="Download the results (CSV, JSON)", file_count="multiple", interactive=False,
                                elem_id="files", visible=False)
            with gr.Tab("Domain sweep", elem_id="sweep-tab"):
                sweep_inputs, sweep_run, sweep_stop, sweep_out = sweep_tab()
        gr.HTML('<div class="foot">One clock: the engines share one MLX thread, and the one that has computed '
                "least so far always runs next, so at every moment each lane shows what that engine alone would "
                "have written after the same amount of its own compute (the race clock, in engine seconds; the "
                "wall clock is shared by all three). Tok/s counts each engine's own busy time. Accept length = "
                "tokens committed per target forward (the target's own token included, so always ≥ 1).</div>")

        knobs = [max_new, temperature, top_p, top_k, seed, dspark_cap, dspark_thr, dflash_len, baseline, thinking,
                 auto_length]
        outputs = [status, errors, *lane_out, plot, table, files]
        private = dict(api_visibility="private")
        buttons = [run_btn, stop_btn]
        gr.on([run_btn.click, prompt.submit], arm, None, [status, *buttons], queue=False, **private).then(
            run, [prompt, *knobs], outputs, concurrency_id="arena", concurrency_limit=1,
            show_progress="minimal", show_progress_on=[status], **private).then(
            released, None, buttons, queue=False, **private)
        replaying = replay_btn.click(lambda: armed(busy=False)[1:], None, buttons, queue=False, **private).then(
            replay_last, None, outputs, show_progress="hidden", **private)
        replaying.then(released, None, buttons, queue=False, **private)
        stop_btn.click(stop, None, None, queue=False, cancels=[replaying], **private)

        load_in = [preset, target_id, dspark_id, dflash_id]
        load_out = [header, errors, preset, custom_box, note, dspark_cap, dflash_len, *lane_out]
        load_args = dict(concurrency_id="arena", concurrency_limit=1, show_progress="full",
                         show_progress_on=[header], **private)
        preset.input(on_preset, preset, [custom_box, note], queue=False, **private).then(
            lambda p, *a: load(p, *a) if p != "custom" else (gr.skip(),) * len(load_out), load_in, load_out,
            **load_args)
        load_btn.click(load, load_in, load_out, **load_args)
        sweeping = sweep_run.click(arm, None, None, queue=False, **private).then(
            sweep_handler, [*sweep_inputs, *knobs], sweep_out, concurrency_id="arena",
            concurrency_limit=1, show_progress="minimal", **private)
        sweep_stop.click(stop, None, None, queue=False, cancels=[sweeping], **private)
        gr.api(race_api, api_name="race", concurrency_id="arena", concurrency_limit=1)
        gr.api(replay_api, api_name="replay", concurrency_id="arena", concurrency_limit=1)
        gr.api(sweep_endpoint, api_name="sweep", concurrency_id="arena", concurrency_limit=1)
    return demo


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
    ap.add_argument("--preset", default="pocket", help="pocket (offline), qwen3, gemma4")
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
    stage = Stage()
    print(f"spec-arena: {blas}", file=sys.stderr)
    try:
        stage.load(choice)
    except Exception as e:  # serve anyway: the page shows why and lets the user pick another preset
        stage.error = f"could not load {choice.label}: {readable(e)}"
        stage.choice = choice
        print(f"spec-arena: {stage.error}", file=sys.stderr)
    demo = build_demo(stage)
    demo.queue(default_concurrency_limit=1)
    demo.launch(server_name=args.host, server_port=args.port, share=args.share, footer_links=["api"],
                **launch_kwargs())
    return 0


if __name__ == "__main__":
    sys.exit(main())
