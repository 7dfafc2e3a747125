"""Edit prompts: the user hands the model a text (a function, a paragraph, a list) and asks for it back
changed (type hints, a fix, a summary). Answers that quote the prompt are where prompt lookup shines, so
these race in a domain of their own ("edit"); hand-written (assets/prompt_data/edit.json), never trained on.
"""

from __future__ import annotations

from .data import table

EDIT = "edit"  # the domain's name: raced and swept beside chat, code and math, not one the heads train on


def edit_prompts() -> list[str]:
    """Each task's ask, a blank line, then its text."""
    return [f"{t['ask']}\n\n{t['text']}" for t in table("edit.json")["tasks"]]
