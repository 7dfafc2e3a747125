"""The block-drafter backbone shared by DFlash and DSpark ("KV injection").

The target's tapped hidden states are fused (fc + hidden_norm) into context rows. Every layer's
queries come from the block rows only; its keys/values are [context ; block], projected with the
same weights, and the block attends to all of it with no mask. Context K/V are roped at their
absolute positions and cached; the cache only grows (block K/V are recomputed each round).
Layers of type sliding_attention are causal and windowed instead (as vLLM and mlx-dspark run them):
a row at position p sees keys at positions p - window < k <= p.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

import mlx.core as mx
import mlx.nn as nn
import numpy as np
from mlx_lm.models.activations import swiglu
from mlx_lm.models.cache import KVCache
from mlx_lm.models.rope_utils import initialize_rope

from ..errors import SpecError
from ..loop import tree_draft
from ..loop.tree import DraftTree
from ..loop.verify import Sampling
from ..target import Target, softcapped
from . import vocab as draft_vocab


def default_taps(num_target_layers: int, num_draft_layers: int = 5) -> list[int]:
    """z-lab's taps when a head names none: one per draft layer, spread from layer 1 to L-3 with
    Python's rounding (36 layers, 5 draft layers -> [1, 9, 17, 25, 33]); one draft layer: L // 2."""
    if num_draft_layers == 1:
        return [num_target_layers // 2]
    span = num_target_layers - 4
    return [int(round(1 + i * span / (num_draft_layers - 1))) for i in range(num_draft_layers)]


# Keys a z-lab head may keep in dflash_config or at the top level: dflash_config wins, as z-lab reads them.
DFLASH_KEYS = ("block_size", "mask_token_id", "target_layer_ids", "num_target_layers", "input_embedding_scale",
               "output_multiplier", "final_logit_softcapping")


@dataclass
class BackboneConfig:
    """Qwen3-style keys of a head's config.json, plus what ties it to its target."""

    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    intermediate_size: int
    vocab_size: int
    block_size: int
    target_layer_ids: tuple[int, ...]
    num_target_layers: int | None  # None: not in the config (z-lab's gpt-oss head names its taps only)
    mask_token_id: int
    head_dim: int | None = None
    rms_norm_eps: float = 1e-6
    rope_theta: float = 1_000_000.0
    rope_scaling: dict | None = None
    max_position_embeddings: int = 40960
    layer_types: list[str] | None = None
    sliding_window: int | None = None
    is_causal: bool | None = None  # all layers causal (True) or not (False); None: sliding layers only
    input_embedding_scale: float | None = None  # None: the target's own embedding (Gemma: x sqrt(H))
    output_multiplier: float = 1.0
    final_logit_softcapping: float | None = None  # None: the target's own softcap
    model_type: str = "qwen3"
    attention_bias: bool = False  # q/k/v/o projections with biases (z-lab's gpt-oss head)
    raw: dict = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.head_dim = self.head_dim or self.hidden_size // self.num_attention_heads
        self.target_layer_ids = tuple(int(i) for i in self.target_layer_ids)

    @classmethod
    def from_dict(cls, cfg: dict, **overrides: Any) -> "BackboneConfig":
        """Read a published config as z-lab's reference does: the DFLASH_KEYS from dflash_config first,
        then the top level (older heads, DSpark); rope_theta may sit in rope_parameters; taps default
        to z-lab's rule over the head's layer count. Keys naming code (auto_map) are ignored."""
        merged = dict(cfg)
        nested = cfg.get("dflash_config") or {}
        merged.update({k: nested[k] for k in DFLASH_KEYS if nested.get(k) is not None})
        if merged.get("is_causal") is None and nested.get("causal") is not None:
            merged["is_causal"] = bool(nested["causal"])  # vLLM's reading of the same switch
        rope = cfg.get("rope_parameters") or {}
        if rope.get("rope_theta") is None and isinstance(rope.get("full_attention"), dict):
            rope = rope["full_attention"]  # per-layer-type form: these heads rope like full attention
        if merged.get("rope_theta") is None and rope.get("rope_theta") is not None:
            merged["rope_theta"] = rope["rope_theta"]
        if merged.get("rope_scaling") is None and rope.get("rope_type", "default") != "default":
            merged["rope_scaling"] = rope
        if merged.get("target_layer_ids") is None and "num_target_layers" in merged:
            merged["target_layer_ids"] = default_taps(int(merged["num_target_layers"]),
                                                      int(merged.get("num_hidden_layers", 5)))
        if merged.get("output_multiplier") is None:
            merged.pop("output_multiplier", None)
        merged.update(overrides)
        names = {f.name for f in fields(cls)} - {"raw"}
        required = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size",
                    "block_size", "mask_token_id", "num_target_layers" if "target_layer_ids" not in merged else None)
        missing = [n for n in required if n and n not in merged]
        if missing:
            raise SpecError(f"head config lacks {', '.join(missing)}")
        merged.setdefault("num_key_value_heads", merged["num_attention_heads"])
        merged.setdefault("num_target_layers", None)
        return cls(**{k: v for k, v in merged.items() if k in names}, raw=cfg)


