"""A race repeated: the same prompt raced 1, 3 or 5 times in turn, to see how far its times move.

Every race of a repeat commits the same rounds (auto decides from the calibration and the acceptance
alone: spec.loop.autodraft), so only the times differ, and how far they differ is the machine's noise on this
prompt. Each lane's speedups, their median and their spread; places by the medians, two lanes tied when
their medians are closer than the widest spread a lane showed (or the races' own noise band, if wider).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace
from typing import Any, Iterator

from ..errors import SpecError
from ..loop.results import GenResult
from .outcome import Outcome, fmt_x, places

REPEATS = (1, 3, 5)  # races a repeat may run: the page's choices and the API's and CLI's limits


def repeat_count(value: int | str) -> int:
    """A repeat as a user gave it, checked (one message for the page, the API and the CLI)."""
    try:
        n = int(value)
    except (TypeError, ValueError):
        n = None
    if n not in REPEATS:
        raise SpecError(f"repeat must be 1, 3 or 5 races (it was {value!r})")
    return n


def fingerprint(r: GenResult) -> tuple:
    """What a lane committed, round by round: draft lengths, trees and what each depth of them landed,
    accept lengths, tokens. Two races of one prompt and settings must agree on it (issue 39)."""
    return tuple(r.drafted), tuple(r.trees), tuple(r.levels), tuple(r.accept_lengths), tuple(r.token_ids)


@dataclass(frozen=True)
class LaneRepeat:
    engine: str
    speedups: list[float | None]  # each race's one speedup (end to end), in the order raced
    median: float | None
    spread: float  # (max - min) / median of its speedups: how far they moved between races
    finish_seconds: float  # the median of its finish times on the race clock (engine seconds)
    tok_s: float  # the median of its tokens per engine second (end to end)
    decode_tok_s: float  # the median of its decode-only tok/s, and of its decode speedups (details)
    decode_speedup: float | None
    place: int | None  # by the medians; None when no race finished
    tied: bool
    same_rounds: bool  # every race committed the same rounds

    @property
    def range_text(self) -> str:
        known = [s for s in self.speedups if s is not None]
        return f"{fmt_x(min(known))}–{fmt_x(max(known))[1:]}" if len(known) > 1 else fmt_x(self.median)


@dataclass(frozen=True)
class Repeated:
    races: int  # races that ran to the end
    asked: int  # races asked for
    lanes: dict[str, LaneRepeat]
    band: float  # relative difference of medians within which two lanes tie
    race_band: float  # the races' own noise band (their median)
    outcomes: tuple[Outcome, ...]

    @classmethod
    def of(cls, finishes: list[tuple[dict[str, GenResult], Outcome]], asked: int | None = None) -> "Repeated":
        """From each race's results and outcome (a stopped race counts as not run)."""
        done = [(res, out) for res, out in finishes if not out.stopped]
        outs = [out for _, out in done]
        race_band = statistics.median(o.band for o in outs) if outs else 0.0
        names = list(outs[-1].lanes) if outs else []
        rows = {}
        for n in names:
            speedups = [o.lanes[n].speedup for o in outs]
            known = [s for s in speedups if s is not None]
            med = statistics.median(known) if known else None
            spread = (max(known) - min(known)) / med if known and med else 0.0
            each = lambda field: statistics.median(getattr(o.lanes[n], field) for o in outs)  # noqa: E731
            decode = [o.lanes[n].decode_speedup for o in outs if o.lanes[n].decode_speedup is not None]
            rows[n] = dict(engine=n, speedups=speedups, median=med, spread=spread,
                           finish_seconds=each("finish_seconds"), tok_s=each("tok_s"),
                           decode_tok_s=each("decode_tok_s"),
                           decode_speedup=statistics.median(decode) if decode else None,
                           same_rounds=len({fingerprint(res[n]) for res, _ in done}) == 1)
        band = max([race_band] + [r["spread"] for r in rows.values()])
        placed = {}
        if rows and all(r["median"] is not None for r in rows.values()):
            for place, group in places({n: r["median"] for n, r in rows.items()}, band):
                placed.update({n: (place, len(group) > 1) for n in group})
        lanes = {n: LaneRepeat(**r, place=placed.get(n, (None, False))[0], tied=placed.get(n, (None, False))[1])
                 for n, r in rows.items()}
        return cls(len(done), asked or len(finishes), lanes, band, race_band, tuple(outs))

    @property
    def stopped(self) -> bool:
        return self.races < self.asked

    @property
    def order(self) -> list[LaneRepeat]:
        """By place, then median finish time: the order of the median outcome's lanes (Outcome.order), so a
        tie is listed alike in the headline, the API's finish order and the table."""
        return sorted(self.lanes.values(), key=lambda o: (o.place or 99, o.finish_seconds))

    @property
    def winner(self) -> str | None:
        first = [o.engine for o in self.lanes.values() if o.place == 1]
        return first[0] if len(first) == 1 else None

    @property
    def same_rounds(self) -> bool:
        return all(o.same_rounds for o in self.lanes.values())

    def median_outcome(self) -> Outcome:
        """The last race's outcome with each lane's times and speedups the repeat's medians, its places and
        band the repeat's: what the page's cards and table show once a repeat is over (accept lengths and
        tokens are every race's: the rounds are the same)."""
        last = self.outcomes[-1]
        lanes = {n: replace(o, tok_s=r.tok_s, finish_seconds=r.finish_seconds, speedup=r.median,
                            decode_tok_s=r.decode_tok_s, decode_speedup=r.decode_speedup, place=r.place, tied=r.tied)
                 for n, o in last.lanes.items() if (r := self.lanes.get(n)) is not None}
        return replace(last, lanes=lanes, band=self.band)

    def label(self, name: str) -> str:
        return self.outcomes[-1].label(name) if self.outcomes else name

    def headline(self) -> str:
        """Who won by the medians, with each head's range; or a tie within the spread seen."""
        if not self.races:
            return "Stopped before the first race ended: nothing to compare."
        over = f"Over {self.races} race{'s' * (self.races != 1)}"
        if self.stopped:
            over += f" (stopped: {self.races} of {self.asked} ran)"
        heads = ", ".join(f"{self.label(o.engine)} {fmt_x(o.median)} ({o.range_text})" for o in self.order
                          if o.engine != "greedy" and o.median is not None)
        first = [o for o in self.order if o.place == 1]
        why = f"within {100 * self.band:.0f}%, the widest spread the races showed" if self.band > self.race_band \
            else f"within {100 * self.band:.0f}% (the races' noise band)"
        if len(first) > 1:
            who = " and ".join(self.label(o.engine) for o in first)
            return f"{over}: a tie, {who} {why}. Medians: {heads}."
        if not first:
            return f"{over}: {heads}."
        if first[0].engine == "greedy":
            return f"{over}: {self.label('greedy')} wins, speculation did not pay here ({heads}); ties {why}."
        return f"{over}: {self.label(first[0].engine)} wins, median {fmt_x(first[0].median)} vs " \
               f"{self.outcomes[-1].versus} ({heads}); ties {why}."

    def record(self) -> dict:
        """As the API and the CLI's --json give it."""
        r4 = lambda x: None if x is None else round(x, 4)  # noqa: E731
        return {"races": self.races, "asked": self.asked, "band": r4(self.band), "race_band": r4(self.race_band),
                "winner": self.winner, "headline": self.headline(), "same_rounds": self.same_rounds,
                "lanes": [{"engine": o.engine, "speedups": [r4(s) for s in o.speedups], "median": r4(o.median),
                           "spread": r4(o.spread), "finish_seconds": r4(o.finish_seconds), "place": o.place,
                           "tied": o.tied, "same_rounds": o.same_rounds} for o in self.order]}


def shown_outcome(outcome: Outcome, rep: Repeated | None) -> tuple[Outcome, dict[str, list] | None]:
    """What a finished race shows (the page's cards and table, the API, the Markdown): after a repeat that
    ran more than one race to the end, its median outcome and each race's speedups per lane; else the race's
    own outcome (a stopped last race keeps its own: no places)."""
    if rep is None or rep.races < 2 or outcome.stopped:
        return outcome, None
    return rep.median_outcome(), {n: o.speedups for n, o in rep.lanes.items()}


def repeat_race(arena: Any, prompt: str, settings: Any, n: int) -> Iterator[tuple[int, Any]]:
    """(race index, event) of n races of one prompt on `arena` (spec.race.arena.Arena), in turn; a stopped
    race ends the repeat."""
    for i in range(repeat_count(n)):
        stopped = True
        for ev in arena.race(prompt, settings):
            yield i, ev
            if ev.kind == "finish":
                stopped = ev.outcome.stopped
        if stopped:
            return


def repeated(finish_events: list[Any], asked: int) -> Repeated:
    """The Repeated of the races' "finish" events (spec.race.run.RaceEvent)."""
    return Repeated.of([(ev.results, ev.outcome) for ev in finish_events], asked)
