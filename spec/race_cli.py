"""`python -m spec race`: one race in the terminal, the lanes side by side, then the results table.

  python -m spec race --prompt "Write a Python function that reverses a string." --save race.json
  python -m spec race --load race.json --replay 1     # a saved race (the app's download too), no model
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import race
from .arena import load_preset_arena
from .presets import pocket_name
from .progress import Console
from .race import RaceSettings, replay
from .race_file import race_record, read_race
from .report import race_markdown, results_table
from .slots import slot_table


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
    ap.add_argument("--preset", default="pocket")
    ap.add_argument("--target")
    ap.add_argument("--dspark")
    ap.add_argument("--dflash")
    ap.add_argument("--json", action="store_true", help="print the results table as JSON")
    ap.add_argument("--markdown", action="store_true", help="print a Markdown summary (for a chat or an issue)")
    ap.add_argument("--replay", type=float, default=0.0, metavar="SPEED",
                    help="then replay the race at its measured speed (1 = as fast as the engines ran, 2 = twice as "
                         "fast): each lane's rounds printed when its own engine time reached them")
    for f in RaceSettings.__dataclass_fields__.values():
        flag = f.name.replace("_", "-")
        if isinstance(f.default, bool):  # on by default: --no-<name> turns it off
            ap.add_argument(("--no-" if f.default else "--") + flag, dest=f.name,
                            action="store_false" if f.default else "store_true")
        else:  # a setting whose default is None (tree: the engine's default) takes a number
            ap.add_argument("--" + flag, type=int if f.default is None else type(f.default), default=f.default)
    a = ap.parse_args(argv)
    if a.load:
        events, header = read_race(a.load)
        print(f"# {a.load}: raced {header.get('timestamp', '?')} on {header.get('machine', '?')}", file=sys.stderr)
    else:
        if not a.prompt:
            ap.error("--prompt is required (or --load a saved race)")
        events, header = run_here(a)
    show(events, header, a)
    return 0


def run_here(a: argparse.Namespace) -> tuple[list, dict]:
    """Race on this machine; (events, the race file's header)."""
    settings = RaceSettings(**{k: getattr(a, k) for k in RaceSettings.__dataclass_fields__})
    arena = load_preset_arena(a.preset, a.target, a.dspark, a.dflash, progress=Console())
    try:
        events = []
        for ev in arena.race(a.prompt, settings):
            if ev.kind == "done":
                print(f"# {ev.engine} done: {ev.meter.tokens} tokens, accept {ev.meter.mean_accept:.2f}, "
                      f"{ev.meter.tok_s:.1f} tok/s, finished at {ev.meter.clock:.2f} s of engine time", file=sys.stderr)
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
    return events, {k: v for k, v in record.items() if k != "events"}


def show(events: list, header: dict, a: argparse.Namespace) -> None:
    final = events[-1]
    table = results_table(final.outcome, final.verdicts)
    if a.json:
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
    if a.replay:
        print(f"\n# replay at {a.replay:g}x the measured speed")
        for ev in replay(events, a.replay):
            if ev.kind == "round":
                print(f"{ev.wall:7.2f} s  {ev.engine:<6} {ev.meter.tokens:4d} tokens  {ev.round.text!r}", flush=True)
            elif ev.kind == "done":
                print(f"{ev.wall:7.2f} s  {ev.engine} finished", flush=True)
