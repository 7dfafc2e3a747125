"""Tiny random checkpoints in exactly the published formats, for fast tests.

Targets are real mlx-lm folders (config.json + model.safetensors + a byte-level tokenizer with a
ChatML template). Heads are written tensor by tensor from the names in shared/docs/drafters.md, so
our loaders are checked against the format, not against our own module tree.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import mlx.core as mx
import numpy as np
from mlx.utils import tree_flatten

CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|mask|>"]


def write_tokenizer(folder: Path) -> int:
    """A byte-level BPE with no merges: 4 specials then 256 byte symbols. Returns its size."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

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


def head_shapes(cfg: dict) -> dict[str, tuple[int, ...]]:
    """Every tensor of a head checkpoint and its shape, from its config alone: the names of drafters.md
    (DFlash), plus DSpark's embedding, lm_head, Markov and confidence heads; Gemma4DSparkModel layers
    have K = V (no v_proj), four norms and a layer_scalar. tests/formats checks it against the
    published tensor lists at full size. A speculators-format head (drafter under transformer_layer_config)
    has our DSpark tensors with lm_head and markov_w2 cut to its draft vocabulary, plus d2t and t2d."""
    if "transformer_layer_config" in cfg:
        from spec.heads.speculators import translate

        flat = translate(cfg, "head")
        out = head_shapes(flat)
        S, H, V = cfg["draft_vocab_size"], flat["hidden_size"], flat["vocab_size"]
        out.update({"lm_head.weight": (S, H), "d2t": (S,), "t2d": (V,)})
        if flat.get("markov_rank"):
            out["markov_head.markov_w2.weight"] = (S, flat["markov_rank"])
        return out
    arch = (cfg.get("architectures") or ["DFlashDraftModel"])[0]
    gemma = arch == "Gemma4DSparkModel"
    H, I, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    nh = cfg["num_attention_heads"]
    hd = cfg["global_head_dim"] if gemma else cfg.get("head_dim") or H // nh
    k_eq_v = gemma and cfg.get("attention_k_eq_v")
    nkv = cfg["num_global_key_value_heads"] if k_eq_v else cfg["num_key_value_heads"]
    taps = (cfg.get("dflash_config") or {}).get("target_layer_ids") or cfg["target_layer_ids"]
    out = {"fc.weight": (H, len(taps) * H), "hidden_norm.weight": (H,), "norm.weight": (H,)}
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
        if cfg.get("attention_bias"):  # Qwen3's attention_bias: all four projections
            for proj in ("q", "k", "v", "o"):
                if p + f"self_attn.{proj}_proj.weight" in out:
                    out[p + f"self_attn.{proj}_proj.bias"] = out[p + f"self_attn.{proj}_proj.weight"][:1]
        out[p + "self_attn.q_norm.weight"] = out[p + "self_attn.k_norm.weight"] = (hd,)
        out[p + "mlp.gate_proj.weight"] = out[p + "mlp.up_proj.weight"] = (I, H)
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


STD = {"embed_tokens.weight": 1.0, "lm_head.weight": 0.5, "markov_head.markov_w1.weight": 1.0,
       "markov_head.markov_w2.weight": 0.5}


