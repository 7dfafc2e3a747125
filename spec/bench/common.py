"""What the benches that race share: their prompts, and an arena over a preset's (or given) models."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from ..prompts import load_prompts
from ..race.arena import Arena, default_prompts, load_preset_arena


def bench_prompts(prompts: str | Path | None = None, per_domain: int = 3) -> list[dict]:
    """The prompts of a jsonl file, or `per_domain` held-out ones per domain."""
    return load_prompts(Path(prompts)) if prompts else default_prompts(per_domain)


def on_arena(work: Callable[[Arena, list[dict]], Any], *, preset: str = "pocket", target: str | None = None,
             dspark: str | None = None, dflash: str | None = None, prompts: str | Path | None = None,
             per_domain: int = 3) -> tuple[list[dict], Any]:
    """The prompts, and work(arena, prompts) on the arena of `preset` or the given models, closed afterwards."""
    chosen = bench_prompts(prompts, per_domain)
    arena = load_preset_arena(preset, target, dspark, dflash)
    try:
        return chosen, work(arena, chosen)
    finally:
        arena.close()
