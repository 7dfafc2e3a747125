"""A round's drafts as a tree, verified by the target in one forward.

Row 0 is the anchor (the newest committed token); every other row is a drafted token whose parent is
an earlier row. A chain is the tree whose row i hangs under row i - 1: one code path verifies both.
The target sees the rows at positions anchor + depth, each row attending to the context and to its
own ancestors only (`mask`), so every root-to-node path is scored exactly as if it had been fed alone.

Two ways to grow a tree from a head's distributions, one per sampling regime:
- T = 0, `best_first`: the N nodes with the highest path probability under the head (the product of
  its probabilities along the path; DDTree's rule). Exact top-N: a path's probability never exceeds
  its parent's, so the best N are closed under taking parents and can be found level by level.
- T > 0, `merge_chains`: K chains each drawn from the head (SpecInfer's token tree), merged where they
  share a prefix. At each node the drawn next tokens are independent draws from one distribution q,
  which is what the multi-draft acceptance rule (spec.loop.verify.walk) needs to stay exact.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable

import mlx.core as mx
import numpy as np


@dataclass
class DraftTree:
    """tokens[i] is row i + 1's token; parents[i] its parent row. At T > 0, q holds the head's
    log-probabilities [M, V] and q_index[row] the q row the children of `row` were drawn from, and
    trials[row] the drawn tokens in draw order (repeats kept; a chain's trials are its children).
    A prompt-lookup branch grafted on (spec.loop.lookup_branch): certain[row] is the token the lookup
    proposes after `row`, tested before the head's draws there, and the rows after head_rows are the
    lookup's own (the head's statistics leave them out)."""

    tokens: mx.array | list[int]
    parents: list[int]
    q: mx.array | None = None
    q_index: dict[int, int] | None = None
    trials: dict[int, list[int]] | None = None
    certain: dict[int, int] | None = None
    head_rows: int | None = None
    depths: list[int] = field(init=False)

    def __post_init__(self) -> None:
        self.depths = [0]
        for p in self.parents:
            if not 0 <= p < len(self.depths):
                raise ValueError(f"row {len(self.depths)}'s parent {p} is not an earlier row")
            self.depths.append(self.depths[p] + 1)

    @classmethod
    def chain(cls, draft: mx.array, q: mx.array | None = None) -> "DraftTree":
        """k drafts in a row (q [k, V]: the distribution each was drawn from)."""
        k = draft.shape[0]
        return cls(draft, list(range(k)), q, {i: i for i in range(k)} if q is not None else None)

    @property
    def size(self) -> int:
        """Drafted nodes (rows less the anchor)."""
        return len(self.parents)

    @property
    def is_chain(self) -> bool:
        return all(p == i for i, p in enumerate(self.parents))

    def token_list(self) -> list[int]:
        if not isinstance(self.tokens, list):
            self.tokens = self.tokens.tolist()
        return self.tokens

    @cached_property
    def kids(self) -> dict[int, list[int]]:
        """{row: its child rows, in row order}."""
        out: dict[int, list[int]] = {}
        for i, p in enumerate(self.parents):
            out.setdefault(p, []).append(i + 1)
        return out

    def own_kids(self, row: int) -> list[int]:
        """`row`'s child rows that the head drafted (a grafted lookup's own rows left out)."""
        kids = self.kids.get(row, [])
        return kids if self.head_rows is None else [c for c in kids if c <= self.head_rows]

    def children(self) -> dict[int, dict[int, int]]:
        """{row: {token: child row}}."""
        tokens = self.token_list()
        return {row: {tokens[c - 1]: c for c in rows} for row, rows in self.kids.items()}

    def drawn(self, row: int) -> list[int]:
        """The tokens drawn for `row`'s children, in draw order (its children, for a tree without trials)."""
        if self.trials is not None:
            return self.trials.get(row, [])
        tokens = self.token_list()
        return [tokens[c - 1] for c in self.kids.get(row, [])]

    def mask(self) -> np.ndarray:
        """Bool [R, R]: row r sees row c when c is r or one of its ancestors."""
        rows = len(self.depths)
        seen = np.eye(rows, dtype=bool)
        for i, p in enumerate(self.parents):
            seen[i + 1] |= seen[p]
        return seen

    def levels(self, path: list[int]) -> list[tuple[int, int]]:
        """What each depth of an accepted path tells about the head: (the rank among its siblings of the
        child that landed, 1 = the likeliest, or 0 when none did; how many children were verified there).
        Siblings rank in row order: best first for best_first trees, in draw order for drawn ones. A
        chain that landed n of k drafts: n x (1, 1), then (0, 1) if n < k. Only the head's rows count: where
        the path goes on through a grafted lookup row, the head missed there (T = 0: the target's token was
        none of its children) or was not asked (T > 0: the lookup's certain trial came first), and the
        levels end."""
        out = []
        for a, b in zip(path, path[1:] + [None]):
            own = self.own_kids(a)
            if b in own:
                out.append((own.index(b) + 1, len(own)))
                continue
            if own and (b is None or self.q is None):
                out.append((0, len(own)))
            break
        return out

    def first_guesses(self, row: int) -> list[int]:
        """The rows of the head's likeliest continuation below `row`: its first child, that child's first
        child, and so on (a chain: the drafts after `row`)."""
        out = []
        while own := self.own_kids(row):
            row = own[0]
            out.append(row)
        return out

    def path_to(self, row: int) -> list[int]:
        """Rows from the anchor down to `row`."""
        path = [row]
        while path[-1]:
            path.append(self.parents[path[-1] - 1])
        return path[::-1]


