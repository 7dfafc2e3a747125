"""What a race runs with, under one name per setting everywhere: the page's knobs, the API's parameters,
`python -m spec race`'s flags, race files and sweep files all read and write these names (the draft length
is `max_draft`, as in the library and `python -m spec`). Names that older files and API calls used are
still read, with one deprecation line each."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any

from ..errors import deprecated
from ..loop.engine import draft_length, tree_setting
from ..loop.verify import Sampling

AUTO = "auto"
RENAMED = {"dspark_cap": "dspark_max_draft", "dflash_len": "dflash_max_draft"}  # old name -> today's
SAMPLING = tuple(f.name for f in fields(Sampling))  # temperature, top_p, top_k, seed: flat in every dict
PARSE = {"dspark_max_draft": draft_length, "dflash_max_draft": draft_length, "lookup_max_draft": draft_length,
         "tree": tree_setting}  # "auto" or a number


@dataclass(frozen=True)
class RaceSettings:
    max_new_tokens: int = 128
    sampling: Sampling = field(default_factory=Sampling)
    dspark_max_draft: int | str = AUTO  # "auto": chosen per round (spec.loop.autodraft); 0 = the head's block
    dspark_threshold: float = 0.0
    dspark_markov: bool = True  # off: DSpark drafts its slots in parallel, without its Markov head (an ablation)
    dflash_max_draft: int | str = AUTO  # "auto": chosen per round; 0 = the full block
    lookup: bool = False  # a prompt-lookup lane (spec.heads.lookup): the head-free racer
    lookup_max_draft: int | str = AUTO  # "auto": chosen per round; 0 = its whole block (15)
    baseline: bool = True
    thinking: bool = False  # the chat template's enable_thinking (Qwen3's <think>)
    tree: int | str = AUTO  # drafts per round a tree may hold; 0: chains; auto: the engine's rule (spec.loop.engine)
    lookup_branch: bool = True  # the heads' rounds also verify prompt lookup's guess (spec.loop.lookup_branch)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> "RaceSettings":
        """Settings from a flat dict (a race file's, an API call's, the page's): missing ones their defaults."""
        v = upgraded(values)
        sampling = Sampling(**{k: v.pop(k) for k in SAMPLING if k in v})
        names = {f.name for f in fields(cls)} - {"sampling"}
        return cls(sampling=sampling, **{k: x for k, x in v.items() if k in names})

    def as_dict(self) -> dict[str, Any]:
        """The flat dict race files, sweep files and results echo (the API's parameter names)."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "sampling"}
        out.update({k: getattr(self.sampling, k) for k in SAMPLING})
        return out

    def with_sampling(self, **changes: Any) -> "RaceSettings":
        return replace(self, sampling=replace(self.sampling, **changes))


def upgraded(values: dict[str, Any]) -> dict[str, Any]:
    """A settings dict in today's names: an old name's value moves to its new name (one deprecation line);
    a nested `sampling` dict is flattened."""
    v = dict(values)
    v.update(v.pop("sampling", None) or {})
    for old, new in RENAMED.items():
        if old in v:
            value = v.pop(old)
            if value is not None:  # it wins over today's name left at its default (an API call fills that in)
                deprecated(old, new)
                if v.get(new, AUTO) == AUTO:
                    v[new] = value
    return v


def defaults() -> dict[str, Any]:
    """Every setting's default, flat (the race command's flags and the page's knobs start here)."""
    return RaceSettings().as_dict()
