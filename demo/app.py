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
import html
import json
import os
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Iterator

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
import pandas as pd  # noqa: E402

from spec.target import SpecError  # noqa: E402

PROMPTS = ROOT / "assets" / "prompts"
DOMAINS = {"code": "Code", "chat": "Chat", "math": "Math"}
LANES = {"dspark": "DSpark", "dflash": "DFlash", "greedy": "Greedy baseline"}
LANE_NOTES = {"dspark": "target + DSpark head", "dflash": "target + DFlash head",
              "greedy": "the target alone"}
COLORS = {"DSpark": "#7c3aed", "DFlash": "#0891b2"}
CUSTOM_LABEL = "custom: your own target and heads"
STREAM_EVERY = 0.12  # seconds between page updates while racing (every round would flood the socket)


# -- the served arena ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Choice:
    """What the arena is loaded from: a preset, or explicit target / head ids or folders."""

    preset: str = "pocket"
    target: str | None = None
    dspark: str | None = None
    dflash: str | None = None

    @property
    def label(self) -> str:
        return self.preset if self.preset != "custom" else short(self.target or "custom")


@dataclass
class Stage:
    """The ONE arena this server races on; replaced only by one that loaded without error.

    Stop is per browser session: only the session whose race is running may stop it, and a Stop
    pressed while one's own run still waits in the queue cancels that run before it starts."""

    arena: Any = None
    choice: Choice | None = None
    error: str = ""
    owner: str | None = None
    cancelled: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def load(self, choice: Choice, progress: Callable[[float, str], None] = lambda f, d: None) -> None:
        """Load `choice` next to the current arena; swap only on success (errors leave it serving)."""
        from spec.race import load_preset_arena

        if choice.preset == "custom" and not choice.target:
            raise SpecError("custom: give a target (hub id or folder), and at least one head")
        if choice.preset != "custom":
            from spec.presets import get_preset

            get_preset(choice.preset)  # "not yet supported" before any download
        prefetch(choice, progress)
        progress(0.9, f"loading {choice.label} into MLX")
        new = load_preset_arena(choice.preset, choice.target, choice.dspark, choice.dflash)
        with self.lock:
            old, self.arena, self.choice, self.error = self.arena, new, choice, ""
        if old is not None:
            old.close()


def preset_choices() -> list[tuple[str, str]]:
    """Dropdown entries from spec.presets: name, the first clause of its note, support."""
    from spec.presets import PRESETS

    out = []
    for name, p in PRESETS.items():
        label = f"{name}: {p.note.split(';')[0].split(':')[0].split(' (')[0].strip()}" if p.note else name
        out.append((label if p.supported else f"{name}: not yet supported", name))
    return out + [(CUSTOM_LABEL, "custom")]


def preset_note(preset: str) -> str:
    from spec.presets import PRESETS

    if preset == "custom":
        return "Type a hub id or a local folder for the target and each head, then press **Load**."
    p = PRESETS.get(preset)
    return f"{p.note}." if p and p.note else ""


def prefetch(choice: Choice, progress: Callable[[float, str], None]) -> None:
    """Download hub ids here (not on the MLX thread) so the page's progress bar sees the tqdm bars."""
    from spec.presets import PRESETS
    from spec.target import resolve_path

    p = PRESETS.get(choice.preset)
    refs = [choice.target or (p.target if p else None), choice.dspark or (p.dspark if p else None),
            choice.dflash or (p.dflash if p else None)]
    hub = [r for r in refs if r and r.count("/") == 1 and not r.startswith((".", "/", "~")) and not Path(r).exists()]
    for i, ref in enumerate(hub):
        progress(i / max(1, len(hub)) * 0.9, f"downloading {ref}")
        resolve_path(ref)


