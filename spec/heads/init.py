"""A new head for a target: its config in the published format (DFlash or DSpark), random weights or
weights started from the target's own layers, and which parameters train."""

from __future__ import annotations

from typing import Sequence

import mlx.core as mx
import mlx.nn as nn
from mlx.utils import tree_flatten

from ..errors import SpecError
from ..target import Target
from .backbone import default_taps
from .dflash import DFlashConfig, DFlashDraftModel
from .dspark import DSparkConfig, DSparkDraftModel


def head_config(target: Target, kind: str, *, layers: int = 2, block_size: int | None = None,
                taps: Sequence[int] | None = None, mask_token_id: int | None = None, markov_rank: int = 32,
                intermediate_size: int | None = None) -> dict:
    """config.json for a new head over `target`: heads and widths follow the target's attention."""
    tc = target.config
    n_heads = int(tc["num_attention_heads"])
    head_dim = int(tc.get("head_dim") or target.hidden_size // n_heads)
    taps = list(taps or default_taps(target.num_layers))
    mask = int(mask_token_id if mask_token_id is not None else tc.get("pad_token_id") or 0)
    common = {
        "model_type": "qwen3", "hidden_size": target.hidden_size, "num_hidden_layers": layers,
        "num_attention_heads": n_heads, "num_key_value_heads": int(tc.get("num_key_value_heads") or n_heads),
        "head_dim": head_dim, "intermediate_size": int(intermediate_size or tc["intermediate_size"]),
        "vocab_size": target.vocab_size, "rms_norm_eps": float(tc.get("rms_norm_eps", 1e-6)),
        "rope_theta": float(tc.get("rope_theta", 10000.0)), "rope_scaling": None,
        "max_position_embeddings": int(tc.get("max_position_embeddings", 8192)),
        "num_target_layers": target.num_layers, "tie_word_embeddings": False,
        "layer_types": ["full_attention"] * layers, "torch_dtype": "bfloat16",
    }
    if kind == "dflash":
        return {**common, "architectures": ["DFlashDraftModel"], "block_size": block_size or 16,
                "dflash_config": {"block_size": block_size or 16, "mask_token_id": mask, "target_layer_ids": taps}}
    if kind == "dspark":
        cfg = {k: v for k, v in tc.items() if k not in ("quantization", "quantization_config")}
        cfg.update(common)
        cfg.update({"architectures": ["Qwen3DSparkModel"], "block_size": block_size or 7, "mask_token_id": mask,
                    "target_layer_ids": taps, "num_anchors": 512, "enable_confidence_head": True,
                    "confidence_head_with_markov": bool(markov_rank), "markov_rank": markov_rank,
                    "markov_head_type": "vanilla"})
        return cfg
    raise SpecError(f"unknown head kind {kind!r} (dflash or dspark)")



def new_head(target: Target, config: dict, seed: int = 0) -> DFlashDraftModel | DSparkDraftModel:
    """A randomly initialised head bound to `target`; DSpark gets frozen copies of its vocab matrices."""
    mx.random.seed(seed)
    if "DFlashDraftModel" in config["architectures"]:
        return DFlashDraftModel(DFlashConfig.from_dict(config)).bind(target)
    head = DSparkDraftModel(DSparkConfig.from_dict(config))
    head.embed_tokens.weight = target.inner.embed_tokens.weight.astype(mx.float32)
    lm = getattr(target.outer, "lm_head", None)
    head.lm_head.weight = (lm.weight if lm is not None else target.inner.embed_tokens.weight).astype(mx.float32)
    return head.bind(target)



def init_from_target(head: DFlashDraftModel | DSparkDraftModel, target: Target) -> int:
    """Start the head as the top of its target: draft layer i a copy of target layer L - n + i, the final
    norm the target's, and fc reading the deepest tap alone. A random head spends its first thousand
    steps learning what these weights already do (the pocket DFlash head reached the random start's
    step-800 loss by step 390, its step-4000 loss by step 1190). Tensors whose names or shapes differ
    keep their random init (q_norm / k_norm of a Llama-style target, which has none), and so do a Gemma
    target's norms (they scale by 1 + w, ours by w). Returns how many tensors were copied."""
    n, copied = len(head.layers), 0
    norms = not target.is_gemma4
    for mine, theirs in zip(head.layers, target.inner.layers[target.num_layers - n :]):
        src = dict(tree_flatten(theirs.parameters()))
        same = [(k, src[k].astype(mx.float32)) for k, v in tree_flatten(mine.parameters())
                if k in src and src[k].shape == v.shape and (norms or "norm" not in k)]
        mine.load_weights(same, strict=False)
        copied += len(same)
    norm = getattr(target.inner, "norm", None)
    if norms and norm is not None and norm.weight.shape == head.norm.weight.shape:
        head.norm.weight = norm.weight.astype(mx.float32)
        copied += 1
    H, taps = head.config.hidden_size, len(head.config.target_layer_ids)
    fc = mx.concatenate([0.01 * mx.random.normal((H, (taps - 1) * H)), mx.eye(H)], axis=1)
    head.fc.weight = fc.astype(head.fc.weight.dtype)
    return copied + 1



def trainable(head: nn.Module) -> nn.Module:
    """Freeze what the formats say is frozen (DSpark's embedding and lm_head)."""
    head.unfreeze()
    if isinstance(head, DSparkDraftModel):
        head.embed_tokens.freeze()
        head.lm_head.freeze()
    return head
