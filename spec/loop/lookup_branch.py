"""Prompt lookup as one more branch of a head's round: the tokens that followed the newest ones earlier in
the text, hung from the anchor beside the head's own guesses, verified in the same forward.

The head guesses from what it learned; the lookup copies from the text. They fail in different places
(the lookup lands where an answer quotes its prompt, the head where the text is new), so one tree holding
both commits what either gets right. The branch is merged into the head's tree where they agree (those
rows cost nothing) and adds rows below where they part. At T > 0 its tokens are certain trials (q all on
one token), tested before the head's draws at each node they pass: an independent trial with its own q,
which keeps the multi-draft rule exact (spec.loop.verify.walk).

How many of its tokens to graft is decided each round as `auto` decides a draft length: by the tokens
expected per millisecond. The lookup's landing rates are learned in every drafting round, grafted or not
(its proposal is free, and what the target committed says how far it would have gone), from a neutral
prior, apart for each length of the match it copies from (a copy after one shared token lands far less
often than one after four); the expected gain at depth d is the lookup's chance of reaching d where the
head's tree does not (treated as independent), the cost the verify rows it adds. At a fixed draft length
the whole branch is grafted, as a fixed length verifies the head's whole draft.
"""

from __future__ import annotations

from ..heads.lookup import LookupCache, LookupConfig, PromptLookup
from .autodraft import Acceptance, AutoDraft
from .results import common_prefix
from .tree import DraftTree

PRIOR = 0.5  # the lookup's landing rate before it has shown any (learned within a few rounds)


def graft(tree: DraftTree, chain: list[int]) -> DraftTree:
    """`tree` with `chain` hung from the anchor: through the rows that hold its prefix, then new rows,
    after all of the head's. At T > 0 every node the chain passes gets its token as a certain trial."""
    if not chain:
        return tree
    tokens, parents = list(tree.token_list()), list(tree.parents)
    trials = None if tree.q is None else {row: tree.drawn(row) for row in tree.kids}  # the head's draws, kept
    children, certain, node = tree.children(), {}, 0
    for tok in chain:
        certain[node] = tok
        child = children.get(node, {}).get(tok)
        if child is None:
            tokens.append(tok)
            parents.append(node)
            child = len(tokens)
            children[child] = {}
        node = child
    return DraftTree(tokens, parents, tree.q, tree.q_index, trials, certain=certain, head_rows=tree.size)


def new_rows(tree: DraftTree, chain: list[int]) -> list[int]:
    """For each prefix of `chain` (1, 2, ... tokens): how many rows grafting it adds to `tree`."""
    children, node, added, out = tree.children(), 0, 0, []
    for tok in chain:
        node = children.get(node, {}).get(tok) if node is not None else None
        added += node is None
        out.append(added)
    return out


class LookupBranch:
    """One generation's lookup branch: the text it searches, its landing rates, and each round's choice."""

    def __init__(self, lookup: PromptLookup | None = None, prior: float = PRIOR, decay: float = 0.95):
        self.lookup = lookup or PromptLookup(LookupConfig())
        self.cache: LookupCache = self.lookup.make_cache()
        self.acceptance = {n: Acceptance([prior] * self.lookup.max_drafts, decay=decay) for n in self.cache.sizes}
        self.matched = 0  # the length of the match this round's proposal copies from
        self.proposed: list[int] = []  # this round's proposal, judged once the round commits
        self.grafted: list[int] = []  # how many tokens each drafting round grafted (0: none)

    def see(self, tokens: list[int]) -> None:
        self.cache.extend(tokens)

    def extend(self, tree: DraftTree, depth: int, policy: AutoDraft | None) -> DraftTree:
        """This round's tree with the lookup's continuation (at most `depth` tokens) grafted on: as many
        of its tokens as pay (policy: auto), or all of them (a fixed draft length)."""
        self.matched, self.proposed = self.cache.match(min(depth, self.lookup.max_drafts))
        m = len(self.proposed) if policy is None else self._best(tree, policy)
        self.grafted.append(m)
        return graft(tree, self.proposed[:m])

    def _best(self, tree: DraftTree, policy: AutoDraft) -> int:
        """The number of lookup tokens with the most expected tokens per millisecond (0: none)."""
        if not self.proposed:
            return 0
        reach = policy.reach()
        head = 1.0 + sum(reach)  # the tokens the head's own rows commit on average
        rates, alive, gain = self.acceptance[self.matched].rates(), 1.0, 0.0
        best, best_rate = 0, head / policy.round_cost(tree.size, not tree.is_chain, tree.size)
        for m, rows in enumerate(new_rows(tree, self.proposed), 1):
            alive *= rates[m - 1]
            gain += alive * (1.0 - (reach[m - 1] if m <= len(reach) else 0.0))
            ms = policy.round_cost(tree.size + rows, rows > 0 or not tree.is_chain, tree.size)
            if (rate := (head + gain) / ms) > best_rate:
                best, best_rate = m, rate
        return best

    def judge(self, committed: list[int]) -> None:
        """What the round committed says of its proposal: how far it matched, as far as it was tested."""
        if self.proposed:
            acceptance = self.acceptance[self.matched]
            acceptance.discount()
            acceptance.observe(min(len(self.proposed), len(committed)), common_prefix(self.proposed, committed))
        self.proposed = []
