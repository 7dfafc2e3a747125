"""The target model: any mlx-lm model, run on its own trimmable cache with hidden-state taps.

We walk the model's own decoder layers instead of re-implementing them, so every family that
mlx-lm supports with the usual `model.layers / embed_tokens / norm` layout works: dense (llama,
qwen2, qwen3, ...), mixture-of-experts (qwen3_moe, gpt_oss, ...) and hybrids whose recurrent layers
can be rolled back (qwen3_5, qwen3_next, lfm2: see spec.loop.caches). Gemma-4 gets its own walk (scaled
embedding, per-layer inputs, shared-KV layers, logit softcap). One loaded Target is shared by many
engines; each engine owns its cache.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import mlx.core as mx
import mlx.nn as nn
from mlx_lm.models.base import create_attention_mask
from mlx_lm.models.cache import KVCache, make_prompt_cache, trim_prompt_cache

from .errors import SpecError
from .hub import read_config, refuse_code, resolve_path
from .loop import tree_positions as positions
from .loop import tree_recurrent as branches
from .loop.caches import RecurrentCache, WindowKVCache, install_taps, mixer_of, recording, rollback_caches
from .loop.tree import DraftTree
from .target_checks import check_rollback, check_walk, tree_check

GEMMA4_FAMILIES = ("gemma4", "gemma4_text")  # mlx-lm modules: multimodal hub checkpoints, text-only
FINAL_NORMS = ("norm", "embedding_norm")  # the inner model's last norm (LFM2 names it embedding_norm)
# Why a per-layer cache type of mlx-lm cannot take back a rejected draft (check_tappable's message).
CACHE_WHY = {
    "CacheList": "several caches in one layer, e.g. attention and a Mamba mixer side by side",
    "RotatingKVCache": "a sliding window that keeps its first tokens (StreamingLLM sinks)",
    "MambaCache": "a state-space layer without a convolution and recurrence we can tape",
    "ChunkedKVCache": "chunked local attention",
    "QuantizedKVCache": "quantized K/V",
}


def softcapped(logits: mx.array, cap: float | None) -> mx.array:
    """Gemma's tanh logit softcap (identity when cap is None or 0)."""
    return mx.tanh(logits / cap) * cap if cap else logits


def target_family(cfg: dict) -> str:
    """The mlx-lm module that loads this config, by mlx-lm's own remap tables (gemma4_unified -> gemma4)."""
    from mlx_lm.utils import _get_classes

    if "model_type" not in cfg:
        raise SpecError("the target's config.json has no model_type")
    try:
        model_cls, _ = _get_classes(cfg)
    except ValueError as e:
        import mlx_lm

        raise SpecError(f"mlx-lm {mlx_lm.__version__} cannot load model_type {cfg['model_type']!r}") from e
    return model_cls.__module__.rsplit(".", 1)[-1]


def check_tappable(cfg: dict, family: str) -> None:
    """Refuse, before any weight is read, a family whose layers cannot take back a rejected draft:
    every layer's cache must be one of ours (caches.rollback_caches), and the caches must pair with
    the decoder layers one to one (our walk hands layer i cache i)."""
    from mlx_lm.utils import _get_classes

    if family in GEMMA4_FAMILIES:
        return  # its own walk: sliding layers on WindowKVCache, shared-KV layers without a cache
    model_cls, args_cls = _get_classes(cfg)
    try:
        model = model_cls(args_cls.from_dict(cfg))  # lazy: no weights are made
        caches = make_prompt_cache(model)
    except Exception as e:
        raise SpecError(f"target family {family!r}: could not build its layers from config.json ({e})") from e
    try:
        rolled = rollback_caches(caches)
    except ValueError as e:
        raise SpecError(f"target family {family!r} keeps a per-layer cache we cannot roll back after a rejected "
                        f"draft ({e}: {CACHE_WHY.get(str(e).split()[0], 'not supported')})") from None
    layers = getattr(model, "layers", None)
    if layers is not None and len(layers) != len(caches):
        raise SpecError(f"target family {family!r}: {len(layers)} decoder layers but {len(caches)} caches (layers "
                        "without a cache, e.g. MLP-only blocks, are not supported by our layer walk)")
    recurrent_mixers(model, rolled)


