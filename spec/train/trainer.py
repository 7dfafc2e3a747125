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
from mlx.utils import tree_flatten, tree_map, tree_unflatten
from tqdm import tqdm

from ..errors import SpecError
from ..heads.backbone import default_taps
from ..heads.files import save_head
from ..heads.init import head_config, init_from_target, new_head, trainable
from ..heads.registry import load_dflash, load_dspark
from ..heads.vocab import DraftVocab
from ..presets import PRESETS, get_preset, resolve
from ..prompts import build_sets
from ..report import to_markdown
from ..target import Target, load_target
from .corpus import SOURCES, build_corpus
from .curve import accept_curve, compare, evaluate, write_curve
from .distill import SOFT_K, build_data, train_prompts
from .loss import WEIGHTINGS, answer_vocab, block_loss, sample_anchors
from .shards import Sequence_, load_data, more_data

VOCAB_TENSORS = ("embed_tokens.weight", "lm_head.weight")  # DSpark's frozen copies of the target's
WARM_KEYS = ("block_size", "num_hidden_layers", "target_layer_ids", "mask_token_id", "dflash_config", "markov_rank")
INITS = ("target", "random")  # init_from_target or new_head's random weights (or a head folder: a warm start)

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
    weighting: str = "decay"  # one of loss.WEIGHTINGS: how each draft slot's loss counts
    init: str = "target"  # one of INITS, or a head folder to warm-start from
    corpus_share: float = 0.0  # of each step's sequences, the share drawn from the corpus (text windows)
    corpus_steps: int = 0  # the first steps read the corpus alone (pre-training), then the answers
    balance: bool = False  # draw answers domain by domain in equal shares (more of one domain: variety, not weight)
    seed: int = 0
    ckpt_every: int = 200
    eval_every: int = 0
    eval_prompts: int = 2
    eval_tokens: int = 64

    def __post_init__(self) -> None:
        self.gamma = self.gamma or (7.0 if self.kind == "dflash" else 4.0)
        if not 0 <= self.soft <= 1:
            raise SpecError(f"--soft is a weight in [0, 1], not {self.soft}")
        if self.init not in INITS and not Path(self.init).is_dir():
            raise SpecError(f"--init is one of {', '.join(INITS)} or a head folder, not {self.init!r}")
        if self.weighting not in WEIGHTINGS:
            raise SpecError(f"--weighting is one of {', '.join(WEIGHTINGS)}, not {self.weighting!r}")
        if not 0 <= self.corpus_share <= 1:
            raise SpecError(f"--corpus-share is a share in [0, 1], not {self.corpus_share}")

    def corpus_at(self, step: int) -> float:
        """The share of this step's sequences that come from the corpus."""
        return 1.0 if step < self.corpus_steps else self.corpus_share


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


def fit(target: Target, data: list[Sequence_], out: Path, s: TrainSettings, config: dict,
        heldout: list[dict] | None = None, until: int | None = None, corpus: list[Sequence_] = ()) -> Path:
    """Train (resuming from out/checkpoint if present) and export to out/head.

    until: stop after this step (the schedule still spans s.steps): a time-boxed or interrupted run.
    corpus: text windows the target read (spec.train.corpus), drawn as s.corpus_at(step) says."""
    head = start_head(target, config, s)
    opt = optim.AdamW(learning_rate=schedule(s), weight_decay=s.weight_decay)
    ckpt = out / "checkpoint"
    step, log = resume(ckpt, head, opt, config)
    head.draft_ids = answer_vocab(data) if s.answer_vocab else None
    vocab = DraftVocab.of(head, head.draft_ids) if s.answer_vocab else None
    if s.soft and any(q.soft_ids is None for q in data):
        raise SpecError("--soft needs data with soft labels (made since 2026-12-03): build it in a new --data folder")
    if (s.corpus_share or s.corpus_steps) and not corpus:
        raise SpecError("--corpus-share and --corpus-steps need the corpus (--corpus FOLDER)")
    loss_and_grad = nn.value_and_grad(
        head, lambda ids, taps, anchors, greedy, *soft: block_loss(head, ids, taps, anchors, s.gamma, vocab,
                                                                   soft or None, s.soft, greedy, s.weighting))
    bar = tqdm(total=s.steps, initial=step, desc=f"train {s.kind}", unit="step")
    ema: dict[str, float] = {}
    while step < min(s.steps, until or s.steps):
        rng = np.random.default_rng([s.seed, step])  # a resumed run draws the same batches
        for k, v in step_on(head, opt, loss_and_grad, draw(rng, data, corpus, s, step), rng, s).items():
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


