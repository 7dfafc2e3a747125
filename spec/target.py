"""The target model: any mlx-lm model, run on its own trimmable cache with hidden-state taps.

We walk the model's own decoder layers instead of re-implementing them, so every family that
mlx-lm supports with the usual `model.layers / embed_tokens / norm` layout works (llama, qwen2,
qwen3, ...). One loaded Target is shared by many engines; each engine owns its cache.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import mlx.core as mx
import mlx.nn as nn
from mlx_lm.models.base import create_attention_mask
from mlx_lm.models.cache import make_prompt_cache, trim_prompt_cache

SUPPORTED_FAMILIES = ("llama", "qwen2", "qwen3")


class SpecError(ValueError):
    """Bad input from the user: a clear message, raised before any generation starts."""


def resolve_path(path_or_repo: str, allow_patterns: Sequence[str] = ("*.json", "*.safetensors", "*.jinja", "*.txt", "*.model")) -> Path:
    """A local folder as is; otherwise a hub repo id fetched (safetensors and json only) by huggingface_hub."""
    p = Path(path_or_repo).expanduser()
    if p.exists():
        if not p.is_dir():
            raise SpecError(f"{path_or_repo} is a file; expected a model folder or a hub repo id")
        return p
    if path_or_repo.startswith((".", "/", "~")) or path_or_repo.count("/") != 1:
        raise SpecError(f"model folder not found: {path_or_repo}")
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(path_or_repo, allow_patterns=list(allow_patterns)))
    except Exception as e:  # network, auth, missing repo: one readable line
        raise SpecError(f"could not download {path_or_repo!r} from the hub: {type(e).__name__}: {e}") from e


def read_config(folder: Path) -> dict:
    """config.json of a model folder, refusing configs that ask for remote code."""
    cfg_path = folder / "config.json"
    if not cfg_path.exists():
        raise SpecError(f"{folder} has no config.json")
    try:
        cfg = json.loads(cfg_path.read_text())
    except json.JSONDecodeError as e:
        raise SpecError(f"{cfg_path} is not valid JSON: {e}") from e
    if "auto_map" in cfg or cfg.get("trust_remote_code"):
        raise SpecError(f"{cfg_path} asks for remote code (auto_map); we never execute code from a checkpoint")
    return cfg


def _language_model(model: nn.Module) -> tuple[nn.Module, nn.Module]:
    """(outer, inner): inner holds embed_tokens / layers / norm; outer holds lm_head if untied."""
    outer = getattr(model, "language_model", model)
    inner = getattr(outer, "model", outer)
    for attr in ("embed_tokens", "layers", "norm"):
        if not hasattr(inner, attr):
            raise SpecError(f"{type(model).__name__}: no `{attr}`; this model layout is not supported")
    return outer, inner


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
        self.num_layers = len(self.inner.layers)
        self.hidden_size = int(self.config.get("hidden_size") or self.inner.embed_tokens.weight.shape[1])
        self.vocab_size = int(self.config.get("vocab_size") or self.inner.embed_tokens.weight.shape[0])
        self.max_context = int(self.config.get("max_position_embeddings") or 1 << 30)
        self.sliding_window = self.config.get("sliding_window")
        eos = getattr(self.tokenizer, "eos_token_ids", None) or {getattr(self.tokenizer, "eos_token_id", None)}
        self.eos_ids = {int(e) for e in eos if e is not None}

    # -- the pieces drafters bind to ----------------------------------------------------------
    def embed(self, ids: mx.array) -> mx.array:
        return self.inner.embed_tokens(ids)

    def lm_head(self, h: mx.array) -> mx.array:
        """Logits from final-normed hidden states (tied embedding when there is no lm_head)."""
        head = getattr(self.outer, "lm_head", None)
        return head(h) if head is not None else self.inner.embed_tokens.as_linear(h)

    def make_cache(self) -> list:
        return make_prompt_cache(self.model)

    @staticmethod
    def trim(cache: list, n: int) -> None:
        if n > 0:
            trim_prompt_cache(cache, n)

    def check_taps(self, layer_ids: Sequence[int], who: str = "drafter") -> None:
        bad = [i for i in layer_ids if not (-1 <= int(i) < self.num_layers)]
        if bad:
            raise SpecError(
                f"{who} taps layers {bad}, outside the target's {self.num_layers} layers "
                f"(valid: -1 for the embedding, 0..{self.num_layers - 1})"
            )

    # -- the forward pass ---------------------------------------------------------------------
    def __call__(self, ids: mx.array, cache: list, taps: Sequence[int] = (),
                 last_only: bool = False) -> tuple[mx.array, mx.array | None]:
        """Run new tokens `ids` [B, T] on `cache`; return (logits [B, T, V], taps [B, T, n*H] or None).

        A tap i is the output of decoder layer i (HF hidden_states[i+1]); -1 is the embedding output.
        last_only: logits of the last row only (a prefill needs no more; the vocabulary is large).
        """
        h = self.embed(ids)
        want = {int(t): None for t in taps}
        if -1 in want:
            want[-1] = h
        window = self.sliding_window
        full_mask = create_attention_mask(h, cache[0])
        for i, (layer, c) in enumerate(zip(self.inner.layers, cache)):
            sliding = getattr(layer, "use_sliding", False)
            mask = create_attention_mask(h, c, window_size=window) if sliding else full_mask
            h = layer(h, mask, c)
            if i in want:
                want[i] = h
        logits = self.lm_head(self.inner.norm(h[:, -1:] if last_only else h))
        hidden = mx.concatenate([want[int(t)] for t in taps], axis=-1) if taps else None
        return logits, hidden

    # -- text ---------------------------------------------------------------------------------
    def encode_chat(self, prompt: str, chat: bool = True) -> list[int]:
        """Token ids of a user prompt, through the model's chat template when it has one."""
        if not prompt or not prompt.strip():
            raise SpecError("the prompt is empty")
        tok = self.tokenizer
        if chat and getattr(tok, "chat_template", None):
            ids = tok.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True)
            if isinstance(ids, str):
                ids = tok.encode(ids, add_special_tokens=False)
            elif isinstance(ids, dict):
                ids = ids["input_ids"]
            return list(ids)
        return list(tok.encode(prompt))

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids))


def load_target(path_or_repo: str, *, lazy: bool = False) -> Target:
    """Load an mlx-lm model by hub id or folder; refuses remote code and unsupported families."""
    from mlx_lm.utils import load as mlx_load

    folder = resolve_path(path_or_repo)
    cfg = read_config(folder)
    family = cfg.get("model_type", "")
    if family not in SUPPORTED_FAMILIES:
        raise SpecError(
            f"target family {family!r} is not supported yet (supported: {', '.join(SUPPORTED_FAMILIES)})"
        )
    model, tokenizer = mlx_load(str(folder), lazy=lazy)
    return Target(model=model, tokenizer=tokenizer, config=cfg, name=str(path_or_repo))