def _language_model(model: nn.Module) -> tuple[nn.Module, nn.Module]:
    """(outer, inner): inner holds embed_tokens / layers / the final norm; outer holds lm_head if untied."""
    outer = getattr(model, "language_model", model)
    inner = getattr(outer, "model", outer)
    family = type(model).__module__.rsplit(".", 1)[-1]
    has = ", ".join(k for k in inner.children() if not k.startswith("_")) or "nothing"
    for attr in ("embed_tokens", "layers"):
        if not hasattr(inner, attr):
            raise SpecError(f"target family {family!r}: no `{attr}` where our layer walk looks for it (it has: "
                            f"{has}); this model layout is not supported")
    if not any(hasattr(inner, n) for n in FINAL_NORMS):
        raise SpecError(f"target family {family!r}: no final norm named {' or '.join(FINAL_NORMS)} (it has: {has}); "
                        "this model layout is not supported")
    return outer, inner


def decoder_layers(inner: nn.Module) -> list:
    """The decoder layers as a list (PLaMo-2 keeps them one level down, in a decoder module)."""
    layers = inner.layers
    return layers if isinstance(layers, list) else list(getattr(layers, "layers", []))


def recurrent_mixers(model: nn.Module, caches: list) -> dict[int, str]:
    """Make every recurrent layer record its tape (caches.install_taps): {layer index: mixer class}.
    A recurrent layer we cannot tape is one clear error naming its type."""
    out = {}
    for i, (layer, c) in enumerate(zip(decoder_layers(_language_model(model)[1]), caches)):
        if isinstance(c, RecurrentCache):
            try:
                out[i] = install_taps(layer)
            except ValueError as e:
                raise SpecError(f"decoder layer {i}: {e}; its state cannot be rolled back after a rejected draft")
            branches.install(mixer_of(layer))
    return out


PREFILL_CHUNK_CPU, PREFILL_CHUNK_GPU = 64, 512


