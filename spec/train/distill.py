"""Distillation data for head training: the target's own greedy answers to the train-split prompts,
with the tapped hidden rows and the top-K next-token log-probs read off that decoding, cached on disk
in shards so epochs never re-run the target."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Iterator, Sequence

import mlx.core as mx
import numpy as np

from ..errors import SpecError
from ..prompts import DOMAINS, build_sets
from ..target import Target
from .shards import Sequence_, check_meta, load_data, more_data, write_shard  # noqa: F401 (the data's API)


def _chunks(xs: list, n: int) -> Iterator[list]:
    for i in range(0, len(xs), n):
        yield xs[i : i + n]



SOFT_K = 16  # the target's top-K next-token log-probs kept per answer row (soft labels)


def top_k(logits: mx.array) -> tuple[mx.array, mx.array]:
    """The target's SOFT_K most likely next tokens and their log-probs, per row."""
    logp = logits.astype(mx.float32)
    logp = logp - mx.logsumexp(logp, axis=-1, keepdims=True)
    top = mx.argpartition(-logp, SOFT_K - 1, axis=-1)[..., :SOFT_K]
    return top.astype(mx.int32), mx.take_along_axis(logp, top, axis=-1).astype(mx.float16)


def distill(target: Target, prompts: list[list[int]], taps: Sequence[int], max_new_tokens: int) -> list[dict]:
    """The target's greedy answers to a batch of prompts, with each row's taps and (from the prompt's
    last row on) its top-K, read off the decoding itself: no second forward over the sequences.

    Prompts are left-padded into one batch (mlx-lm's BatchKVCache); an answer ends at an eos (kept:
    the head learns to predict it) or at max_new_tokens. Rows before the prompt's last hold no soft label."""
    from mlx_lm.models.cache import BatchKVCache

    B, L = len(prompts), max(len(p) for p in prompts)
    pad = [L - len(p) for p in prompts]
    if target.is_gemma4 and B > 1:
        raise SpecError("Gemma-4 targets distil one prompt at a time")
    cache = target.make_cache() if target.is_gemma4 else [BatchKVCache(pad) for _ in range(target.num_layers)]
    x = mx.array([[0] * n + p for n, p in zip(pad, prompts)])
    answers: list[list[int]] = [[] for _ in prompts]
    done = [False] * B
    hidden_rows = []  # prompt rows before the last get zero soft labels, once
    id_rows, logp_rows = [mx.zeros((B, L - 1, SOFT_K), mx.int32)], [mx.zeros((B, L - 1, SOFT_K), mx.float16)]
    while True:
        logits, hidden = target(x, cache, taps, last_only=True)
        ids, logp = top_k(logits[:, -1:])
        nxt = mx.argmax(logits[:, -1], axis=-1)
        hidden = hidden.astype(mx.float16)
        mx.eval(hidden, ids, logp, nxt)
        hidden_rows.append(hidden)
        id_rows.append(ids)
        logp_rows.append(logp)
        if all(done):
            break
        for i, tok in enumerate(nxt.tolist()):
            if not done[i]:
                answers[i].append(tok)
                done[i] = tok in target.eos_ids or len(answers[i]) == max_new_tokens
        x = nxt[:, None]
    rows = [np.array(mx.concatenate(r, axis=1)) for r in (hidden_rows, id_rows, logp_rows)]
    out = []
    for i, (n, p, a) in enumerate(zip(pad, prompts, answers)):
        end = n + len(p) + len(a)
        out.append({"ids": p + a, "prompt_len": len(p), "taps": rows[0][i, n:end], "soft_ids": rows[1][i, n:end],
                    "soft_logp": rows[2][i, n:end]})
    return out


def build_data(target: Target, out: Path, prompts: list[dict], taps: Sequence[int], *, max_new_tokens: int = 192,
               batch: int = 32, shard_size: int = 128) -> Path:
    """Self-distillation data: greedy answers + taps + soft labels, in shards; finished shards are kept
    (resumable)."""
    from tqdm import tqdm

    out.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256("\n".join(p["prompt"] for p in prompts).encode()).hexdigest()[:16]
    meta = {"target": target.name, "taps": list(taps), "max_new_tokens": max_new_tokens, "prompts": len(prompts),
            "prompts_sha256": digest}
    check_meta(out, meta, ("taps", "max_new_tokens", "prompts", "prompts_sha256"))  # shards are cut by position
    bar = tqdm(total=len(prompts), desc="distilling", unit="prompt")
    for si, shard in enumerate(_chunks(prompts, shard_size)):
        path = out / f"shard-{si:05d}.safetensors"
        if path.exists():
            bar.update(len(shard))
            continue
        rows = []
        for group in _chunks(shard, 1 if target.is_gemma4 else batch):
            rows += distill(target, [target.encode_chat(p["prompt"]) for p in group], taps, max_new_tokens)
            bar.update(len(group))
        write_shard(path, rows, [p["domain"] for p in shard])
    bar.close()
    return out


def train_prompts(text: str) -> list[dict]:
    """--prompts-per-domain: '480' is the first 480 train prompts of every domain (the shipped heads' data);
    'chat=480:1440' the chat ones from 480 to 1440 only. The same stream either way, so slices extend a set."""
    text = str(text).strip()
    try:
        if text.isdigit():
            slices = {d: (0, int(text)) for d in DOMAINS}
        else:
            slices = {}
            for part in filter(None, (x.strip() for x in text.split(","))):
                domain, _, span = part.partition("=")
                start, _, stop = span.rpartition(":")
                slices[domain.strip()] = (int(start or 0), int(stop))
    except ValueError:
        slices = {}
    if not slices or any(d not in DOMAINS or not 0 <= a < b for d, (a, b) in slices.items()):
        raise SpecError(f"--prompts-per-domain is N or domain=[from:]to,... over {', '.join(sorted(DOMAINS))} "
                        f"(e.g. 480 or chat=480:1440), not {text!r}")
    sets = build_sets(max(b for _, b in slices.values()), seed=0, domains=sorted(slices))
    return [p for d in sorted(slices) for p in sets[d]["train"][slices[d][0]:slices[d][1]]]
