"""The ONE speculative loop, generic over a drafter, and the greedy baseline as its k = 0 case.

A round: the drafter proposes up to k tokens after the anchor (the newest committed token), the target
verifies [anchor + drafts] in one forward, the acceptance rule commits n drafts + one token of the
target's own, the target cache is trimmed by the rejected rows, and the drafter gets the target's
tapped hidden rows of what was committed. One host sync per round.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Callable, Iterator, Protocol, Sequence

import mlx.core as mx

from ..errors import SpecError
from ..target import Target
from . import autodraft
from .generation import Generation
from .results import GenResult, Round
from .tree import DraftTree
from .verify import Sampling


class Drafter(Protocol):
    """What the loop needs from a drafter (DFlashDraftModel, DSparkDraftModel and PromptLookup provide it).
    A head learns the committed text from the target's taps; `see` shows the tokens themselves."""

    kind: str
    config: object
    max_drafts: int

    def make_cache(self) -> list: ...

    def see(self, cache: list, tokens: list[int]) -> None: ...

    def propose(self, cache: list, new_taps: mx.array | None, anchor: int, k: int, sampling: Sampling,
                key: mx.array | None, threshold: float = 0.0) -> tuple[mx.array, mx.array | None]: ...

    def propose_tree(self, cache: list, new_taps: mx.array | None, anchor: int, k: int, nodes: int,
                     sampling: Sampling, key: mx.array | None) -> DraftTree: ...


class Engine:
    """A target + optional drafter + settings. Stateless between generations: each has its own caches."""

    def __init__(self, target: Target, drafter: Drafter | None = None, *, max_draft: int | str = 0,
                 sampling: Sampling = Sampling(), confidence_threshold: float = 0.0, name: str | None = None,
                 profile: bool = False, thinking: bool = False, costs: autodraft.Costs | None = None,
                 tree: int | str | None = "auto", markov: bool = True, adapt: bool = False,
                 lookup_branch: bool = False):
        """profile: sync once more per round, after drafting, to time the drafter on its own.
        thinking: the chat template's enable_thinking for text prompts (off, as the heads are benchmarked).
        costs: what max_draft="auto" weighs, measured for this pair (spec.loop.calibrate.costs_for).
        tree: verify at most this many drafts as a tree, at most max_draft deep (0: chains; "auto", the
        default everywhere, or None: chains at a fixed length, and trees up to the head's block allowed with
        max_draft "auto", which picks chain or tree and its size every round); a target whose layers cannot
        branch verifies chains (tree_note: why).
        markov: off, a DSpark head drafts every slot from its backbone alone, in parallel (an ablation).
        adapt: "auto" also follows this generation's own timings (the chooser before issue 39, which made
        two races of one prompt diverge; kept for the benchmark that compares it: spec.loop.autodraft).
        lookup_branch: a head's rounds also verify what prompt lookup copies from the text, as one more
        branch of their tree (spec.loop.lookup_branch; off where the target cannot branch: tree_note)."""
        self.target, self.drafter, self.sampling, self.profile = target, drafter, sampling, profile
        self.thinking, self.markov, self.adapt = thinking, markov, adapt
        self.costs = None  # measured round costs when the draft length is chosen per round ("auto")
        max_draft = draft_length(max_draft)
        if drafter is not None and max_draft == "auto":
            if costs is None:
                raise SpecError("max draft auto needs this pair's measured costs: "
                                "Engine(..., costs=spec.loop.calibrate.costs_for(target, head, 'auto'))")
            self.max_draft, self.costs = drafter.max_drafts, costs
        elif drafter is not None:
            cap = drafter.max_drafts if not max_draft else max_draft
            if not isinstance(cap, int) or not 1 <= cap <= drafter.max_drafts:
                raise SpecError(f"max draft {max_draft!r} is outside 1..{drafter.max_drafts} (or auto) for this "
                                f"{drafter.kind} head")
            self.max_draft = cap
        else:
            self.max_draft = 0
        if not 0 <= confidence_threshold < 1:
            raise SpecError("confidence threshold must be in [0, 1)")
        self.confidence_threshold = confidence_threshold
        tree = tree_setting(tree)
        if tree == "auto":
            tree = self.max_draft if self.costs is not None else 0
        branch = lookup_branch and drafter is not None and drafter.kind != "lookup"
        self.tree_note = target.check_trees() if (tree or branch) and drafter is not None else ""
        self.tree = 0 if self.tree_note or drafter is None else tree  # at most; auto picks per round
        self.lookup_branch = branch and not self.tree_note
        self.name = name or (drafter.kind if drafter is not None else "greedy")
        self.taps: tuple[int, ...] = tuple(drafter.config.target_layer_ids) if drafter is not None else ()

    @contextmanager
    def drafting(self) -> Iterator[Drafter]:
        """The drafter for one draft: a DSpark head with its Markov head off for this engine only (the
        head is shared; everyone else finds it on)."""
        off = not self.markov and hasattr(self.drafter, "markov_on")
        if off:
            self.drafter.markov_on = False
        try:
            yield self.drafter
        finally:
            if off:
                self.drafter.markov_on = True

    def start(self, prompt: str | Sequence[int], max_new_tokens: int = 256) -> "Generation":
        ids = (self.target.encode_chat(prompt, thinking=self.thinking) if isinstance(prompt, str)
               else [int(t) for t in prompt])
        return Generation(self, ids, max_new_tokens)

    def generate(self, prompt: str | Sequence[int], max_new_tokens: int = 256,
                 on_round: Callable[[Round], None] | None = None, stop: threading.Event | None = None) -> GenResult:
        gen = self.start(prompt, max_new_tokens)
        for r in gen:
            if on_round:
                on_round(r)
            if stop is not None and stop.is_set():
                gen.stop()
        return gen.result


MAX_TREE = 64  # drafted nodes a tree may have (its verify runs them all in one forward)


def tree_setting(value: int | str | None) -> int | str:
    """A tree setting as given by a user: "auto" (or None), a number of drafted nodes, or its digits."""
    if value is None or (isinstance(value, str) and value.strip().lower() == "auto"):
        return "auto"
    try:
        nodes = int(value)
    except (TypeError, ValueError):
        nodes = -1
    if not 0 <= nodes <= MAX_TREE or (isinstance(value, float) and not value.is_integer()):
        raise SpecError(f"tree must be auto or a number of drafted nodes in 0..{MAX_TREE} (0 = chains), "
                        f"not {value!r}")
    return nodes


def draft_length(value: int | str) -> int | str:
    """A max-draft setting as given by a user: an int (0 = the head's block), its digits, or "auto"."""
    if isinstance(value, str):
        value = value.strip().lower()
        if value == "auto":
            return value
        try:
            return int(value)
        except ValueError:
            raise SpecError(f"max draft must be a number or auto, not {value!r}") from None
    return int(value)
