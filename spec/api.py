"""The public API kept from the original tool: load a pair, generate, get a GenResult."""

from __future__ import annotations

from typing import Callable, Sequence

from .errors import SpecError
from .heads.dflash import DFlashDraftModel
from .heads.dspark import DSparkDraftModel
from .heads.registry import load_dflash, load_dspark
from .loop.calibrate import build_engine
from .loop.engine import Engine, GenResult, Round
from .loop.verify import Sampling
from .target import Target, load_target


def load_pair(target: str, drafter: str, drafter_bits: int | None = None) -> tuple[Target, DSparkDraftModel]:
    """Target (hub id or folder) + its DSpark head, checked against each other."""
    t = load_target(target)
    return t, load_dspark(drafter, t, drafter_bits=drafter_bits)


def load_dflash_pair(target: str, drafter: str, drafter_bits: int | None = None,
                     block_size: int | None = None) -> tuple[Target, DFlashDraftModel]:
    """Target (hub id or folder) + its DFlash head, bound to the target's embedding and lm_head."""
    t = load_target(target)
    return t, load_dflash(drafter, t, drafter_bits=drafter_bits, block_size=block_size)


def speculative_generate(target: Target, drafter: DSparkDraftModel | DFlashDraftModel, prompt: str | Sequence[int],
                         max_new_tokens: int = 256, *, max_draft: int | str = 0, temperature: float = 0.0,
                         top_p: float = 1.0, top_k: int = 0, seed: int = 0, confidence_threshold: float = 0.0,
                         thinking: bool = False, tree: int | str = "auto",
                         on_round: Callable[[Round], None] | None = None) -> GenResult:
    """Lossless speculative decoding with either head. max_draft 0 = the head's whole block, "auto" =
    chosen every round from measured costs and the acceptance so far (spec.loop.autodraft);
    thinking: the chat template's enable_thinking (Qwen3's <think>), off by default;
    tree: verify at most this many drafts as a tree, max_draft deep (0 = chains; "auto": trees up to the
    head's block when max_draft is "auto", chains at a fixed length; spec.loop.tree)."""
    engine = build_engine(target, drafter, max_draft, sampling=Sampling(temperature, top_p, top_k, seed),
                          confidence_threshold=confidence_threshold, thinking=thinking, tree=tree)
    return engine.generate(prompt, max_new_tokens, on_round=on_round)


def dflash_generate(target: Target, drafter: DFlashDraftModel, prompt: str | Sequence[int],
                    max_new_tokens: int = 256, **kwargs) -> GenResult:
    if not isinstance(drafter, DFlashDraftModel):
        raise SpecError("dflash_generate needs a DFlash head (use speculative_generate for DSpark)")
    return speculative_generate(target, drafter, prompt, max_new_tokens, **kwargs)


def greedy_generate(target: Target, prompt: str | Sequence[int], max_new_tokens: int = 256, *,
                    temperature: float = 0.0, top_p: float = 1.0, top_k: int = 0, seed: int = 0,
                    thinking: bool = False, on_round: Callable[[Round], None] | None = None) -> GenResult:
    """Plain decoding with the target alone (the baseline every race is checked against)."""
    engine = Engine(target, None, sampling=Sampling(temperature, top_p, top_k, seed), thinking=thinking)
    return engine.generate(prompt, max_new_tokens, on_round=on_round)
