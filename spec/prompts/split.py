"""The split: a prompt's side (train / held-out) is a pure function of its text, decided by hashing a
*normalised* form in which names, props, frames and "show your reasoning" phrases are dropped, and a
prompt about a named stdlib object (`textwrap.dedent`) is keyed by that name alone.

The filler phrases come from the data files (assets/prompt_data): adding a filler word can move an
existing prompt that contains it to the other side, so add words that our prompts don't use yet.
"""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache

from .chat_tasks import FRAMES as CHAT_FRAMES
from .code_tasks import CLASS_FRAMES, CLASSIC_FRAMES, SNIPPET_ASKS
from .math_problems import ASKS, OPENERS
from .math_cast import BAKED, CHEAP, CONTAINERS, EXPENSES, ITEMS, PEOPLE, PLACES, PRICEY, PRONOUNS

HELDOUT_PER_MILLE = 100  # 10% of normalised keys are held out
SPLIT_SALT = "spec-arena/prompts/v1"  # changing it reshuffles every split: never do so silently

_TOKEN = re.compile(r"[a-z]+|\d+(?:\.\d+)?")
_REF = re.compile(r"(?<!`)`([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)`(?!`)")
_STOPWORDS = {"a", "an", "the"}


def _tokens(text: str) -> list[str]:
    text = re.sub(r"(?<=\d),(?=\d)", "", text.lower())
    return [t for t in _TOKEN.findall(text) if t not in _STOPWORDS]


@lru_cache(maxsize=1)
def _fillers() -> tuple[frozenset[tuple[str, ...]], int]:
    """Phrases that vary without changing the task: names, props, frames, 'show your reasoning'."""
    phrases: list[str] = [p.name for p in PEOPLE] + PRONOUNS + ASKS + OPENERS
    phrases += [w for pair in ITEMS + CHEAP for w in pair] + PRICEY + CONTAINERS + BAKED + EXPENSES + PLACES
    for frames in (*CHAT_FRAMES.values(), CLASSIC_FRAMES, CLASS_FRAMES, SNIPPET_ASKS):
        phrases += [part for f in frames for part in f.split("{}")]
    out = {tuple(t) for p in phrases if (t := _tokens(p))}
    return frozenset(out), max(len(t) for t in out)


def normalise(text: str) -> str:
    """The key a prompt is split on: near-duplicates of one task share it.

    A prompt naming a Python object in backticks (`textwrap.dedent`) is keyed by that name alone, so
    every prompt about one stdlib function is on one side. Otherwise: lowercase words and numbers,
    minus articles and filler phrases (names, props, frames), numbers kept.
    """
    if m := _REF.search(text):
        return "ref:" + m.group(1).lower()
    tokens = _tokens(text)
    fillers, longest = _fillers()
    kept: list[str] = []
    i = 0
    while i < len(tokens):
        for n in range(min(longest, len(tokens) - i), 0, -1):
            if tuple(tokens[i:i + n]) in fillers:
                i += n
                break
        else:
            kept.append(tokens[i])
            i += 1
    return " ".join(kept or tokens)


def split_of(prompt_text: str) -> str:
    """'train' or 'heldout', fixed forever by a salted hash of the normalised text."""
    digest = hashlib.sha256(f"{SPLIT_SALT}\n{normalise(prompt_text)}".encode()).digest()
    return "heldout" if int.from_bytes(digest[:8], "big") % 1000 < HELDOUT_PER_MILLE else "train"
