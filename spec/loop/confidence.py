"""DSpark's confidence head, checked against what landed.

A DSpark head with a confidence head estimates, for each drafted slot i, the chance that slot i lands
given that every slot before it did. DeepSpec's rule cuts a draft before the first slot whose estimate is
below a threshold (the Settings' slider). Two questions a viewer can then ask of a race's rounds:

- Is the head right? Reliability: every slot a round reached (all earlier slots landed, slot i verified),
  binned by its estimate; per bin, how many such slots there were and how many landed. A reliable head's
  bins land about as often as they say.
- What would moving the slider do? Replaying the rule on the recorded estimates: per threshold, the
  verify rows it would save and the landed drafts it would lose. Exact for thresholds at or above the one
  the race ran with; below it, a round whose draft the race's own cut ended never verified the drafts a
  lower threshold would keep, so such rounds are left out of that threshold's count (and counted).

Only chain rounds carry estimates: a round DSpark drafts as a tree has none (its confidence head scores a
chain's slots, each given the slots before it), even where that tree did not branch. Such rounds are
counted (`drafted_as_trees`), so a page can say why this check covers fewer rounds than the per-slot counts
(spec.loop.slots), which count every drafting round.
"""

from __future__ import annotations

from typing import Sequence

BINS = 10
THRESHOLDS = tuple(round(0.1 * i, 1) for i in range(1, 10))


def first_below(estimates: Sequence[float], threshold: float) -> int:
    """DeepSpec's cut: the drafts kept are those before the first slot whose estimate is below `threshold`."""
    return next((i for i, c in enumerate(estimates) if c < threshold), len(estimates))


class ConfidenceCheck:
    """Rounds of one DSpark lane: the estimates of every slot it drafted, the slots verified (the draft
    after the race's own cut), and the slots that landed."""

    def __init__(self) -> None:
        self.rounds: list[tuple[tuple[float, ...], int, int]] = []
        self.drafted_as_trees = 0  # drafting rounds without estimates (counted, not checked)

    def add(self, estimates: Sequence[float], verified: int, landed: int) -> None:
        """One round: a chain round's estimates are checked; a drafting round without any (a tree) is only
        counted; a plain step (nothing verified) adds nothing."""
        if not verified:
            return
        if estimates:
            self.rounds.append((tuple(estimates), verified, landed))
        else:
            self.drafted_as_trees += 1

    def copy(self) -> "ConfidenceCheck":
        out = ConfidenceCheck()
        out.rounds, out.drafted_as_trees = list(self.rounds), self.drafted_as_trees
        return out

    def bins(self) -> list[dict]:
        """Per estimate bin [i / BINS, (i + 1) / BINS): slots reached, slots landed, their mean estimate."""
        reached, landed, total = [0] * BINS, [0] * BINS, [0.0] * BINS
        for est, verified, n in self.rounds:
            for i in range(min(n + 1, verified)):
                b = min(BINS - 1, int(est[i] * BINS))
                reached[b] += 1
                landed[b] += i < n
                total[b] += est[i]
        return [{"low": b / BINS, "high": (b + 1) / BINS, "slots": reached[b], "landed": landed[b],
                 "mean_estimate": round(total[b] / reached[b], 4) if reached[b] else None} for b in range(BINS)]

    def cut(self, threshold: float) -> dict:
        """What the rule at `threshold` does to these rounds: drafts verified and landed as they ran,
        the rows it would save and the landed drafts it would lose; `unknown`: rounds it cannot judge."""
        verified = landed = saved = lost = unknown = 0
        for est, v, n in self.rounds:
            keep = first_below(est, threshold)
            if keep > v and v < len(est):  # the race's own cut ended this draft sooner: never verified
                unknown += 1
                continue
            kept = min(keep, v)
            verified, landed = verified + v, landed + n
            saved, lost = saved + v - kept, lost + n - min(n, kept)
        return {"threshold": threshold, "verified": verified, "landed": landed, "saved": saved, "lost": lost,
                "unknown": unknown}

    def record(self, used: float = 0.0) -> dict:
        """As the API gives it: the chain rounds checked and the tree rounds left out, the bins, the cut at
        each slider value, and the threshold the race used."""
        return {"rounds": len(self.rounds), "drafted_as_trees": self.drafted_as_trees, "used": used,
                "bins": self.bins(), "cuts": [self.cut(t) for t in THRESHOLDS]}
