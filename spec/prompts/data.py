"""The word lists, frames and hand-written tasks: data files in assets/prompt_data, read once.

Words used as *filler* (they vary without changing the task: names, props, frames, "show your
reasoning") are also what the split normaliser drops, so near-duplicates share one key. Adding a filler
word can move an existing prompt that contains it to the other side: add words that our prompts don't
use yet. The split and the prompts are pinned by tests/test_prompts.py.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Iterable, Sequence

DATA = Path(__file__).resolve().parents[2] / "assets" / "prompt_data"


@cache
def table(name: str) -> dict:
    """A JSON file of named lists, e.g. table("chat.json")["why_frames"]."""
    return json.loads((DATA / name).read_text(encoding="utf-8"))


def lines(name: str) -> list[str]:
    """A text file's non-empty lines, one entry each."""
    return [ln for ln in (DATA / name).read_text(encoding="utf-8").splitlines() if ln]


def fill(frames: Sequence[str], slots: Iterable[str]) -> list[str]:
    """Every slot in every frame, slot by slot."""
    return [f.format(s) for s in slots for f in frames]
