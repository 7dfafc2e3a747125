"""The domain sweep tab: race the example prompts of chosen domains (or the user's own list), filling the
release's table method x domain (accept / tok/s / speedup vs greedy, end to end, lossless verdict per cell)
and a bar chart of the speedups after every prompt. The races and the table come from spec.sweep, the same
code as `python -m spec bench sweep`. It behaves as the race does: Run shows its busy state, Stop is live
only while a sweep runs and confirms, and what was raced stays downloadable."""

from __future__ import annotations

import json
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

import gradio as gr
import pandas as pd

from demo.knobs import echo, settings_of
from demo.lanes import COLORS as LANE_COLORS
from demo.lanes import LANES, esc
from demo.slot_chart import slot_chart
from demo.stage import examples
from spec.errors import SpecError
from spec.loop.slots import by_method_and_domain
from spec.race.file import versions
from spec.race.story import remember_sweep
from spec.race.sweep import METHODS, grid, sweep

DOMAIN_NAMES = {"chat": "Chat", "code": "Code", "math": "Math", "edit": "Edit"}  # edit: where prompt lookup shines
METHOD_ORDER = ("DSpark", "DFlash", "lookup")  # the chart's bars (the sweep's method names), in this order
COLORS = {METHODS[n]: c for n, c in LANE_COLORS.items()}  # by method name, in the lanes' colours
SHOWN = {METHODS[n]: LANES[n] for n in METHODS}  # a method as the chart's legend names it ("Prompt lookup")
RUN, RUNNING = "Run sweep", "Sweeping…"


def sweep_tab() -> tuple[list, gr.Button, gr.Button, list]:
    """The tab's components: (inputs, Run, Stop, outputs)."""
    gr.Markdown("Race several prompts per domain, one after another, and fill the table of the original "
                "release: **accept length / tok/s / speedup vs greedy** (end to end, as in the race) per method "
                "and domain, with a lossless verdict per cell. The sampling and head settings apply.")
    with gr.Row():
        domains = gr.CheckboxGroup([(v, k) for k, v in DOMAIN_NAMES.items()], value=list(DOMAIN_NAMES),
                                   label="Domains (their example prompts)", elem_id="sweep-domains")
        per_domain = gr.Slider(1, 6, value=2, step=1, label="Prompts per domain", elem_id="sweep-per-domain")
        max_new = gr.Slider(8, 512, value=48, step=8, label="Max new tokens per race", elem_id="sweep-max-new")
    own = gr.Textbox(label="…or your own prompts, one a line (domain: custom)", lines=3, elem_id="sweep-own")
    with gr.Row():
        run = gr.Button(RUN, variant="primary", elem_id="sweep-run")
        stop = gr.Button("Stop", variant="stop", interactive=False, elem_id="sweep-stop")
    status = gr.HTML('<div class="status">Ready.</div>', elem_id="sweep-status")
    table = gr.DataFrame(pd.DataFrame(columns=["method"]), label="accept / tok/s / speedup vs greedy (end to end)",
                         interactive=False, elem_id="sweep-table")
    bars = gr.Plot(None, label="Speedup vs greedy (end to end; 1.0 = as fast as greedy)", elem_id="sweep-bars",
                   format="png")
    slots = gr.HTML("", elem_id="sweep-slots")  # per domain: how deep each drafter's drafts land
    files = gr.File(label="Download the sweep (CSV, JSON)", file_count="multiple", interactive=False,
                    elem_id="sweep-files", visible=False)
    return [domains, per_domain, own, max_new], run, stop, [status, table, bars, slots, files]


def busy(running: bool) -> tuple[gr.Button, gr.Button]:
    """Run off and Stop live while a sweep runs; the other way round otherwise."""
    return gr.Button(RUNNING if running else RUN, interactive=not running), gr.Button(interactive=running)


