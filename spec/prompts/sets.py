"""Prompt sets for self-distillation and evaluation, made offline by our own code.

The sets and their files: the first n prompts of a domain, the train / held-out sets, the demo picks,
jsonl in and out, and the command line (python -m spec.prompts).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Iterable, Sequence

from .edit_tasks import EDIT, edit_prompts
from .split import normalise, split_of
from .streams import DEMO_KINDS, DOMAINS, Item, stream

DEFAULT_HELDOUT = 200
DEMO_SIZE = 10


def _record(domain: str, text: str) -> dict:
    return {"id": f"{domain}-{hashlib.sha1(text.encode()).hexdigest()[:12]}", "domain": domain, "prompt": text}


def generate(domain: str, n: int, seed: int = 0) -> list[dict]:
    """The first n distinct prompts of a domain (both splits mixed); a larger n extends a smaller one."""
    out = [_record(domain, it.text) for it, _ in zip(stream(domain, seed), range(n))]
    if len(out) < n:
        raise ValueError(f"{domain}: only {len(out)} distinct prompts can be generated, asked for {n}")
    return out


def build_sets(n_per_domain: int, seed: int = 0, n_heldout: int = DEFAULT_HELDOUT,
               domains: Sequence[str] = DOMAINS) -> dict[str, dict[str, list[dict]]]:
    """{domain: {"train": [...n_per_domain], "heldout": [...n_heldout]}} from one seeded stream.

    Held-out = the first n_heldout held-out prompts of the stream, so it does not depend on how many
    train prompts are asked for.
    """
    sets: dict[str, dict[str, list[dict]]] = {}
    for domain in domains:
        want = {"train": n_per_domain, "heldout": n_heldout}
        got: dict[str, list[dict]] = {"train": [], "heldout": []}
        for it in stream(domain, seed):
            side = split_of(it.text)
            if len(got[side]) < want[side]:
                got[side].append(_record(domain, it.text))
            if all(len(got[s]) >= want[s] for s in want):
                break
        for s in want:
            if len(got[s]) < want[s]:
                raise ValueError(f"{domain}: only {len(got[s])} {s} prompts can be generated, asked for {want[s]}")
        sets[domain] = got
    return sets


def pick_demo(domain: str, k: int = DEMO_SIZE, seed: int = 0, max_chars: int = 160) -> list[dict]:
    """Short, varied held-out prompts for the demo and the benchmark: one per task, kinds in turn.

    Drawn only from Python-version-independent kinds, so the committed files can be re-made anywhere;
    of a task's phrasings the shortest is kept.
    """
    best: dict[str, Item] = {}  # normalised key -> shortest phrasing seen
    for n, it in enumerate(stream(domain, seed, kinds=DEMO_KINDS[domain])):
        if n >= 400 * k:
            break
        if len(it.text) <= max_chars and split_of(it.text) == "heldout":
            key = normalise(it.text)
            if key not in best or len(it.text) < len(best[key].text):
                best[key] = it
    by_kind: dict[str, list[str]] = {}
    for it in best.values():  # dicts keep first-seen order, so this is seeded, not arbitrary
        by_kind.setdefault(it.kind, []).append(it.text)
    picked: list[str] = []
    for rnd in range(k):
        for kind in sorted(by_kind):
            if len(picked) < k and rnd < len(by_kind[kind]):
                picked.append(by_kind[kind][rnd])
    return [_record(domain, t) for t in picked]


def write_jsonl(path: str | Path, rows: Iterable[dict]) -> Path:
    """One JSON object per line (UTF-8); parent folders are created."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path


def load_prompts(path: str | Path) -> list[dict]:
    """Read a prompts jsonl file, checking every row has id, domain and prompt."""
    rows = []
    for lineno, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        row = json.loads(line)
        if not isinstance(row, dict) or not all(isinstance(row.get(k), str) for k in ("id", "domain", "prompt")):
            raise ValueError(f"{path}:{lineno}: expected an object with string id, domain and prompt")
        rows.append(row)
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m spec.prompts", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="output folder")
    ap.add_argument("--n", type=int, default=2000, help="train prompts per domain")
    ap.add_argument("--heldout", type=int, default=DEFAULT_HELDOUT, help="held-out prompts per domain")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--domains", default=",".join(DOMAINS), help="comma-separated subset of math,code,chat")
    ap.add_argument("--demo", action="store_true", help="write the demo prompts (OUT/<domain>.jsonl) instead")
    args = ap.parse_args(argv)
    domains = [d.strip() for d in args.domains.split(",") if d.strip()]
    out = Path(args.out)
    try:
        if args.demo:
            for d in domains:
                p = write_jsonl(out / f"{d}.jsonl", pick_demo(d, seed=args.seed))
                print(f"{p}: {DEMO_SIZE} held-out demo prompts")
            p = write_jsonl(out / f"{EDIT}.jsonl", [_record(EDIT, t) for t in edit_prompts()])
            print(f"{p}: the edit prompts (hand-written, never trained on)")
            return 0
        sets = build_sets(args.n, seed=args.seed, n_heldout=args.heldout, domains=domains)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for d, sides in sets.items():
        for side, rows in sides.items():
            p = write_jsonl(out / side / f"{d}.jsonl", rows)
            print(f"{p}: {len(rows)} prompts")
    return 0

