"""What a generation reports: a Round per target forward as it happens, a GenResult at the end."""

from __future__ import annotations

from dataclasses import dataclass, field

from .confidence import ConfidenceCheck
from .slots import slot_counts


def common_prefix(a: list[int], b: list[int]) -> int:
    """How many leading tokens a and b share (a draft against what was committed, a run against greedy)."""
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


@dataclass
class Round:
    """What one round committed. tokens[:accepted] were drafts; the rest is the target's own."""

    engine: str
    index: int  # 0 = the prefill's first token
    tokens: list[int]
    accepted: int
    drafted: int
    text: str  # new text (the streaming detokenizer may hold back a partial character or a space)
    seconds: float  # busy time of this round, measured after the sync
    done: bool = False
    pieces: tuple[tuple[str, str], ...] = ()  # the new text split: ("acc", accepted drafts' text), ("own", ...)
    levels: tuple[tuple[int, int], ...] = ()  # per depth verified: (rank of the draft that landed or 0, drafts there)
    parents: tuple[int, ...] = ()  # the verified drafts' tree: row i + 1's parent row (0 = the anchor; a chain: i)
    path: tuple[int, ...] = ()  # the rows it committed, from the anchor (0)
    missed: str = ""  # where a draft was rejected: the text the head had drafted from there (its likeliest guess)
    estimates: tuple[float, ...] = ()  # DSpark: its confidence head's estimate for every slot drafted (cut ones too)
    copied: int = 0  # of the drafts, rows prompt lookup's branch added to the head's own (spec.loop.lookup_branch)

    @property
    def is_tree(self) -> bool:
        """Whether its drafts were verified as a tree (some row hangs under another than the one before)."""
        return any(p != i for i, p in enumerate(self.parents))


@dataclass
class GenResult:
    text: str
    token_ids: list[int]
    accept_lengths: list[int]  # committed tokens per verify round (drafts accepted + 1)
    drafted: list[int]  # drafts verified per round
    target_forwards: int  # prefill included
    prompt_tokens: int
    prefill_seconds: float
    decode_seconds: float
    finish_reason: str  # "eos" | "length" | "context" | "stopped"
    engine: str = ""
    draft_seconds: float = 0.0  # drafter time inside decode_seconds (measured only with profile=True)
    trees: list[bool] = field(default_factory=list)  # per round: its drafts were verified as a tree (not a chain)
    round_seconds: list[float] = field(default_factory=list)  # each decode round's own time (its jitter: spec.race.outcome)
    levels: list[tuple] = field(default_factory=list)  # per round: (rank landed or 0, drafts) per depth (spec.loop.slots)
    estimates: list[tuple] = field(default_factory=list)  # per round: DSpark's confidence per slot (spec.loop.confidence)

    @property
    def rounds(self) -> int:
        return len(self.accept_lengths)

    @property
    def mean_accept(self) -> float:
        return sum(self.accept_lengths) / max(1, self.rounds)

    @property
    def positions(self) -> list[dict[str, int]]:
        """Per draft slot: rounds that reached it and rounds that landed it (spec.loop.slots)."""
        return slot_counts(self.levels)

    def confidence(self, used: float = 0.0) -> dict | None:
        """DSpark's confidence head against what landed (spec.loop.confidence); None without estimates."""
        check = ConfidenceCheck()
        for est, k, n in zip(self.estimates, self.drafted, self.accept_lengths):
            check.add(est, k, n - 1)  # only chain rounds carry estimates
        return check.record(used) if check.rounds else None

    @property
    def tokens_per_sec(self) -> float:
        """End to end, prefill included."""
        return len(self.token_ids) / max(1e-9, self.prefill_seconds + self.decode_seconds)

    @property
    def decode_tokens_per_sec(self) -> float:
        """Tokens after the first one, over the decode time only."""
        return (len(self.token_ids) - 1) / self.decode_seconds if self.decode_seconds > 0 else 0.0

    def summary(self) -> dict:
        return {
            "engine": self.engine, "text": self.text, "token_ids": self.token_ids,
            "accept_lengths": self.accept_lengths, "rounds": self.rounds,
            "mean_accept": round(self.mean_accept, 3), "tokens": len(self.token_ids),
            "tokens_per_sec": round(self.tokens_per_sec, 2),
            "decode_tokens_per_sec": round(self.decode_tokens_per_sec, 2),
            "prefill_seconds": round(self.prefill_seconds, 4), "decode_seconds": round(self.decode_seconds, 4),
            "target_forwards": self.target_forwards, "prompt_tokens": self.prompt_tokens,
            "finish_reason": self.finish_reason,
        }
