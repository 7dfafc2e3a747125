"""DFlash (z-lab): block diffusion drafting. One pass drafts a whole block.

The block is [anchor, mask x (block_size-1)], embedded with the TARGET's embedding; the drafts are
the logits at slots 1..block_size-1 through the TARGET's lm_head. The checkpoint carries neither:
`bind(target)` borrows them (Backbone.embed / logits), so a Gemma target's embedding scale and logit
softcap apply to the drafts too.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx

from ..loop.verify import Sampling, pick
from .backbone import Backbone, BackboneConfig


class DFlashConfig(BackboneConfig):
    """A DFlash head's config.json (Qwen3 keys + block_size, dflash_config{mask_token_id, target_layer_ids})."""

    @classmethod
    def from_dict(cls, cfg: dict, **overrides: Any) -> "DFlashConfig":
        """z-lab's block of 16 when a head names none."""
        if all(c.get("block_size") is None for c in (cfg, cfg.get("dflash_config") or {})):
            overrides.setdefault("block_size", 16)
        return super().from_dict(cfg, **overrides)


class DFlashDraftModel(Backbone):
    """The DFlash head. Drafts come from slots 1.. of the block (slot 0 is the anchor)."""

    kind, title = "dflash", "DFlash"
    first_draft_slot = 1

    @property
    def max_drafts(self) -> int:
        return self.config.block_size - 1

    def propose(self, cache: list, new_taps: mx.array | None, anchor: int, k: int, sampling: Sampling,
                key: mx.array | None, threshold: float = 0.0) -> tuple[mx.array, mx.array | None]:
        """k drafts from slots 1..k of one block pass (the block always runs whole, as trained)."""
        h = self.block_hidden(cache, new_taps, anchor)
        return self.to_vocab(*pick(self.logits(h[1 : 1 + k]), sampling, key))
