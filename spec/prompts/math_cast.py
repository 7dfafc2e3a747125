"""The cast and props of the math word problems (assets/prompt_data/vocabulary.json)."""

from __future__ import annotations

from dataclasses import dataclass

from .data import table


@dataclass(frozen=True)
class Person:
    name: str
    he: str  # subject pronoun
    him: str
    his: str

    @property
    def He(self) -> str:
        return self.he.capitalize()


_V = table("vocabulary.json")
PEOPLE = [Person(name, *pronouns.split()) for pronouns, names in _V["people"].items() for name in names]
PRONOUNS: list[str] = _V["pronouns"]
ITEMS: list[tuple[str, str]] = [tuple(p) for p in _V["items"]]  # (singular, plural) countable things
CHEAP: list[tuple[str, str]] = [tuple(p) for p in _V["cheap"]]  # plausible at $1-$25
PRICEY: list[str] = _V["pricey"]  # plausible at $20-$300
CONTAINERS: list[str] = _V["containers"]
BAKED: list[str] = _V["baked"]
EXPENSES: list[str] = _V["expenses"]
PLACES: list[str] = _V["places"]
