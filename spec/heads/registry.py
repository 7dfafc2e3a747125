"""Which head class a checkpoint's architecture name loads: the one table both loaders read.

A head's config.json names its class in `architectures` (z-lab: DFlashDraftModel; deepseek-ai:
Qwen3DSparkModel or Gemma4DSparkModel) and its own backbone in `model_type`. We implement every class
ourselves; the name only picks ours (an `auto_map` next to it is metadata and never imported).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import SpecError
from ..target import Target
from . import speculators
from .dflash import DFlashConfig, DFlashDraftModel
from .dspark import DSparkConfig, DSparkDraftModel
from .dspark_gemma4 import Gemma4DSparkConfig, Gemma4DSparkDraftModel
from .files import build_head, load_head_folder

TITLES = {"dflash": "DFlash", "dspark": "DSpark"}


@dataclass(frozen=True)
class HeadClass:
    kind: str  # "dflash" | "dspark"
    config: type
    model: type
    model_types: tuple[str, ...] | None  # the head's own backbone; None: any


HEADS: dict[str, HeadClass] = {
    "DFlashDraftModel": HeadClass("dflash", DFlashConfig, DFlashDraftModel, None),
    "Qwen3DSparkModel": HeadClass("dspark", DSparkConfig, DSparkDraftModel, ("qwen3",)),
    # drafters.md says model_type gemma4; DeepSpec's saved configs copy the target's gemma4_text
    "Gemma4DSparkModel": HeadClass("dspark", Gemma4DSparkConfig, Gemma4DSparkDraftModel, ("gemma4", "gemma4_text")),
}
DEFAULT = {"dflash": "DFlashDraftModel"}  # a head config without architectures (older z-lab heads)
# Head formats in public use that we recognise but do not run yet: why, in one line.
NOT_YET = {
    "DFlash2DraftModel": "a DFlash 2 head (convolutions in its layers and a candidate selector) is not supported yet",
    "Qwen3DFlash2DraftModel": "a DFlash 2 head (convolutions in its layers and a candidate selector) is not supported yet",
}


def refuse_not_yet(cfg: dict, who: str) -> None:
    """One error for a head format in public use that we recognise but do not run."""
    why = next((NOT_YET[a] for a in cfg.get("architectures") or [] if a in NOT_YET), None)
    if why or cfg.get("speculators_model_type") == "dflash2":
        raise SpecError(f"{who}: {why or NOT_YET['DFlash2DraftModel']}")


def head_class(cfg: dict, kind: str, who: str) -> HeadClass:
    """The entry of HEADS a config names, checked to be a `kind` head with a backbone we run."""
    arch = cfg.get("architectures") or ([DEFAULT[kind]] if kind in DEFAULT else [])
    refuse_not_yet(cfg, who)
    found = [HEADS[a] for a in arch if a in HEADS]
    if not found or found[0].kind != kind:
        named = ", ".join(arch) if arch else "missing"
        raise SpecError(f"{who} is not a {TITLES[kind]} head (architectures {named}; "
                        f"expected {' or '.join(a for a, h in HEADS.items() if h.kind == kind)})")
    head = found[0]
    if head.model_types and cfg.get("model_type") not in head.model_types:
        raise SpecError(f"{who}: a {arch[0]} head with model_type {cfg.get('model_type')!r} "
                        f"(expected {' or '.join(head.model_types)})")
    return head


def load_head(path_or_repo: str, kind: str, target: Target | None = None, drafter_bits: int | None = None,
              **overrides: Any):
    """config.json + safetensors of a head (strict names, no code), as the class its config names."""
    who = f"{TITLES[kind]} head {path_or_repo}"
    folder, cfg, weights = load_head_folder(path_or_repo)
    refuse_not_yet(cfg, who)
    rows = None  # the target token of each output row, for a head shipped with its draft vocabulary cut
    if speculators.is_speculators(cfg):  # vLLM's layout of the same drafter (RedHatAI's DSpark heads)
        cfg = speculators.translate(cfg, who)
        rows = speculators.draft_rows(weights, who)
    head = head_class(cfg, kind, who)
    config = head.config.from_dict(cfg, **{k: v for k, v in overrides.items() if v})
    return build_head(head.model, config, weights, target, who, drafter_bits, folder, rows)


def load_dflash(path_or_repo: str, target: Target | None = None, drafter_bits: int | None = None,
                block_size: int | None = None) -> DFlashDraftModel:
    """Load a DFlash head from a folder or hub id (config.json + safetensors, strict names); bound to
    `target` when given, else call bind() later."""
    return load_head(path_or_repo, "dflash", target, drafter_bits, block_size=block_size)


def load_dspark(path_or_repo: str, target: Target | None = None, drafter_bits: int | None = None) -> DSparkDraftModel:
    """Load a deepseek-ai DSpark head (config.json + safetensors, strict names, no remote code), as the
    class its architectures name (Qwen3DSparkModel, Gemma4DSparkModel)."""
    return load_head(path_or_repo, "dspark", target, drafter_bits)