def describe(stage: Stage) -> str:
    """Header chips: target, heads, device, BLAS, versions (device and BLAS asked on the MLX thread)."""
    def versions() -> str:
        out = []
        for pkg in ("mlx", "mlx-lm", "gradio"):
            try:
                out.append(f"{pkg} {metadata.version(pkg)}")
            except metadata.PackageNotFoundError:
                pass
        return " · ".join(out)

    chips: list[tuple[str, str, str]] = []
    a = stage.arena
    if a is None:
        chips.append(("model", "none loaded", ""))
    else:
        for key, label in (("target", "target"), ("dspark", "DSpark head"), ("dflash", "DFlash head")):
            ref = a.info.get(key)
            chips.append((label, short(ref) if ref else "none", ref or ""))
        device, blas = a.call(_device_and_blas)
        chips += [("device", device, ""), ("BLAS", blas.split(" (")[0], blas)]
    chips.append(("versions", versions(), ""))
    body = "".join(f'<span class="chip" title="{esc(tip)}"><b>{esc(k)}</b> {esc(v)}</span>' for k, v, tip in chips)
    return f'<div class="chips">{body}</div>'


def _device_and_blas() -> tuple[str, str]:
    import platform

    import mlx.core as mx

    from spec.cpu import blas_info

    gpu = mx.default_device().type == mx.gpu
    return ("GPU (Metal)" if gpu else f"CPU ({platform.machine()})"), blas_info()


def short(ref: str) -> str:
    p = Path(ref)
    return p.name if p.exists() else ref


def esc(s: Any) -> str:
    return html.escape(str(s), quote=True)


# -- one race, as the page sees it ---------------------------------------------------------------

class Lane:
    """One engine's column: its tokens painted as accepted drafts vs the target's own tokens."""

    def __init__(self, name: str, decode: Callable[[list[int]], str], eos: set[int]):
        self.name, self.decode, self.eos = name, decode, eos
        self.ids: list[int] = []
        self.spans: list[list[str]] = []  # [kind, text]; kind "acc" (accepted draft) or "own"
        self.text = ""
        self.meter: Any = None
        self.result: Any = None
        self.verdict = ""
        self.done = False

    def add(self, r: Any) -> None:
        """Decode the whole sequence (tokens may split characters) and paint what is new."""
        acc = [t for t in r.tokens[: r.accepted] if t not in self.eos]
        own = [t for t in r.tokens[r.accepted:] if t not in self.eos]
        if acc:
            self.ids += acc
            self._show(self.decode(self.ids), "acc", final=False)
        self.ids += own
        self._show(self.decode(self.ids), "own", final=r.done)

    def finish(self, result: Any) -> None:
        """The engine's own final text wins if our per-round painting ever drifted from it."""
        self.result, self.done = result, True
        self._show(result.text, "own", final=True)

    def _show(self, text: str, kind: str, final: bool) -> None:
        if not final:
            text = text.rstrip("\ufffd")  # a character still split across tokens: wait for the rest
        if not text.startswith(self.text):
            n = 0
            while n < min(len(text), len(self.text)) and text[n] == self.text[n]:
                n += 1
            self._cut(n)
        piece = text[len(self.text):]
        if piece:
            if self.spans and self.spans[-1][0] == kind == "own":
                self.spans[-1][1] += piece
            else:
                self.spans.append([kind, piece])
            self.text = text

    def _cut(self, n: int) -> None:
        while self.spans and len(self.text) - len(self.spans[-1][1]) >= n:
            self.text = self.text[: len(self.text) - len(self.spans.pop()[1])]
        if self.spans and len(self.text) > n:
            self.spans[-1][1] = self.spans[-1][1][: len(self.spans[-1][1]) - (len(self.text) - n)]
        self.text = self.text[:n]


