"""The race's downloads: a CSV of the table and a JSON that another person opens in the app and sees the
same race (spec.race.file: its events, machine, versions and settings), with the table and each lane's
per-round lists beside them for study; the models by name (never a server folder), under file names
unique to the race."""

from __future__ import annotations

import json
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any


def results_doc(view: Any, record: dict) -> dict:
    """Everything the JSON download holds: the race file (spec.race.file.race_record) and, beside its events,
    the table and each lane's per-round lists for study."""
    rounds = {}
    for name, records in view.rounds.items():
        meter = view.lanes[name].meter if name in view.lanes else None
        decode = [r for r in records if r["round"] > 0]
        rounds[name] = {"prefill_seconds": round(meter.prefill, 6) if meter else None,
                        "accept_lengths": [r["tokens"] for r in decode],
                        "draft_lengths": [r["drafted"] for r in decode],
                        "round_seconds": [r["seconds"] for r in decode], "rounds": records}
    header = {k: v for k, v in record.items() if k != "events"}
    return {**header, "wall_seconds": round(view.wall, 3), "race_clock_seconds": round(view.clock, 3),
            "verdicts": view.verdicts, "outcome": view.outcome.record() if view.outcome else None,
            "results": json.loads(view.table.to_json(orient="records")),
            "texts": {n: lane.text for n, lane in view.lanes.items()}, "per_round": rounds, "events": record["events"]}


def save_results(view: Any, record: dict, when: datetime | None = None) -> list[str]:
    """CSV + JSON in a fresh folder, named spec-arena-<UTC time to the millisecond>.csv / .json (when: the
    time the race file was stamped with)."""
    when = when or datetime.now(timezone.utc)
    out = Path(tempfile.mkdtemp(prefix="spec-arena-"))
    stem = f"spec-arena-{when.strftime('%Y%m%d-%H%M%S-%f')[:-3]}"
    csv, doc = out / f"{stem}.csv", out / f"{stem}.json"
    view.table.to_csv(csv, index=False)
    doc.write_text(json.dumps(results_doc(view, record), ensure_ascii=False))
    return [str(csv), str(doc)]
