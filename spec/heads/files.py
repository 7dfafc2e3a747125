"""A head's folder: read (local or hub, safetensors only), weights checked name by name, built bound
to its target, optionally quantized; and written back in the published layout."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

import mlx.core as mx
import mlx.nn as nn
import numpy as np
from mlx.utils import tree_flatten

from ..errors import SpecError
from ..hub import HEAD_FILES, read_config, resolve_path
from ..target import Target
from . import vocab as draft_vocab
from .backbone import BackboneConfig


def load_head_folder(path_or_repo: str) -> tuple[Path, dict, dict[str, mx.array]]:
    """config.json + every *.safetensors of a head (hub id or folder); safetensors only, no code."""
    folder = resolve_path(path_or_repo, allow_patterns=HEAD_FILES)
    cfg = read_config(folder)
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise SpecError(f"{folder} has no .safetensors weights")
    weights: dict[str, mx.array] = {}
    for f in files:
        weights.update(mx.load(str(f)))
    return folder, cfg, weights


def load_strict(module: nn.Module, weights: dict[str, mx.array], who: str, dtype: mx.Dtype | None = None) -> None:
    """Load weights by exact name and shape: any missing, extra or misshapen tensor is an error."""
    expected = dict(tree_flatten(module.parameters()))
    missing = sorted(set(expected) - set(weights))
    extra = sorted(set(weights) - set(expected))
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"missing {len(missing)} tensor(s): {', '.join(missing[:4])}{' ...' if len(missing) > 4 else ''}")
        if extra:
            parts.append(f"unexpected {len(extra)} tensor(s): {', '.join(extra[:4])}{' ...' if len(extra) > 4 else ''}")
        raise SpecError(f"{who}: checkpoint does not match the format: " + "; ".join(parts))
    bad = [f"{k} {tuple(weights[k].shape)} != {tuple(v.shape)}" for k, v in expected.items()
           if tuple(weights[k].shape) != tuple(v.shape)]
    if bad:
        raise SpecError(f"{who}: tensor shapes do not match its config: {'; '.join(bad[:3])}")
    if dtype is not None:
        weights = {k: v.astype(dtype) for k, v in weights.items()}
    module.load_weights(list(weights.items()))
    mx.eval(module.parameters())


def build_head(model_cls: type, config: BackboneConfig, weights: dict[str, mx.array], target: Target | None,
               who: str, drafter_bits: int | None, folder: Path | None = None, draft_ids: Any = None):
    """The common tail of both loaders: refuse a head made for another target before reading its
    weights, load them strictly, quantize if asked, bind (which applies a shipped draft vocabulary:
    draft_vocab.json, or `draft_ids` when the checkpoint carries its own)."""
    if target is not None:
        model_cls.check_target(config, target, who)
    model = model_cls.from_weights(config, weights)
    load_strict(model, weights, who, compute_dtype(weights))
    maybe_quantize(model, drafter_bits)
    ids = draft_vocab.read(folder) if folder is not None else None
    ids = draft_ids if ids is None else ids
    model.draft_ids = None if ids is None else np.asarray(ids, dtype=np.int64)
    if target is not None:
        model.bind(target)
    return model


def compute_dtype(weights: dict[str, mx.array]) -> mx.Dtype | None:
    """Half-precision heads run in f32 on the CPU, where bf16/f16 matmuls are several times slower."""
    if mx.default_device() == mx.cpu and any(v.dtype in (mx.bfloat16, mx.float16) for v in weights.values()):
        return mx.float32
    return None


def default_drafter_bits() -> int:
    """4-bit drafters on an Apple GPU (memory-bound), none on the CPU (quantized matmul is slow there)."""
    return 4 if mx.default_device() == mx.gpu and mx.metal.is_available() else 0


def maybe_quantize(module: nn.Module, bits: int | None) -> None:
    bits = default_drafter_bits() if bits is None else bits
    if bits not in (0, 4, 8):
        raise SpecError(f"--drafter-bits must be 0, 4 or 8, not {bits}")
    if bits:
        nn.quantize(module, group_size=64, bits=bits,
                    class_predicate=lambda _, m: hasattr(m, "to_quantized") and m.weight.shape[-1] % 64 == 0)


def save_head(folder: str | Path, config: dict, weights: dict[str, mx.array],
              draft_ids: Sequence[int] | None = None) -> Path:
    """Write a head in the published layout: config.json + model.safetensors (+ draft_vocab.json)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    mx.save_safetensors(str(folder / "model.safetensors"), weights, metadata={"format": "mlx"})
    (folder / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    if draft_ids is not None:
        draft_vocab.write(folder, draft_ids)
    return folder