@dataclass
class View:
    """Everything the page shows about one race, fed event by event."""

    lanes: dict[str, Lane]
    wall: float = 0.0
    state: str = "waiting"  # waiting | racing | finished | stopped
    table: Any = None
    verdicts: dict[str, str] = field(default_factory=dict)
    files: list[str] | None = None

    @classmethod
    def for_arena(cls, arena: Any, settings: Any) -> "View":
        names = [n for n in ("dspark", "dflash") if n in arena.heads] + (["greedy"] if settings.baseline else [])
        t = arena.target
        return cls({n: Lane(n, t.decode, t.eos_ids) for n in names})

    def feed(self, ev: Any) -> None:
        self.wall = ev.wall or self.wall
        if ev.kind == "start":
            self.state = "racing"
        elif ev.kind == "round":
            lane = self.lanes[ev.engine]
            lane.add(ev.round)
            lane.meter = ev.meter
        elif ev.kind == "done":
            self.lanes[ev.engine].meter = ev.meter
            self.lanes[ev.engine].finish(ev.result)
        elif ev.kind == "finish":
            from spec.race import results_table

            for name, res in ev.results.items():
                if name in self.lanes and not self.lanes[name].done:
                    self.lanes[name].finish(res)
            self.verdicts = dict(ev.verdicts)
            for name, v in ev.verdicts.items():
                self.lanes[name].verdict = v
            stopped = any(r.finish_reason == "stopped" for r in ev.results.values())
            self.state = "stopped" if stopped else "finished"
            self.table = results_table(ev.results, ev.verdicts)

    def speedup(self, name: str) -> float | None:
        base, lane = self.lanes.get("greedy"), self.lanes[name]
        if base is None or base.meter is None or lane.meter is None or base.meter.tok_s <= 0:
            return None
        return lane.meter.tok_s / base.meter.tok_s

    def plot(self) -> pd.DataFrame | None:
        """Accept length per round of each head; None (never an empty frame, Gradio 6 LinePlot) until
        every head has a round or the race is over: the browser keeps the colours of the plot's first
        frame, so a head missing from it would stay invisible for the whole race."""
        heads = [n for n in ("dspark", "dflash") if n in self.lanes]
        rounds = {n: self.lanes[n].meter.accept_lengths if self.lanes[n].meter else [] for n in heads}
        if self.state == "racing" and not all(rounds.values()):
            return None
        rows = [{"round": i + 1, "accept length": a, "engine": LANES[n]}
                for n in heads for i, a in enumerate(rounds[n])]
        return pd.DataFrame(rows) if rows else None

    def outputs(self) -> tuple:
        cols = []
        for name in LANES:
            lane = self.lanes.get(name)
            cols += [meters_html(name, lane, self.speedup(name) if lane else None), text_html(name, lane)]
        files = gr.File(value=self.files, visible=True) if self.files else gr.File(value=None, visible=False)
        return (status_html(self), "", *cols, self.plot(), self.table if self.table is not None else empty_table(),
                files)


def empty_table() -> pd.DataFrame:
    return pd.DataFrame(columns=["engine", "tokens", "rounds", "mean accept", "decode tok/s", "end-to-end tok/s",
                                 "speedup", "prefill s", "finish", "lossless"])


def idle_lanes(stage: Stage) -> list[str]:
    """Lane cards before the first race: the engines this arena will race, nothing measured yet."""
    a = stage.arena
    present = {n for n in ("dspark", "dflash") if a is not None and n in a.heads} | ({"greedy"} if a else set())
    out = []
    for name in LANES:
        lane = Lane(name, lambda ids: "", set()) if name in present else None
        out += [meters_html(name, lane, None), text_html(name, lane, idle=True)]
    return out


def fmt(x: float | None, digits: int = 2, prefix: str = "", suffix: str = "") -> str:
    return "–" if x is None else f"{prefix}{x:,.{digits}f}{suffix}"


def verdict_badge(v: str) -> str:
    if not v:
        return ""
    kind = "ok" if v.startswith("identical") else "bad" if v.startswith("DIFFERS") else "info"
    mark = {"ok": "✓ ", "bad": "✗ ", "info": "≠ " if v.startswith("differs") else "– "}[kind]
    short_v = v.split(":")[0] if kind == "info" else v
    return f'<span class="verdict {kind}" title="{esc(v)}">{mark}{esc(short_v)}</span>'