class DraftAttention(nn.Module):
    """GQA attention whose keys/values are [context ; block]; q_norm / k_norm per head."""

    def __init__(self, cfg: BackboneConfig):
        super().__init__()
        d, hd = cfg.hidden_size, cfg.head_dim
        self.n_heads, self.n_kv_heads, self.scale = cfg.num_attention_heads, cfg.num_key_value_heads, hd**-0.5
        bias = bool(cfg.attention_bias)
        self.q_proj = nn.Linear(d, self.n_heads * hd, bias=bias)
        self.k_proj = nn.Linear(d, self.n_kv_heads * hd, bias=bias)
        self.v_proj = nn.Linear(d, self.n_kv_heads * hd, bias=bias)
        self.o_proj = nn.Linear(self.n_heads * hd, d, bias=bias)
        self.q_norm = nn.RMSNorm(hd, eps=cfg.rms_norm_eps)
        self.k_norm = nn.RMSNorm(hd, eps=cfg.rms_norm_eps)

    def _heads(self, x: mx.array, n: int) -> mx.array:
        B, L, _ = x.shape
        return x.reshape(B, L, n, -1).transpose(0, 2, 1, 3)

    def keys_values(self, x: mx.array, rope: nn.Module, offset: int | mx.array) -> tuple[mx.array, mx.array]:
        """Roped K (k_norm'd) and V of rows starting at position `offset` (scalar or one per batch row)."""
        k = rope(self.k_norm(self._heads(self.k_proj(x), self.n_kv_heads)), offset=offset)
        return k, self._heads(self.v_proj(x), self.n_kv_heads)

    def __call__(self, x: mx.array, ctx_k: mx.array, ctx_v: mx.array, rope: nn.Module,
                 offset: int | mx.array, mask: mx.array | None = None) -> mx.array:
        B, L, _ = x.shape
        q = rope(self.q_norm(self._heads(self.q_proj(x), self.n_heads)), offset=offset)
        k, v = self.keys_values(x, rope, offset)
        k = mx.concatenate([ctx_k, k], axis=2)
        v = mx.concatenate([ctx_v, v], axis=2)
        out = mx.fast.scaled_dot_product_attention(q, k, v, scale=self.scale, mask=mask)
        return self.o_proj(out.transpose(0, 2, 1, 3).reshape(B, L, -1))


class DraftMLP(nn.Module):
    def __init__(self, d: int, hidden: int):
        super().__init__()
        self.gate_proj = nn.Linear(d, hidden, bias=False)
        self.up_proj = nn.Linear(d, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, d, bias=False)

    def __call__(self, x: mx.array) -> mx.array:
        return self.down_proj(swiglu(self.gate_proj(x), self.up_proj(x)))


class DraftLayer(nn.Module):
    def __init__(self, cfg: BackboneConfig):
        super().__init__()
        self.self_attn = DraftAttention(cfg)
        self.mlp = DraftMLP(cfg.hidden_size, cfg.intermediate_size)
        self.input_layernorm = nn.RMSNorm(cfg.hidden_size, eps=cfg.rms_norm_eps)
        self.post_attention_layernorm = nn.RMSNorm(cfg.hidden_size, eps=cfg.rms_norm_eps)

    def __call__(self, x, ctx_k, ctx_v, rope, offset, mask=None):
        h = x + self.self_attn(self.input_layernorm(x), ctx_k, ctx_v, rope, offset, mask)
        return h + self.mlp(self.post_attention_layernorm(h))


