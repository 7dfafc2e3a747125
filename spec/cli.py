"""`python -m spec`: one generation from the command line, or a sub-command (bench, train, race)."""

from __future__ import annotations

import argparse
import importlib
import json
import platform
import sys

import mlx.core as mx

from .cpu import blas_info
from .errors import SpecError, deprecated, flag
from .heads.lookup import LookupConfig, PromptLookup
from .heads.registry import load_dflash, load_dspark
from .loop.calibrate import build_engine
from .loop.engine import draft_length, tree_setting
from .loop.verify import Sampling
from .presets import add_model_flags, get_preset, resolve
from .progress import Console
from .target import load_target

SUBCOMMANDS = {"bench": "spec.bench.main", "train": "spec.train.trainer", "race": "spec.race.cli",
               "prompts": "spec.prompts"}
EXAMPLE = "Write a Python function that checks whether a string is a palindrome."


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m spec", description=__doc__,
                                 epilog=f"sub-commands: {', '.join(SUBCOMMANDS)} (python -m spec bench --help)")
    ap.add_argument("--mode", choices=["dspark", "dflash", "lookup", "baseline"], default="dflash",
                    help="the drafter: a trained head (dspark, dflash), prompt lookup (no head), or none")
    add_model_flags(ap)
    ap.add_argument("--family", help=argparse.SUPPRESS)  # the old names of --preset, --target and the head's flag
    ap.add_argument("--model", help=argparse.SUPPRESS)
    ap.add_argument("--drafter", help=argparse.SUPPRESS)
    ap.add_argument("--max-draft", default="0", type=flag(draft_length),
                    help="drafts verified per round (dflash: 0 = full block; dspark: 0 = block_size), or auto: "
                         "chosen every round from the measured costs and the acceptance so far")
    ap.add_argument("--lookup-branch", action=argparse.BooleanOptionalAction, default=True,
                    help="a head's rounds also verify what prompt lookup copies from the text, as one more branch "
                         "of their tree (auto grafts as many of its tokens as pay; a target that cannot branch: off)")
    ap.add_argument("--tree", type=flag(tree_setting), default="auto", metavar="N",
                    help="verify at most N drafts as a tree, --max-draft deep (0 = chains only; auto, the default: "
                         "chains at a fixed --max-draft, trees up to the head's block with --max-draft auto); a "
                         "target that fails the tree check at load verifies chains and says why")
    ap.add_argument("--confidence-threshold", type=float, default=0.0, help="DSpark: cut drafts below it (0 = off)")
    ap.add_argument("--no-markov", action="store_true",
                    help="DSpark: draft every slot from the backbone alone, without the Markov head (an ablation)")
    ap.add_argument("--lookup-ngram", default=f"{LookupConfig.min_ngram}-{LookupConfig.max_ngram}", metavar="MIN-MAX",
                    help="lookup: the n-gram sizes matched, longest first")
    ap.add_argument("--drafter-bits", type=int, choices=[0, 4, 8], default=None,
                    help="quantize the head on load (default: 4 on an Apple GPU, 0 on CPU)")
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--top-p", type=float, default=1.0)
    ap.add_argument("--top-k", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--prompt", default=EXAMPLE)
    ap.add_argument("--no-chat", action="store_true", help="feed the prompt raw, without the chat template")
    ap.add_argument("--thinking", action="store_true",
                    help="let the chat template think (Qwen3's <think>; off, as the heads are benchmarked)")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of streaming text")
    return ap


def device_line() -> str:
    dev = "GPU (Metal)" if mx.default_device() == mx.gpu else f"CPU ({platform.machine()})"
    return f"device {dev}, BLAS {blas_info()}, mlx {mx.__version__}"


def upgrade(args: argparse.Namespace) -> argparse.Namespace:
    """The old flags (--family, --model, --drafter) read as today's, with a deprecation line each."""
    for old, new in (("family", "preset"), ("model", "target"), ("drafter", args.mode)):
        if getattr(args, old) is not None:
            deprecated(f"--{old}", f"--{new}")
            if new != "baseline":
                setattr(args, new, getattr(args, old))
    return args


def run(args: argparse.Namespace) -> int:
    args = upgrade(args)
    progress = Console()  # a first start converts the pocket target and measures auto's costs: say so
    target_ref, head_ref = refs(args, progress)
    target = load_target(target_ref)
    drafter = None
    if args.mode == "lookup":
        drafter, head_ref = PromptLookup(lookup_config(args.lookup_ngram)).bind(target), f"lookup {args.lookup_ngram}"
    elif args.mode != "baseline":
        drafter = (load_dflash if args.mode == "dflash" else load_dspark)(head_ref, target,
                                                                          drafter_bits=args.drafter_bits)
    engine = build_engine(target, drafter, args.max_draft, progress, confidence_threshold=args.confidence_threshold,
                          sampling=Sampling(args.temperature, args.top_p, args.top_k, args.seed),
                          thinking=args.thinking, tree=args.tree, markov=not args.no_markov,
                          lookup_branch=args.lookup_branch)
    if engine.tree_note:
        print(f"# {engine.tree_note}", file=sys.stderr)
    prompt = list(target.tokenizer.encode(args.prompt)) if args.no_chat else args.prompt
    gen = engine.start(prompt, args.max_new_tokens)
    if not args.json:
        print(f"# {engine.name} | target {target_ref} | head {head_ref or '-'} | {device_line()}", file=sys.stderr)
    for r in gen:
        if not args.json:
            print(r.text, end="", flush=True)
    res = gen.result
    if args.json:
        out = res.summary()
        out.pop("engine")
        print(json.dumps(out))
    else:
        nodes = (f" | {sum(res.drafted) / max(1, res.rounds):.1f} drafts verified per round"
                 if engine.tree or engine.lookup_branch else "")
        print(f"\n# accept {res.mean_accept:.2f}{nodes} | {res.decode_tokens_per_sec:.1f} tok/s decode, "
              f"{res.tokens_per_sec:.1f} tok/s end-to-end | {len(res.token_ids)} tokens in {res.rounds} rounds | "
              f"{res.finish_reason}")
    return 0


def refs(args: argparse.Namespace, progress: Console) -> tuple[str, str | None]:
    """(the target, the head) as named or as the preset has them (no head for baseline and lookup)."""
    trained = args.mode in ("dspark", "dflash")
    head = getattr(args, args.mode, None) if trained else None
    preset = get_preset(args.preset) if not (args.target and (head or not trained)) else None
    if trained and not (head or getattr(preset, args.mode)):
        raise SpecError(f"preset {preset.name!r} has no {args.mode} head: {preset.missing or 'none named'}; "
                        f"use the other --mode, or name a head with --{args.mode}")
    target_ref = args.target or resolve(preset.target, "target", progress)
    return target_ref, (head or resolve(getattr(preset, args.mode), args.mode, progress)) if trained else None


def lookup_config(text: str) -> LookupConfig:
    """'1-4' -> n-grams of 4 tokens down to 1."""
    try:
        low, high = (int(x) for x in text.split("-"))
    except ValueError:
        raise SpecError(f"--lookup-ngram is MIN-MAX (e.g. 1-4), not {text!r}") from None
    return LookupConfig(max_ngram=high, min_ngram=low)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv and argv[0] in SUBCOMMANDS:
            return importlib.import_module(SUBCOMMANDS[argv[0]]).main(argv[1:])
        return run(parser().parse_args(argv))
    except SpecError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