def meters_html(name: str, lane: Lane | None, speedup: float | None) -> str:
    head = (f'<div class="lane-head"><span class="dot {name}"></span><span class="lane-name">{LANES[name]}</span>'
            f'<span class="lane-note">{LANE_NOTES[name]}</span></div>')
    if lane is None:
        why = "baseline off" if name == "greedy" else "no head loaded"
        return f'<div class="lane-card off">{head}<div class="muted">not in this race ({why})</div></div>'
    m = lane.meter
    cells = [
        (fmt(m.mean_accept if m and m.rounds else None), "accept length"),
        (fmt(m.tok_s if m and m.busy else None, 1), "tok/s decode"),
        (fmt(speedup, 2, "×") if name != "greedy" else ("×1.00" if m and m.busy else "–"), "vs greedy"),
        (str(m.tokens) if m else "0", "tokens"),
        (str(m.rounds) if m else "0", "rounds"),
    ]
    body = "".join(f'<div class="m"><div class="v">{v}</div><div class="k">{k}</div></div>' for v, k in cells)
    badge = verdict_badge(lane.verdict) if name != "greedy" else (
        '<span class="verdict base">reference</span>' if lane.done else "")
    return (f'<div class="lane-card {name}">{head}<div class="meters">{body}</div>'
            f'<div class="badges">{badge}</div></div>')


def text_html(name: str, lane: Lane | None, idle: bool = False) -> str:
    if lane is None:
        return '<div class="lane-text empty"></div>'
    if not lane.spans:
        word = "Press Run race." if idle else "(no text)" if lane.done else "waiting for the first token…"
        return f'<div class="lane-text {name}"><span class="muted">{word}</span></div>'
    paint = name != "greedy"
    parts = [f'<span class="tok-{kind}">{html.escape(text, quote=False)}</span>' if paint
             else html.escape(text, quote=False) for kind, text in lane.spans]
    caret = "" if lane.done else '<span class="caret"></span>'
    return f'<div class="lane-text {name}">{"".join(parts)}{caret}</div>'


def status_html(view: View) -> str:
    wall = f"{view.wall:.2f} s wall"
    if view.state == "waiting":
        return '<div class="status">Waiting for the arena…</div>'
    if view.state == "racing":
        return f'<div class="status racing"><span class="pulse"></span>Racing · {wall}</div>'
    summary = " · ".join(f"{LANES[n]} {verdict_badge(v)}" for n, v in view.verdicts.items())
    why = next((v.split(": ", 1)[1] for v in view.verdicts.values() if v.startswith("differs by design: ")), "")
    title = "Stopped" if view.state == "stopped" else "Finished"
    note = " (texts compared up to where the first engine stopped)" if view.state == "stopped" else ""
    return (f'<div class="status {view.state}"><b>{title}</b> in {wall}{note}. '
            f'<span class="lossless">Lossless check: {summary or "–"}</span>'
            + (f'<div class="why">Why: {esc(why)}.</div>' if why else "") + "</div>")


def save_results(view: View, prompt: str, settings: Any, info: dict) -> list[str]:
    """CSV of the table, JSON of the table + texts + settings (a fresh folder per race)."""
    from dataclasses import asdict

    out = Path(tempfile.mkdtemp(prefix="spec-arena-"))
    view.table.to_csv(out / "spec-arena-results.csv", index=False)
    doc = {"prompt": prompt, "settings": asdict(settings), "models": info, "wall_seconds": round(view.wall, 3),
           "verdicts": view.verdicts, "results": json.loads(view.table.to_json(orient="records")),
           "texts": {n: lane.text for n, lane in view.lanes.items()}}
    (out / "spec-arena-results.json").write_text(json.dumps(doc, indent=2, ensure_ascii=False))
    return [str(out / "spec-arena-results.csv"), str(out / "spec-arena-results.json")]


def error_html(msg: str) -> str:
    return f'<div class="error-box"><b>Error.</b> {esc(msg)}</div>' if msg else ""


def readable(e: BaseException) -> str:
    """One line a user can act on; SpecError messages are already written for people."""
    if isinstance(e, SpecError):
        return str(e)
    text = str(e) or type(e).__name__
    if "memory" in text.lower() or isinstance(e, MemoryError):
        return f"out of memory: {text}. Try a smaller preset or fewer max new tokens."
    return f"{type(e).__name__}: {text}"


# -- the page --------------------------------------------------------------------------------------

