"""Distillation data at prefill speed: the target reads text already on this machine in long windows, one
forward each, and every position keeps its taps and its top-K next tokens, as the target's own answers do.

Generating an answer costs one forward per token; reading a 512-token window costs about what generating a
handful of tokens does. The text: the standard library's sources (code), installed packages' and Debian's
documentation (prose), the train-split math problems (math). The held-out split stays clean: a stdlib
function, class or module that a held-out prompt names (`textwrap.dedent`) is left out, by the same
salted hash that splits the prompts, and so is every held-out prompt's text.
"""

from __future__ import annotations

import ast
import gzip
import random
import sysconfig
from pathlib import Path
from typing import Iterator, Sequence

import mlx.core as mx
import numpy as np

from ..errors import SpecError
from ..prompts import build_sets, generate, pick_demo, split_of
from ..target import Target
from .distill import top_k
from .shards import check_meta, write_shard

SOURCES = ("code", "prose", "math")
SKIP_DIRS = {"test", "tests", "idlelib", "tkinter", "turtledemo", "lib2to3", "site-packages", "ensurepip",
             "__pycache__", "pydoc_data", "encodings"}  # tests and data tables read as noise, not code


def held_out(ref: str) -> bool:
    """Whether prompts about this Python object sit on the held-out side (their split key is the name)."""
    return split_of(f"`{ref}`") == "heldout"


def module_chunks(path: Path, modname: str) -> Iterator[str]:
    """A module's top-level functions and classes, each on its own, then the rest of it; those a held-out
    prompt could be about are dropped (a class with any held-out method goes whole)."""
    try:
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source)
    except (SyntaxError, UnicodeDecodeError, ValueError):
        return
    if held_out(modname):
        return
    lines, rest = source.splitlines(keepends=True), []
    taken = set()
    for node in tree.body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        refs = [f"{modname}.{node.name}"]
        if isinstance(node, ast.ClassDef):
            refs += [f"{modname}.{node.name}.{m.name}" for m in node.body if isinstance(m, ast.FunctionDef)]
        start = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1
        taken.update(range(start, node.end_lineno))
        if not any(held_out(r) for r in refs):
            yield "".join(lines[start : node.end_lineno])
    rest = "".join(line for i, line in enumerate(lines) if i not in taken).strip()
    if rest:
        yield rest


def code_documents() -> Iterator[str]:
    """The standard library's Python sources, chunked (module_chunks), in path order."""
    root = Path(sysconfig.get_paths()["stdlib"])
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if SKIP_DIRS & set(rel.parts[:-1]) or rel.name.startswith("test_"):
            continue
        modname = ".".join(rel.with_suffix("").parts).removesuffix(".__init__")
        yield from module_chunks(path, modname)


def prose_documents() -> Iterator[str]:
    """Installed packages' descriptions (their README, as the wheel's METADATA holds it) and Debian's
    READMEs and changelogs' neighbours in /usr/share/doc (plain or gzipped text)."""
    site = Path(sysconfig.get_paths()["purelib"])
    for meta in sorted(site.glob("*.dist-info/METADATA")):
        text = meta.read_text(encoding="utf-8", errors="replace")
        body = text.split("\n\n", 1)[1] if "\n\n" in text else ""
        if len(body) > 400:
            yield body
    for doc in sorted(Path("/usr/share/doc").glob("*/README*")):
        try:
            raw = gzip.decompress(doc.read_bytes()) if doc.suffix == ".gz" else doc.read_bytes()
            text = raw.decode("utf-8")
        except (OSError, UnicodeDecodeError, EOFError):
            continue
        if len(text) > 400:
            yield text


def math_documents(n: int = 4000) -> Iterator[str]:
    """Train-split math word problems, one per document (the held-out ones never appear)."""
    for p in generate("math", n, seed=1):
        if split_of(p["prompt"]) == "train":
            yield p["prompt"]


DOCUMENTS = {"code": code_documents, "prose": prose_documents, "math": math_documents}


def heldout_texts(n_heldout: int = 64) -> list[str]:
    """Every held-out prompt the evaluations and the page use: none of them may occur in the corpus."""
    sets = build_sets(0, seed=0, n_heldout=n_heldout)
    return [p["prompt"] for d in sorted(sets) for p in sets[d]["heldout"] + pick_demo(d)]


def windows(target: Target, source: str, tokens: int, window: int = 512, seed: int = 0) -> list[list[int]]:
    """`tokens` worth of whole windows of `source`'s text: documents in a seeded order, joined by blank
    lines, cut into windows of `window` tokens (the tail shorter than a window is dropped)."""
    docs = list(DOCUMENTS[source]())
    random.Random(f"{seed}/{source}").shuffle(docs)
    banned = heldout_texts()
    out, run = [], []
    for doc in docs:
        if any(b in doc for b in banned):
            continue
        run += target.tokenizer.encode(doc + "\n\n", add_special_tokens=False)
        while len(run) >= window:
            out.append(run[:window])
            run = run[window:]
            if len(out) * window >= tokens:
                return out
    return out


def read(target: Target, batch: list[list[int]], taps: Sequence[int]) -> list[dict]:
    """One forward over equal-length windows: each row's taps and top-K, like distill's rows."""
    x = mx.array(batch)
    logits, hidden = target(x, target.make_cache(), taps)
    ids, logp = top_k(logits)
    hidden = hidden.astype(mx.float16)
    mx.eval(hidden, ids, logp)
    rows = [np.array(a) for a in (hidden, ids, logp)]
    return [{"ids": w, "prompt_len": 0, "taps": rows[0][i], "soft_ids": rows[1][i], "soft_logp": rows[2][i]}
            for i, w in enumerate(batch)]


def build_corpus(target: Target, out: Path, taps: Sequence[int], *, tokens: dict[str, int], window: int = 512,
                 batch: int = 4, shard_size: int = 64, seed: int = 0) -> Path:
    """The corpus data in shards (load with distill.load_data); finished shards are kept (resumable).

    tokens: how many tokens of each source ({"code": 300_000, ...})."""
    from tqdm import tqdm

    bad = sorted(set(tokens) - set(SOURCES))
    if bad:
        raise SpecError(f"unknown corpus source(s) {bad}: the sources are {', '.join(SOURCES)}")
    rows = [(s, w) for s in SOURCES if tokens.get(s) for w in windows(target, s, tokens[s], window, seed)]
    meta = {"target": target.name, "taps": list(taps), "window": window, "tokens": tokens, "seed": seed,
            "windows": len(rows)}
    check_meta(out, meta, ("taps", "window", "tokens", "seed"))
    bar = tqdm(total=len(rows), desc="reading", unit="window")
    for si in range(0, len(rows), shard_size):
        shard = rows[si : si + shard_size]
        path = out / f"shard-{si // shard_size:05d}.safetensors"
        if not path.exists():
            step, read_rows = 1 if target.is_gemma4 else batch, []
            for b in range(0, len(shard), step):
                read_rows += read(target, [w for _, w in shard[b : b + step]], taps)
            write_shard(path, read_rows, [s for s, _ in shard], text=True)
        bar.update(len(shard))
    bar.close()
    return out
