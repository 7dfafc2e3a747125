"""The Gemma-4 DSpark head (architectures ["Gemma4DSparkModel"]): the DSpark backbone with Gemma layers.

Same block drafting as the Qwen3 head (spec/dspark.py); what differs is inside a layer, following
deepseek-ai/DeepSpec's gemma4 modeling: attention heads of global_head_dim (512) with score scale
1.0; K = V when attention_k_eq_v (no v_proj: V is the raw k_proj output through a weightless
RMSNorm, K goes through k_norm and RoPE); proportional RoPE of the target's full-attention layers
(partial_rotary_factor 0.25, theta 1e6); four norms per layer and a fixed `layer_scalar`;
a GELU-tanh MLP; embeddings x sqrt(H). The logit softcap (30) is read by DSparkDraftModel.
The head's config.json is a copy of the target's text config plus the DSpark keys.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
import mlx.nn as nn

from ..errors import SpecError
from .backbone import DraftAttention, DraftMLP
from .dspark import DSparkConfig, DSparkDraftModel


class Gemma4DSparkConfig(DSparkConfig):
    """A Gemma4DSparkModel config: Gemma text keys mapped onto the backbone's fields."""

    @classmethod
    def from_dict(cls, cfg: dict, **overrides: Any) -> "Gemma4DSparkConfig":
        """Heads use global_head_dim, the global KV head count when K = V, and the rope of the
        target's full-attention layers."""
        for key in ("enable_moe_block", "hidden_size_per_layer_input", "attention_bias"):  # DeepSpec refuses them too
            if cfg.get(key):
                raise SpecError(f"Gemma4 DSpark head with {key}={cfg[key]!r} is not supported")
        act = cfg.get("hidden_activation", "gelu_pytorch_tanh")
        if act not in ("gelu_pytorch_tanh", "gelu_new"):
            raise SpecError(f"Gemma4 DSpark head activation {act!r} is not supported (gelu_pytorch_tanh)")
        derived: dict[str, Any] = {}
        if cfg.get("global_head_dim"):
            derived["head_dim"] = int(cfg["global_head_dim"])
        if cfg.get("attention_k_eq_v") and cfg.get("num_global_key_value_heads"):
            derived["num_key_value_heads"] = int(cfg["num_global_key_value_heads"])
        rope = (cfg.get("rope_parameters") or {}).get("full_attention")
        if rope is None:  # mlx-lm's and transformers' Gemma-4 default for full attention
            rope = {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1_000_000.0}
        derived["rope_theta"] = float(rope.get("rope_theta", 1_000_000.0))
        derived["rope_scaling"] = dict(rope) if rope.get("rope_type", "default") != "default" else None
        derived.update(overrides)
        return super().from_dict(cfg, **derived)

    @property
    def k_eq_v(self) -> bool:
        return bool(self.raw.get("attention_k_eq_v", False))

    def intermediate_size_of(self, index: int) -> int:
        """Gemma4TextMLP's width: doubled on "KV-shared" layers when use_double_wide_mlp, counted over
        the head's own layers as Gemma4TextMLP(config, layer_idx) does (mlx-lm's rule; a dense
        12B target has no shared layers, so its head is never affected)."""
        first_shared = self.num_hidden_layers - int(self.raw.get("num_kv_shared_layers", 0) or 0)
        wide = bool(self.raw.get("use_double_wide_mlp")) and index >= first_shared > 0
        return self.intermediate_size * (2 if wide else 1)


class Gemma4Attention(DraftAttention):
    """K = V attention of the Gemma head; queries and the [context ; block] layout as in the backbone."""

    def __init__(self, cfg: Gemma4DSparkConfig):
        nn.Module.__init__(self)  # not DraftAttention's: there is no v_proj when K = V
        d, hd = cfg.hidden_size, cfg.head_dim
        self.n_heads, self.n_kv_heads, self.scale = cfg.num_attention_heads, cfg.num_key_value_heads, 1.0
        self.k_eq_v, self.eps = cfg.k_eq_v, cfg.rms_norm_eps
        self.q_proj = nn.Linear(d, self.n_heads * hd, bias=False)
        self.k_proj = nn.Linear(d, self.n_kv_heads * hd, bias=False)
        if not self.k_eq_v:
            self.v_proj = nn.Linear(d, self.n_kv_heads * hd, bias=False)
        self.o_proj = nn.Linear(self.n_heads * hd, d, bias=False)
        self.q_norm = nn.RMSNorm(hd, eps=cfg.rms_norm_eps)
        self.k_norm = nn.RMSNorm(hd, eps=cfg.rms_norm_eps)

    def keys_values(self, x: mx.array, rope: nn.Module, offset: int | mx.array) -> tuple[mx.array, mx.array]:
        """K = rope(k_norm(k_proj x)); V = weightless RMSNorm of k_proj x (or of v_proj x), not roped."""
        raw = self._heads(self.k_proj(x), self.n_kv_heads)
        v = raw if self.k_eq_v else self._heads(self.v_proj(x), self.n_kv_heads)
        return rope(self.k_norm(raw), offset=offset), mx.fast.rms_norm(v, None, self.eps)


class GeluMLP(DraftMLP):
    """down(gelu_tanh(gate(x)) * up(x)): the same weights as DraftMLP, another activation."""

    def __call__(self, x: mx.array) -> mx.array:
        return self.down_proj(nn.gelu_approx(self.gate_proj(x)) * self.up_proj(x))


class Gemma4DraftLayer(nn.Module):
    """Sandwich norms around attention and MLP, then the whole output times layer_scalar."""

    def __init__(self, cfg: Gemma4DSparkConfig, index: int):
        super().__init__()
        d, eps = cfg.hidden_size, cfg.rms_norm_eps
        self.self_attn = Gemma4Attention(cfg)
        self.mlp = GeluMLP(d, cfg.intermediate_size_of(index))
        self.input_layernorm = nn.RMSNorm(d, eps=eps)
        self.post_attention_layernorm = nn.RMSNorm(d, eps=eps)
        self.pre_feedforward_layernorm = nn.RMSNorm(d, eps=eps)
        self.post_feedforward_layernorm = nn.RMSNorm(d, eps=eps)
        self.layer_scalar = mx.ones((1,))

    def __call__(self, x, ctx_k, ctx_v, rope, offset, mask=None):
        h = x + self.post_attention_layernorm(self.self_attn(self.input_layernorm(x), ctx_k, ctx_v, rope, offset, mask))
        h = h + self.post_feedforward_layernorm(self.mlp(self.pre_feedforward_layernorm(h)))
        return h * self.layer_scalar


class Gemma4DSparkDraftModel(DSparkDraftModel):
    """A DSpark head whose backbone layers are Gemma's; embeddings scaled by sqrt(H)."""

    def __init__(self, config: Gemma4DSparkConfig, **shipped: bool):
        super().__init__(config, **shipped)
        # sqrt(H) as the reference computes it, in the checkpoint's bf16 (sqrt(3840) -> 62.0)
        self.embed_scale = mx.array(config.hidden_size**0.5, dtype=mx.bfloat16).item()

    def make_layer(self, cfg: Gemma4DSparkConfig, index: int) -> nn.Module:
        return Gemma4DraftLayer(cfg, index)

    def embed(self, ids: mx.array) -> mx.array:
        """Own embedding x sqrt(H); a borrowed one is the target's, which scales it itself."""
        return self.embed_tokens(ids) * self.embed_scale if "embed_tokens" in self else super().embed(ids)