def start_head(target: Target, config: dict, s: TrainSettings) -> Any:
    """A new head as s.init says: the target's top, random, or the weights of a trained head (a warm start;
    every trainable tensor must be there, in the same shape). A resumed run loads its checkpoint over it."""
    head = trainable(new_head(target, config, s.seed))
    if s.init == "target":
        init_from_target(head, target)
    elif s.init != "random":
        folder = Path(s.init)
        theirs = json.loads((folder / "config.json").read_text()) if (folder / "config.json").exists() else {}
        differ = [k for k in WARM_KEYS if k in theirs and k in config and theirs[k] != config[k]]
        if differ:
            raise SpecError(f"{folder} was trained with other {', '.join(differ)} than this run asks for "
                            f"({', '.join(f'{k}: {theirs[k]} vs {config[k]}' for k in differ)})")
        weights = {k: v for f in sorted(folder.glob("*.safetensors")) for k, v in mx.load(str(f)).items()}
        mine = dict(tree_flatten(head.trainable_parameters()))
        missing = [k for k, v in mine.items() if k not in weights or weights[k].shape != v.shape]
        if missing:
            raise SpecError(f"{folder} is not a {s.kind} head of this shape: {len(missing)} of {len(mine)} "
                            f"tensors missing or shaped otherwise (e.g. {missing[0]})")
        head.load_weights([(k, weights[k].astype(mx.float32)) for k in mine], strict=False)
    return head


def draw(rng: Any, data: list[Sequence_], corpus: Sequence[Sequence_], s: TrainSettings, step: int) -> list[Sequence_]:
    """This step's sequences: answers, and as many text windows as the corpus share says (on average)."""
    share = s.corpus_at(step) if corpus else 0.0
    if share == 0:
        return answers(rng, data, s.seqs_per_step, s.balance)
    n = int(rng.binomial(s.seqs_per_step, share))
    return ([corpus[int(i)] for i in rng.choice(len(corpus), size=n, replace=False)]
            + answers(rng, data, s.seqs_per_step - n, s.balance))


def answers(rng: Any, data: list[Sequence_], k: int, balance: bool = False) -> list[Sequence_]:
    """k distinct answers, uniformly; balance: each from a domain drawn in equal shares, so a domain with
    three times the answers (--more-data) is seen as often as before, its answers each less often."""
    if not balance:
        return [data[int(i)] for i in rng.choice(len(data), size=k, replace=False)]
    groups: dict[str, list[int]] = {}
    for i, q in enumerate(data):
        groups.setdefault(q.domain, []).append(i)
    names = sorted(groups)
    counts = np.bincount(rng.choice(len(names), size=k), minlength=len(names))
    return [data[groups[d][int(j)]] for d, c in zip(names, counts) if c
            for j in rng.choice(len(groups[d]), size=min(int(c), len(groups[d])), replace=False)]


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