def write_head(folder: Path, cfg: dict, seed: int, dtype=mx.float32, drop: tuple[str, ...] = ()) -> Path:
    """config.json + model.safetensors of random weights under head_shapes' names: norms at one, the
    layer scalar 0.9, a positive confidence bias, small matrices (`drop`: tensors left out, as a
    packaging that borrows them from the target ships)."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    w = {}
    shapes = head_shapes(cfg)
    if "d2t" in shapes:  # a draft vocabulary of S ascending token ids out of V, as speculators writes it
        ids = np.sort(rng.choice(shapes["t2d"][0], shapes["d2t"][0], replace=False))
        mask = np.zeros(shapes["t2d"][0], dtype=bool)
        mask[ids] = True
        special = {"d2t": mx.array(ids - np.arange(len(ids)), dtype=mx.int64), "t2d": mx.array(mask)}
    for name, shape in shapes.items():
        if name in ("d2t", "t2d"):
            continue
        if name.endswith("norm.weight"):
            w[name] = mx.ones(shape)
        elif name.endswith("layer_scalar"):
            w[name] = mx.full(shape, 0.9)
        elif name == "confidence_head.proj.bias":
            w[name] = mx.full(shape, 2.0)
        else:
            w[name] = _rand(rng, *shape, std=STD.get(name, 0.1))
    w = {k: v.astype(dtype) for k, v in w.items() if k not in drop}
    if "d2t" in shapes:
        w.update(special)
    mx.save_safetensors(str(folder / "model.safetensors"), w, metadata={"format": "pt"})
    (folder / "config.json").write_text(json.dumps(cfg, indent=2))
    return folder


def make_dflash_head(folder: Path, target_cfg: dict, taps=(1, 3), block_size: int = 8, layers: int = 2,
                     seed: int = 1, nested: bool = True, mask_token_id: int = 3) -> Path:
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
    return write_head(folder, cfg, seed)


def make_dspark_head(folder: Path, target_cfg: dict, taps=(1, 3), block_size: int = 7, layers: int = 2,
                     rank: int = 8, confidence: bool = True, seed: int = 2, mask_token_id: int = 3) -> Path:
    H = target_cfg["hidden_size"]
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
    return write_head(folder, cfg, seed)


# -- Gemma-4 ------------------------------------------------------------------------------------

GEMMA4_ROPE = {
    "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1_000_000.0},
    "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
}


def gemma4_text_config(layers: int = 8, hidden: int = 64, vocab: int = 288, window: int = 8,
                       max_pos: int = 512, **extra) -> dict:
    """A Gemma-4 text config shaped like the 12B (K = V global layers, no per-layer inputs, no shared
    KV), scaled down: 3 sliding layers then 1 full, a small window so prompts cross it cheaply."""
    cfg = {
        "model_type": "gemma4_text", "hidden_size": hidden, "num_hidden_layers": layers,
        "intermediate_size": 2 * hidden, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
        "global_head_dim": 32, "num_global_key_value_heads": 1, "attention_k_eq_v": True,
        "rms_norm_eps": 1e-6, "vocab_size": vocab, "vocab_size_per_layer_input": vocab,
        "hidden_size_per_layer_input": 0, "num_kv_shared_layers": 0, "use_double_wide_mlp": False,
        "enable_moe_block": False, "sliding_window": window, "max_position_embeddings": max_pos,
        "final_logit_softcapping": 30.0, "rope_parameters": GEMMA4_ROPE, "tie_word_embeddings": True,
        "layer_types": (["sliding_attention"] * 3 + ["full_attention"]) * (layers // 4),
        "hidden_activation": "gelu_pytorch_tanh", "attention_bias": False, "attention_dropout": 0.0,
        "pad_token_id": 0, "eos_token_id": 2, "bos_token_id": 1,
    }
    cfg.update(extra)
    return cfg


def make_gemma4_target(folder: Path, layout: str = "gemma4", seed: int = 0, bits: int = 0, gain: float = 5.0,
                       **text_extra) -> Path:
    """A random Gemma-4 mlx-lm folder. layout "gemma4": the hub's multimodal config (text model
    under text_config, weights under language_model.); "gemma4_text": a text-only checkpoint.
    `gain` scales the post-attention / post-feedforward norms so the layers outweigh the x sqrt(H)
    embedding: the greedy tokens then depend on the context, and a stale cache row shows."""
    from mlx_lm.models import gemma4, gemma4_text

    folder.mkdir(parents=True, exist_ok=True)
    write_tokenizer(folder)
    text = gemma4_text_config(**text_extra)
    if layout == "gemma4":
        cfg = {"model_type": "gemma4", "architectures": ["Gemma4ForConditionalGeneration"],
               "text_config": text, "vocab_size": text["vocab_size"], "eos_token_id": 2, "bos_token_id": 1}
        mod = gemma4
    else:
        cfg = dict(text, architectures=["Gemma4ForCausalLM"])
        mod = gemma4_text
    mx.random.seed(seed)
    model = mod.Model(mod.ModelArgs.from_dict(cfg))
    inner = getattr(model, "language_model", model).model
    inner.embed_tokens.weight = mx.random.normal(inner.embed_tokens.weight.shape)
    for layer in inner.layers:
        layer.post_attention_layernorm.weight = layer.post_attention_layernorm.weight * gain
        layer.post_feedforward_layernorm.weight = layer.post_feedforward_layernorm.weight * gain
    if bits:
        import mlx.nn as nn

        nn.quantize(model, group_size=32, bits=bits)
        cfg["quantization"] = {"group_size": 32, "bits": bits}
    mx.save_safetensors(str(folder / "model.safetensors"), dict(tree_flatten(model.parameters())))
    (folder / "config.json").write_text(json.dumps(cfg))
    return folder


def text_config_of(target_cfg: dict) -> dict:
    return dict(target_cfg.get("text_config") or target_cfg)


def make_gemma4_dspark_head(folder: Path, target_cfg: dict, taps=(1, 5), block_size: int = 7, layers: int = 2,
                            rank: int = 8, confidence: bool = True, seed: int = 3, mask_token_id: int = 3,
                            model_type: str = "gemma4") -> Path:
    """deepseek-ai's Gemma4DSparkModel layout (DeepSpec gemma4/modeling.py): a copy of the target's
    text config; global_head_dim heads, K = V (no v_proj, v_norm has no weight), four norms and a
    layer_scalar per layer, own embed_tokens / lm_head, Markov and confidence heads."""
    text = text_config_of(target_cfg)
    cfg = dict(text)
    cfg.update({
        "architectures": ["Gemma4DSparkModel"], "model_type": model_type, "target_model_type": "gemma4",
        "target_text_model_type": "gemma4_text", "num_target_layers": text["num_hidden_layers"],
        "num_hidden_layers": layers, "block_size": block_size, "tie_word_embeddings": False,
        "layer_types": ["full_attention"] * layers, "mask_token_id": mask_token_id,
        "target_layer_ids": list(taps), "num_anchors": 512, "enable_confidence_head": confidence,
        "confidence_head_with_markov": confidence, "markov_rank": rank, "markov_head_type": "vanilla",
    })
    return write_head(folder, cfg, seed)


def make_gemma4_dflash_head(folder: Path, target_cfg: dict, taps=(1, 5), block_size: int = 8, layers: int = 3,
                            window: int = 6, seed: int = 4, mask_token_id: int = 3) -> Path:
    """A z-lab DFlash head for a Gemma target: the usual Qwen3-style backbone (model_type qwen3),
    some layers of type sliding_attention with a sliding_window."""
    text = text_config_of(target_cfg)
    make_dflash_head(folder, text, taps=taps, block_size=block_size, layers=layers, seed=seed,
                     mask_token_id=mask_token_id)
    cfg = json.loads((folder / "config.json").read_text())
    cfg.update({"layer_types": (["sliding_attention", "full_attention"] * layers)[:layers],
                "sliding_window": window, "use_sliding_window": True})
    (folder / "config.json").write_text(json.dumps(cfg))
    return folder


# -- hybrid and mixture-of-experts targets ------------------------------------------------------------

FORMATS = Path(__file__).parent / "formats"
# Sizes of the published configs shrunk for unit tests: widths, head counts and expert counts only.
SMALL = {"hidden_size": 64, "intermediate_size": 128, "moe_intermediate_size": 32, "shared_expert_intermediate_size": 32,
         "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "linear_key_head_dim": 16,
         "linear_value_head_dim": 16, "linear_num_key_heads": 2, "linear_num_value_heads": 4, "num_experts": 8,
         "num_local_experts": 8, "num_experts_per_tok": 2, "experts_per_token": 2, "sliding_window": 8}


def published(name: str) -> dict:
    """A published config.json from tests/formats (org--name folder, under published/ or refused/)."""
    for sub in ("published", "refused"):
        path = FORMATS / sub / name / "config.json"
        if path.exists():
            return json.loads(path.read_text())
    raise FileNotFoundError(name)


def small_config(cfg: dict, layers: int, vocab: int = 272, max_pos: int = 512) -> dict:
    """A published config with SMALL sizes, `layers` decoder layers (its layer pattern kept: the first
    `layers` entries of layer_types), our tokenizer's vocabulary and a short context."""
    out = {}
    for k, v in cfg.items():
        if k == "text_config" and isinstance(v, dict):
            out[k] = small_config(v, layers, vocab, max_pos)
        elif k in SMALL and v is not None:
            out[k] = SMALL[k]
        else:
            out[k] = v
    if "num_hidden_layers" in out:
        out["num_hidden_layers"] = layers
        if isinstance(out.get("layer_types"), list):
            out["layer_types"] = out["layer_types"][:layers]
        out["vocab_size"], out["max_position_embeddings"] = vocab, max_pos
        out["eos_token_id"], out["bos_token_id"] = 2, 1
        rope = out.get("rope_parameters") or {}
        if "mrope_section" in rope:  # one pair of rotary frequencies per section, at head_dim 16
            rope["mrope_section"] = [2, 1, 1]
    return out