@dataclass
class Target:
    """A loaded mlx-lm model plus what drafters need to read from it."""

    model: nn.Module
    tokenizer: Any
    config: dict
    name: str = "target"
    outer: nn.Module = field(init=False)
    inner: nn.Module = field(init=False)

    def __post_init__(self) -> None:
        self.outer, self.inner = _language_model(self.model)
        self.model_type = self.config.get("model_type", "")
        self.family = type(self.model).__module__.rsplit(".", 1)[-1]  # the mlx-lm module that built it
        self.is_gemma4 = self.family in GEMMA4_FAMILIES
        # a multimodal Gemma-4 config keeps the text model's keys under text_config; mlx-lm's own
        # args are the ground truth there (it also moves the top-level vocab_size into them)
        # (Qwen3.5's hub configs nest it the same way; mlx-lm reads that one as is)
        cfg = dict(vars(self.outer.args)) if self.is_gemma4 else (self.config.get("text_config") or self.config)
        self.final_norm = next(getattr(self.inner, n) for n in FINAL_NORMS if hasattr(self.inner, n))
        self.num_layers = len(decoder_layers(self.inner))
        self.hidden_size = int(cfg.get("hidden_size") or self.inner.embed_tokens.weight.shape[1])
        self.vocab_size = int(cfg.get("vocab_size") or self.inner.embed_tokens.weight.shape[0])
        self.max_context = int(cfg.get("max_position_embeddings") or 1 << 30)
        # Gemma: embeddings x sqrt(H) and tanh-softcapped logits (the model's own constants)
        self.embed_scale = getattr(self.inner, "embed_scale", None) if self.is_gemma4 else None
        self.softcap = getattr(self.outer, "final_logit_softcapping", None) if self.is_gemma4 else None
        eos = getattr(self.tokenizer, "eos_token_ids", None) or {getattr(self.tokenizer, "eos_token_id", None)}
        self.eos_ids = {int(e) for e in eos if e is not None}
        # prompt tokens per prefill chunk: short enough on a CPU that Stop and progress answer within
        # about a second on long prompts, long enough on a GPU to keep it busy
        self.prefill_chunk = PREFILL_CHUNK_GPU if mx.default_device().type == mx.gpu else PREFILL_CHUNK_CPU
        # recurrent layers (gated DeltaNet, short conv, Mamba-2) record a tape to take rows back
        self.recurrent = {} if self.is_gemma4 else recurrent_mixers(self.model, self.make_cache())
        self._trees: str | None = None  # why drafts cannot be verified as trees ("" = they can): check_trees

    @classmethod
    def of(cls, model_or_target: "Target | nn.Module") -> "Target":
        """A Target as is; a bare mlx-lm model (`target.model`, as the original tool bound heads) wrapped
        with its own args as config (no tokenizer: enough for a head to borrow its layers)."""
        if isinstance(model_or_target, Target):
            return model_or_target
        if not isinstance(model_or_target, nn.Module):
            raise SpecError(f"bind() needs a Target or an mlx-lm model, not {type(model_or_target).__name__}")
        args = getattr(model_or_target, "args", None)
        return cls(model=model_or_target, tokenizer=None, config=dict(vars(args)) if args is not None else {})

    # -- the pieces drafters bind to ----------------------------------------------------------
    def embed(self, ids: mx.array) -> mx.array:
        """Input embeddings as the model's first layer sees them (scaled for Gemma)."""
        h = self.inner.embed_tokens(ids)
        return h * self.embed_scale if self.embed_scale is not None else h

    def lm_head(self, h: mx.array) -> mx.array:
        """Logits from final-normed hidden states (tied embedding when there is no lm_head;
        tanh softcap for Gemma)."""
        return softcapped(self.project(h), self.softcap)

    def project(self, h: mx.array) -> mx.array:
        """The output layer alone: logits before any softcap."""
        head = getattr(self.outer, "lm_head", None)
        return head(h) if head is not None else self.inner.embed_tokens.as_linear(h)

    def output_layer(self) -> nn.Module:
        """The layer whose weight rows turn hidden states into logits (lm_head or the tied embedding)."""
        return getattr(self.outer, "lm_head", None) or self.inner.embed_tokens

    def make_cache(self) -> list:
        """One cache per layer that can take back a verify's rejected rows (spec.loop.caches)."""
        if self.is_gemma4:
            return self._gemma4_cache()
        return rollback_caches(make_prompt_cache(self.model))

    @staticmethod
    def trim(cache: list, n: int) -> None:
        """Take the newest n rows back out of every layer (at most the rows of the latest forward)."""
        if n > 0:
            trim_prompt_cache(cache, n)

    def keep(self, cache: list, rows: list[int], verified: int) -> None:
        """Of the latest forward's `verified` rows keep `rows` (ascending, from 0): the cache then holds
        what feeding those rows alone would have left. A prefix is a trim; a tree's path is gathered
        into place in K/V layers and kept by recurrent ones (spec.loop.tree_recurrent)."""
        prefix = rows == list(range(len(rows)))
        if prefix and not any(isinstance(c, RecurrentCache) and c.paths for c in cache):
            return self.trim(cache, verified - len(rows))
        for c in cache:
            if isinstance(c, RecurrentCache):
                c.keep_path(rows)
            elif prefix:
                c.trim(verified - len(rows))
            else:  # K/V rows gathered into place (a window's buffer starts at its `start` position)
                base = c.offset - verified - getattr(c, "start", 0)
                idx = mx.array([base + r for r in rows])
                c.keys[..., base : base + len(rows), :] = c.keys[..., idx, :]
                c.values[..., base : base + len(rows), :] = c.values[..., idx, :]
                c.offset -= verified - len(rows)

    def check_trees(self) -> str:
        """Why this target cannot verify drafts as trees ("" when it can), checked once: every layer on
        a K/V cache, and a small tree's logits equal to feeding each of its paths alone (which also
        catches a family that ropes without a module spec.loop.tree_positions can reach)."""
        if self._trees is None:
            self._trees = tree_check(self)
        return self._trees

    def check_taps(self, layer_ids: Sequence[int], who: str = "drafter") -> None:
        bad = [i for i in layer_ids if not (-1 <= int(i) < self.num_layers)]
        if bad:
            raise SpecError(
                f"{who} taps layers {bad}, outside the target's {self.num_layers} layers "
                f"(valid: -1 for the embedding, 0..{self.num_layers - 1})"
            )

    # -- the forward pass ---------------------------------------------------------------------
    def __call__(self, ids: mx.array, cache: list, taps: Sequence[int] = (),
                 last_only: bool = False, tree: DraftTree | None = None) -> tuple[mx.array, mx.array | None]:
        """Run new tokens `ids` [B, T] on `cache`; return (logits [B, T, V], taps [B, T, n*H] or None).

        A tap i is the output of decoder layer i (HF hidden_states[i+1]); -1 is the embedding output.
        last_only: logits of the last row only (a prefill needs no more; the vocabulary is large).
        tree: the rows are [anchor + a draft tree's tokens] (check_trees first); then `keep` the path.
        """
        h = self.embed(ids)
        want = {int(t): None for t in taps}
        if -1 in want:
            want[-1] = h
        tree = None if tree is None or tree.is_chain else tree
        with positions.rows_at(mx.array(tree.depths) if tree else None), branches.paths_of(tree):
            if self.is_gemma4:
                h = self._gemma4_layers(ids, h, cache, want, tree)
            else:
                h = self._layers(h, cache, want, tree)
        logits = self.lm_head(self.final_norm(h[:, -1:] if last_only else h))
        hidden = mx.concatenate([want[int(t)] for t in taps], axis=-1) if taps else None
        return logits, hidden

    def _layers(self, h: mx.array, cache: list, want: dict, tree: DraftTree | None = None) -> mx.array:
        """One cache per layer, each layer's mask by its cache: causal for K/V, causal and windowed for a
        WindowKVCache, none for a recurrent layer (whose tape is recorded while it runs); a tree's rows
        see the context and their ancestors in (windowed) K/V layers and run path by path in recurrent
        ones (spec.loop.tree_recurrent)."""
        n = h.shape[1]
        causal: Any = ...  # one causal mask for every K/V layer: made at the first one
        if tree is not None:
            seen, depths = mx.array(tree.mask()), mx.array(tree.depths)
            offset = next((c.offset for c in cache if isinstance(c, KVCache)), 0)
            causal = mx.concatenate([mx.ones((n, offset), dtype=mx.bool_), seen], axis=1)
        for i, (layer, c) in enumerate(zip(decoder_layers(self.inner), cache)):
            if isinstance(c, WindowKVCache):
                c.reserve(n)
                mask = c.mask(n) if tree is None else c.tree_mask(seen, depths)
            elif isinstance(c, RecurrentCache):
                mask = c.make_mask(n)
            else:
                causal = create_attention_mask(h, c) if causal is ... else causal
                mask = causal
            with recording(c, n):
                h = layer(h, mask, c)
            if i in want:
                want[i] = h
        return h

    # -- Gemma-4 ------------------------------------------------------------------------------
    def _gemma4_cache(self) -> list:
        """Full-attention layers on a KVCache, sliding ones on a trimmable WindowKVCache; none for
        the shared-KV layers at the end (they reuse an earlier layer's K/V), as mlx-lm lays it out."""
        n_own = len(self.inner.layers) - int(getattr(self.outer.args, "num_kv_shared_layers", 0) or 0)
        return [KVCache() if layer.layer_type == "full_attention" else WindowKVCache(self.inner.window_size)
                for layer in self.inner.layers[:n_own]]

    def _gemma4_layers(self, ids: mx.array, h: mx.array, cache: list, want: dict,
                       tree: DraftTree | None = None) -> mx.array:
        """The walk of mlx-lm's Gemma4TextModel: per-layer inputs (E2B/E4B), shared K/V for the last
        num_kv_shared_layers layers, one mask per layer type (a tree's: rows see their ancestors, as in
        _layers); h is the scaled embedding."""
        inner = self.inner
        per_layer = None
        if inner.hidden_size_per_layer_input:
            per_layer = inner._project_per_layer_inputs(h, inner._get_per_layer_inputs(ids))
        cache = list(cache) + [None] * (len(inner.layers) - len(cache))
        masks: dict[str, Any] = {}
        n = h.shape[1]
        seen, depths = (mx.array(tree.mask()), mx.array(tree.depths)) if tree else (None, None)
        for layer, c in zip(inner.layers, cache):
            kind = layer.layer_type
            if kind in masks or c is None:
                continue
            if isinstance(c, WindowKVCache):
                c.reserve(n)
                masks[kind] = c.mask(n) if tree is None else c.tree_mask(seen, depths)
            elif tree is not None:
                masks[kind] = mx.concatenate([mx.ones((n, c.offset), dtype=mx.bool_), seen], axis=1)
            else:
                masks[kind] = create_attention_mask(h, c)
        shared: list[tuple] = [(None, None)] * len(inner.layers)
        for i, (layer, c) in enumerate(zip(inner.layers, cache)):
            kvs, offset = shared[inner.previous_kvs[i]]
            h, kvs, offset = layer(h, masks[layer.layer_type], c,
                                   per_layer_input=per_layer[:, :, i, :] if per_layer is not None else None,
                                   shared_kv=kvs, offset=offset)
            shared[i] = (kvs, offset)
            if i in want:
                want[i] = h
        return h

    # -- text ---------------------------------------------------------------------------------
    def encode_chat(self, prompt: str, chat: bool = True, thinking: bool = False) -> list[int]:
        """Token ids of a user prompt, through the model's chat template when it has one.

        thinking: the template's `enable_thinking` (Qwen3 thinks unless told not to; templates without
        the switch ignore it). Off by default, as the heads' published benchmarks run.
        """
        if not prompt or not prompt.strip():
            raise SpecError("the prompt is empty")
        tok = self.tokenizer
        if chat and getattr(tok, "chat_template", None):
            ids = tok.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True,
                                          enable_thinking=bool(thinking))
            if isinstance(ids, str):
                ids = tok.encode(ids, add_special_tokens=False)
            elif isinstance(ids, dict):
                ids = ids["input_ids"]
            return list(ids)
        return list(tok.encode(prompt))

    @property
    def can_think(self) -> bool:
        """Whether the chat template (any of its named ones) reads `enable_thinking`, Qwen3's <think>
        switch: only then does thinking change anything, so only then is it offered."""
        return "enable_thinking" in str(getattr(self.tokenizer, "chat_template", None) or "")

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids))


