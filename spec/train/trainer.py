"""Train DFlash and DSpark heads for any mlx-lm target, on MLX, by self-distillation.

Data: the target's own greedy answers to offline prompt sets (train split only), with the tapped
hidden states and top-K next-token log-probs read off that decoding and cached on disk once, so
epochs never re-run the target. Training: blocks anchored at random answer positions, many blocks
sharing one sequence's context in a single masked pass; the loss favours early slots (they decide
the accept length) and can mix in the target's distribution (--soft). Output: the published formats.

  python -m spec train --target pocket --kind dflash --out runs/dflash
  python -m spec train --curve runs/dflash runs/dspark --out assets/training   # accept vs steps
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

import mlx.core as mx
import mlx.nn as nn
import mlx.optimizers as optim
import numpy as np
from mlx.utils import tree_flatten, tree_unflatten
from tqdm import tqdm

from ..errors import SpecError
from ..heads.backbone import block_embed_ids, default_taps, training_mask
from ..heads.dspark import DSparkDraftModel
from ..heads.files import save_head
from ..heads.init import head_config, init_from_target, new_head, trainable
from ..heads.registry import load_dflash, load_dspark
from ..heads.vocab import DraftVocab
from ..loop.calibrate import build_engine
from ..presets import PRESETS, get_preset, resolve
from ..prompts import build_sets
from ..report import to_markdown
from ..target import Target, load_target, softcapped
from .distill import SOFT_K, Sequence_, build_data, load_data

VOCAB_TENSORS = ("embed_tokens.weight", "lm_head.weight")  # DSpark's frozen copies of the target's
INITS = ("target", "random")  # how a new head starts: init_from_target, or new_head's random weights






# -- the loss -------------------------------------------------------------------------------------

def answer_vocab(data: list["Sequence_"]) -> np.ndarray:
    """Every token the target answered with: the softmax rows training scores (exact for every label;
    49152 x 576 full rows would be most of a step), shipped with the head as its draft vocabulary."""
    return np.unique(np.concatenate([s.ids[s.prompt_len:] for s in data]))


def block_loss(head, ids: mx.array, taps: mx.array, anchors: mx.array, gamma: float,
               vocab: DraftVocab | None = None, soft: tuple[mx.array, mx.array] | None = None,
               soft_weight: float = 0.0) -> tuple[mx.array, dict]:
    """Weighted CE over every draft slot of blocks anchored at `anchors` (+ DSpark confidence BCE).

    Draft i of a block anchored at a predicts token a+1+i (DFlash reads it from slot i+1, DSpark from
    slot i). soft = the target's top-K (ids, log-probs) per position: with soft_weight w the CE is
    (1 - w) * CE(greedy token) + w * CE(target's distribution), which also says how close the runners-up
    were. Returns (loss, stats) with the running accept-length estimate of greedy drafting."""
    cfg = head.config
    T, bs, d, s0 = ids.shape[0], cfg.block_size, head.max_drafts, head.first_draft_slot
    ctx = head.fuse(taps[None].astype(mx.float32))
    block = head.embed(block_embed_ids(ids[anchors], bs, cfg.mask_token_id))
    h = head.train_blocks(block, ctx, anchors, training_mask(anchors, T, bs))[:, s0 : s0 + d]
    pos = anchors[:, None] + 1 + mx.arange(d)[None, :]
    valid = pos < T
    labels = ids[mx.minimum(pos, T - 1)]
    prev = ids[mx.minimum(pos - 1, T - 1)]
    dspark = isinstance(head, DSparkDraftModel)
    if vocab is None:
        logits = head.logits(h)
        if dspark and head.has_markov:
            logits = logits + head.markov_bias(prev)
    else:
        logits = softcapped(h @ vocab.weight.T, head.softcap if dspark else head.target.softcap)
        if dspark and head.has_markov:  # the live Markov weights (vocab.markov is a frozen copy)
            logits = logits + head.markov_head.markov_w1(prev) @ head.markov_head.markov_w2.weight[vocab.ids].T
        labels = vocab.index_of(labels)
    w = mx.exp(-mx.arange(d) / gamma)[None, :] * valid
    if soft is not None and soft_weight:  # one log-softmax serves both terms
        logq = logits - mx.logsumexp(logits, axis=-1, keepdims=True)
        hard = -mx.take_along_axis(logq, labels[..., None].astype(mx.int32), axis=-1)[..., 0]
        ce = (1 - soft_weight) * hard + soft_weight * soft_cross_entropy(logq, pos, soft, vocab)
    else:
        ce = nn.losses.cross_entropy(logits, labels)
    loss = (ce * w).sum() / w.sum()
    hit = (mx.argmax(logits, axis=-1) == labels) & valid
    if dspark and head.has_confidence:
        feats = h if not cfg.confidence_with_markov else mx.concatenate([h, head.markov_head.markov_w1(prev)], axis=-1)
        conf = head.confidence_head(feats)
        bce = nn.losses.binary_cross_entropy(conf, mx.stop_gradient(hit.astype(mx.float32)), with_logits=True,
                                             reduction="none")
        loss = loss + (bce * w).sum() / w.sum()
    accepted = mx.cumprod(hit.astype(mx.int32), axis=1).sum(axis=1)
    return loss, {"tau": (accepted + 1).astype(mx.float32).mean(), "ce": (ce * w).sum() / w.sum()}


def soft_cross_entropy(logq: mx.array, pos: mx.array, soft: tuple[mx.array, mx.array],
                       vocab: DraftVocab | None) -> mx.array:
    """-sum_k p_k log q(k) (logq: the head's log-softmax) against the target's top-K distribution for each
    label position `pos` (the target's row pos - 1); runners-up outside the draft vocabulary are dropped,
    p renormalised."""
    rows = mx.clip(pos - 1, 0, soft[0].shape[0] - 1)
    tok, p = soft[0][rows], mx.exp(soft[1][rows].astype(mx.float32))
    if vocab is not None:
        idx = mx.minimum(vocab.index_of(tok), vocab.ids.shape[0] - 1)
        p = p * (vocab.ids[idx] == tok.astype(mx.uint32))
        tok = idx
    return -(p * mx.take_along_axis(logq, tok.astype(mx.int32), axis=-1)).sum(-1) / mx.maximum(p.sum(-1), 1e-6)


def sample_anchors(rng: np.random.Generator, seq: Sequence_, n: int) -> np.ndarray:
    """Anchors whose next token is part of the answer (the prompt is context, never a label)."""
    lo, hi = max(0, seq.prompt_len - 1), len(seq.ids) - 1
    cand = np.arange(lo, hi)
    if len(cand) == 0:
        return cand
    return np.sort(rng.choice(cand, size=min(n, len(cand)), replace=False))


# -- the run --------------------------------------------------------------------------------------

@dataclass
class TrainSettings:
    kind: str = "dflash"
    steps: int = 2000
    lr: float = 1e-3
    warmup: float = 0.04
    weight_decay: float = 0.01
    seqs_per_step: int = 2
    anchors: int = 24
    gamma: float = 0.0  # 0 = the kind's default (DFlash 7, DSpark 4)
    clip: float = 1.0
    answer_vocab: bool = True  # softmax over the answers' vocabulary only (see answer_vocab)
    soft: float = 0.0  # weight of the target's top-K distribution in the CE (0 = greedy tokens only)
    init: str = "target"  # one of INITS
    seed: int = 0
    ckpt_every: int = 200
    eval_every: int = 0
    eval_prompts: int = 2
    eval_tokens: int = 64

    def __post_init__(self) -> None:
        self.gamma = self.gamma or (7.0 if self.kind == "dflash" else 4.0)
        if not 0 <= self.soft <= 1:
            raise SpecError(f"--soft is a weight in [0, 1], not {self.soft}")
        if self.init not in INITS:
            raise SpecError(f"--init is one of {', '.join(INITS)}, not {self.init!r}")


def schedule(s: TrainSettings):
    warm = max(1, int(s.steps * s.warmup))
    return optim.join_schedules([optim.linear_schedule(s.lr * 0.01, s.lr, warm),
                                 optim.cosine_decay(s.lr, max(1, s.steps - warm), s.lr * 0.1)], [warm])


def save_checkpoint(ckpt: Path, head, opt, step: int, log: list[dict], s: TrainSettings, config: dict) -> None:
    """Weights, optimizer state, step and log, written to a temp folder and swapped in atomically."""
    tmp = ckpt.with_name(ckpt.name + ".tmp")
    tmp.mkdir(parents=True, exist_ok=True)
    mx.save_safetensors(str(tmp / "weights.safetensors"), dict(tree_flatten(head.trainable_parameters())))
    mx.save_safetensors(str(tmp / "optimizer.safetensors"), dict(tree_flatten(opt.state)))
    (tmp / "state.json").write_text(json.dumps({"step": step, "log": log, "settings": asdict(s), "config": config}))
    old = ckpt.with_name(ckpt.name + ".old")
    if ckpt.exists():
        ckpt.rename(old)
    tmp.rename(ckpt)
    if old.exists():
        for f in old.iterdir():
            f.unlink()
        old.rmdir()


def export_head(head, config: dict, folder: Path, *, ship: bool = False) -> Path:
    """Published format (f32, complete); ship=True: bf16 without the vocab copies (for assets/)."""
    weights = dict(tree_flatten(head.parameters()))
    if ship:
        weights = {k: v.astype(mx.bfloat16) for k, v in weights.items() if k not in VOCAB_TENSORS}
    return save_head(folder, config, weights, head.draft_ids)


def evaluate(target: Target, head, prompts: list[dict], max_new_tokens: int = 96, max_draft: int = 0) -> dict[str, float]:
    """Mean accept length per domain at T = 0 on the given (held-out) prompts."""
    out: dict[str, list[int]] = {}
    eng = build_engine(target, head, max_draft)
    for p in prompts:
        res = eng.generate(p["prompt"], max_new_tokens)
        out.setdefault(p["domain"], []).extend(res.accept_lengths)
    return {d: round(sum(v) / len(v), 3) for d, v in out.items()}


def fit(target: Target, data: list[Sequence_], out: Path, s: TrainSettings, config: dict,
        heldout: list[dict] | None = None, until: int | None = None) -> Path:
    """Train (resuming from out/checkpoint if present) and export to out/head.

    until: stop after this step (the schedule still spans s.steps): a time-boxed or interrupted run."""
    head = trainable(new_head(target, config, s.seed))
    if s.init == "target":
        init_from_target(head, target)  # a resumed run loads its checkpoint over this
    opt = optim.AdamW(learning_rate=schedule(s), weight_decay=s.weight_decay)
    ckpt = out / "checkpoint"
    step, log = resume(ckpt, head, opt, config)
    head.draft_ids = answer_vocab(data) if s.answer_vocab else None
    vocab = DraftVocab.of(head, head.draft_ids) if s.answer_vocab else None
    if s.soft and any(q.soft_ids is None for q in data):
        raise SpecError("--soft needs data with soft labels (made since 2026-12-03): build it in a new --data folder")
    loss_and_grad = nn.value_and_grad(
        head, lambda ids, taps, anchors, *soft: block_loss(head, ids, taps, anchors, s.gamma, vocab,
                                                           soft or None, s.soft))
    bar = tqdm(total=s.steps, initial=step, desc=f"train {s.kind}", unit="step")
    ema: dict[str, float] = {}
    while step < min(s.steps, until or s.steps):
        rng = np.random.default_rng([s.seed, step])  # a resumed run draws the same batches
        for k, v in step_on(head, opt, loss_and_grad, data, rng, s).items():
            ema[k] = v if k not in ema else 0.98 * ema[k] + 0.02 * v
        step += 1
        bar.update(1)
        bar.set_postfix(loss=f"{ema.get('loss', 0):.3f}", accept=f"{ema.get('tau', 0):.2f}")
        if step % 10 == 0:
            log.append({"step": step, "loss": round(ema["loss"], 4), "train_accept": round(ema["tau"], 3),
                        "time": time.time()})
        if s.eval_every and heldout and (step % s.eval_every == 0 or step == s.steps):
            head.use_draft_vocab(head.draft_ids)  # as shipped: drafts over the answer vocabulary
            log.append({"step": step, "heldout_accept": evaluate(target, head, heldout, s.eval_tokens)})
            bar.write(f"step {step}: held-out accept {log[-1]['heldout_accept']}")
        if step % s.ckpt_every == 0 or step in (s.steps, until):
            save_checkpoint(ckpt, head, opt, step, log, s, config)
    bar.close()
    return export_head(head, config, out / "head")

def resume(ckpt: Path, head: Any, opt: Any, config: dict) -> tuple[int, list]:
    """(step, log) of the checkpoint in `ckpt`, its weights and optimizer state loaded; (0, []) if none."""
    if not (ckpt / "state.json").exists():
        return 0, []
    state = json.loads((ckpt / "state.json").read_text())
    if state["config"] != config:
        raise SpecError(f"{ckpt} was made with another head config; use another --out")
    head.load_weights(list(mx.load(str(ckpt / "weights.safetensors")).items()), strict=False)
    opt.init(head.trainable_parameters())
    opt.state = tree_unflatten(list(mx.load(str(ckpt / "optimizer.safetensors")).items()))
    return state["step"], state["log"]


def step_on(head: Any, opt: Any, loss_and_grad: Any, data: list[Sequence_], rng: Any, s: TrainSettings) -> dict:
    """One optimizer step over s.seqs_per_step sequences (gradients averaged, clipped); its mean loss and
    training accept length ({} when no sequence had an anchor)."""
    grads_acc, stats_acc = None, []
    for i in rng.choice(len(data), size=s.seqs_per_step, replace=False):
        seq = data[int(i)]
        anchors = sample_anchors(rng, seq, s.anchors)
        if len(anchors) == 0:
            continue
        soft = (mx.array(seq.soft_ids), mx.array(seq.soft_logp)) if s.soft else ()
        (loss, stats), grads = loss_and_grad(mx.array(seq.ids), mx.array(seq.taps), mx.array(anchors), *soft)
        grads_acc = grads if grads_acc is None else tree_map_add(grads_acc, grads)
        stats_acc.append((loss, stats["tau"]))
    if not stats_acc:
        return {}
    grads_acc, _ = optim.clip_grad_norm(tree_map_scale(grads_acc, 1.0 / len(stats_acc)), s.clip)
    opt.update(head, grads_acc)
    mx.eval(head.parameters(), opt.state)
    return {"loss": float(sum(l.item() for l, _ in stats_acc) / len(stats_acc)),
            "tau": float(sum(t.item() for _, t in stats_acc) / len(stats_acc))}



def accept_curve(runs: Sequence[Path]) -> "Any":
    """Held-out accept length vs training step (and minutes trained) of run folders, from their logs."""
    import pandas as pd

    rows = []
    for run in runs:
        state = json.loads((Path(run) / "checkpoint" / "state.json").read_text())
        kind, log = state["settings"]["kind"], state["log"]
        clock = {e["step"]: e["time"] for e in log if "time" in e}
        start = min(clock.values()) if clock else 0.0
        for e in log:
            if "heldout_accept" in e:
                t = clock.get(e["step"], max((v for k, v in clock.items() if k <= e["step"]), default=start))
                rows += [{"kind": kind, "step": e["step"], "minutes": round((t - start) / 60, 1), "domain": d,
                          "accept": a} for d, a in e["heldout_accept"].items()]
    if not rows:
        raise SpecError("no held-out evaluations in these runs' logs (train with --eval-every N)")
    return pd.DataFrame(rows)


def write_curve(curve: "Any", out: Path) -> list[Path]:
    """curve.md (step x kind/domain table) and curve.png (accept length vs step) in `out`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt


    out.mkdir(parents=True, exist_ok=True)
    wide = curve.assign(col=curve["kind"].map({"dflash": "DFlash", "dspark": "DSpark"}) + " " + curve["domain"])
    wide = wide.pivot_table(index="step", columns="col", values="accept").round(2)
    wide.columns.name = None
    paths = [out / "curve.md", out / "curve.png"]
    paths[0].write_text(to_markdown(wide.reset_index().fillna("")) + "\n")
    ax = wide.plot(figsize=(8, 4.5), marker="o", style=["-" if c.startswith("DFlash") else "--" for c in wide])
    ax.set_xlabel("training step")
    ax.set_ylabel("held-out accept length (T = 0)")
    plt.tight_layout()
    plt.savefig(paths[1], dpi=120)
    plt.close()
    return paths


def tree_map_add(a, b):
    from mlx.utils import tree_map

    return tree_map(lambda x, y: x + y, a, b)


def tree_map_scale(a, f: float):
    from mlx.utils import tree_map

    return tree_map(lambda x: x * f, a)


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m spec train", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="pocket", help=f"whose target to train for: {', '.join(PRESETS)}")
    ap.add_argument("--target", default=None, help="target hub id or folder (replaces the preset's; 'pocket' reads "
                                                   "as the pocket preset's)")
    ap.add_argument("--kind", choices=["dflash", "dspark"])
    ap.add_argument("--out", type=Path, help="run folder: checkpoint/, head/, log (with --curve: where to write)")
    ap.add_argument("--data", type=Path, default=None, help="distillation cache (default: <out>/../data)")
    ap.add_argument("--prompts-per-domain", type=int, default=400)
    ap.add_argument("--max-new-tokens", type=int, default=192)
    ap.add_argument("--gen-batch", type=int, default=32)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--block-size", type=int, default=None, help="default: DFlash 16, DSpark 7")
    ap.add_argument("--markov-rank", type=int, default=32)
    ap.add_argument("--mask-token-id", type=int, default=None)
    ap.add_argument("--taps", type=str, default=None, help="comma-separated target layer ids")
    ap.add_argument("--ship", type=Path, default=None, help="also write a bf16 copy without vocab tensors here")
    for f in ("steps", "seqs_per_step", "anchors", "ckpt_every", "eval_every", "eval_prompts", "seed"):
        ap.add_argument("--" + f.replace("_", "-"), type=int, default=getattr(TrainSettings, f))
    ap.add_argument("--lr", type=float, default=TrainSettings.lr)
    ap.add_argument("--soft", type=float, default=0.0,
                    help="weight of the target's top-%d distribution in the loss (0: its greedy tokens only)" % SOFT_K)
    ap.add_argument("--init", choices=INITS, default=TrainSettings.init,
                    help="start the head's layers, final norm and fc from the target's top (default) or at random")
    ap.add_argument("--until", type=int, default=None,
                    help="stop after this step (the schedule still spans --steps); the same command resumes")
    ap.add_argument("--gamma", type=float, default=0.0,
                    help="slot k's loss weight is exp(-k/gamma) (default: DFlash 7, DSpark 4)")
    ap.add_argument("--curve", type=Path, nargs="+", metavar="RUN",
                    help="instead of training: write the held-out accept curve of these run folders to --out")
    return ap


def main(argv: list[str]) -> int:
    ap = parser()
    a = ap.parse_args(argv)
    if a.out is None or (a.kind is None and not a.curve):
        ap.error("--out is required, and --kind unless --curve is given")
    if a.curve:
        curve = accept_curve(a.curve)
        paths = write_curve(curve, a.out)
        print(paths[0].read_text() + "written: " + ", ".join(map(str, paths)))
        return 0
    return train(a)


def train(a: argparse.Namespace) -> int:
    """The distillation data (built once, cached), then the fit, then the shipped copy if asked."""
    s = TrainSettings(kind=a.kind, steps=a.steps, lr=a.lr, gamma=a.gamma, seqs_per_step=a.seqs_per_step,
                      anchors=a.anchors, ckpt_every=a.ckpt_every, eval_every=a.eval_every,
                      eval_prompts=a.eval_prompts, seed=a.seed, soft=a.soft, init=a.init)  # bad settings fail before any work

    ref = a.target if a.target not in (None, "pocket") else get_preset(a.target or a.preset).target
    target = load_target(resolve(ref, "target"))
    taps = [int(x) for x in a.taps.split(",")] if a.taps else default_taps(target.num_layers)
    config = head_config(target, a.kind, layers=a.layers, block_size=a.block_size, taps=taps,
                         mask_token_id=a.mask_token_id, markov_rank=a.markov_rank)
    sets = build_sets(a.prompts_per_domain, seed=0)
    train_prompts = [p for d in sorted(sets) for p in sets[d]["train"]]
    heldout = [p for d in sorted(sets) for p in sets[d]["heldout"][: a.eval_prompts]]
    data_dir = a.data or a.out.parent / "data"
    build_data(target, data_dir, train_prompts, taps, max_new_tokens=a.max_new_tokens, batch=a.gen_batch)
    if a.steps == 0:
        print(f"distillation data in {data_dir} (--steps 0: no training)")
        return 0
    data = load_data(data_dir)
    folder = fit(target, data, a.out, s, config, heldout, until=a.until)
    print(f"head written to {folder}")
    if a.ship:
        head = (load_dflash if a.kind == "dflash" else load_dspark)(str(folder), target)
        print(f"shipped copy written to {export_head(head, config, a.ship, ship=True)}")
    return 0
