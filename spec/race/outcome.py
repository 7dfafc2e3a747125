"""A race's outcome, computed ONCE from its own record (the engines' results): each lane's finish time,
status, place and speedup, the band within which lanes tie, and the headline. The page, the API, the
CLI, the replay and the sweep all read this; none of them recomputes a number.

The one speedup is END TO END: tokens per engine second, prefill included, over the plain lane's. At
T = 0 every lane writes the same tokens, so it is exactly the plain lane's finish time over this lane's:
the speedup, the finish times on the race clock and the places can never disagree. Decode-only tok/s
(prefill left out) is kept as a labelled detail.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from ..loop.engine import GenResult

ENGINES = ("dspark", "dflash", "lookup", "greedy")
NAMES = {"dspark": "DSpark", "dflash": "DFlash", "lookup": "Prompt lookup", "greedy": "Greedy baseline"}
# The least relative difference between two lanes that is not called a tie: twice the run-to-run spread
# of a race's speedup, measured by racing the same prompts again (`python -m spec bench noise` writes
# it; assets/bench/noise/noise.md shows the races). A race's own timing noise can widen it (tie_band).
NOISE = Path(__file__).resolve().parents[2] / "assets" / "bench" / "noise" / "noise.json"
TIE_FLOOR = float(json.loads(NOISE.read_text())["tie_floor"]) if NOISE.exists() else 0.05
DEFAULT_CV = 0.15  # step-to-step jitter assumed when the plain lane has too few steps to measure it (< 8)
STATUS = {"eos": "finished", "length": "cut at max tokens", "context": "cut at the context's end",
          "stopped": "stopped", "running": "stopped"}


@dataclass(frozen=True)
class LaneOutcome:
    engine: str
    tokens: int
    rounds: int
    mean_accept: float | None  # tokens committed per target forward; None without a decode round
    prompt_tokens: int
    prefill_seconds: float
    finish_seconds: float  # engine seconds at its end: prefill + decode (its place on the race clock)
    tok_s: float  # end to end: tokens per engine second
    decode_tok_s: float  # detail: tokens after the first over the decode time
    speedup: float | None  # THE speedup: tok_s over the plain lane's (None without one)
    decode_speedup: float | None  # detail: decode_tok_s over the plain lane's
    status: str  # finished | cut at max tokens | cut at the context's end | stopped
    place: int | None  # 1 = fastest; lanes that tie share a place; None in a stopped race
    tied: bool  # shares its place with another lane

    @property
    def place_text(self) -> str:
        """'1st', '=1st' for a shared place, '–' in a stopped race."""
        if self.place is None:
            return "–"
        return ("=" if self.tied else "") + {1: "1st", 2: "2nd", 3: "3rd"}.get(self.place, f"{self.place}th")

    @property
    def ended(self) -> str:
        """How its card labels its last engine time: 'finished at' or 'stopped at'."""
        return "stopped at" if self.status == "stopped" else "finished at"


@dataclass(frozen=True)
class Outcome:
    lanes: dict[str, LaneOutcome]  # in ENGINES order
    band: float  # relative difference within which two lanes tie
    sampled: bool  # T > 0: the plain lane samples
    stopped: bool
    positions: dict[str, list[dict[str, int]]]  # head -> per draft slot: rounds that reached / landed it
    confidence: dict[str, dict]  # head with a confidence head -> its estimates checked (spec.loop.confidence)
    notes: dict[str, str] = field(default_factory=dict)  # lane -> how it ran unlike its usual self ("Markov off")

    @classmethod
    def of(cls, results: dict[str, GenResult], sampled: bool = False, threshold: float = 0.0,
           notes: dict[str, str] | None = None, floor: float = TIE_FLOOR) -> "Outcome":
        base = results.get("greedy")
        stopped = any(r.finish_reason in ("stopped", "running") for r in results.values())
        band = tie_band(results, floor)
        rows = {}
        for name in [n for n in ENGINES if n in results] + [n for n in results if n not in ENGINES]:
            r = results[name]
            rows[name] = dict(
                engine=name, tokens=len(r.token_ids), rounds=r.rounds,
                mean_accept=r.mean_accept if r.rounds else None, prompt_tokens=r.prompt_tokens,
                prefill_seconds=r.prefill_seconds,
                finish_seconds=r.prefill_seconds + r.decode_seconds, tok_s=r.tokens_per_sec,
                decode_tok_s=r.decode_tokens_per_sec,
                speedup=ratio(r.tokens_per_sec, base.tokens_per_sec) if base else None,
                decode_speedup=ratio(r.decode_tokens_per_sec, base.decode_tokens_per_sec) if base else None,
                status=STATUS.get(r.finish_reason, r.finish_reason), place=None, tied=False)
        if not stopped:
            for place, group in places({n: row["tok_s"] for n, row in rows.items()}, band):
                for n in group:
                    rows[n].update(place=place, tied=len(group) > 1)
        positions = {n: results[n].positions for n in rows if n != "greedy"}
        confidence = {n: c for n in rows if (c := results[n].confidence(threshold)) is not None}
        return cls({n: LaneOutcome(**row) for n, row in rows.items()}, band, sampled, stopped, positions, confidence,
                   dict(notes or {}))

    @property
    def order(self) -> list[LaneOutcome]:
        """The lanes fastest first: by place; a stopped race, which has none, by how far each lane had got
        for its compute (tokens per engine second, the speedup so far), the lane ahead first."""
        key = (lambda o: (-o.tok_s, -o.tokens)) if self.stopped else (lambda o: (o.place, o.finish_seconds))
        return sorted(self.lanes.values(), key=key)

    @property
    def winner(self) -> str | None:
        """The one lane in first place; None for a tie at the top, a stopped race or an empty one."""
        first = [o.engine for o in self.lanes.values() if o.place == 1]
        return first[0] if len(first) == 1 else None

    def label(self, name: str) -> str:
        base = "Plain sampling" if name == "greedy" and self.sampled else NAMES.get(name, name)
        return f"{base} ({self.notes[name]})" if name in self.notes else base

    @property
    def versus(self) -> str:
        """What a speedup is measured against: 'greedy' or, at T > 0, 'plain sampling'."""
        return "plain sampling" if self.sampled else "greedy"

    def headline(self) -> str:
        """One sentence: who won, by how much (the one speedup), or that it was a tie, or stopped."""
        if self.stopped:
            return "Stopped: no places (texts compared up to where the first lane stopped)."
        if not self.lanes:
            return "Nothing raced."
        first = [o for o in self.order if o.place == 1]
        if len(first) > 1:
            who = ("all " + {2: "two", 3: "three"}.get(len(first), str(len(first))) + " lanes"
                   if len(first) == len(self.lanes) else " and ".join(self.label(o.engine) for o in first))
            return f"A tie: {who} within {100 * self.band:.0f}% of each other (this race's noise band)."
        win = first[0]
        if win.speedup is None:
            return f"{self.label(win.engine)} first."
        if win.engine == "greedy":
            lost = ", ".join(f"{self.label(o.engine)} {fmt_x(o.speedup)}" for o in self.order if o.engine != "greedy")
            return f"{self.label('greedy')} wins: speculation did not pay on this prompt ({lost})."
        return f"{self.label(win.engine)} wins: {fmt_x(win.speedup)} vs {self.versus}, end to end."

    def record(self) -> dict:
        """As the API and the downloads give it."""
        return {"band": round(self.band, 4), "stopped": self.stopped, "winner": self.winner,
                "headline": self.headline(),
                "lanes": [{k: (round(v, 4) if isinstance(v, float) else v) for k, v in o.__dict__.items()}
                          for o in self.order],
                "positions": self.positions, "confidence": self.confidence}


def ratio(a: float, b: float) -> float | None:
    return a / b if b > 0 else None


def fmt_x(x: float | None) -> str:
    return "–" if x is None else f"×{x:.2f}"


def places(speeds: dict[str, float], band: float) -> list[tuple[int, list[str]]]:
    """(place, lanes) fastest first. A lane within `band` of the fastest lane of the group above it
    shares that group's place (a tie); the next group's place counts the lanes ahead of it."""
    ranked = sorted(speeds, key=lambda n: -speeds[n])
    groups: list[list[str]] = []
    for n in ranked:
        if groups and speeds[n] >= speeds[groups[-1][0]] * (1 - band):
            groups[-1].append(n)
        else:
            groups.append([n])
    out, ahead = [], 0
    for g in groups:
        out.append((ahead + 1, g))
        ahead += len(g)
    return out


def tie_band(results: dict[str, GenResult], floor: float = TIE_FLOOR) -> float:
    """The relative difference within which two lanes of this race tie: the larger of `floor` (the
    run-to-run spread measured on repeated races) and twice this race's own timing noise. That noise
    comes from the plain lane's steps, all alike, so their step-to-step jitter (robust coefficient of
    variation) is the machine's; each lane's finish time sums its rounds, so its noise is that jitter
    times the root of the sum of its squared round times, and a difference of two lanes has the root
    of the sum of their squares (the two noisiest lanes). Short races get a wide band, long ones the
    floor; a race too short to measure the jitter assumes DEFAULT_CV."""
    base = results.get("greedy")
    steps = base.round_seconds if base is not None else []
    cv = DEFAULT_CV
    if len(steps) >= 8:
        med = statistics.median(steps)
        cv = 1.4826 * statistics.median(abs(s - med) for s in steps) / med if med > 0 else DEFAULT_CV
    rel = sorted(cv * math.sqrt(sum(s * s for s in r.round_seconds)) / (r.prefill_seconds + r.decode_seconds)
                 for r in results.values() if r.prefill_seconds + r.decode_seconds > 0)
    return max(floor, 2 * math.sqrt(sum(x * x for x in rel[-2:])))
