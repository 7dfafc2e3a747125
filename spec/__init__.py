"""Spec Arena engine: one MLX target, two lossless block drafters (DSpark, DFlash), one verify loop.

Exports load lazily, so importing the package loads no MLX: it first puts the fast CPU BLAS in place (Linux
CPU; SPEC_ARENA_BLAS=stock opts out), so a script that imports spec gets what the CLI and the app get."""

import importlib

from .cpu import ensure_fast_blas

ensure_fast_blas(reexec=False)  # in-process, and only while MLX is not loaded yet; never restarts a script

_EXPORTS = {
    "load_pair": "api", "speculative_generate": "api", "load_dflash_pair": "api", "dflash_generate": "api",
    "greedy_generate": "api", "DFlashConfig": "heads.dflash", "DFlashDraftModel": "heads.dflash",
    "load_dflash": "heads.registry", "DSparkConfig": "heads.dspark", "DSparkDraftModel": "heads.dspark",
    "load_dspark": "heads.registry", "Engine": "loop.engine", "GenResult": "loop.results", "Round": "loop.results",
    "DFLASH_PRESETS": "presets", "PRESETS": "presets", "SpecError": "errors", "Target": "target",
    "load_target": "target", "Sampling": "loop.verify", "load_preset_arena": "race.arena", "run_race": "race.run",
    "RaceSettings": "race.run",
}
__all__ = list(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module 'spec' has no attribute {name!r}")
