"""Shrunken copies of the published checkpoints, built from their config.json as published.

Each folder under published/ holds one hub checkpoint: its config.json with every key as a public
source quotes it, SOURCE.md naming that source and what is still unknown, and, where known,
tensors.json (every tensor's name, dtype and shape at the published size). `build()` keeps every key
but shrinks the sizes (SHRINK), the same way for a target and its heads, and writes random weights
under the published names and dtypes: bf16 heads, 8-bit mlx-community targets as mlx-lm writes them.
Layer counts, vocabularies, taps, mask tokens and the chat templates stay as published.
"""

from __future__ import annotations

import json
from pathlib import Path

import mlx.core as mx
import mlx.nn as nn
import numpy as np
from mlx.utils import tree_flatten

import tiny

PUBLISHED = Path(__file__).parent / "published"

# The only keys build() changes: sizes. Everything else (layer counts, vocab, taps, ids) is as published.
SHRINK = {"hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2,
          "head_dim": 16, "global_head_dim": 32, "num_global_key_value_heads": 1, "sliding_window": 8,
          "markov_rank": 8}

TARGETS = ("mlx-community/Qwen3-4B-8bit", "mlx-community/gemma-4-12B-it-8bit")
# every head our presets and README name, with the target it is checked on (the 8B heads shrink to the
# same sizes as the 4B ones: 36 layers, vocabulary 151,936, so the shrunk 4B target serves them)
HEADS = {
    "z-lab/Qwen3-4B-DFlash-b16": "mlx-community/Qwen3-4B-8bit",
    "z-lab/Qwen3-8B-DFlash-b16": "mlx-community/Qwen3-4B-8bit",
    "z-lab/gemma4-12B-it-DFlash": "mlx-community/gemma-4-12B-it-8bit",
    "deepseek-ai/dspark_qwen3_4b_block7": "mlx-community/Qwen3-4B-8bit",
    "deepseek-ai/dspark_qwen3_8b_block7": "mlx-community/Qwen3-4B-8bit",
    "deepseek-ai/dspark_gemma4_12b_block7": "mlx-community/gemma-4-12B-it-8bit",
}


def folder_of(repo: str) -> Path:
    return PUBLISHED / repo.replace("/", "--")


def published_config(repo: str) -> dict:
    return json.loads((folder_of(repo) / "config.json").read_text())


def published_tensors(repo: str) -> dict[str, dict] | None:
    path = folder_of(repo) / "tensors.json"
    return json.loads(path.read_text())["tensors"] if path.exists() else None


def shrink(cfg: dict) -> dict:
    """The same config with every SHRINK size replaced, in text_config too; nulls stay null."""
    out = {}
    for k, v in cfg.items():
        if k == "text_config" and isinstance(v, dict):
            out[k] = shrink(v)
        elif k in SHRINK and v is not None:
            out[k] = SHRINK[k]
        else:
            out[k] = v
    return out


# -- heads ------------------------------------------------------------------------------------------

def head_taps(cfg: dict) -> list[int]:
    nested = cfg.get("dflash_config") or {}
    return list(nested.get("target_layer_ids") or cfg["target_layer_ids"])


def head_shapes(cfg: dict) -> dict[str, tuple[int, ...]]:
    """Every tensor of a head checkpoint and its shape, from its config alone: the names of drafters.md
    (DFlash), plus DSpark's embedding, lm_head, Markov and confidence heads; Gemma4DSparkModel layers
    have K = V (no v_proj), four norms and a layer_scalar."""
    arch = cfg["architectures"][0]
    gemma = arch == "Gemma4DSparkModel"
    H, I, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    nh = cfg["num_attention_heads"]
    hd = cfg["global_head_dim"] if gemma else cfg.get("head_dim") or H // nh
    k_eq_v = gemma and cfg.get("attention_k_eq_v")
    nkv = cfg["num_global_key_value_heads"] if k_eq_v else cfg["num_key_value_heads"]
    out = {"fc.weight": (H, len(head_taps(cfg)) * H), "hidden_norm.weight": (H,), "norm.weight": (H,)}
    norms = ["input_layernorm", "post_attention_layernorm"]
    if gemma:
        norms += ["pre_feedforward_layernorm", "post_feedforward_layernorm"]
    for i in range(cfg["num_hidden_layers"]):
        p = f"layers.{i}."
        out[p + "self_attn.q_proj.weight"] = (nh * hd, H)
        out[p + "self_attn.k_proj.weight"] = (nkv * hd, H)
        if not k_eq_v:
            out[p + "self_attn.v_proj.weight"] = (nkv * hd, H)
        out[p + "self_attn.o_proj.weight"] = (H, nh * hd)
        out[p + "self_attn.q_norm.weight"] = (hd,)
        out[p + "self_attn.k_norm.weight"] = (hd,)
        out[p + "mlp.gate_proj.weight"] = (I, H)
        out[p + "mlp.up_proj.weight"] = (I, H)
        out[p + "mlp.down_proj.weight"] = (H, I)
        out.update({p + n + ".weight": (H,) for n in norms})
        if gemma:
            out[p + "layer_scalar"] = (1,)
    if arch.endswith("DSparkModel"):
        r = cfg.get("markov_rank", 0)
        out["embed_tokens.weight"] = out["lm_head.weight"] = (V, H)
        if r:
            out["markov_head.markov_w1.weight"] = out["markov_head.markov_w2.weight"] = (V, r)
        if cfg.get("enable_confidence_head"):
            out["confidence_head.proj.weight"] = (1, H + (r if cfg.get("confidence_head_with_markov") else 0))
            out["confidence_head.proj.bias"] = (1,)
    return out