def make_from_config(folder: Path, cfg: dict, seed: int = 0, scale: float = 4.0) -> Path:
    """A random f32 mlx-lm folder of any family, built with mlx-lm's own model classes from `cfg`."""
    from random_model import write_random_model

    write_random_model(folder, cfg, seed, scale)
    write_tokenizer(folder)
    return folder


class OracleHead:
    """Proposes the true greedy continuation with random corruptions: exercises every accept length.

    It wraps a real head (for the cache and the context bookkeeping) and overrides only the tokens."""

    def __init__(self, head, truth: list[int], prompt_len: int, corrupt: float, seed: int):
        self.head, self.truth, self.corrupt = head, truth, corrupt
        self.kind, self.config, self.max_drafts = head.kind, head.config, head.max_drafts
        self.pos = 0  # index in truth of the anchor
        self.rng = random.Random(seed)
        self.draft_ids = getattr(head, "draft_ids", None)

    def make_cache(self):
        return self.head.make_cache()

    def see(self, cache, tokens):
        self.head.see(cache, tokens)

    def propose(self, cache, new_taps, anchor, k, sampling, key, threshold=0.0):
        self.head.propose(cache, new_taps, anchor, k, sampling, key)  # keep the real context cache going
        self.pos = self.truth.index(anchor, self.pos) if anchor in self.truth[self.pos:] else self.pos
        nxt = self.truth[self.pos + 1: self.pos + 1 + k]
        nxt += [5] * (k - len(nxt))
        out = [t if self.rng.random() > self.corrupt else (t + 1) % 200 + 4 for t in nxt]
        return mx.array(out, dtype=mx.uint32), None

    def propose_tree(self, cache, new_taps, anchor, k, nodes, sampling, key):
        """A tree whose true path hides among decoys: at each depth the true token (unless corrupted)
        is one of 1-3 siblings in random order, and a decoy may carry a child of its own, so accepted
        paths leave through later siblings and the kept rows are not a prefix."""
        from spec.loop.tree import DraftTree

        self.head.propose_tree(cache, new_taps, anchor, k, nodes, sampling, key)
        truth, _ = self.propose(cache, None, anchor, k, sampling, key)  # advances nothing new: same anchor
        tokens, parents, node = [], [], 0
        for t in truth.tolist():
            if len(tokens) >= nodes:
                break
            sibs = [t] + [(t + j * 7) % 200 + 4 for j in range(1, self.rng.randint(1, 3))]
            self.rng.shuffle(sibs)
            true_row = None
            for s in sibs:
                if len(tokens) >= nodes:
                    break
                tokens.append(s)
                parents.append(node)
                if s == t:
                    true_row = len(tokens)
                elif len(tokens) < nodes and self.rng.random() < 0.5:
                    tokens.append((s + 3) % 200 + 4)
                    parents.append(len(tokens) - 1)
            if true_row is None:
                break
            node = true_row
        return DraftTree(tokens, parents)