def layer_attention(cfg: BackboneConfig) -> list[tuple[bool, int | None]]:
    """Per layer (causal, window): full-attention layers see the whole block both ways, sliding ones
    are causal and windowed, unless the config's is_causal sets every layer (z-lab's and vLLM's rule).
    Checked here, so a head we cannot run is refused at load time."""
    types = list(cfg.layer_types or ["full_attention"] * cfg.num_hidden_layers)
    if len(types) != cfg.num_hidden_layers:
        raise SpecError(f"head config has {len(types)} layer_types for {cfg.num_hidden_layers} layers")
    unknown = sorted(set(types) - {"full_attention", "sliding_attention"})
    if unknown:
        raise SpecError(f"head layer_types {unknown} are not supported (full_attention, sliding_attention)")
    if "sliding_attention" in types and not cfg.sliding_window:
        raise SpecError("head has sliding_attention layers but no sliding_window in its config")
    return [(t == "sliding_attention" if cfg.is_causal is None else bool(cfg.is_causal),
             int(cfg.sliding_window) if t == "sliding_attention" else None) for t in types]


def attention_mask(q_pos: mx.array, k_pos: mx.array, causal: bool, window: int | None) -> mx.array | None:
    """Boolean mask of what a query at q_pos sees (None: everything). Causal: keys at or before it;
    windowed: keys less than `window` away (behind it, and ahead of it too when not causal)."""
    if not causal and window is None:
        return None
    seen = k_pos <= q_pos if causal else mx.ones(mx.broadcast_shapes(q_pos.shape, k_pos.shape), dtype=mx.bool_)
    if window is not None:
        seen = seen & (q_pos - k_pos < window) & (causal or (k_pos - q_pos < window))
    return seen


