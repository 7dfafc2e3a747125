"""Tiny random checkpoints in exactly the published formats, for fast tests.

Targets are real mlx-lm folders (config.json + model.safetensors + a byte-level tokenizer with a
ChatML template). Heads are written tensor by tensor from the names in shared/docs/drafters.md, so
our loaders are checked against the format, not against our own module tree.
"""

from __future__ import annotations

import json
from pathlib import Path

import mlx.core as mx
import numpy as np
from mlx.utils import tree_flatten

CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|mask|>"]


def write_tokenizer(folder: Path) -> int:
    """A byte-level BPE with no merges: 4 specials then 256 byte symbols. Returns its size."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from tokenizers import AddedToken

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {s: i for i, s in enumerate(SPECIALS)}
    vocab.update({ch: len(SPECIALS) + i for i, ch in enumerate(alphabet)})
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], fuse_unk=False))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in SPECIALS])
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": None, "eos_token": "<|im_end|>",
        "pad_token": "<|im_end|>", "unk_token": "<|endoftext|>", "add_bos_token": False,
        "chat_template": CHATML, "model_max_length": 4096}))
    return len(vocab)


def target_config(family: str = "qwen3", layers: int = 6, hidden: int = 64, vocab: int = 272,
                  max_pos: int = 512, **extra) -> dict:
    cfg = {
        "model_type": family, "architectures": [{"qwen3": "Qwen3ForCausalLM", "llama": "LlamaForCausalLM",
                                                 "qwen2": "Qwen2ForCausalLM"}[family]],
        "hidden_size": hidden, "num_hidden_layers": layers, "intermediate_size": 2 * hidden,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": hidden // 4, "rms_norm_eps": 1e-6,
        "vocab_size": vocab, "max_position_embeddings": max_pos, "rope_theta": 10000.0,
        "tie_word_embeddings": family == "llama", "eos_token_id": 2, "bos_token_id": 1,
    }
    cfg.update(extra)
    return cfg


def make_target(folder: Path, family: str = "qwen3", seed: int = 0, scale: float = 4.0, bits: int = 0,
                **cfg_extra) -> Path:
    """A random mlx-lm model folder. `scale` sharpens the embeddings so the target is not uniform;
    bits 4/8 stores it quantized the way mlx-community checkpoints are."""
    import importlib

    folder.mkdir(parents=True, exist_ok=True)
    write_tokenizer(folder)
    cfg = target_config(family, **cfg_extra)
    mod = importlib.import_module(f"mlx_lm.models.{family}")
    mx.random.seed(seed)
    model = mod.Model(mod.ModelArgs.from_dict(cfg))
    model.model.embed_tokens.weight = model.model.embed_tokens.weight * scale
    if bits:
        import mlx.nn as nn

        nn.quantize(model, group_size=32, bits=bits)
        cfg["quantization"] = {"group_size": 32, "bits": bits}
    mx.save_safetensors(str(folder / "model.safetensors"), dict(tree_flatten(model.parameters())))
    (folder / "config.json").write_text(json.dumps(cfg))
    return folder


def _rand(rng: np.random.Generator, *shape: int, std: float = 0.1) -> mx.array:
    return mx.array((rng.standard_normal(shape) * std).astype(np.float32))


def backbone_tensors(rng, hidden: int, layers: int, heads: int, kv: int, head_dim: int, inter: int,
                     n_taps: int) -> dict[str, mx.array]:
    """The DFlash tensor names of drafters.md section 2."""
    w = {"fc.weight": _rand(rng, hidden, n_taps * hidden), "hidden_norm.weight": mx.ones((hidden,)),
         "norm.weight": mx.ones((hidden,))}
    for i in range(layers):
        p = f"layers.{i}."
        w[p + "self_attn.q_proj.weight"] = _rand(rng, heads * head_dim, hidden)
        w[p + "self_attn.k_proj.weight"] = _rand(rng, kv * head_dim, hidden)
        w[p + "self_attn.v_proj.weight"] = _rand(rng, kv * head_dim, hidden)
        w[p + "self_attn.o_proj.weight"] = _rand(rng, hidden, heads * head_dim)
        w[p + "self_attn.q_norm.weight"] = mx.ones((head_dim,))
        w[p + "self_attn.k_norm.weight"] = mx.ones((head_dim,))
        w[p + "mlp.gate_proj.weight"] = _rand(rng, inter, hidden)
        w[p + "mlp.up_proj.weight"] = _rand(rng, inter, hidden)
        w[p + "mlp.down_proj.weight"] = _rand(rng, hidden, inter)
        w[p + "input_layernorm.weight"] = mx.ones((hidden,))
        w[p + "post_attention_layernorm.weight"] = mx.ones((hidden,))
    return w


def make_dflash_head(folder: Path, target_cfg: dict, taps=(1, 3), block_size: int = 8, layers: int = 2,
                     seed: int = 1, nested: bool = True, mask_token_id: int = 3) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    H = target_cfg["hidden_size"]
    cfg = {
        "architectures": ["DFlashDraftModel"], "model_type": "qwen3", "hidden_size": H,
        "num_hidden_layers": layers, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": H // 4,
        "intermediate_size": 2 * H, "vocab_size": target_cfg["vocab_size"], "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0, "max_position_embeddings": target_cfg["max_position_embeddings"],
        "rope_scaling": None, "num_target_layers": target_cfg["num_hidden_layers"],
        "dflash_config": {"mask_token_id": mask_token_id, "target_layer_ids": list(taps)},
    }
    if nested:
        cfg["dflash_config"]["block_size"] = block_size
    else:
        cfg["block_size"] = block_size
    w = backbone_tensors(rng, H, layers, 4, 2, H // 4, 2 * H, len(taps))
    mx.save_safetensors(str(folder / "model.safetensors"), w)
    (folder / "config.json").write_text(json.dumps(cfg))
    return folder


def make_dspark_head(folder: Path, target_cfg: dict, taps=(1, 3), block_size: int = 7, layers: int = 2,
                     rank: int = 8, confidence: bool = True, seed: int = 2, mask_token_id: int = 3) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    H, V = target_cfg["hidden_size"], target_cfg["vocab_size"]
    cfg = dict(target_cfg)  # a deep copy of the target's config plus the head's keys
    cfg.update({
        "architectures": ["Qwen3DSparkModel"], "model_type": "qwen3", "num_hidden_layers": layers,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": H // 4, "intermediate_size": 2 * H,
        "num_target_layers": target_cfg["num_hidden_layers"], "block_size": block_size,
        "mask_token_id": mask_token_id, "target_layer_ids": list(taps), "num_anchors": 64,
        "enable_confidence_head": confidence, "confidence_head_with_markov": confidence,
        "markov_rank": rank, "markov_head_type": "vanilla", "layer_types": ["full_attention"] * layers,
        "tie_word_embeddings": False,
    })
    w = backbone_tensors(rng, H, layers, 4, 2, H // 4, 2 * H, len(taps))
    w["embed_tokens.weight"] = _rand(rng, V, H, std=1.0)
    w["lm_head.weight"] = _rand(rng, V, H, std=0.5)
    if rank:
        w["markov_head.markov_w1.weight"] = _rand(rng, V, rank, std=1.0)
        w["markov_head.markov_w2.weight"] = _rand(rng, V, rank, std=0.5)
    if confidence:
        w["confidence_head.proj.weight"] = _rand(rng, 1, H + rank)
        w["confidence_head.proj.bias"] = mx.array([2.0])
    mx.save_safetensors(str(folder / "model.safetensors"), w)
    (folder / "config.json").write_text(json.dumps(cfg))
    return folder