def settings_of(max_new_tokens: float, temperature: float, top_p: float, top_k: float, seed: float,
                dspark_cap: float, dspark_threshold: float, dflash_len: float, baseline: bool,
                thinking: bool = False) -> Any:
    from spec.race import RaceSettings

    return RaceSettings(max_new_tokens=int(max_new_tokens), temperature=float(temperature), top_p=float(top_p),
                        top_k=int(top_k), seed=int(seed or 0), dspark_cap=int(dspark_cap),
                        dspark_threshold=float(dspark_threshold), dflash_len=int(dflash_len), baseline=bool(baseline),
                        thinking=bool(thinking))


def examples(domain: str, k: int = 6) -> list[str]:
    from spec.prompts import load_prompts

    try:
        return [row["prompt"] for row in load_prompts(PROMPTS / f"{domain}.jsonl")][:k]
    except (OSError, ValueError):
        return []


def build_demo(stage: Stage) -> gr.Blocks:
    """The Blocks layout and its handlers, over a Stage shared by every session."""

    def message(status: str, error: str = "", reset: bool = False) -> tuple:
        """Status + error; the lanes keep the last race (or go back to idle when this one never began)."""
        lanes = idle_lanes(stage) if reset else [gr.skip()] * (2 * len(LANES))
        return (f'<div class="status">{esc(status)}</div>', error_html(error), *lanes, gr.skip(), gr.skip(),
                gr.skip())

    def arm(request: gr.Request) -> None:
        """Run clicked: forget a Stop pressed earlier while nothing of ours was queued."""
        stage.cancelled.discard(request.session_hash)

    def run(prompt: str, max_new_tokens: float, temperature: float, top_p: float, top_k: float, seed: float,
            dspark_cap: float, dspark_threshold: float, dflash_len: float, baseline: bool, thinking: bool,
            request: gr.Request) -> Iterator[tuple]:
        """Drain the arena's events into the page, a few updates a second."""
        knobs = (max_new_tokens, temperature, top_p, top_k, seed, dspark_cap, dspark_threshold, dflash_len,
                 baseline, thinking)
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
            stage.owner, last = sid, 0.0
            for ev in arena.race(prompt, settings):
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

    def stop(request: gr.Request) -> None:
        """Stop our own race within one round (or our queued run before it starts); never someone else's."""
        sid = request.session_hash
        if stage.owner == sid and stage.arena is not None:
            stage.arena.stop()
        else:
            stage.cancelled.add(sid)

    def race_api(prompt: str, max_new_tokens: int = 128, temperature: float = 0.0, top_p: float = 1.0,
                 top_k: int = 0, seed: int = 0, dspark_cap: int = 0, dspark_threshold: float = 0.0,
                 dflash_len: int = 0, baseline: bool = True, thinking: bool = False) -> dict:
        """Run one race to the end; returns the results table (records), the texts and the verdicts.
        thinking: the chat template's enable_thinking (Qwen3's <think>), off by default."""
        arena = stage.arena
        if arena is None:
            raise gr.Error(stage.error or "no model is loaded")
        settings = settings_of(max_new_tokens, temperature, top_p, top_k, seed, dspark_cap, dspark_threshold,
                               dflash_len, baseline, thinking)
        try:
            if not prompt or not prompt.strip():
                raise SpecError("the prompt is empty")
            final = None
            for final in arena.race(prompt, settings):
                pass
        except Exception as e:
            raise gr.Error(readable(e)) from e
        from spec.race import results_table

        table = results_table(final.results, final.verdicts)
        return {"table": json.loads(table.to_json(orient="records")), "columns": list(table.columns),
                "texts": {n: r.text for n, r in final.results.items()}, "verdicts": final.verdicts,
                "wall_seconds": round(final.wall, 3), "models": dict(arena.info)}

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
        with gr.Row(equal_height=False):
            with gr.Column(scale=5):
                prompt = gr.Textbox(label="Prompt", lines=3, max_lines=8, elem_id="prompt",
                                    placeholder="Ask anything, or pick an example below…")
            with gr.Column(scale=1, min_width=160):
                run_btn = gr.Button("Run race", variant="primary", elem_id="run")
                stop_btn = gr.Button("Stop", variant="stop", elem_id="stop")
        with gr.Tabs(elem_id="examples"):
            for domain, title in DOMAINS.items():
                with gr.Tab(title):
                    gr.Examples([[p] for p in examples(domain)], inputs=[prompt], label=None,
                                examples_per_page=6)
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
                           y_lim=[0, None], x_axis_format="d", elem_id="plot",
                           label="Accept length per round (tokens committed per target forward)")
        table = gr.DataFrame(empty_table(), label="Results (decode tok/s uses each engine's own busy time)",
                             interactive=False, elem_id="table")
        files = gr.File(label="Download the results (CSV, JSON)", file_count="multiple", interactive=False,
                        elem_id="files", visible=False)
        with gr.Accordion("Settings", open=False, elem_id="settings"):
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
                dspark_cap = gr.Slider(0, cap_max, value=0, step=1, label="DSpark cap (0 = the head's block)")
                dspark_thr = gr.Slider(0, 0.95, value=0, step=0.05, label="DSpark confidence threshold (0 = off)")
                dflash_len = gr.Slider(0, len_max, value=0, step=1, label="DFlash draft length (0 = full block)")
                baseline = gr.Checkbox(True, label="Run the greedy baseline", elem_id="baseline")
                thinking = gr.Checkbox(False, label="Let the model think (enable_thinking)",
                                       elem_id="thinking")
        gr.HTML('<div class="foot">Tok/s counts each engine\'s own busy time: the three engines take turns, '
                "one round each, on one MLX thread, so the wall clock is shared. Accept length = tokens "
                "committed per target forward (the target's own token included, so always ≥ 1).</div>")

        knobs = [max_new, temperature, top_p, top_k, seed, dspark_cap, dspark_thr, dflash_len, baseline, thinking]
        outputs = [status, errors, *lane_out, plot, table, files]
        private = dict(api_visibility="private")
        gr.on([run_btn.click, prompt.submit], arm, None, None, queue=False, **private).then(
            run, [prompt, *knobs], outputs, concurrency_id="arena", concurrency_limit=1,
            show_progress="minimal", show_progress_on=[status], **private)
        stop_btn.click(stop, None, None, queue=False, **private)

        load_in = [preset, target_id, dspark_id, dflash_id]
        load_out = [header, errors, preset, custom_box, note, dspark_cap, dflash_len, *lane_out]
        load_args = dict(concurrency_id="arena", concurrency_limit=1, show_progress="full",
                         show_progress_on=[header], **private)
        preset.input(on_preset, preset, [custom_box, note], queue=False, **private).then(
            lambda p, *a: load(p, *a) if p != "custom" else (gr.skip(),) * len(load_out), load_in, load_out,
            **load_args)
        load_btn.click(load, load_in, load_out, **load_args)
        gr.api(race_api, api_name="race", concurrency_id="arena", concurrency_limit=1)
    return demo


