"""Prompt sets for self-distillation and evaluation, made offline by our own code.

The drafter heads learn from the target's answers to these prompts, and the benchmark measures accept
length on the held-out ones, so two things matter more than anything else:

* determinism: a seed gives the same prompts, in the same order, on every machine (the stdlib-derived
  code and chat prompts follow the running Python's own docstrings, so they are pinned per Python
  version);
* an honest split: a prompt's side (train / held-out) is a pure function of its text, decided by
  hashing a *normalised* form in which names, props, frames and "show your reasoning" phrases are
  dropped, and a prompt about a named stdlib object (`textwrap.dedent`) is keyed by that name alone.
  Near-duplicates (same problem, other name or object; same task, other framing) therefore always
  land on the same side, and generating more train prompts never moves a held-out one.

Three domains, each a weighted mix of "kinds" (a template family or a source of documentation):
math (GSM8K-style word problems), code (classic small tasks, stdlib functions, code reading) and chat
(explanations, advice, how-tos, stories, emails, Python documentation). The words, frames and
hand-written tasks are data, in assets/prompt_data; the modules here are the logic:

    data.py           reads assets/prompt_data
    math_cast.py      the cast and props of the word problems
    math_problems.py  the math templates
    stdlib.py         the standard library's public objects and their docs
    code_tasks.py     code prompts        chat_tasks.py  chat prompts
    streams.py        each domain's seeded, weighted stream of kinds
    split.py          the normaliser and the train / held-out split
    sets.py           the public API and the command line

    python -m spec.prompts --out runs/prompts --n 2000       # train/ and heldout/ jsonl per domain
    python -m spec.prompts --demo --out assets/prompts       # the demo / bench example prompts
"""

from .sets import DEFAULT_HELDOUT, DEMO_SIZE, build_sets, generate, load_prompts, main, pick_demo, write_jsonl
from .split import HELDOUT_PER_MILLE, SPLIT_SALT, normalise, split_of
from .streams import DOMAINS

__all__ = ["DEFAULT_HELDOUT", "DEMO_SIZE", "DOMAINS", "HELDOUT_PER_MILLE", "SPLIT_SALT", "build_sets", "generate",
           "load_prompts", "main", "normalise", "pick_demo", "split_of", "write_jsonl"]
