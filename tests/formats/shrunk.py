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
from fnmatch import fnmatch
from pathlib import Path

import mlx.core as mx
import mlx.nn as nn
from mlx.utils import tree_flatten

import tiny

PUBLISHED = Path(__file__).parent / "published"

# The only keys build() changes: sizes. Everything else (layer counts, vocab, taps, ids) is as published.
SHRINK = {"hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2,
          "head_dim": 16, "global_head_dim": 32, "num_global_key_value_heads": 1, "sliding_window": 8,
          "markov_rank": 8,
          # gated DeltaNet widths (Qwen3.5), experts (a count is a size too: 128-256 experts of every layer
          # would make the shrunk MoE targets the largest files of the suite), and mRoPE's rotary sections
          # (their sum is half the rotary width: 16 x 0.25 / 2 = 2)
          "linear_key_head_dim": 16, "linear_value_head_dim": 16, "linear_num_key_heads": 2,
          "linear_num_value_heads": 4, "moe_intermediate_size": 32, "shared_expert_intermediate_size": 32,
          "num_experts": 8, "num_local_experts": 8, "num_experts_per_tok": 2, "experts_per_token": 2,
          "mrope_section": [1, 1, 0]}

TARGETS = ("mlx-community/Qwen3-4B-8bit", "mlx-community/gemma-4-12B-it-8bit", "mlx-community/Qwen3-8B-8bit",
           "mlx-community/Qwen3.5-4B-MLX-4bit", "Qwen/Qwen3.5-4B", "Qwen/Qwen3.5-27B", "Qwen/Qwen3.5-35B-A3B", "Qwen/Qwen3-30B-A3B", "openai/gpt-oss-20b")
# every head our presets and README name, with the target it is checked on (the 8B heads shrink to the
# same sizes as the 4B ones: 36 layers, vocabulary 151,936, so the shrunk 4B target serves them)
HEADS = {
    "z-lab/Qwen3-4B-DFlash-b16": "mlx-community/Qwen3-4B-8bit",
    "z-lab/Qwen3-8B-DFlash-b16": "mlx-community/Qwen3-4B-8bit",
    "z-lab/gemma4-12B-it-DFlash": "mlx-community/gemma-4-12B-it-8bit",
    "deepseek-ai/dspark_qwen3_4b_block7": "mlx-community/Qwen3-4B-8bit",
    "deepseek-ai/dspark_qwen3_8b_block7": "mlx-community/Qwen3-4B-8bit",
    "deepseek-ai/dspark_gemma4_12b_block7": "mlx-community/gemma-4-12B-it-8bit",
    "z-lab/Qwen3.5-4B-DFlash": "mlx-community/Qwen3.5-4B-MLX-4bit",
    "z-lab/Qwen3.5-35B-A3B-DFlash": "Qwen/Qwen3.5-35B-A3B",
    "z-lab/gpt-oss-20b-DFlash": "openai/gpt-oss-20b",
    # vLLM speculators' layout; made for Qwen3.6-35B-A3B, whose architecture (qwen3_5_moe, 40 layers, vocabulary
    # 248,320) is Qwen3.5-35B-A3B's: no Qwen3.6 config is quoted in what we read
    "RedHatAI/Qwen3.6-35B-A3B-speculator.dspark": "Qwen/Qwen3.5-35B-A3B",
}


def folder_of(repo: str) -> Path:
    return PUBLISHED / repo.replace("/", "--")


def published_config(repo: str) -> dict:
    return json.loads((folder_of(repo) / "config.json").read_text())


def published_tensors(repo: str) -> dict[str, dict] | None:
    path = folder_of(repo) / "tensors.json"
    return json.loads(path.read_text())["tensors"] if path.exists() else None


def shrink(cfg: dict) -> dict:
    """The same config with every SHRINK size replaced, in nested configs too; nulls stay null."""
    out = {}
    for k, v in cfg.items():
        if k in ("text_config", "rope_parameters", "transformer_layer_config") and isinstance(v, dict):
            out[k] = shrink(v)
        elif k in SHRINK and v is not None:
            out[k] = SHRINK[k]
        else:
            out[k] = v
    return out


def head_taps(cfg: dict) -> list[int]:
    if "aux_hidden_state_layer_ids" in cfg:  # speculators: Hugging Face hidden_states indices, ours + 1
        return [i - 1 for i in cfg["aux_hidden_state_layer_ids"]]
    return list((cfg.get("dflash_config") or {}).get("target_layer_ids") or cfg["target_layer_ids"])


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
    hf = cfg.get("quantization_config") or {}
    if hf.get("quant_method") == "mxfp4":  # gpt-oss: MXFP4 experts, the modules it names left as they are
        keep = [p.removeprefix("model.") for p in hf.get("modules_to_not_convert", [])]
        nn.quantize(model, group_size=32, bits=4, mode="mxfp4", class_predicate=lambda p, m: hasattr(
            m, "to_quantized") and not any(fnmatch(p.removeprefix("model."), k + "*") for k in keep))
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
    path = folder_of(repo) / "chat_template.jinja"
    template = path.read_text() if path.exists() else ""
    tok_cfg = json.loads((out / "tokenizer_config.json").read_text())
    if not template:  # no chat template quoted by a public source: our tokenizer's ChatML one stays
        pass
    elif "gemma" in repo:
        tok_cfg.pop("chat_template")
        (out / "chat_template.jinja").write_text(template)
    else:
        tok_cfg["chat_template"] = template
    (out / "tokenizer_config.json").write_text(json.dumps(tok_cfg))


def build(repo: str, out: Path, edit=None, seed: int = 1) -> Path:
    """The shrunk copy of a published checkpoint in `out` (edit: a function applied to the shrunk config,
    for the readings of a fact that is unknown)."""
    cfg = shrink(published_config(repo))
    if edit is not None:
        edit(cfg)
    if repo in TARGETS:
        return write_target(out, cfg, repo, seed)
    return tiny.write_head(out, cfg, seed, dtype=mx.bfloat16)
