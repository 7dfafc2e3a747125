"""A draft vocabulary: the drafter scores the few thousand tokens its target answers with, not all of them.

The output matrix is most of a small drafter's cost: for the pocket target a 49152 x 576 row costs as
much as eight of its draft layers. Our heads are trained with the softmax over the answers' vocabulary
(`spec.train.trainer`), so at inference they score the same rows (EAGLE-3 and FR-Spec shrink the draft
vocabulary the same way). Still lossless: a token outside it is never drafted, and the verify rule
only asks that q be a distribution; q over the subset, expanded with zeros, is one.

A head folder may carry `draft_vocab.json` ({"token_ids": [...]}) next to its config; tools that do
not know it ignore it, and the head then drafts over the whole vocabulary as before.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import mlx.core as mx
import mlx.nn as nn
import numpy as np

from ..errors import SpecError

FILE = "draft_vocab.json"


def rows_of(layer: nn.Module, ids: mx.array) -> mx.array:
    """Rows `ids` of a Linear / Embedding weight as f32 (dequantized when the layer is quantized)."""
    if "scales" in layer:
        biases = layer["biases"][ids] if "biases" in layer else None
        w = mx.dequantize(layer.weight[ids], layer.scales[ids], biases, group_size=layer.group_size,
                          bits=layer.bits)
    else:
        w = layer.weight[ids]
    return w.astype(mx.float32)


@dataclass
class DraftVocab:
    ids: mx.array  # [S] sorted token ids (uint32)
    weight: mx.array  # [S, H] the head's output rows for them
    markov: mx.array | None  # [S, r] DSpark's markov_w2 rows for them
    vocab_size: int

    @classmethod
    def of(cls, head, token_ids) -> "DraftVocab":
        """Restrict `head`'s output layer (and Markov head) to `token_ids`."""
        ids = np.unique(np.asarray(token_ids, dtype=np.int64))
        V = head.config.vocab_size
        if len(ids) == 0 or ids[0] < 0 or ids[-1] >= V:
            raise SpecError(f"draft vocabulary ids must be within 0..{V - 1}")
        sub = mx.array(ids.astype(np.uint32))
        markov = getattr(head, "markov_head", None)
        layer = head.output_layer()
        rows = sub  # the rows of those tokens; a head shipped already cut (speculators' d2t) has only them
        if layer.weight.shape[0] != V:
            if layer.weight.shape[0] != len(ids):
                raise SpecError(f"the head has {layer.weight.shape[0]} output rows for {len(ids)} draft tokens")
            rows = mx.arange(len(ids))
        out = cls(sub, rows_of(layer, rows), None if markov is None else rows_of(markov.markov_w2, rows), V)
        mx.eval(out.weight, *([] if out.markov is None else [out.markov]))  # copied now, not in the first draft
        return out

    def index_of(self, tokens: mx.array) -> mx.array:
        """Positions of `tokens` in the draft vocabulary (tokens must belong to it)."""
        return mx.searchsorted(self.ids, tokens.astype(mx.uint32))

    def to_vocab(self, idx: mx.array, logprobs: mx.array | None) -> tuple[mx.array, mx.array | None]:
        """Picks over the draft vocabulary -> token ids and log-probs over the whole vocabulary."""
        if logprobs is None:
            return self.ids[idx], None
        full = mx.full((*logprobs.shape[:-1], self.vocab_size), -mx.inf, dtype=logprobs.dtype)
        full[..., self.ids] = logprobs
        return self.ids[idx], full


def read(folder: Path) -> list[int] | None:
    path = Path(folder) / FILE
    if not path.exists():
        return None
    try:
        ids = json.loads(path.read_text())["token_ids"]
        return [int(i) for i in ids]
    except (ValueError, KeyError, TypeError) as e:
        raise SpecError(f"{path} is not a draft vocabulary ({{\"token_ids\": [...]}}): {e}") from None


def write(folder: Path, token_ids) -> Path:
    path = Path(folder) / FILE
    path.write_text(json.dumps({"token_ids": sorted(int(i) for i in token_ids)}) + "\n")
    return path