def sweep_prompts(domains: list[str], per_domain: int, own: str) -> list[dict]:
    """The user's own prompts (one a line) when given, else the example prompts of the chosen domains."""
    lines = [line.strip() for line in (own or "").splitlines() if line.strip()]
    if lines:
        return [{"domain": "custom", "prompt": line} for line in lines]
    if not 1 <= int(per_domain) <= 6:
        raise SpecError(f"prompts per domain must be between 1 and 6 (it was {int(per_domain)})")
    if not domains:
        raise SpecError("the sweep has no prompts: pick a domain or type your own, one a line")
    return [{"domain": d, "prompt": p} for d in domains for p in examples(d, int(per_domain))]


def run_sweep(stage: Any, domains: list[str], per_domain: float, own: str, max_new: float, values: dict[str, Any],
              request: gr.Request = None) -> Iterator[tuple]:
    """Race each prompt on the served arena; after each, the table, the bars and the files so far."""
    arena, sid = stage.arena, request.session_hash if request else None
    if sid in stage.cancelled:  # Stop pressed while this sweep waited in the queue
        stage.cancelled.discard(sid)
        yield status_html("Stopped before it started.", "stopped"), gr.skip(), gr.skip(), gr.skip(), gr.skip()
        return
    try:
        if arena is None:
            raise SpecError(stage.error or "no model is loaded: pick a preset in Settings")
        prompts = sweep_prompts(domains, per_domain, own)
        settings = settings_of({**values, "max_new_tokens": max_new}, arena)
        yield status_html(f"Racing 1 of {len(prompts)}…", "racing"), gr.skip(), gr.skip(), gr.skip(), gr.skip()
        stage.owner = sid
        when = datetime.now(timezone.utc)
        for upd in sweep(arena.race, prompts, settings):
            done = upd.done == upd.total
            each = f"({settings.max_new_tokens} new tokens each)"
            if upd.stopped:
                word, state = f"Stopped after {upd.done} of {upd.total} prompts {each}", "stopped"
                word += ": the table holds the races that finished." if upd.done else "."
            else:
                word = (f"Finished: {upd.total} prompts {each}." if done
                        else f"Raced {upd.done} of {upd.total}; racing the next… {each}")
                state = "finished" if done else "racing"
            files = (save_sweep(upd, prompts, settings, stage.names(), when)
                     if (done or upd.stopped) and upd.done else None)
            has = upd.table is not None
            yield (status_html(word, state), grid(upd.table) if has else gr.skip(),
                   bars_figure(upd.table) if has else gr.skip(), domain_slots_html(upd.rows) if has else gr.skip(),
                   gr.File(value=files, visible=True) if files else gr.skip())
    except Exception as e:  # one readable line in the tab; the server keeps serving
        yield status_html(stage.tell(e), "error"), gr.skip(), gr.skip(), gr.skip(), gr.skip()
    finally:
        if sid is not None and stage.owner == sid:
            stage.owner = None


def domain_positions(rows: pd.DataFrame) -> dict[str, dict[str, list[dict]]]:
    """domain -> drafter (a head, or lookup) -> per-slot counts summed over the domain's races (spec.slots)."""
    heads = {v: k for k, v in METHODS.items() if k != "greedy"}  # "DSpark" -> "dspark"
    out: dict[str, dict[str, list[dict]]] = {}
    for (method, domain), counts in by_method_and_domain(rows).items():
        if method in heads:
            out.setdefault(domain, {})[heads[method]] = counts
    return out


def domain_slots_html(rows: pd.DataFrame) -> str:
    """One per-slot chart per domain, every drafter that raced side by side in each."""
    charts = [slot_chart(p, f"{DOMAIN_NAMES.get(d, d.title())}: per draft slot")
              for d, p in domain_positions(rows).items()]
    return f'<div class="why-charts">{"".join(charts)}</div>' if charts else ""


def sweep_api(stage: Any, domains: str, per_domain: int, prompts: str, values: dict[str, Any]) -> dict:
    """Run the sweep to the end: the table, its release layout, the per-race rows, and what it ran with."""
    if stage.arena is None:
        raise gr.Error(stage.error or "no model is loaded", print_exception=False)
    try:
        chosen = [d.strip() for d in domains.split(",") if d.strip()]
        unknown = sorted(set(chosen) - set(DOMAIN_NAMES))
        if unknown:
            raise SpecError(f"unknown domain(s) {unknown}: choose from {', '.join(DOMAIN_NAMES)}")
        settings = settings_of(values, stage.arena)
        raced = sweep_prompts(chosen, per_domain, prompts)
        when = datetime.now(timezone.utc)
        last = None
        for last in sweep(stage.arena.race, raced, settings):
            pass
    except Exception as e:
        raise gr.Error(stage.tell(e), print_exception=False) from None
    return sweep_doc(last, raced, settings, stage.names(), when)


