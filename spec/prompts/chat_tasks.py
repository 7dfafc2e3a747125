"""Chat prompts: everyday templates with hand-written slots (assets/prompt_data/chat.json), plus
explanations built from the Python documentation that ships with the interpreter (module docstrings,
pydoc topics, keywords; pinned per Python version, like the stdlib code prompts).
"""

from __future__ import annotations

import keyword
import re
from functools import lru_cache

from .data import fill, table
from .stdlib import MODULES, clean_doc_sentence, entries, import_quietly

C = table("chat.json")  # slot lists, and the frames ("..._frames") a slot is put into
# The frames: phrasings of one task, dropped by the split normaliser.
FRAMES = {k: C[k] for k in ("concept_frames", "compare_frames", "goal_frames", "howto_frames", "word_frames",
                            "list_frames", "why_frames")}


def _python_doc_prompts() -> list[str]:
    """Chat prompts built from documentation text that ships with Python."""
    out: list[str] = []
    for modname in MODULES:
        if (mod := import_quietly(modname)) is None:
            continue
        out.append(f"What is the Python `{modname}` module used for? Give a short example.")
        sentence = clean_doc_sentence(mod.__doc__)
        if sentence and not sentence.lower().startswith((modname, "this module", "module")):
            out.append(f'The Python documentation describes the `{modname}` module as: "{sentence}" '
                       f"Explain what that means to a beginner.")
    try:
        from pydoc_data.topics import topics
    except ImportError:  # some distributions strip it
        topics = {}
    for key, text in sorted(topics.items()):
        title = text.split("\n", 1)[0].strip()
        title = re.sub(r'"(\w+)"', r"`\1`", title.split(" — ")[0])
        if title.isascii() and 1 <= len(title.split()) <= 6 and not title.startswith(("Emulating", "Basic", "Special")):
            t = title[0].lower() + title[1:] if not title[:2].isupper() else title
            out.append(f"Explain {t} in Python to a beginner, with a simple example.")
    for e in entries():
        out.append(f'The Python documentation describes `{e.ref}` like this: "{e.sentence}" '
                   f"Explain that in plain English.")
    for kw in keyword.kwlist:
        if kw.isalpha() and kw not in ("True", "False", "None"):
            out.append(f"What does the `{kw}` keyword do in Python? Give a simple example.")
    return out


@lru_cache(maxsize=1)
def pools() -> dict[str, list[str]]:
    """Every chat prompt, by kind (the kind's name seeds its rng: renaming one changes the prompts)."""
    return {
        "concept": fill(C["concept_frames"], C["concepts"]),
        "compare": fill(C["compare_frames"], C["comparisons"]),
        "advice": fill(C["goal_frames"], C["goals"]) + [f"I am {p}. How can I {g}?" for p in C["personas"]
                                                        for g in C["goals"]],
        "howto": fill(C["howto_frames"], C["howtos"]),
        "story": [f"Write a short story about {c} who {e}{s}." for c in C["characters"] for e in C["events"]
                  for s in C["settings"]],
        "poem": [f"Write {f} about {t}." for f in C["poem_forms"] for t in C["poem_topics"]],
        "email": [f"Write a {t} email to {w} {p}." for t in C["tones"] for w in C["recipients"] for p in C["purposes"]],
        "word": fill(C["word_frames"], C["words_to_define"]),
        "list": fill(C["list_frames"], C["list_tasks"]),
        "why": fill(C["why_frames"], C["why"]),
        "rewrite": [f'Rewrite this sentence to be {st}: "{se}"' for se in C["rewrite_sentences"] for st in C["styles"]],
        "plan": [f"Plan a {n}-day trip to {d} on a small budget." for d in C["destinations"] for n in range(2, 8)]
        + [f"Make a {n}-day study plan for {e}." for e in C["exams"] for n in range(3, 8)]
        + [f"Create a simple weekly workout plan for {t}." for t in C["trainees"]],
        "python_docs": _python_doc_prompts(),
    }