class Backbone(nn.Module):
    """fc + hidden_norm fusion of the taps, the draft layers, the final norm."""

    draft_ids: np.ndarray | None = None  # a draft vocabulary (spec.heads.vocab), applied when bound; an
    # array, not a list: a list attribute would join the module's parameter tree
    draft_vocab: draft_vocab.DraftVocab | None = None  # None: draft over the whole vocabulary

    def __init__(self, cfg: BackboneConfig):
        super().__init__()
        self.config = cfg
        self._attention = tuple(layer_attention(cfg))  # a tuple: not a parameter tree
        self.fc = nn.Linear(len(cfg.target_layer_ids) * cfg.hidden_size, cfg.hidden_size, bias=False)
        self.hidden_norm = nn.RMSNorm(cfg.hidden_size, eps=cfg.rms_norm_eps)
        self.layers = [self.make_layer(cfg, i) for i in range(cfg.num_hidden_layers)]
        self.norm = nn.RMSNorm(cfg.hidden_size, eps=cfg.rms_norm_eps)
        self.rope = initialize_rope(cfg.head_dim, cfg.rope_theta, False, cfg.rope_scaling,
                                    cfg.max_position_embeddings)

    def make_layer(self, cfg: BackboneConfig, index: int) -> nn.Module:
        """The Qwen3-style draft layer; a head variant with other layers overrides this."""
        return DraftLayer(cfg)

    # -- what a head borrows from its target -------------------------------------------------------
    kind, title = "head", "Draft"
    _target: Target | None = None  # set by bind(); a plain attribute, not a parameter

    @classmethod
    def from_weights(cls, config: BackboneConfig, weights: dict[str, mx.array]) -> "Backbone":
        """The module the checkpoint's tensors fit (a head variant may depend on what was shipped)."""
        return cls(config)

    @classmethod
    def check_target(cls, config: BackboneConfig, target: Target, who: str) -> None:
        """Refuse a target this head was not made for (sizes, taps); a head variant adds its rules."""
        check_against_target(config, target, who)

    def bind(self, target: "Target | nn.Module") -> "Backbone":
        """Tie the head to its target (a Target, or the bare mlx-lm model `target.model`): what it does
        not ship (embedding, output layer) it shares with the target, not copied."""
        target = Target.of(target)
        self.check_target(self.config, target, f"{self.title} head")
        self._target = target
        self.use_draft_vocab(self.draft_ids)
        return self

    @property
    def target(self) -> Target:
        if self._target is None:
            raise SpecError(f"the {self.title} head is not bound to a target: call bind(target) first")
        return self._target

    def embed(self, ids: mx.array) -> mx.array:
        """Block rows through the target's embedding: as its first layer sees them (Gemma: x sqrt(H)),
        or the raw table x input_embedding_scale when the head's config sets one (z-lab's newer heads)."""
        scale = self.config.input_embedding_scale
        return self.target.embed(ids) if scale is None else self.target.inner.embed_tokens(ids) * scale

    def output_layer(self) -> nn.Module:
        return self.target.output_layer()

    def logits(self, h: mx.array) -> mx.array:
        """Logits over the draft vocabulary (the whole vocabulary when there is none) through the
        target's output layer, x output_multiplier, then the head's softcap or else the target's."""
        v = self.draft_vocab
        out = self.target.project(h) if v is None else h @ v.weight.T
        if self.config.output_multiplier != 1.0:
            out = out * self.config.output_multiplier
        cap = self.config.final_logit_softcapping
        return softcapped(out, self.target.softcap if cap is None else cap)

    def use_draft_vocab(self, token_ids: list[int] | None) -> None:
        """Draft over `token_ids` only (None: the whole vocabulary). Call again after the output
        weights change: the restricted rows are a copy."""
        self.draft_ids = None if token_ids is None else np.unique(np.asarray(token_ids, dtype=np.int64))
        self.draft_vocab = None if token_ids is None else draft_vocab.DraftVocab.of(self, self.draft_ids)

    def to_vocab(self, idx: mx.array, logprobs: mx.array | None) -> tuple[mx.array, mx.array | None]:
        """Picks from self.logits rows -> token ids (and log-probs over the whole vocabulary)."""
        return (idx, logprobs) if self.draft_vocab is None else self.draft_vocab.to_vocab(idx, logprobs)

    def fuse(self, taps: mx.array) -> mx.array:
        return self.hidden_norm(self.fc(taps))

    def see(self, cache: list[KVCache], tokens: list[int]) -> None:
        """A head reads the committed text through the target's taps (propose's new_taps): nothing to do."""

    def make_cache(self) -> list[KVCache]:
        return [KVCache() for _ in self.layers]

    def run_block(self, block: mx.array, new_taps: mx.array | None, cache: list[KVCache]) -> mx.array:
        """One drafting pass: append new context rows to the cache, then run the block after them.

        block: embedded block rows [B, S, H]; new_taps: target taps of the committed tokens not yet in
        the cache [B, C, n*H]. Returns final-normed block hidden states [B, S, H].
        """
        start = cache[0].offset
        ctx = self.fuse(new_taps) if new_taps is not None and new_taps.shape[1] else None
        pos = start + (ctx.shape[1] if ctx is not None else 0)
        h = block
        S = block.shape[1]
        for layer, c, (causal, window) in zip(self.layers, cache, self._attention):
            if ctx is not None:
                ctx_k, ctx_v = c.update_and_fetch(*layer.self_attn.keys_values(ctx, self.rope, start))
            else:
                ctx_k, ctx_v = c.keys_and_values() if c.keys is not None else (None, None)
            if ctx_k is None:  # no context yet (never in the engine: the prompt is non-empty)
                B, nkv, hd = h.shape[0], layer.self_attn.n_kv_heads, self.config.head_dim
                ctx_k = ctx_v = mx.zeros((B, nkv, 0, hd), dtype=h.dtype)
            # context rows sit at positions 0..pos-1, the block after them
            mask = attention_mask(mx.arange(pos, pos + S)[:, None], mx.arange(pos + S)[None], causal, window)
            h = layer(h, ctx_k, ctx_v, self.rope, pos, mask)
        return self.norm(h)

    parent_free = True  # a slot's distribution does not depend on the drafts before it (DSpark: Markov)

    def next_logits(self, base: mx.array, prev: mx.array) -> mx.array:
        """One slot's logits [V'] after each of the previous tokens prev [F]: [F, V']."""
        return mx.broadcast_to(base, (prev.shape[0],) + base.shape)

    def propose_tree(self, cache: list[KVCache], new_taps: mx.array | None, anchor: int, k: int, nodes: int,
                     sampling: Sampling, key: mx.array | None) -> DraftTree:
        """At most `nodes` drafts as a tree at most k deep (spec.loop.tree_draft)."""
        return tree_draft.propose_tree(self, cache, new_taps, anchor, k, nodes, sampling, key)

    def block_hidden(self, cache: list[KVCache], new_taps: mx.array | None, anchor: int) -> mx.array:
        """Final-normed hidden rows [block_size, H] of the block [anchor, mask, ...] after the context."""
        ids = mx.array([[anchor] + [self.config.mask_token_id] * (self.config.block_size - 1)])
        return self.run_block(self.embed(ids), new_taps, cache)[0]

    def train_blocks(self, block: mx.array, ctx: mx.array, anchors: mx.array, mask: mx.array) -> mx.array:
        """Teacher-forced pass over many blocks sharing one sequence's context (training).

        block: [N, S, H] embedded blocks; ctx: fused context [1, T, H] (all positions);
        anchors: [N] position of each block's anchor; mask: additive or boolean [N, 1, S, T+S].
        """
        N, S = block.shape[:2]
        h = block
        for layer, (causal, window) in zip(self.layers, self._attention):
            k, v = layer.self_attn.keys_values(ctx, self.rope, 0)
            k = mx.broadcast_to(k, (N,) + k.shape[1:])
            v = mx.broadcast_to(v, (N,) + v.shape[1:])
            own = training_layer_mask(anchors, ctx.shape[1], S, causal, window)
            h = layer(h, k, v, self.rope, anchors, mask if own is None else _and_mask(mask, own))
        return self.norm(h)