def step_on(head: Any, opt: Any, loss_and_grad: Any, seqs: list[Sequence_], rng: Any, s: TrainSettings) -> dict:
    """One optimizer step over `seqs` (gradients averaged, clipped); its mean loss and training accept
    length ({} when no sequence had an anchor)."""
    grads_acc, stats_acc = None, []
    for seq in seqs:
        anchors = sample_anchors(rng, seq, s.anchors)
        if len(anchors) == 0:
            continue
        soft = (mx.array(seq.soft_ids), mx.array(seq.soft_logp)) if s.soft else ()
        (loss, stats), grads = loss_and_grad(mx.array(seq.ids), mx.array(seq.taps), mx.array(anchors),
                                             mx.array(seq.greedy()), *soft)
        grads_acc = grads if grads_acc is None else tree_map(mx.add, grads_acc, grads)
        stats_acc.append((loss, stats["tau"]))
    if not stats_acc:
        return {}
    grads_acc, _ = optim.clip_grad_norm(tree_map(lambda g: g / len(stats_acc), grads_acc), s.clip)
    opt.update(head, grads_acc)
    mx.eval(head.parameters(), opt.state)
    return {"loss": float(sum(l.item() for l, _ in stats_acc) / len(stats_acc)),
            "tau": float(sum(t.item() for _, t in stats_acc) / len(stats_acc))}


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m spec train", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="pocket", help=f"whose target to train for: {', '.join(PRESETS)}")
    ap.add_argument("--target", default=None, help="target hub id or folder (replaces the preset's; 'pocket' reads "
                                                   "as the pocket preset's)")
    ap.add_argument("--kind", choices=["dflash", "dspark"])
    ap.add_argument("--out", type=Path, help="run folder: checkpoint/, head/, log (with --curve: where to write)")
    ap.add_argument("--data", type=Path, default=None, help="distillation cache (default: <out>/../data)")
    ap.add_argument("--prompts-per-domain", default="400", metavar="N or DOMAIN=[FROM:]TO,...",
                    help="train prompts: the first N of every domain, or slices of some (chat=480:1440: "
                         "more chat answers, built into a --data folder of their own)")
    ap.add_argument("--balance-domains", action="store_true",
                    help="draw each step's answers domain by domain in equal shares (with --more-data of one domain: "
                         "more variety in it, not more weight)")
    ap.add_argument("--more-data", type=Path, action="append", default=[], metavar="FOLDER",
                    help="distillation data built before for the same target and taps (e.g. more answers of one "
                         "domain), read along with --data; repeatable")
    ap.add_argument("--max-new-tokens", type=int, default=192)
    ap.add_argument("--gen-batch", type=int, default=32)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--block-size", type=int, default=None, help="default: DFlash 16, DSpark 7")
    ap.add_argument("--markov-rank", type=int, default=32)
    ap.add_argument("--mask-token-id", type=int, default=None)
    ap.add_argument("--taps", type=str, default=None, help="comma-separated target layer ids")
    ap.add_argument("--ship", type=Path, default=None, help="also write a bf16 copy without vocab tensors here")
    for f in ("steps", "seqs_per_step", "anchors", "ckpt_every", "eval_every", "eval_prompts", "eval_tokens",
              "corpus_steps", "seed"):
        ap.add_argument("--" + f.replace("_", "-"), type=int, default=getattr(TrainSettings, f))
    ap.add_argument("--lr", type=float, default=TrainSettings.lr)
    ap.add_argument("--soft", type=float, default=0.0,
                    help="weight of the target's top-%d distribution in the loss (0: its greedy tokens only)" % SOFT_K)
    ap.add_argument("--init", default=TrainSettings.init, metavar="{target,random,shipped,FOLDER}",
                    help="start from the target's top (default), at random, or from a trained head's weights: "
                         "the preset's shipped head or a head folder")
    ap.add_argument("--until", type=int, default=None,
                    help="stop after this step (the schedule still spans --steps); the same command resumes")
    ap.add_argument("--gamma", type=float, default=0.0,
                    help="slot k's loss weight is exp(-k/gamma) (default: DFlash 7, DSpark 4)")
    ap.add_argument("--weighting", choices=WEIGHTINGS, default=TrainSettings.weighting,
                    help="slot k's loss weight: exp(-k/gamma) (decay), or what it adds to the expected accept length "
                         "under the head's own current odds (accept)")
    ap.add_argument("--corpus", type=Path, default=None,
                    help="text the target reads at prefill speed (spec.train.corpus), built here if missing")
    ap.add_argument("--corpus-tokens", default="code=300000,prose=200000,math=100000",
                    help=f"tokens of each source ({', '.join(SOURCES)}) the corpus holds")
    ap.add_argument("--corpus-share", type=float, default=0.0, help="share of each step's sequences from the corpus")
    ap.add_argument("--window", type=int, default=512, help="tokens per corpus window (one forward each)")
    ap.add_argument("--curve", type=Path, nargs="+", metavar="RUN",
                    help="instead of training: write the held-out accept curve of these run folders to --out")
    ap.add_argument("--compare", nargs="+", metavar="HEAD",
                    help="instead of training: held-out accept per domain of these --kind heads (folders, or "
                         "'shipped'), side by side (--eval-prompts per domain, --eval-tokens each)")
    return ap


