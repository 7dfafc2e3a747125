"""One generation of an Engine, round by round: draft (a chain or a tree), verify in one target forward,
commit the path that lands; or a plain target step, pipelined, when drafting would not pay (auto parks).
Each round is a spec.loop.results.Round as it happens; `result` is the GenResult so far."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Iterator

import mlx.core as mx
import numpy as np
from mlx_lm.tokenizer_utils import NaiveStreamingDetokenizer, StreamingDetokenizer

from ..errors import SpecError
from . import autodraft
from .caches import copy_cache
from .lookup_branch import LookupBranch
from .prefill import Prefill
from .results import GenResult, Round, common_prefix
from .tree import DraftTree
from .verify import pick, walk

Engine = Any  # a spec.loop.engine.Engine (not imported: spec.loop.engine imports this module)


@dataclass
class Generation:
    """One generation in progress. Iterate (or call step()) for Round events; .result when done."""

    engine: Engine
    prompt_ids: list[int]
    max_new_tokens: int
    ids: list[int] = field(default_factory=list)
    done: bool = False

    def __post_init__(self) -> None:
        t = self.engine.target
        if not self.prompt_ids:
            raise SpecError("the prompt is empty")
        if self.max_new_tokens <= 0:
            raise SpecError("max new tokens must be > 0")
        if len(self.prompt_ids) >= t.max_context:
            raise SpecError(f"the prompt has {len(self.prompt_ids)} tokens; the target's context is {t.max_context}")
        if max(self.prompt_ids) >= t.vocab_size or min(self.prompt_ids) < 0:
            raise SpecError("prompt token ids are outside the target's vocabulary")
        self.cache = t.make_cache()
        d = self.engine.drafter
        self.draft_cache = d.make_cache() if d is not None else None
        if d is not None:
            d.see(self.draft_cache, self.prompt_ids)
        self.branch = LookupBranch() if self.engine.lookup_branch else None  # lookup's guesses beside the head's
        if self.branch is not None:
            self.branch.see(self.prompt_ids)
        self.policy = (None if self.engine.costs is None
                       else autodraft.AutoDraft(self.engine.costs, self.engine.max_draft, max_nodes=self.engine.tree,
                                                adapt=self.engine.adapt))
        self.pending: list[mx.array] = []  # target taps of committed tokens the drafter has not seen
        self.queued: mx.array | None = None  # plain steps: the next token, already dispatched
        self.next_k: int | None = None  # the next round's draft length, when decided ahead
        self.nodes = 0  # this round's tree size (0: a chain)
        self.shared: Prefill | None = None  # a prefill run for several engines (see share())
        # a probe's drafts, where they start in ids, and how many of them were judged so far
        self.shadow: tuple[mx.array | list[int], int, int] | None = None
        self.probe_key = mx.random.key(self.engine.sampling.seed + 1)  # probes leave the main key stream alone
        self.in_flight = False  # work this generation dispatched and nobody has waited for yet
        self.carry = 0.0  # decode time spent in the prefill round (dispatching a plain step): billed to the next round
        self.key = mx.random.key(self.engine.sampling.seed)
        self.rng = np.random.default_rng(self.engine.sampling.seed)  # the acceptance rule's draws (T > 0)
        self.accept_lengths: list[int] = []
        self.drafted: list[int] = []
        self.trees: list[bool] = []
        self.levels: list[tuple] = []  # per round: what each depth of its committed path says (spec.loop.slots)
        self.estimates: mx.array | None = None  # this round's DSpark confidence of each slot drafted (lazy)
        self.copied = 0  # the latest draft's rows from the lookup branch (set with the branch's every draft)
        self.estimates_per_round: list[tuple] = []  # per round: those estimates (spec.loop.confidence)
        self.forwards = 0
        self.prefill_seconds = self.decode_seconds = self.draft_seconds = 0.0
        self.round_seconds: list[float] = []
        self.finish_reason = ""
        self.detok = streaming_detokenizer(t.tokenizer)

    def share(self, prefill: Prefill) -> None:
        """Start from a prefill of this prompt run once for several engines, with (at least) this
        engine's taps: the first round copies its cache and taps instead of running the prompt again.
        Its time still counts in this generation's prefill: alone, this engine would have spent it."""
        if prefill.ids != self.prompt_ids or not set(self.engine.taps) <= set(prefill.taps) or not prefill.done:
            raise SpecError("a shared prefill must be finished, of the same prompt, with this engine's taps")
        self.shared = prefill

    def __iter__(self) -> Iterator[Round]:
        while (r := self.step()) is not None:
            yield r

    def stop(self) -> None:
        if not self.done:
            self.done, self.finish_reason = True, "stopped"
            self.detok.finalize()

    @property
    def result(self) -> GenResult:
        return GenResult(
            text=self.detok.text, token_ids=list(self.ids), accept_lengths=list(self.accept_lengths),
            drafted=list(self.drafted), target_forwards=self.forwards, prompt_tokens=len(self.prompt_ids),
            prefill_seconds=self.prefill_seconds, decode_seconds=self.decode_seconds,
            draft_seconds=self.draft_seconds, finish_reason=self.finish_reason or "running", engine=self.engine.name,
            trees=list(self.trees), round_seconds=list(self.round_seconds), levels=list(self.levels),
            estimates=list(self.estimates_per_round))

    def _keys(self) -> tuple[mx.array | None, mx.array | None]:
        if self.engine.sampling.greedy:
            return None, None
        self.key, a, b = mx.random.split(self.key, 3)
        return a, b

    def _draft(self, k: int, key: mx.array | None, tic: float) -> DraftTree:
        """This round's drafts after the anchor: a chain of at most k, or a tree of at most `tree` nodes
        k deep; the drafter first takes in the taps of what was committed since its last draft."""
        eng = self.engine
        new_taps = None if not self.pending else mx.concatenate(self.pending, axis=1)
        self.pending = []
        with eng.drafting() as head:
            if self.nodes:
                tree = head.propose_tree(self.draft_cache, new_taps, self.ids[-1], k, self.nodes, eng.sampling, key)
            else:
                tree = DraftTree.chain(*head.propose(self.draft_cache, new_taps, self.ids[-1], k, eng.sampling, key,
                                                     eng.confidence_threshold))
                held = getattr(head, "estimates", None)  # DSpark's confidence of every slot this chain drafted
                self.estimates = held.value if held is not None else None  # (a tree's rounds have none)
        if self.branch is not None:
            size = tree.size
            tree = self.branch.extend(tree, k if self.policy is None else self._room() - 1, self.policy)
            self.copied = tree.size - size
            if tree.size != size:  # rows of the lookup's own: a tree round, whose slots DSpark's estimates do not score
                self.estimates = None
        if eng.profile:
            mx.eval(tree.tokens, *([tree.q] if tree.q is not None else []), *[c.state for c in self.draft_cache])
            self.draft_seconds += time.perf_counter() - tic
        return tree

    def _taps_to_keep(self, taps: mx.array | None, rows: int) -> None:
        if taps is not None:
            self.pending.append(taps[:, :rows])

    def _room(self) -> int:
        """How many more tokens this generation may commit (length and context limits)."""
        t = self.engine.target
        pos = len(self.prompt_ids) + len(self.ids)  # position after the anchor
        return min(self.max_new_tokens - len(self.ids), t.max_context - pos + 1)

    def _draft_length(self) -> int:
        """Drafts to verify this round (0 = a plain target step): decided ahead when a plain step
        dispatched this round's forward already."""
        k, self.next_k = self.next_k, None
        if k is None:
            k = self.policy.next() if self.policy else self.engine.max_draft
        self.nodes = self.policy.nodes if self.policy else self.engine.tree
        return min(k, self._room() - 1)

    def _pipeline(self) -> bool:
        """Whether the next round is a plain step too (then its forward can be dispatched now)."""
        if self._room() <= 1:
            return False
        if self.policy is not None:
            self.next_k = self.policy.next()
            return self.next_k == 0
        return self.engine.max_draft == 0

    def _plain_forward(self, token: mx.array) -> mx.array:
        """Dispatch one target step on `token` [1] without waiting; returns the next token [1] (lazy).
        A drafter's taps of `token` are kept for its next draft."""
        _, key = self._keys()
        logits, taps = self.engine.target(token[None], self.cache, self.engine.taps)
        nxt, _ = pick(logits[0], self.engine.sampling, key)
        self._taps_to_keep(taps, 1)
        mx.async_eval(nxt, *(self.pending[-1:] if taps is not None else []))
        return nxt[:1]

    def step(self) -> Round | None:
        """One round. A plain step leaves the next one in flight when the next round is plain too
        (pipelining, as mlx-lm does); call settle() before another generation uses the device."""
        if self.done:
            return None
        eng, t = self.engine, self.engine.target
        if self.ids and (k := self._draft_length()) == 0:
            return self._plain_step()
        k_draft, k_verify = self._keys()
        tic = time.perf_counter()
        shared, shape = 0.0, ((), (), (), (), ())
        if not self.ids:  # prefill: the whole prompt, then the first token from its last row
            if self.shared is not None:
                pre, shared = self.shared, self.shared.seconds
                self.cache = copy_cache(pre.cache)
            else:
                pre = Prefill(t, self.prompt_ids, eng.taps, cache=self.cache).run()
            logits, taps = pre.logits, pre.taps_of(eng.taps)
            committed, _ = pick(logits[0], eng.sampling, k_verify)
            self._taps_to_keep(taps, len(self.prompt_ids))
            mx.eval(committed, *([taps] if taps is not None else []))
            tokens, accepted, drafted = [int(committed[0].item())], 0, 0
            first = time.perf_counter()  # the prefill ends here; a plain step dispatched now is decoding
            if self._pipeline():
                self.queued = self._plain_forward(committed[:1])
            self.carry = time.perf_counter() - first
            tic += self.carry
        else:
            self.estimates = None
            tree = self._draft(k, k_draft, tic)
            drafts = tree.tokens if isinstance(tree.tokens, mx.array) else mx.array(tree.tokens, dtype=mx.uint32)
            ids = mx.concatenate([mx.array([self.ids[-1]], dtype=drafts.dtype), drafts])
            logits, taps = t(ids[None], self.cache, eng.taps, tree=tree)
            est = [self.estimates] if self.estimates is not None else []
            mx.eval(logits, *([taps] if taps is not None else []), *est)
            path, tokens = walk(tree, logits[0], eng.sampling, self.rng)
            drafted, accepted = tree.size, len(path) - 1
            guess = tuple(tree.token_list()[r - 1] for r in tree.first_guesses(path[-1]))  # what missed
            shape = (tuple(tree.levels(path)), tuple(tree.parents), tuple(path), guess,
                     tuple(round(x, 4) for x in est[0].tolist()) if est else ())
            t.keep(self.cache, path, drafted + 1)
            if taps is not None:
                self.pending.append(taps[:, :accepted + 1] if path[-1] == accepted else taps[:, mx.array(path)])
            self.accept_lengths.append(accepted + 1)
            self.drafted.append(drafted)
            self.trees.append(not tree.is_chain)
            self.levels.append(shape[0])
            self.estimates_per_round.append(shape[4])
        seconds = time.perf_counter() - tic + shared
        if self.policy and self.ids:
            self.policy.observe(drafted, accepted, 1000 * seconds, levels=shape[0])
        if self.ids:
            seconds, self.carry = seconds + self.carry, 0.0
        self.in_flight = self.queued is not None
        return self._commit(tokens, accepted, drafted, seconds, *shape, copied=self.copied)

    def _plain_step(self) -> Round:
        """Plain decoding, pipelined as mlx-lm does it: when the next round is plain too, its step is
        dispatched before this one's token is read, so building its graph overlaps the compute."""
        tic = time.perf_counter()
        probed = self.policy is not None and self.shadow is None and self.policy.probe()
        if probed:
            self._probe(probed)
        steady = not probed and self.queued is not None  # one step dispatched this round, if the next is
        token = self.queued if self.queued is not None else self._plain_forward(mx.array([self.ids[-1]]))
        self.queued = self._plain_forward(token) if self._pipeline() else None
        steady = steady and self.queued is not None
        tokens = [int(token.item())]
        self.accept_lengths.append(1)
        self.drafted.append(0)
        self.trees.append(False)
        self.levels.append(())
        self.estimates_per_round.append(())
        self.in_flight = self.queued is not None
        seconds = time.perf_counter() - tic
        if self.policy:
            self.policy.observe(0, 0, 1000 * seconds, steady=steady)
        seconds, self.carry = seconds + self.carry, 0.0
        return self._commit(tokens, 0, 0, seconds)

    def _probe(self, k: int) -> None:
        """Let the drafter draft k tokens after the newest one without verifying them (a shadow probe):
        _commit compares them with what the target commits and tells the policy. The drafter takes in
        the taps of every token before that one (a step in flight has the newest one's: kept)."""
        split = len(self.pending) - (self.queued is not None)
        new_taps = mx.concatenate(self.pending[:split], axis=1) if split else None
        self.pending = self.pending[split:]
        key = None
        if not self.engine.sampling.greedy:
            self.probe_key, key = mx.random.split(self.probe_key)
        with self.engine.drafting() as head:
            draft, _ = head.propose(self.draft_cache, new_taps, self.ids[-1], k, self.engine.sampling, key)
        mx.async_eval(draft)
        self.shadow = (draft, len(self.ids), 0)

    def _check_probe(self) -> None:
        """Tell the policy which of a probe's drafts the target has committed since (each judged once,
        as it comes); the probe is over at its first miss, its last draft or the generation's end."""
        draft, start, judged = self.shadow
        if not isinstance(draft, list):
            draft = draft.tolist()
        seen = self.ids[start : start + len(draft)]
        matched = common_prefix(draft, seen)
        final = matched < len(seen) or len(seen) == len(draft) or self.done
        if len(seen) > judged or final:
            self.policy.observe_probe(len(seen), matched, start=judged, final=final)
        self.shadow = None if final else (draft, start, len(seen))

    def settle(self) -> float:
        """Wait for the work this generation left in flight (the plain decoder's dispatched next step),
        so another generation's round starts on an idle device. The wait is this generation's own
        compute, what its next round would have waited for: it is added to its decode time. Returns it."""
        if not self.in_flight:
            return 0.0
        tic = time.perf_counter()
        mx.eval(self.queued)
        self.in_flight = False
        waited = time.perf_counter() - tic
        self.decode_seconds += waited
        return waited

    def _commit(self, tokens: list[int], accepted: int, drafted: int, seconds: float, levels: tuple = (),
                parents: tuple[int, ...] = (), path: tuple[int, ...] = (), guess: tuple[int, ...] = (),
                estimates: tuple[float, ...] = (), copied: int = 0) -> Round:
        """Book one target forward's tokens (cut at eos) and its time; emit the Round (with the text of
        the head's `guess` where its draft was rejected: decoded here, after the round's time is taken)."""
        t = self.engine.target
        self.forwards += 1
        if len(self.ids) == 0:
            self.prefill_seconds = seconds
        else:
            self.decode_seconds += seconds
            self.round_seconds.append(seconds)
        for i, tok in enumerate(tokens):
            if tok in t.eos_ids:
                tokens, self.finish_reason = tokens[: i + 1], "eos"
                break
        index = len(self.accept_lengths)
        self.ids.extend(tokens)
        if self.engine.drafter is not None:
            self.engine.drafter.see(self.draft_cache, tokens)
        if self.branch is not None:
            self.branch.judge(tokens)
            self.branch.see(tokens)
        if not self.finish_reason:
            if len(self.ids) >= self.max_new_tokens:
                self.finish_reason = "length"
            elif len(self.prompt_ids) + len(self.ids) >= t.max_context:
                self.finish_reason = "context"
        self.done = bool(self.finish_reason)
        if self.shadow is not None:
            self._check_probe()
        pieces = self._detokenize(tokens, accepted)
        return Round(self.engine.name, index, tokens, min(accepted, len(tokens)), drafted,
                     "".join(text for _, text in pieces), seconds, self.done, pieces, levels, parents, path,
                     t.decode(guess) if guess else "", estimates, copied)

    def _detokenize(self, tokens: list[int], accepted: int) -> tuple[tuple[str, str], ...]:
        """Feed the round's tokens (eos left out) to the streaming detokenizer: the text of the
        accepted drafts, then of the target's own token(s); flushed when the generation is done."""
        eos = self.engine.target.eos_ids
        pieces = []
        for kind, group in (("acc", tokens[:accepted]), ("own", tokens[accepted:])):
            for tok in group:
                if tok not in eos:
                    self.detok.add_token(tok)
            if kind == "own" and self.done:
                self.detok.finalize()
            text = self.detok.last_segment
            if text:
                pieces.append((kind, text))
        return tuple(pieces)


def streaming_detokenizer(tokenizer: Any) -> StreamingDetokenizer:
    """mlx-lm's streaming detokenizer of the tokenizer (a naive one around a plain HF tokenizer)."""
    if hasattr(tokenizer, "detokenizer"):
        return tokenizer.detokenizer
    return NaiveStreamingDetokenizer(tokenizer)
