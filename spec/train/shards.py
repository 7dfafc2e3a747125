"""Training data on disk: sequences (token ids, the target's taps and top-K per row) in safetensors shards,
written once and atomically, so an interrupted build resumes at the first missing shard."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import mlx.core as mx
import numpy as np

from ..errors import SpecError


@dataclass
class Sequence_:
    ids: np.ndarray  # prompt + answer token ids (a corpus window: its text, prompt_len 0)
    prompt_len: int
    domain: str  # chat / code / math for answers; the source (code / prose / math) for corpus windows
    taps: np.ndarray  # [T, n_taps*H] float16
    soft_ids: np.ndarray | None = None  # [T, K] the target's top-K next tokens (answer rows)
    soft_logp: np.ndarray | None = None  # [T, K] their log-probs (float16)
    text: bool = False  # a window of text the target read (spec.train.corpus), not its own answer

    def greedy(self) -> np.ndarray:
        """The target's greedy next token for every position: what a draft there must guess. An answer IS
        the target's greedy path (its ids); in a text window, row p's top-1 predicts token p + 1."""
        if not self.text:
            return self.ids
        top = np.take_along_axis(self.soft_ids, self.soft_logp.argmax(-1)[:, None], axis=-1)[:, 0]
        return np.concatenate([self.ids[:1], top[:-1]]).astype(self.ids.dtype)


def check_meta(out: Path, meta: dict, keys: tuple[str, ...]) -> None:
    """Write meta.json, refusing a folder whose shards were made with other settings (they would mix)."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "meta.json"
    if path.exists():
        old = json.loads(path.read_text())
        if any(k in old and old[k] != meta[k] for k in keys):  # a key older data lacks is not held against it
            raise SpecError(f"{out} holds data made with other settings or prompts ({old}); use another --data folder")
    path.write_text(json.dumps(meta, indent=2))


def write_shard(path: Path, rows: list[dict], domains: list[str], text: bool = False) -> None:
    """Rows ({ids, prompt_len, taps, soft_ids, soft_logp}) concatenated into one shard, swapped in atomically;
    text: the rows are windows of text the target read, not its answers."""
    tensors = {
        "ids": mx.array(np.concatenate([np.array(r["ids"], dtype=np.int32) for r in rows])),
        "offsets": mx.array(np.cumsum([0] + [len(r["ids"]) for r in rows]).astype(np.int32)),
        "prompt_lens": mx.array(np.array([r["prompt_len"] for r in rows], dtype=np.int32)),
        **{k: mx.array(np.concatenate([r[k] for r in rows])) for k in ("taps", "soft_ids", "soft_logp")},
    }
    tmp = path.with_suffix(".tmp.safetensors")
    mx.save_safetensors(str(tmp), tensors, metadata={"domains": json.dumps(domains), "text": json.dumps(text)})
    tmp.rename(path)


def load_data(folder: Path) -> list[Sequence_]:
    seqs = []
    for path in sorted(Path(folder).glob("shard-*.safetensors")):
        if ".tmp." in path.name:
            continue
        t, meta = mx.load(str(path), return_metadata=True)
        ids, off, plen, taps = (np.array(t[k]) for k in ("ids", "offsets", "prompt_lens", "taps"))
        soft = [np.array(t[k]) if k in t else None for k in ("soft_ids", "soft_logp")]
        doms, text = json.loads(meta["domains"]), json.loads(meta.get("text", "false"))
        for i in range(len(plen)):
            a, b = off[i], off[i + 1]
            seqs.append(Sequence_(ids[a:b], int(plen[i]), doms[i], taps[a:b],
                                  *(x if x is None else x[a:b] for x in soft), text=text))
    if not seqs:
        raise SpecError(f"no training data in {folder}")
    return seqs


def more_data(folder: Path, target: str, taps: Sequence[int]) -> list[Sequence_]:
    """A --more-data folder's rows: finished data of this target at these taps (else rows would not mix)."""
    meta_path = folder / "meta.json"
    if not meta_path.exists():
        raise SpecError(f"--more-data {folder} holds no distillation data (build it first: --data {folder} --steps 0)")
    meta = json.loads(meta_path.read_text())
    if meta.get("taps") != list(taps) or meta.get("target") != target:
        raise SpecError(f"--more-data {folder} was made for another target or taps ({meta.get('target')}, taps "
                        f"{meta.get('taps')}; this run: {target}, taps {list(taps)})")
    rows = load_data(folder) if any(folder.glob("shard-*.safetensors")) else []
    if len(rows) != meta.get("prompts"):
        raise SpecError(f"--more-data {folder} is unfinished ({len(rows)} of {meta.get('prompts')} prompts): "
                        f"finish it with the command that began it")
    return rows
