"""Random mlx-lm models of any family, built with mlx-lm's own classes from a config: the tiny targets of the
tests (families we cannot download here) and of the rollback bench."""

from __future__ import annotations

import json
from pathlib import Path

import mlx.core as mx
from mlx.utils import tree_flatten


def write_random_model(folder: Path, cfg: dict, seed: int = 0, scale: float = 4.0) -> Path:
    """config.json + model.safetensors (f32) of a randomly initialised mlx-lm model of `cfg`'s family.
    `scale` sharpens the embedding, so greedy tokens depend on the context instead of being near-uniform.
    No tokenizer: the caller adds one."""
    from mlx_lm.utils import _get_classes

    folder.mkdir(parents=True, exist_ok=True)
    model_cls, args_cls = _get_classes(cfg)
    mx.random.seed(seed)
    model = model_cls(args_cls.from_dict(cfg))
    outer = getattr(model, "language_model", model)
    inner = getattr(outer, "model", None) or getattr(outer, "backbone", outer)
    embed = getattr(inner, "embed_tokens", None) or getattr(inner, "embeddings")
    embed.weight = embed.weight * scale
    mx.save_safetensors(str(folder / "model.safetensors"), dict(tree_flatten(model.parameters())))
    (folder / "config.json").write_text(json.dumps(cfg))
    return folder