def random_tensor(name: str, shape: tuple[int, ...], rng: np.random.Generator) -> mx.array:
    """Norm weights near one (and the layer scalar), a positive confidence bias, small random matrices."""
    if name.endswith(("norm.weight", "layer_scalar")):
        x = 1.0 + 0.05 * rng.standard_normal(shape)
    elif name == "confidence_head.proj.bias":
        x = np.full(shape, 2.0)
    else:
        std = 1.0 if name.startswith(("embed_tokens", "markov_head.markov_w1")) else 0.1
        x = rng.standard_normal(shape) * std
    return mx.array(x.astype(np.float32)).astype(mx.bfloat16)


def write_head(out: Path, cfg: dict, seed: int = 1, drop: tuple[str, ...] = ()) -> Path:
    """A head folder: config.json as given, model.safetensors in bf16 under the published names
    (`drop`: leave these tensors out, as a packaging that borrows them from the target does)."""
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    w = {n: random_tensor(n, s, rng) for n, s in head_shapes(cfg).items() if n not in drop}
    mx.save_safetensors(str(out / "model.safetensors"), w, metadata={"format": "pt"})
    (out / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    return out


# -- targets ----------------------------------------------------------------------------------------

def write_target(out: Path, cfg: dict, repo: str, seed: int = 0) -> Path:
    """An mlx-community-style folder: mlx-lm's own module tree from the shrunk config, bf16, quantized
    as its "quantization" key says (what mlx_lm.convert writes), a byte-level tokenizer carrying the
    published chat template, config.json as given."""
    from mlx_lm.utils import _get_classes

    out.mkdir(parents=True, exist_ok=True)
    model_cls, args_cls = _get_classes(cfg)
    mx.random.seed(seed)
    model = model_cls(args_cls.from_dict(cfg))
    inner = getattr(model, "language_model", model).model
    inner.embed_tokens.weight = mx.random.normal(inner.embed_tokens.weight.shape) * 4.0
    for layer in inner.layers:  # Gemma: let the layers outweigh the x sqrt(H) embedding
        for norm in ("post_attention_layernorm", "post_feedforward_layernorm"):
            if hasattr(layer, norm):
                getattr(layer, norm).weight = getattr(layer, norm).weight * 5.0
    model.update(nn.utils.tree_map(lambda a: a.astype(mx.bfloat16), model.parameters()))
    q = cfg.get("quantization")
    if q:
        nn.quantize(model, group_size=q["group_size"], bits=q["bits"], mode=q.get("mode", "affine"))
    mx.save_safetensors(str(out / "model.safetensors"), dict(tree_flatten(model.parameters())),
                        metadata={"format": "mlx"})
    (out / "config.json").write_text(json.dumps(cfg, indent=4))
    write_tokenizer(out, repo, cfg)
    return out


def write_tokenizer(out: Path, repo: str, cfg: dict) -> None:
    """tiny's byte-level tokenizer, with the checkpoint's published chat template where it ships it:
    Qwen3's inside tokenizer_config.json (transformers 4.51 wrote it there), Gemma-4's as
    chat_template.jinja (listed among mlx-community/gemma-4-12B-it-8bit's files)."""
    tiny.write_tokenizer(out)
    template = (folder_of(repo) / "chat_template.jinja").read_text()
    tok_cfg = json.loads((out / "tokenizer_config.json").read_text())
    if "gemma" in repo:
        tok_cfg.pop("chat_template")
        (out / "chat_template.jinja").write_text(template)
    else:
        tok_cfg["chat_template"] = template
    (out / "tokenizer_config.json").write_text(json.dumps(tok_cfg))


def build(repo: str, out: Path, edit=None, **kwargs) -> Path:
    """The shrunk copy of a published checkpoint in `out` (edit: a function applied to the shrunk config,
    for the readings of a fact that is unknown)."""
    cfg = shrink(published_config(repo))
    if edit is not None:
        edit(cfg)
    if repo in TARGETS:
        return write_target(out, cfg, repo, **kwargs)
    return write_head(out, cfg, **kwargs)