def experts_in_f32_on_cpu(model: nn.Module) -> int:
    """On MLX's CPU backend a gather matmul (mixture-of-experts layers: SwitchLinear) runs in float32 only
    ("[GatherMM::eval] Currently only supports float32"): there, unquantized bf16 / f16 expert weights
    are cast to f32 (twice their memory; quantized experts run as they are). Returns the layers cast."""
    from mlx_lm.models.switch_layers import SwitchLinear

    if mx.default_device().type != mx.cpu:
        return 0
    cast = 0
    for _, module in model.named_modules():
        if isinstance(module, SwitchLinear) and module.weight.dtype != mx.float32:
            module.update({k: v.astype(mx.float32) for k, v in module.parameters().items()})
            cast += 1
    return cast


def load_target(path_or_repo: str, *, lazy: bool = False) -> Target:
    """Load an mlx-lm model by hub id or folder: any family mlx-lm loads whose layers we can walk,
    tap and roll back; a checkpoint that would run its own code is refused."""
    from mlx_lm.utils import load as mlx_load

    folder = resolve_path(path_or_repo)
    cfg = read_config(folder)
    refuse_code(folder, cfg)
    check_tappable(cfg, target_family(cfg))
    try:
        model, tokenizer = mlx_load(str(folder), lazy=lazy)
    except (SpecError, OSError):
        raise
    except Exception as e:  # e.g. transformers refusing the config while it reads the tokenizer
        raise SpecError(f"mlx-lm could not load {path_or_repo} ({type(e).__name__}: {str(e).splitlines()[0]})") from e
    experts_in_f32_on_cpu(model)
    target = Target(model=model, tokenizer=tokenizer, config=cfg, name=str(path_or_repo))
    check_walk(target)
    check_rollback(target)
    return target
