"""Spec Arena engine: one MLX target, two lossless block drafters (DSpark, DFlash), one verify loop."""

from .api import dflash_generate, greedy_generate, load_dflash_pair, load_pair, speculative_generate
from .dflash import DFlashConfig, DFlashDraftModel, load_dflash
from .dspark import DSparkConfig, DSparkDraftModel, load_dspark
from .engine import Engine, GenResult, Round
from .presets import DFLASH_PRESETS, PRESETS
from .target import SpecError, Target, load_target
from .verify import Sampling

__all__ = [
    "load_pair", "speculative_generate", "load_dflash", "load_dflash_pair", "dflash_generate", "greedy_generate",
    "DFLASH_PRESETS", "PRESETS", "DFlashDraftModel", "DFlashConfig", "DSparkDraftModel", "DSparkConfig",
    "load_dspark", "load_target", "Target", "Engine", "GenResult", "Round", "Sampling", "SpecError",
]
