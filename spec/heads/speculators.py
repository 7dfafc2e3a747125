"""Heads in vLLM's `speculators` format (RedHatAI publishes DSpark heads this way), read as our own.

The format keeps the same drafter as deepseek-ai's checkpoints in another layout: the drafter's own
config (a Qwen3 config) under `transformer_layer_config`, the DSpark keys (block_size, mask_token_id,
markov_rank, the confidence head's switches) at the top level, the taps as
`aux_hidden_state_layer_ids` (indices into Hugging Face's hidden_states, whose entry 0 is the
embedding: our tap i is their i + 1, as speculators' own converter tests offset them), and a reduced
draft vocabulary: `lm_head` and `markov_w2` hold only its rows, and `d2t` maps draft row j to target
token j + d2t[j] (`t2d` is the same map as a mask). That is our draft vocabulary (spec.heads.vocab) shipped
already cut, so the head loads as a DSpark head whose output rows are its draft vocabulary's.

speculators writes `transformer_layer_config` as a diff against transformers' Qwen3Config defaults
(`to_diff_dict`), so a key left out there means that default, not ours: QWEN3_DEFAULTS fills them.
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np

from ..errors import SpecError

# top-level keys of a speculators DSpark config that are ours too (the drafter's own sit one level down)
DSPARK_KEYS = ("block_size", "mask_token_id", "markov_rank", "markov_head_type", "enable_confidence_head",
               "confidence_head_with_markov")


# transformers' Qwen3Config defaults (5.x; the same values in 4.51) for the keys our backbone reads
QWEN3_DEFAULTS = {"head_dim": 128, "num_key_value_heads": 32, "rms_norm_eps": 1e-6, "max_position_embeddings": 32768,
                  "rope_theta": 10000.0, "attention_bias": False}


def is_speculators(cfg: dict) -> bool:
    return "speculators_model_type" in cfg or "transformer_layer_config" in cfg


def translate(cfg: dict, who: str) -> dict:
    """A speculators DSpark config as the flat config our DSpark head reads."""
    kind = cfg.get("speculators_model_type")
    layer = cfg.get("transformer_layer_config")
    if kind != "dspark" or not isinstance(layer, dict):
        raise SpecError(f"{who}: a vLLM speculators-format {kind or 'unknown'} head; of that format only DSpark "
                        "heads (speculators_model_type dspark) are read")
    if cfg.get("sample_from_anchor") is False:
        raise SpecError(f"{who}: sample_from_anchor false (the anchor's slot drafts nothing) is not supported")
    aux = cfg.get("aux_hidden_state_layer_ids")
    if not aux:
        raise SpecError(f"{who}: no aux_hidden_state_layer_ids (the target layers it reads)")
    defaults = {k: v for k, v in QWEN3_DEFAULTS.items() if not (k == "rope_theta" and "rope_parameters" in layer)}
    flat = {**defaults, **layer}  # (a rope_parameters of its own gives the theta: BackboneConfig reads it)
    flat.update({k: cfg[k] for k in DSPARK_KEYS if k in cfg})
    flat["architectures"] = ["Qwen3DSparkModel"]  # its own names vary (Qwen3DSparkModel, DSparkSpeculator)
    flat["target_layer_ids"] = [int(i) - 1 for i in aux]
    if cfg.get("sliding_window_non_causal"):
        flat["is_causal"] = False
    return flat


def draft_rows(weights: dict[str, mx.array], who: str) -> np.ndarray | None:
    """Take d2t / t2d out of `weights`; the target token of each draft row, rows reordered by it so the
    ids ascend as spec.heads.vocab keeps them. None for a head without a reduced vocabulary."""
    d2t = weights.pop("d2t", None)
    weights.pop("t2d", None)
    if d2t is None:
        return None
    offsets = np.asarray(d2t.astype(mx.int64))
    ids = np.arange(len(offsets), dtype=np.int64) + offsets
    if len(np.unique(ids)) != len(ids) or ids.min() < 0:
        raise SpecError(f"{who}: d2t maps two draft rows to one token, or below 0")
    order = np.argsort(ids, kind="stable")
    if (order != np.arange(len(ids))).any():
        take = mx.array(order.astype(np.uint32))
        for name in ("lm_head.weight", "markov_head.markov_w2.weight"):
            if name in weights:
                weights[name] = weights[name][take]
    return ids[order]