def main(argv: list[str]) -> int:
    ap = parser()
    a = ap.parse_args(argv)
    if a.compare:
        return compare_heads(a) if a.kind else ap.error("--compare needs --kind")
    if a.out is None or (a.kind is None and not a.curve):
        ap.error("--out is required, and --kind unless --curve is given")
    if a.curve:
        curve = accept_curve(a.curve)
        paths = write_curve(curve, a.out)
        print(paths[0].read_text() + "written: " + ", ".join(map(str, paths)))
        return 0
    return train(a)


def shipped_or(a: argparse.Namespace, ref: str) -> str:
    """'shipped' is the preset's head of this kind (the pocket's set up from assets/); anything else as is."""
    return resolve(getattr(get_preset(a.preset), a.kind), a.kind) if ref == "shipped" else ref


def target_of(a: argparse.Namespace) -> Target:
    ref = a.target if a.target not in (None, "pocket") else get_preset(a.target or a.preset).target
    return load_target(resolve(ref, "target"))


def heldout_prompts(per_domain: int) -> list[dict]:
    sets = build_sets(0, seed=0, n_heldout=max(per_domain, 1))
    return [p for d in sorted(sets) for p in sets[d]["heldout"][:per_domain]]


def compare_heads(a: argparse.Namespace) -> int:
    """Held-out accept per domain of several heads of one kind, measured one after another on the same prompts."""
    target, load = target_of(a), (load_dflash if a.kind == "dflash" else load_dspark)
    heads = [(ref, load(shipped_or(a, ref), target)) for ref in a.compare]
    table = compare(target, heads, heldout_prompts(a.eval_prompts), a.eval_tokens)
    print(to_markdown(table))
    return 0


def train(a: argparse.Namespace) -> int:
    """The distillation data (built once, cached), then the fit, then the shipped copy if asked."""
    s = TrainSettings(kind=a.kind, steps=a.steps, lr=a.lr, gamma=a.gamma, seqs_per_step=a.seqs_per_step,
                      anchors=a.anchors, ckpt_every=a.ckpt_every, eval_every=a.eval_every, eval_prompts=a.eval_prompts,
                      eval_tokens=a.eval_tokens, seed=a.seed, soft=a.soft, init=shipped_or(a, a.init),
                      corpus_share=a.corpus_share, corpus_steps=a.corpus_steps,
                      weighting=a.weighting, balance=a.balance_domains)  # bad settings fail here, before any work
    prompts = train_prompts(a.prompts_per_domain)
    target = target_of(a)
    taps = [int(x) for x in a.taps.split(",")] if a.taps else default_taps(target.num_layers)
    config = head_config(target, a.kind, layers=a.layers, block_size=a.block_size, taps=taps,
                         mask_token_id=a.mask_token_id, markov_rank=a.markov_rank)
    more = [q for f in a.more_data for q in more_data(f, target.name, taps)]  # a bad folder fails before the data
    data_dir = a.data or a.out.parent / "data"
    build_data(target, data_dir, prompts, taps, max_new_tokens=a.max_new_tokens, batch=a.gen_batch)
    if a.corpus:
        build_corpus(target, a.corpus, taps, tokens=corpus_tokens(a.corpus_tokens), window=a.window)
    if a.steps == 0:
        print(f"training data in {data_dir}" + (f" and {a.corpus}" if a.corpus else "") + " (--steps 0: no training)")
        return 0
    corpus = load_data(a.corpus) if a.corpus else []
    folder = fit(target, load_data(data_dir) + more, a.out, s, config, heldout_prompts(a.eval_prompts), a.until, corpus)
    print(f"head written to {folder}")
    if a.ship:
        head = (load_dflash if a.kind == "dflash" else load_dspark)(str(folder), target)
        print(f"shipped copy written to {export_head(head, config, a.ship, ship=True)}")
    return 0


def corpus_tokens(text: str) -> dict[str, int]:
    """'code=300000,prose=200000' -> {"code": 300000, "prose": 200000}."""
    try:
        return {k.strip(): int(v) for k, v in (part.split("=") for part in text.split(",") if part.strip())}
    except ValueError:
        raise SpecError(f"--corpus-tokens is source=tokens,... (e.g. code=300000,prose=200000), not {text!r}") from None