def training_mask(anchors: mx.array, ctx_len: int, block_size: int) -> mx.array:
    """Boolean [N, 1, S, T+S]: block j sees context rows before its anchor and all of its own rows."""
    ctx = mx.arange(ctx_len)[None, :] < anchors[:, None]  # [N, T]
    ctx = mx.broadcast_to(ctx[:, None, None, :], (anchors.shape[0], 1, block_size, ctx_len))
    own = mx.ones((anchors.shape[0], 1, block_size, block_size), dtype=mx.bool_)
    return mx.concatenate([ctx, own], axis=-1)


def training_layer_mask(anchors: mx.array, ctx_len: int, block_size: int, causal: bool,
                        window: int | None) -> mx.array | None:
    """Boolean [N, 1, S, T+S] of a causal or sliding layer in train_blocks (None: no restriction):
    context key t sits at position t, block key j of block n at anchors[n] + j; queries at anchors[n] + i."""
    blk = anchors[:, None] + mx.arange(block_size)[None]  # [N, S] positions of the block rows
    keys = mx.concatenate([mx.broadcast_to(mx.arange(ctx_len)[None], (anchors.shape[0], ctx_len)), blk], axis=1)
    seen = attention_mask(blk[:, :, None], keys[:, None, :], causal, window)
    return None if seen is None else seen[:, None]


def _and_mask(mask: mx.array | None, allowed: mx.array) -> mx.array:
    """Restrict a boolean or additive attention mask to `allowed` positions."""
    if mask is None:
        return allowed
    if mask.dtype == mx.bool_:
        return mask & allowed
    return mask + mx.where(allowed, 0.0, -mx.inf).astype(mask.dtype)




def block_embed_ids(anchor: mx.array, block_size: int, mask_token_id: int) -> mx.array:
    """[anchor, mask, mask, ...] ids for one block per anchor: anchors [N] -> [N, block_size]."""
    masks = mx.full((anchor.shape[0], block_size - 1), mask_token_id, dtype=anchor.dtype)
    return mx.concatenate([anchor[:, None], masks], axis=1)


def check_against_target(cfg: BackboneConfig, target: Target, who: str) -> None:
    """Refuse a head that was not made for this target, before any generation."""
    if cfg.hidden_size != target.hidden_size:
        raise SpecError(f"{who} has hidden size {cfg.hidden_size}, the target has {target.hidden_size}")
    if cfg.vocab_size != target.vocab_size:
        raise SpecError(f"{who} has vocabulary {cfg.vocab_size}, the target has {target.vocab_size}")
    if cfg.num_target_layers not in (None, target.num_layers):
        raise SpecError(f"{who} was made for a {cfg.num_target_layers}-layer target; this target has "
                        f"{target.num_layers} layers")
    target.check_taps(cfg.target_layer_ids, who)
    if not 0 <= cfg.mask_token_id < target.vocab_size:
        raise SpecError(f"{who} mask_token_id {cfg.mask_token_id} is outside the vocabulary")
