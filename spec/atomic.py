"""A JSON file written whole or not at all: a reader (another server, a crash mid-write) never sees half of
one. For files the project keeps between runs (measured costs, the last sweep)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def write_json(path: Path, obj: Any) -> None:
    """obj as JSON at path, its folder made if needed, through a temporary file renamed into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(obj, ensure_ascii=False))
    tmp.replace(path)