def sweep_doc(upd: Any, prompts: list[dict], settings: Any, models: dict[str, str], when: datetime) -> dict:
    """The sweep as its JSON download and the API give it."""
    records = (lambda f: json.loads(f.to_json(orient="records")) if f is not None and len(f) else [])  # noqa: E731
    return {"table": records(upd.table), "grid": records(grid(upd.table)) if upd.table is not None else [],
            "rows": records(upd.rows), "prompts": prompts[: upd.done] if upd.stopped else prompts,
            "positions": domain_positions(upd.rows) if upd.rows is not None and len(upd.rows) else {},
            "settings": echo(settings), "models": models, "versions": versions(),
            "timestamp": when.isoformat(timespec="seconds"), "stopped": upd.stopped}


def bars_figure(table: pd.DataFrame) -> Any:
    """One bar per drafter (the heads, prompt lookup where it raced) and domain, in a fixed order within
    each domain, a line at 1.0 (greedy's speed), and room above the tallest bar for its label."""
    # Lazy on purpose: pyplot costs ~0.4 s at import (every start of the app would pay it, and most never
    # sweep), and the Agg backend (no display on a server) has to be chosen before pyplot loads.
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    heads = table[table["method"] != "greedy"]
    if not len(heads):
        return None
    domains = list(dict.fromkeys(heads["domain"]))
    methods = [m for m in METHOD_ORDER if m in set(heads["method"])]  # no gap where a lane did not race
    fig, ax = plt.subplots(figsize=(7, 3.2), dpi=110)
    width = 0.8 / len(methods)
    for j, method in enumerate(methods):
        mine = heads[heads["method"] == method].set_index("domain")["speedup"]
        xs = [i + (j - (len(methods) - 1) / 2) * width for i in range(len(domains))]
        ys = [float(mine.get(d, float("nan"))) for d in domains]
        drawn = ax.bar(xs, ys, width * 0.92, color=COLORS[method], label=SHOWN[method])
        ax.bar_label(drawn, labels=[f"{y:.2f}" if y == y else "" for y in ys], fontsize=8, padding=2)
    ax.axhline(1.0, color="#64748b", linewidth=1, linestyle="--", label="greedy = 1.0")
    top = float(heads["speedup"].max())
    ax.set_ylim(0, max(1.4, top * 1.3))  # room for the bars' labels and the legend
    ax.set_xticks(range(len(domains)), domains)
    ax.set_ylabel("speedup vs greedy")
    ax.legend(loc="upper left", fontsize=8, ncols=len(methods) + 1, frameon=False)  # one row above the bars
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    fig.tight_layout()
    plt.close(fig)
    return fig


def save_sweep(upd: Any, prompts: list[dict], settings: Any, models: dict[str, str], when: datetime) -> list[str]:
    """CSV (the grid) + JSON (everything), named spec-arena-sweep-<UTC time>."""
    out = Path(tempfile.mkdtemp(prefix="spec-arena-sweep-"))
    stem = f"spec-arena-sweep-{when.strftime('%Y%m%d-%H%M%S')}"
    grid(upd.table).to_csv(out / f"{stem}.csv", index=False)
    doc = sweep_doc(upd, prompts, settings, models, when)
    (out / f"{stem}.json").write_text(json.dumps(doc, indent=2, ensure_ascii=False))
    remember_sweep(doc)  # the story panel's "who wins where" on this machine, from now on
    return [str(out / f"{stem}.csv"), str(out / f"{stem}.json")]


def status_html(text: str, state: str) -> str:
    pulse = '<span class="pulse"></span>' if state == "racing" else ""
    return f'<div class="status {state}">{pulse}{esc(text)}</div>'