def block_sizes(stage: Stage) -> tuple[int, int]:
    heads = stage.arena.heads if stage.arena is not None else {}
    return (int(getattr(heads.get("dspark"), "max_drafts", 16) or 16),
            int(getattr(heads.get("dflash"), "max_drafts", 16) or 16))


def knob_limits(stage: Stage) -> tuple:
    cap_max, len_max = block_sizes(stage)
    return gr.Slider(maximum=cap_max), gr.Slider(maximum=len_max)


CSS = """
.gradio-container { max-width: 1440px !important; margin: 0 auto; }
.hero h1 { font-size: 2rem; margin: 0.2rem 0 0.3rem; letter-spacing: -0.02em; }
.hero p { margin: 0 0 0.4rem; color: var(--body-text-color-subdued); max-width: 70rem; }
.chips { display: flex; flex-wrap: wrap; gap: 6px; font-size: 0.8rem; }
.chip { background: var(--block-background-fill); border: 1px solid var(--border-color-primary);
        border-radius: 999px; padding: 2px 10px; white-space: nowrap; max-width: 100%; overflow: hidden;
        text-overflow: ellipsis; }
.chip b { color: var(--body-text-color-subdued); font-weight: 500; margin-right: 3px; }
.error-box { border: 1px solid #ef4444; background: rgba(239,68,68,.08); color: var(--body-text-color);
             border-radius: 8px; padding: 8px 12px; }
.error-box b { color: #dc2626; }
.status { font-size: 0.92rem; padding: 4px 2px; min-height: 1.6rem; }
.status .pulse { display: inline-block; width: 8px; height: 8px; border-radius: 50%; background: #22c55e;
                 margin-right: 8px; animation: pulse 1s infinite; }
@keyframes pulse { 50% { opacity: .25; } }
.legend { display: flex; gap: 22px; flex-wrap: wrap; font-size: 0.85rem; color: var(--body-text-color-subdued); }
.legend .sw { display: inline-block; width: 14px; height: 14px; border-radius: 3px; margin-right: 6px;
              vertical-align: -2px; }
.sw.acc, .tok-acc { background: rgba(34,197,94,.30); }
.sw.own, .tok-own { background: rgba(245,158,11,.20); }
.tok-acc, .tok-own { border-radius: 3px; }
.lane-card { border: 1px solid var(--border-color-primary); border-top: 4px solid #94a3b8; border-radius: 10px;
             padding: 10px 12px; background: var(--block-background-fill); }
.lane-card.dspark { border-top-color: #7c3aed; } .lane-card.dflash { border-top-color: #0891b2; }
.lane-card.off { opacity: .6; }
.lane-head { display: flex; align-items: baseline; gap: 8px; white-space: nowrap; overflow: hidden; }
.lane-name { font-weight: 700; font-size: 1.1rem; }
.lane-note { font-size: 0.78rem; color: var(--body-text-color-subdued); overflow: hidden; text-overflow: ellipsis; }
.dot { width: 10px; height: 10px; border-radius: 50%; display: inline-block; background: #94a3b8; }
.dot.dspark { background: #7c3aed; } .dot.dflash { background: #0891b2; }
.meters { display: grid; grid-template-columns: repeat(5, minmax(0, 1fr)); gap: 6px; margin-top: 8px; }
.m .v { font-size: 1.25rem; font-weight: 700; font-variant-numeric: tabular-nums; line-height: 1.2; }
.m .k { font-size: 0.7rem; color: var(--body-text-color-subdued); text-transform: uppercase; letter-spacing: .03em; }
.badges { margin-top: 6px; min-height: 1.5rem; }
.verdict { display: inline-block; font-size: 0.8rem; border-radius: 999px; padding: 1px 9px; font-weight: 600; }
.verdict.ok { background: rgba(34,197,94,.16); color: #15803d; }
.verdict.bad { background: rgba(239,68,68,.16); color: #b91c1c; }
.dark .verdict.ok { color: #4ade80; } .dark .verdict.bad { color: #f87171; }
.verdict.info, .verdict.base { background: rgba(100,116,139,.16); color: var(--body-text-color-subdued); }
.lane-text { white-space: pre-wrap; word-break: break-word; font-family: var(--font-mono); font-size: 0.84rem;
             line-height: 1.55; padding: 10px 12px; min-height: 220px; border-radius: 10px;
             border: 1px solid var(--border-color-primary); background: var(--background-fill-secondary); }
.lane-text.empty { opacity: .4; }
.muted { color: var(--body-text-color-subdued); }
.caret { display: inline-block; width: 7px; height: 1em; background: currentColor; opacity: .6;
         vertical-align: -2px; animation: pulse .8s infinite; }
#lanes .lane { gap: 8px; }
.status .why { font-size: 0.8rem; color: var(--body-text-color-subdued); margin-top: 2px; }
.foot { font-size: 0.78rem; color: var(--body-text-color-subdued); }
"""


def theme() -> gr.themes.Base:
    return gr.themes.Soft(primary_hue="violet", secondary_hue="cyan", neutral_hue="slate").set(
        button_primary_background_fill="*primary_600", button_primary_background_fill_hover="*primary_700",
        button_primary_text_color="white", button_primary_text_color_hover="white")


def launch_kwargs() -> dict:
    """Gradio 6 takes theme and CSS at launch()."""
    return {"theme": theme(), "css": CSS}


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
