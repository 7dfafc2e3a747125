"""`python -m spec race`: one race in the terminal, the lanes side by side, then the results table.

  python -m spec race --prompt "Write a Python function that reverses a string." --save race.json
  python -m spec race --load race.json --replay 1     # a saved race (the app's download too), no model
  python -m spec race --prompt "What is 17 * 23?" --repeat 3   # three races in turn: the medians and spread
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..errors import SpecError, flag
from ..loop.slots import slot_table
from ..presets import add_model_flags, pocket_name
from ..progress import Console
from ..report import race_markdown, results_table
from . import run as race
from .arena import load_preset_arena
from .file import race_record, read_race
from .repeat import Repeated, repeat_count, repeat_race, repeated
from .run import replay
from .settings import PARSE, RENAMED, RaceSettings, defaults


def side_by_side(texts: dict[str, str], width: int = 40) -> str:
    """Columns of wrapped text for a terminal."""
    import textwrap

    cols = {n: textwrap.wrap(t.replace("\n", " / "), width) or [""] for n, t in texts.items()}
    depth = max(len(c) for c in cols.values())
    lines = [" | ".join(n.ljust(width) for n in cols), "-+-".join("-" * width for _ in cols)]
    for i in range(depth):
        lines.append(" | ".join((c[i] if i < len(c) else "").ljust(width) for c in cols.values()))
    return "\n".join(lines)



def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m spec race", description=race.__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prompt", help="the user's message (needed unless --load opens a saved race)")
    ap.add_argument("--load", metavar="FILE", help="open a saved race (the app's JSON download, or --save's file): "
                    "no model is loaded")
    ap.add_argument("--save", metavar="FILE", help="write the race to FILE, for the app's Open or --load")
    add_model_flags(ap)
    ap.add_argument("--repeat", default="1", metavar="N", help="race the prompt 1, 3 or 5 times in turn: each "
                    "lane's speedups, their median and spread, places by the medians (ties within the spread)")
    ap.add_argument("--json", action="store_true", help="print the results table as JSON")
    ap.add_argument("--markdown", action="store_true", help="print a Markdown summary (for a chat or an issue)")
    ap.add_argument("--replay", type=float, default=0.0, metavar="SPEED",
                    help="then replay the race at its measured speed (1 = as fast as the engines ran, 2 = twice as "
                         "fast): each lane's rounds printed when its own engine time reached them")
    for name, default in defaults().items():  # one flag a setting, named as the page's knob and the API's parameter
        dashed = name.replace("_", "-")
        if isinstance(default, bool):  # on by default: --no-<name> turns it off
            ap.add_argument(("--no-" if default else "--") + dashed, dest=name,
                            action="store_false" if default else "store_true")
        else:
            ap.add_argument("--" + dashed, type=flag(PARSE[name]) if name in PARSE else type(default), default=default)
    for old, new in RENAMED.items():  # the old flags still work, with a deprecation line
        ap.add_argument("--" + old.replace("_", "-"), dest=old, type=flag(PARSE[new]), default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    try:
        a.repeat = repeat_count(a.repeat)
    except SpecError as e:
        ap.error(str(e))
    if a.load and a.repeat > 1:
        ap.error("--repeat races again: it needs --prompt, not --load")
    rep = None
    if a.load:
        events, header = read_race(a.load)
        print(f"# {a.load}: raced {header.get('timestamp', '?')} on {header.get('machine', '?')}", file=sys.stderr)
    else:
        if not a.prompt:
            ap.error("--prompt is required (or --load a saved race)")
        events, header, rep = run_here(a)
    show(events, header, a, rep)
    return 0


def run_here(a: argparse.Namespace) -> tuple[list, dict, Repeated | None]:
    """Race on this machine (--repeat times in turn); (the last race's events, the race file's header, the
    repeat's summary or None for one race)."""
    settings = RaceSettings.from_dict({k: getattr(a, k) for k in (*defaults(), *RENAMED) if getattr(a, k) is not None})
    arena = load_preset_arena(a.preset, a.target, a.dspark, a.dflash, progress=Console())
    try:
        events, finishes = [], []
        for i, ev in repeat_race(arena, a.prompt, settings, a.repeat):
            if ev.kind == "start":
                events = []
                if a.repeat > 1:
                    print(f"# race {i + 1} of {a.repeat}", file=sys.stderr)
            if ev.kind == "done":
                print(f"# {ev.engine} done: {ev.meter.tokens} tokens, accept {ev.meter.mean_accept:.2f}, "
                      f"{ev.meter.tok_s:.1f} tok/s, finished at {ev.meter.clock:.2f} s of engine time", file=sys.stderr)
            finishes += [ev] if ev.kind == "finish" else []
            events.append(ev)
        pocket = a.preset == "pocket" and not (a.target or a.dspark or a.dflash)
        models = {k: pocket_name(k) if pocket else Path(v).name if Path(v).expanduser().exists() else v
                  for k, v in arena.info.items()}  # as the page names them; never a local path
    finally:
        arena.close()
    record = race_record(events, a.prompt, models)
    if a.save:
        Path(a.save).write_text(json.dumps(record, ensure_ascii=False))
        print(f"# saved: {a.save} (open it with --load, or in the app)", file=sys.stderr)
    rep = repeated(finishes, a.repeat) if a.repeat > 1 else None
    return events, {k: v for k, v in record.items() if k != "events"}, rep


def show(events: list, header: dict, a: argparse.Namespace, rep: Repeated | None = None) -> None:
    final = events[-1]
    table = results_table(final.outcome, final.verdicts)
    if a.json and rep is not None:
        print(json.dumps({"table": json.loads(table.to_json(orient="records")), "repeat": rep.record()}))
    elif a.json:
        print(table.to_json(orient="records"))
    elif a.markdown:
        print(race_markdown(final, header))
    else:
        print(side_by_side({n: r.text for n, r in final.results.items()}))
        print()
        print(table.to_string(index=False))
        print(f"\n{final.outcome.headline()}  Speedup: end to end (tokens per engine second, prefill included); "
              f"ties: within {100 * final.outcome.band:.0f}%.")
        if any(final.outcome.positions.values()):
            print("\nDraft slots: landed / rounds that reached the slot (every earlier slot landed), and the share")
            print(slot_table(final.outcome.positions, {n: final.outcome.label(n) for n in final.outcome.positions}))
        if rep is not None:
            print(f"\nThe table above is the last race's. {repeat_text(rep)}")
    if a.replay:
        print(f"\n# replay at {a.replay:g}x the measured speed")
        for ev in replay(events, a.replay):
            if ev.kind == "round":
                print(f"{ev.wall:7.2f} s  {ev.engine:<6} {ev.meter.tokens:4d} tokens  {ev.round.text!r}", flush=True)
            elif ev.kind == "done":
                print(f"{ev.wall:7.2f} s  {ev.engine} finished", flush=True)


def repeat_text(rep: Repeated) -> str:
    """A repeat's lanes (speedups, median, spread, place) and headline, for a terminal."""
    rows = [f"{'place':<6} {'engine':<16} {'speedups (each race)':<28} {'median':>7} {'spread':>7}  same rounds"]
    for o in rep.order:
        each = " ".join("–" if s is None else f"{s:.2f}" for s in o.speedups)
        med = "–" if o.median is None else f"{o.median:.2f}"
        place = "–" if o.place is None else ("=" if o.tied else "") + str(o.place)
        rows.append(f"{place:<6} {rep.label(o.engine):<16} {each:<28} {med:>7} {100 * o.spread:>6.1f}%  "
                    f"{'yes' if o.same_rounds else 'NO'}")
    return "\n".join([rep.headline(), *rows])
