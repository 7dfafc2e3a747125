"""DFlash (z-lab): block diffusion drafting. One pass drafts a whole block.

The block is [anchor, mask x (block_size-1)], embedded with the TARGET's embedding; the drafts are
the logits at slots 1..block_size-1 through the TARGET's lm_head. The checkpoint carries neither:
`bind(target)` borrows them, as Target.embed / Target.lm_head, so a Gemma target's embedding scale
and logit softcap apply to the drafts too.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx

from .drafter import Backbone, BackboneConfig, build_head, check_against_target, load_head_folder
from .target import SpecError, Target, softcapped
from .verify import Sampling, pick


class DFlashConfig(BackboneConfig):
    """A DFlash head's config.json (Qwen3 keys + block_size, dflash_config{mask_token_id, target_layer_ids})."""


class DFlashDraftModel(Backbone):
    """The DFlash head. Drafts come from slots 1.. of the block (slot 0 is the anchor)."""

    kind = "dflash"
    first_draft_slot = 1

    def __init__(self, config: DFlashConfig):
        super().__init__(config)
        self._target: Target | None = None

    @property
    def max_drafts(self) -> int:
        return self.config.block_size - 1

    def bind(self, target: Target) -> "DFlashDraftModel":
        """Share the target's embedding and lm_head (not copied: one set of weights in memory)."""
        check_against_target(self.config, target, "DFlash head")
        self._target = target
        self.use_draft_vocab(self.draft_ids)
        return self

    @property
    def target(self) -> Target:
        if self._target is None:
            raise SpecError("DFlash head is not bound to a target: call bind(target) first")
        return self._target

    def embed(self, ids: mx.array) -> mx.array:
        return self.target.embed(ids)

    def output_layer(self):
        return self.target.output_layer()

    def logits(self, h: mx.array) -> mx.array:
        """Logits over the draft vocabulary (the whole vocabulary when there is none)."""
        v = self.draft_vocab
        return self.target.lm_head(h) if v is None else softcapped(h @ v.weight.T, self.target.softcap)

    def propose(self, cache: list, new_taps: mx.array | None, anchor: int, k: int, sampling: Sampling,
                key: mx.array | None, threshold: float = 0.0) -> tuple[mx.array, mx.array | None]:
        """k drafts from slots 1..k of one block pass (the block always runs whole, as trained)."""
        h = self.block_hidden(cache, new_taps, anchor)
        return self.to_vocab(*pick(self.logits(h[1 : 1 + k]), sampling, key))


def load_dflash(path_or_repo: str, target: Target | None = None, drafter_bits: int | None = None,
                block_size: int | None = None) -> DFlashDraftModel:
    """Load a DFlash head from a folder or hub id (config.json + safetensors, strict names)."""
    folder, cfg, weights = load_head_folder(path_or_repo)
    arch = cfg.get("architectures") or ["DFlashDraftModel"]
    if "DFlashDraftModel" not in arch:
        raise SpecError(f"{path_or_repo} is a {arch[0]}, not a DFlash head (architectures DFlashDraftModel)")
    overrides: dict[str, Any] = {"block_size": block_size} if block_size else {}
    config = DFlashConfig.from_dict(cfg, **overrides)
    return build_head(DFlashDraftModel, config, weights, target, f"DFlash head {path_or_repo}", drafter_bits, folder)
