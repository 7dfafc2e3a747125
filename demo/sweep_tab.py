"""The domain sweep tab: race the example prompts of chosen domains (or the user's own list), filling the
release's table method x domain (accept / tok/s / speedup vs greedy, lossless verdict per cell) and a bar
chart of the speedups after every prompt. The races and the table come from spec.sweep, the same code as
`python -m spec bench --sweep`."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any, Iterator

import gradio as gr
import pandas as pd

from demo.lanes import esc
from demo.stage import examples, settings_of
from spec.target import SpecError

DOMAIN_NAMES = {"chat": "Chat", "code": "Code", "math": "Math"}
COLORS = {"DSpark": "#7c3aed", "DFlash": "#0891b2", "greedy": "#94a3b8"}


def sweep_tab() -> tuple[list, gr.Button, gr.Button, list]:
    """The tab's components: (inputs, Run, Stop, outputs)."""
    gr.Markdown("Race several prompts per domain, one after another, and fill the table of the original "
                "release: **accept length / decode tok/s / speedup vs greedy** per method and domain, with a "
                "lossless verdict per cell. The sampling and head settings below apply.")
    with gr.Row():
        domains = gr.CheckboxGroup([(v, k) for k, v in DOMAIN_NAMES.items()], value=list(DOMAIN_NAMES),
                                   label="Domains (their example prompts)", elem_id="sweep-domains")
        per_domain = gr.Slider(1, 6, value=2, step=1, label="Prompts per domain", elem_id="sweep-per-domain")
        max_new = gr.Slider(8, 512, value=48, step=8, label="Max new tokens per race", elem_id="sweep-max-new")
    own = gr.Textbox(label="…or your own prompts, one a line (domain: custom)", lines=3, elem_id="sweep-own")
    with gr.Row():
        run = gr.Button("Run sweep", variant="primary", elem_id="sweep-run")
        stop = gr.Button("Stop", variant="stop", elem_id="sweep-stop")
    status = gr.HTML('<div class="status">Ready.</div>', elem_id="sweep-status")
    table = gr.DataFrame(pd.DataFrame(columns=["method"]), label="accept / tok/s / speedup vs greedy",
                         interactive=False, elem_id="sweep-table")
    bars = gr.BarPlot(None, x="bar", y="speedup", color="method", color_map=COLORS, y_lim=[0, None],
                      sort=None, label="Speedup vs greedy (decode tok/s; 1.0 = as fast as greedy)",
                      elem_id="sweep-bars")
    files = gr.File(label="Download the sweep (CSV, JSON)", file_count="multiple", interactive=False,
                    elem_id="sweep-files", visible=False)
    return [domains, per_domain, own, max_new], run, stop, [status, table, bars, files]


def sweep_prompts(domains: list[str], per_domain: int, own: str) -> list[dict]:
    """The user's own prompts (one a line) when given, else the example prompts of the chosen domains."""
    lines = [line.strip() for line in (own or "").splitlines() if line.strip()]
    if lines:
        return [{"domain": "custom", "prompt": line} for line in lines]
    return [{"domain": d, "prompt": p} for d in domains for p in examples(d, int(per_domain))]


def run_sweep(stage: Any, domains: list[str], per_domain: float, own: str, max_new: float, *knobs: Any,
              request: gr.Request = None) -> Iterator[tuple]:
    """Race each prompt on the served arena; after each, the table, the bars and the files so far."""
    from spec.sweep import grid, sweep

    arena = stage.arena
    try:
        if arena is None:
            raise SpecError(stage.error or "no model is loaded: pick a preset in Settings")
        prompts = sweep_prompts(domains, per_domain, own)
        settings = settings_of(max_new, *knobs[1:])
        yield status_html(f"Racing 1 of {len(prompts)}…", "racing"), gr.skip(), gr.skip(), gr.skip()
        stage.owner = request.session_hash if request else None
        for upd in sweep(arena.race, prompts, settings):
            done = upd.done == upd.total
            word = "Finished" if done else f"Raced {upd.done} of {upd.total}; racing the next…"
            files = save_sweep(upd) if done else None
            yield (status_html(f"{word} ({upd.total} prompts, {settings.max_new_tokens} new tokens each)",
                               "finished" if done else "racing"),
                   grid(upd.table), bars_of(upd.table),
                   gr.File(value=files, visible=True) if files else gr.skip())
    except Exception as e:  # one readable line in the tab; the server keeps serving
        yield status_html(stage.tell(e), "error"), gr.skip(), gr.skip(), gr.skip()
    finally:
        if request is not None and stage.owner == request.session_hash:
            stage.owner = None


def sweep_api(stage: Any, domains: str = "chat,code,math", per_domain: int = 2, prompts: str = "",
              max_new_tokens: int = 48, temperature: float = 0.0) -> dict:
    """Run the sweep to the end: the table (method x domain records: accept, tok/s, speedup, lossless),
    its release layout (grid) and the per-race rows."""
    from spec.sweep import grid, sweep

    if stage.arena is None:
        raise gr.Error(stage.error or "no model is loaded")
    try:
        chosen = [d.strip() for d in domains.split(",") if d.strip()]
        unknown = sorted(set(chosen) - set(DOMAIN_NAMES))
        if unknown:
            raise SpecError(f"unknown domain(s) {unknown}: choose from {', '.join(DOMAIN_NAMES)}")
        last = None
        settings = settings_of(max_new_tokens, temperature, 1.0, 0, 0, 0, 0.0, 0, True, auto_length=True)
        for last in sweep(stage.arena.race, sweep_prompts(chosen, per_domain, prompts), settings):
            pass
    except Exception as e:
        raise gr.Error(stage.tell(e)) from e
    return {"table": json.loads(last.table.to_json(orient="records")),
            "grid": json.loads(grid(last.table).to_json(orient="records")),
            "rows": json.loads(last.rows.to_json(orient="records"))}


def bars_of(table: pd.DataFrame) -> pd.DataFrame | None:
    """One bar per head and domain, side by side (a bar plot stacks the bars that share an x)."""
    heads = table[table["method"] != "greedy"]
    if not len(heads):
        return None
    return heads.assign(bar=heads["domain"] + " · " + heads["method"])[["bar", "method", "speedup"]]


def save_sweep(upd: Any) -> list[str]:
    from spec.sweep import grid

    out = Path(tempfile.mkdtemp(prefix="spec-arena-sweep-"))
    grid(upd.table).to_csv(out / "spec-arena-sweep.csv", index=False)
    (out / "spec-arena-sweep.json").write_text(json.dumps({
        "table": json.loads(upd.table.to_json(orient="records")),
        "rows": json.loads(upd.rows.to_json(orient="records"))}, indent=2))
    return [str(out / "spec-arena-sweep.csv"), str(out / "spec-arena-sweep.json")]


def status_html(text: str, state: str) -> str:
    pulse = '<span class="pulse"></span>' if state == "racing" else ""
    return f'<div class="status {state}">{pulse}{esc(text)}</div>'
