"""Per-slot acceptance: how deep into a round a head's drafts keep landing.

Slot i is the i-th draft of a round (a depth of its tree; a chain's i-th draft). A round *reached* slot i
when every slot before it landed and the round verified at least one draft at depth i; it *landed* slot
i when one of those drafts was accepted. landed / reached is the chance that slot i lands given that
the slots before it did: DFlash's whole-block pass and DSpark's left-to-right Markov head differ exactly
here. Every accepted draft lands one slot, so over a generation 1 + (landed, summed over slots) / rounds
is its mean accept length (rounds counting plain steps, which reach no slot).

Read from each round's `levels` (spec.loop.tree.DraftTree.levels: per depth, the rank of the draft that
landed or 0, and how many drafts were verified there). One implementation for the page, the API, the
CLI's race summary and the bench.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

Levels = Sequence[tuple[int, int]]  # one round's (rank landed or 0, drafts verified) per depth


class SlotCounts:
    """Reached and landed counts per slot, added one round at a time (a live race) or all at once."""

    def __init__(self, rounds: Iterable[Levels] = ()):
        self.reached: list[int] = []
        self.landed: list[int] = []
        for levels in rounds:
            self.add(levels)

    def add(self, levels: Levels) -> None:
        """One round's levels (empty for a plain step)."""
        for depth, (rank, _) in enumerate(levels):
            self._count(depth, 1, rank > 0)

    def add_rows(self, rows: Iterable[dict[str, int]]) -> None:
        """Another generation's rows, added slot by slot."""
        for r in rows:
            self._count(r["slot"] - 1, r["reached"], r["landed"])

    def _count(self, depth: int, reached: int, landed: int) -> None:
        while len(self.reached) <= depth:
            self.reached.append(0)
            self.landed.append(0)
        self.reached[depth] += reached
        self.landed[depth] += landed

    def copy(self) -> "SlotCounts":
        out = SlotCounts()
        out.reached, out.landed = list(self.reached), list(self.landed)
        return out

    def rows(self) -> list[dict[str, int]]:
        """[{"slot": i, "reached": rounds that verified slot i, "landed": rounds where it landed}, ...], i from 1."""
        return [{"slot": i + 1, "reached": r, "landed": n} for i, (r, n) in enumerate(zip(self.reached, self.landed))]

    def rates(self) -> list[float]:
        """landed / reached per slot."""
        return [n / r for r, n in zip(self.reached, self.landed)]

    @property
    def accepted(self) -> int:
        """Drafts accepted over these rounds."""
        return sum(self.landed)


def slot_counts(rounds: Iterable[Levels]) -> list[dict[str, int]]:
    """The rows of SlotCounts over a generation's rounds (GenResult.levels)."""
    return SlotCounts(rounds).rows()


def as_columns(rows: Sequence[dict[str, int]]) -> dict[str, str]:
    """A generation's rows as two result-table cells, one number per slot: {"reached": "9 7 3", "landed": "7 3 1"}."""
    return {"reached": " ".join(str(r["reached"]) for r in rows), "landed": " ".join(str(r["landed"]) for r in rows)}


def by_method_and_domain(runs: "Any") -> dict[tuple[str, str], list[dict[str, int]]]:
    """A results table's slot columns (as_columns) summed per (method, domain), drafting methods only."""
    out = {}
    if "reached" not in runs:
        return out
    for key, g in runs.groupby(["method", "domain"], sort=False):
        total = SlotCounts()
        for reached, landed in zip(g["reached"].fillna(""), g["landed"].fillna("")):
            total.add_rows({"slot": i + 1, "reached": int(r), "landed": int(n)}
                           for i, (r, n) in enumerate(zip(str(reached).split(), str(landed).split())))
        if total.reached:
            out[key] = total.rows()
    return out


def shares_text(rows: Sequence[dict[str, int]]) -> str:
    """'1: 80% (40/50), 2: 55% (22/40), ...'"""
    return ", ".join(f"{r['slot']}: {100 * r['landed'] / r['reached']:.0f}% ({r['landed']}/{r['reached']})"
                     for r in rows)


def slot_table(positions: dict[str, list[dict[str, int]]], names: dict[str, str] | None = None) -> str:
    """A small plain-text table, one line per head: landed/reached and the rate at each slot."""
    if not positions:
        return ""
    width = max(len(rows) for rows in positions.values())
    label = {h: (names or {}).get(h, h) for h in positions}
    pad = max(len(x) for x in label.values()) + 2
    lines = ["slot".ljust(pad) + "".join(f"{i:>11}" for i in range(1, width + 1))]
    for head, rows in positions.items():
        cells = [f"{r['landed']}/{r['reached']} {100 * r['landed'] / r['reached']:.0f}%".rjust(11) for r in rows]
        lines.append(label[head].ljust(pad) + "".join(cells))
    return "\n".join(lines)
