"""A race as a file another person opens and sees the same race: its events (every round's text pieces,
drafts, slots, timings, each lane's clock), the settings, machine and versions it ran with. Loading needs
no model: the meters are rebuilt from the rounds with the recorded engine times, the outcome is
recomputed from the recorded results with the recorded tie floor (spec.race.outcome: the same numbers), and
the replay plays the recorded clocks. The app's JSON download is such a file (with the table and
per-round lists beside it, for study); `python -m spec race --load FILE` and the API's /load_race read it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, fields
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from ..errors import SpecError
from ..loop.results import GenResult, Round
from ..report import machine_line
from .outcome import TIE_FLOOR, Outcome
from .run import Meter, RaceEvent, lane_notes
from .settings import RaceSettings

VERSION = 4  # "spec_arena_results" of the app's downloads; files from version 4 on carry their events
PACKAGES = ("spec-arena", "mlx", "mlx-lm", "gradio")
NOT_INSTALLED = "not installed"


def versions() -> dict[str, str]:
    out = {}
    for pkg in PACKAGES:
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = NOT_INSTALLED
    return out


def race_record(events: list[RaceEvent], prompt: str, models: dict[str, str],
                when: datetime | None = None) -> dict:
    """The race as a JSON-ready dict: header (time, machine, versions, prompt, models, settings) and events."""
    when = when or datetime.now(timezone.utc)
    start = next((e for e in events if e.kind == "start"), None)
    return {"spec_arena_results": VERSION, "timestamp": when.isoformat(timespec="seconds"),
            "machine": machine_line(), "versions": versions(), "prompt": prompt, "models": models,
            "settings": start.settings.as_dict() if start and start.settings else None, "tie_floor": TIE_FLOOR,
            "events": [event_record(e) for e in events]}


def event_record(e: RaceEvent) -> dict:
    out: dict[str, Any] = {"kind": e.kind, "wall": e.wall, "clock": e.clock}  # as measured: the replay orders by them
    if e.kind == "start":
        out.update(prompt_tokens=e.prompt_tokens, temperature=e.temperature)
    elif e.kind == "prefill":
        out.update(prefilled=e.prefilled, prompt_tokens=e.prompt_tokens)
    elif e.kind in ("round", "done"):
        out.update(engine=e.engine, busy=e.meter.busy, prefill=e.meter.prefill)
        if e.kind == "round":
            out.update(lane_clock=e.lane_clock, round=asdict(e.round))
        else:
            out.update(result=asdict(e.result))
    elif e.kind == "finish":
        out.update(results={n: asdict(r) for n, r in e.results.items()}, verdicts=e.verdicts)
    return out


def read_race(source: str | Path | dict) -> tuple[list[RaceEvent], dict]:
    """(events, header) from a race file's path, text or parsed dict; anything else is one SpecError."""
    try:
        if isinstance(source, dict):
            doc = source
        elif isinstance(source, Path) or (isinstance(source, str) and not source.lstrip().startswith("{")):
            doc = json.loads(Path(source).read_text())
        else:
            doc = json.loads(source)
    except (OSError, UnicodeDecodeError) as e:
        raise SpecError(f"cannot read the race file ({e})") from None
    except json.JSONDecodeError as e:
        raise SpecError(f"not a race file: it is not JSON ({e.msg} at line {e.lineno})") from None
    if not isinstance(doc, dict) or "spec_arena_results" not in doc:
        raise SpecError("not a race file: no spec_arena_results key (download one from a finished race)")
    if not isinstance(doc.get("events"), list) or int(doc["spec_arena_results"]) < VERSION:
        raise SpecError(f"this race file (format {doc['spec_arena_results']}) holds no events to replay: only files "
                        f"downloaded from format {VERSION} on can be opened")
    try:
        settings = RaceSettings.from_dict(doc.get("settings") or {})
        events = rebuild(doc["events"])
        events[0].settings, final = settings, events[-1]
        final.outcome = Outcome.of(final.results, settings.sampling.temperature > 0, settings.dspark_threshold,
                                   lane_notes(settings), floor=float(doc.get("tie_floor", TIE_FLOOR)))
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as e:
        raise SpecError(f"the race file is damaged ({type(e).__name__}: {e})") from None
    return events, {k: v for k, v in doc.items() if k != "events"}


def rebuild(records: list[dict]) -> list[RaceEvent]:
    """RaceEvents from their records: meters re-added round by round, engine times as recorded."""
    if not records or records[0]["kind"] != "start" or records[-1]["kind"] != "finish":
        raise ValueError("a race runs from its start to its finish event")
    meters: dict[str, Meter] = {}
    events = []
    for rec in records:
        kind, base = rec["kind"], dict(wall=float(rec["wall"]), clock=float(rec["clock"]))
        if kind == "start":
            events.append(RaceEvent("start", prompt_tokens=int(rec["prompt_tokens"]),
                                    temperature=float(rec["temperature"]), **base))
        elif kind == "prefill":
            events.append(RaceEvent("prefill", prefilled=int(rec["prefilled"]),
                                    prompt_tokens=int(rec["prompt_tokens"]), **base))
        elif kind in ("round", "done"):
            meter = meters.setdefault(str(rec["engine"]), Meter())
            extra: dict[str, Any] = {}
            if kind == "round":
                r = typed(Round, rec["round"])
                meter.add(r)
                extra = dict(round=r, lane_clock=float(rec["lane_clock"]))
            else:
                extra = dict(result=typed(GenResult, rec["result"]))
            meter.busy, meter.prefill = float(rec["busy"]), float(rec["prefill"])
            events.append(RaceEvent(kind, str(rec["engine"]), meter=meter.snapshot(), **extra, **base))
        elif kind == "finish":
            results = {n: typed(GenResult, r) for n, r in rec["results"].items()}
            events.append(RaceEvent("finish", results=results, verdicts=dict(rec["verdicts"]), **base))
        else:
            raise ValueError(f"unknown event kind {kind!r}")
    return events


def typed(cls: type, record: dict) -> Any:
    """A Round or GenResult from its asdict(): JSON's lists back into the tuples the fields hold."""
    names = {f.name for f in fields(cls)}
    values = {k: v for k, v in record.items() if k in names}
    for k in ("pieces", "levels", "parents", "path", "estimates"):
        if cls is Round and k in values:
            values[k] = tuple(tuple(x) if isinstance(x, list) else x for x in values[k])
    if cls is GenResult and "levels" in values:
        values["levels"] = [tuple(tuple(x) for x in lv) for lv in values["levels"]]
    return cls(**values)
