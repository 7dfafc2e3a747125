"""Streams: each domain is a weighted interleaving of its kinds, each kind an iterator with its own
seeded rng, so the order is fixed by the seed and a longer run extends a shorter one (prefix-stable).

A kind's name seeds its rng (f"{domain}:{kind}:{seed}"): renaming a kind changes its prompts.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

from .chat_tasks import pools as chat_pools
from .code_tasks import CLASS_FRAMES, CLASS_TASKS, CLASSIC_FRAMES, CLASSIC_TASKS, snippet, stdlib_prompts
from .data import fill
from .math_problems import SIMPLE, TEMPLATES
from .math_problems import prompt as math_prompt
from .split import normalise

DOMAINS = ("math", "code", "chat")

KindFactory = Callable[[random.Random], Iterator[str]]


def _shuffled(pool: Callable[[], list[str]]) -> KindFactory:
    def make(r: random.Random) -> Iterator[str]:
        items = sorted(set(pool()))
        r.shuffle(items)
        return iter(items)
    return make


def _forever(draw: Callable[[random.Random], str]) -> KindFactory:
    def make(r: random.Random) -> Iterator[str]:
        while True:
            yield draw(r)
    return make


def _math_kinds() -> dict[str, tuple[float, KindFactory]]:
    return {name: (1.0, _forever(lambda r, name=name: math_prompt(r, name))) for name in TEMPLATES}


def _stdlib_pool(kind: str) -> Callable[[], list[str]]:
    return lambda: stdlib_prompts()[kind]


def _code_kinds() -> dict[str, tuple[float, KindFactory]]:
    return {
        "classic": (0.30, _shuffled(lambda: fill(CLASSIC_FRAMES, CLASSIC_TASKS))),
        "class": (0.05, _shuffled(lambda: fill(CLASS_FRAMES, CLASS_TASKS))),
        "snippet": (0.15, _forever(snippet)),
        "stdlib_explain": (0.15, _shuffled(_stdlib_pool("stdlib_explain"))),
        "stdlib_write": (0.15, _shuffled(_stdlib_pool("stdlib_write"))),
        "stdlib_implement": (0.10, _shuffled(_stdlib_pool("stdlib_implement"))),
        "stdlib_use": (0.10, _shuffled(_stdlib_pool("stdlib_use"))),
    }


def _chat_kinds() -> dict[str, tuple[float, KindFactory]]:
    weights = {"concept": 0.18, "compare": 0.05, "advice": 0.09, "howto": 0.07, "story": 0.10, "poem": 0.05,
               "email": 0.09, "word": 0.04, "list": 0.05, "why": 0.09, "rewrite": 0.05, "plan": 0.04,
               "python_docs": 0.10}
    return {k: (w, _shuffled(lambda k=k: chat_pools()[k])) for k, w in weights.items()}


_KINDS: dict[str, Callable[[], dict[str, tuple[float, KindFactory]]]] = {
    "math": _math_kinds, "code": _code_kinds, "chat": _chat_kinds,
}
# Kinds whose text does not depend on the Python version: the demo prompts come only from these.
DEMO_KINDS = {
    "math": SIMPLE,
    "code": ("classic", "class"),
    "chat": ("concept", "why", "howto", "advice", "story", "poem", "email", "compare", "list"),
}


@dataclass(frozen=True)
class Item:
    text: str
    kind: str


def stream(domain: str, seed: int, kinds: Sequence[str] | None = None) -> Iterator[Item]:
    """Distinct prompts of a domain in seeded order; ends when every finite kind is exhausted."""
    if domain not in _KINDS:
        raise ValueError(f"unknown domain {domain!r}; expected one of {DOMAINS}")
    spec = _KINDS[domain]()
    names = sorted(k for k in spec if kinds is None or k in kinds)
    iters = {k: spec[k][1](random.Random(f"{domain}:{k}:{seed}")) for k in names}
    chooser = random.Random(f"{domain}:{seed}")
    seen: set[str] = set()
    misses = 0
    while iters and misses < 10_000:  # an infinite kind that only repeats itself ends the stream
        live = sorted(iters)
        kind = chooser.choices(live, weights=[spec[k][0] for k in live])[0]
        try:
            text = next(iters[kind])
        except StopIteration:
            del iters[kind]
            continue
        key = normalise(text) if domain == "math" else text  # math: same problem, other names = duplicate
        if key in seen:
            misses += 1
            continue
        misses = 0
        seen.add(key)
        yield Item(text, kind)