def best_first(level: Callable[[int, list[int]], tuple[np.ndarray, np.ndarray]], depth: int, nodes: int,
               anchor: int) -> DraftTree:
    """The `nodes` likeliest paths of at most `depth` tokens under a head, as a tree (T = 0).

    level(d, parent_tokens) -> (log-probs [F, m], tokens [F, m]): the head's m best next tokens after
    each of F frontier nodes at depth d (their tokens given, the anchor's for d = 0), best first.
    Level by level, only the nodes that can still be among the best N grow children."""
    kept: list[tuple[float, int, int, int]] = []  # (score, depth, candidate id, parent candidate id)
    tokens: list[int] = []
    frontier = [(0.0, -1, anchor)]  # (score, candidate id, token)
    for d in range(depth):
        lp, tok = level(d, [t for _, _, t in frontier])
        cands = []
        for (score, cid, _), row_lp, row_tok in zip(frontier, lp, tok):
            for v, t in zip(row_lp, row_tok):
                cands.append((score + float(v), cid, int(t)))
        cands = heapq.nlargest(nodes, cands, key=lambda c: c[0])
        if len(kept) >= nodes:  # children never beat their parent: drop what cannot make the cut
            floor = heapq.nlargest(nodes, kept)[-1][0]
            cands = [c for c in cands if c[0] > floor]
        frontier = []
        for score, parent, t in cands:
            kept.append((score, -d, len(tokens), parent))
            frontier.append((score, len(tokens), t))
            tokens.append(t)
        if not frontier:
            break
    best = sorted(heapq.nlargest(nodes, kept), key=lambda c: (-c[1], c[2]))  # by depth: parents first
    row = {c[2]: i + 1 for i, c in enumerate(best)}
    return DraftTree([tokens[c[2]] for c in best], [row.get(c[3], 0) for c in best])


def merge_chains(chains: list[list[int]], q_rows: list[list[int]], q: mx.array) -> DraftTree:
    """K drawn chains merged into a token tree (T > 0). chains[j][d] was drawn from q[q_rows[j][d]];
    every draw is kept as a trial of its parent node, in chain order."""
    tokens: list[int] = []
    parents: list[int] = []
    children: dict[tuple[int, int], int] = {}
    trials: dict[int, list[int]] = {}
    q_index: dict[int, int] = {}
    for chain, rows in zip(chains, q_rows):
        node = 0
        for tok, qr in zip(chain, rows):
            trials.setdefault(node, []).append(tok)
            q_index.setdefault(node, qr)
            if (node, tok) not in children:
                tokens.append(tok)
                parents.append(node)
                children[(node, tok)] = len(tokens)
            node = children[(node, tok)]
    return DraftTree(tokens, parents, q, q_index, trials)