def recurrent_states(cache: list) -> list:
    from spec.loop.caches import RecurrentCache

    return [a for c in cache if isinstance(c, RecurrentCache) for a in c.cache]


def assert_rollback_exact(t, k: int, prompt_len: int = 30) -> None:
    """A verify of [anchor + k drafts] that keeps n + 1 rows (every n from 0 to k), then the rest taken
    back: each layer's state is the state after the n + 1 tokens fed one at a time, and so is what the
    target computes next."""
    prompt, rows = list(range(10, 10 + prompt_len)), list(range(60, 60 + k + 1))
    for n in range(k + 1):
        verified, stepped = t.make_cache(), t.make_cache()
        for cache in (verified, stepped):
            t(mx.array([prompt]), cache)
        t(mx.array([rows]), verified)
        t.trim(verified, k - n)
        for tok in rows[: n + 1]:
            t(mx.array([[tok]]), stepped)
        ours, ref = recurrent_states(verified), recurrent_states(stepped)
        assert len(ours) == len(ref) and bool(ours) == bool(t.recurrent)
        for a, b in zip(ours, ref):
            assert a.shape == b.shape and mx.allclose(a, b, atol=1e-5, rtol=1e-4), (n, k)
        assert [getattr(c, "offset", None) for c in verified] == [getattr(c, "offset", None) for c in stepped]
        after = [t(mx.array([[7, 8]]), c)[0] for c in (verified, stepped)]
        assert mx.allclose(*after, atol=1e-4), (n, k)


# rows: 0 anchor; 1, 2 under it; 3 under 1; 4 under 2; 5 under 3 (leaves at depths 2 and 3)
def hand_tree():
    from spec.loop.tree import DraftTree

    return DraftTree([11, 12, 13, 14, 15], [0, 0, 1, 2, 3])


def assert_tree_row_is_its_path(t, prompt: list[int], tree, row: int) -> None:
    """Row `row` of a tree forward after `prompt` has the logits of its path fed alone, and keeping that path
    leaves the cache as feeding it would (the next two tokens agree)."""
    toks = [60] + tree.token_list()
    cache = t.make_cache()
    t(mx.array([prompt]), cache)
    logits, _ = t(mx.array([toks]), cache, tree=tree)
    path = tree.path_to(row)
    fed = t.make_cache()
    ref, _ = t(mx.array([prompt + [toks[r] for r in path]]), fed)
    assert mx.allclose(logits[0, row], ref[0, -1], atol=1e-4), row
    t.keep(cache, path, len(toks))
    after = [t(mx.array([[50, 51]]), c)[0] for c in (cache, fed)]
    assert mx.allclose(*after, atol=1e-4), row
