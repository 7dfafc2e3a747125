"""`python -m spec bench head-to-head` (the default): the head to head.

Greedy (ours and mlx-lm's), DSpark and DFlash at fixed caps and `auto` over the held-out prompts of
each domain, after a warm-up, several trials each (median tok/s); the table "method x domain: accept /
tok/s / speedup" as markdown, CSV, JSON and a PNG plot. At T = 0 every row's tokens must equal the
greedy baseline's, or the run fails.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd
from mlx_lm.generate import stream_generate
from tqdm import tqdm

from ..errors import SpecError
from ..loop.calibrate import build_engine, cached_costs
from ..loop.results import common_prefix
from ..loop.slots import as_columns
from ..loop.verify import Sampling
from ..race.arena import load_preset_arena
from ..race.sweep import summarise
from ..report import header_of, spread, to_markdown, write_outputs
from .common import on_arena


def cost_model(arena: Any, preset: str = "pocket") -> str:
    """The chooser's cost model of each head (spec.autodraft: measured once per machine and cached), in
    this process's BLAS, as markdown: what `auto` weighs every round, per row count verified."""
    out = []
    for kind, head in arena.heads.items():
        c = arena.call(lambda h=head: cached_costs(arena.target, h))
        rows = [{"k": k, "verify (k+1 rows) ms": round(c.verify[k], 2), "draft ms": round(c.draft[k], 2),
                 "round ms": round(c.verify[k] + c.draft[k], 2),
                 "prior a_k": round(c.prior[k - 1], 2) if k else "-"} for k in range(c.max_k + 1)]
        trees = (f"choices 2, 3, ... land where the ones before missed: {', '.join(f'{r:.2f}' for r in c.second)}; "
                 f"a tree round costs {c.tree_ms:.1f} ms more than a chain of as many drafts" if c.second
                 else "this target verifies chains only")
        loop = (f"a round in a real generation costs {c.loop_ms:+.1f} ms beyond its parts above (a chain), "
                f"{c.tree_loop_ms:+.1f} ms (a tree)")
        out.append(f"\nauto's cost model, {kind} head ({preset}): ms per round verifying k drafts (a chain, or a "
                   f"tree of k)\n\n{to_markdown(pd.DataFrame(rows))}\n\n{trees}; {loop}\n")
    return "".join(out)


def print_cost_model(preset: str = "pocket") -> None:
    arena = load_preset_arena(preset)
    try:
        print(cost_model(arena, preset))
    finally:
        arena.close()


@dataclass(frozen=True)
class Method:
    name: str
    kind: str  # "greedy" | "mlx-lm" | "dspark" | "dflash" | "lookup"
    cap: int | str = 0  # drafts verified per round; 0 = the head's whole block; "auto": chosen every round
    whole_vocab: bool = False  # ignore the head's draft vocabulary (spec.vocab): the cost it saves
    tree: int | None = None  # drafts verified as a tree of this many nodes (0: chains; None: auto's default, trees)
    adapt: bool = False  # auto as before issue 39: following each generation's own timings (spec.autodraft)
    lookup_branch: bool = False  # prompt lookup's guess as one more branch of each round (spec.loop.lookup_branch)



def methods(heads: dict, vocab_ablation: bool = False, adapting: bool = False) -> list[Method]:
    """The original release's rows: greedy, mlx-lm, DSpark caps 2 / 4 / full, DFlash caps 2 / full, and
    each head's full block as a tree of as many nodes, auto (trees allowed) and auto with chains only;
    prompt lookup's full block and auto where the arena has it, and each head's auto with lookup's guess
    as one more branch;
    vocab_ablation adds the full caps drafting over the whole vocabulary (heads with a draft vocabulary);
    adapting adds auto as it was before issue 39 (its choices following its own round times)."""
    out = [Method("greedy (ours)", "greedy"), Method("greedy (mlx-lm)", "mlx-lm")]
    for kind, label, caps in (("dspark", "DSpark", (2, 4)), ("dflash", "DFlash", (2,))):
        if kind not in heads:
            continue
        full = heads[kind].max_drafts
        out += [Method(f"{label} cap {c}", kind, c) for c in caps if c < full]
        out.append(Method(f"{label} full ({full})", kind, full))
        if vocab_ablation and heads[kind].draft_vocab is not None:
            out.append(Method(f"{label} full, whole vocab", kind, full, whole_vocab=True))
        out.append(Method(f"{label} tree ({full})", kind, full, tree=full))
        out.append(Method(f"{label} auto", kind, "auto"))
        out.append(Method(f"{label} auto, chains", kind, "auto", tree=0))
        if "lookup" in heads:
            out.append(Method(f"{label} auto + lookup", kind, "auto", lookup_branch=True))
        if adapting:
            out.append(Method(f"{label} auto, adapting", kind, "auto", adapt=True))
    if "lookup" in heads:  # the head-free racer: where a trained head is worth its training
        full = heads["lookup"].max_drafts
        out += [Method(f"lookup full ({full})", "lookup", full), Method("lookup auto", "lookup", "auto")]
    return out



def mlx_lm_greedy(target: Any, prompt_ids: list[int], max_new_tokens: int) -> tuple[list[int], float, float]:
    """mlx-lm's own stream_generate (greedy): (token ids, end-to-end tok/s, decode tok/s), both from the
    rates it reports (its prompt rate gives the prefill's seconds)."""
    ids, r = [], None
    for r in stream_generate(target.model, target.tokenizer, prompt_ids, max_tokens=max_new_tokens):
        ids.append(r.token)
    if r is None or r.generation_tps <= 0:
        return ids, 0.0, 0.0
    seconds = r.prompt_tokens / r.prompt_tps + r.generation_tokens / r.generation_tps
    return ids, r.generation_tokens / seconds, r.generation_tps



def run_method(target: Any, heads: dict, m: Method, prompt_ids: list[int], max_new_tokens: int,
               sampling: Any, profile: bool = False) -> dict:
    """One generation: tokens, accept lengths, decode seconds (and the drafter's share if profiled)."""
    if m.kind == "mlx-lm":
        ids, tps, decode_tps = mlx_lm_greedy(target, prompt_ids, max_new_tokens)
        ids = ids[: next((i + 1 for i, t in enumerate(ids) if t in target.eos_ids), len(ids))]
        return {"ids": ids, "tok_s": tps, "decode_tok_s": decode_tps, "accept": [], "draft_s": 0.0, "decode_s": 0.0}
    head = heads.get(m.kind)
    eng = build_engine(target, head, m.cap, sampling=sampling, name=m.name, profile=profile, tree=m.tree,
                       adapt=m.adapt, lookup_branch=m.lookup_branch)
    vocab = head.draft_vocab if head is not None else None
    if m.whole_vocab:
        head.draft_vocab = None
    try:
        r = eng.generate(prompt_ids, max_new_tokens)
    finally:
        if head is not None:
            head.draft_vocab = vocab
    return {"ids": r.token_ids, "tok_s": r.tokens_per_sec, "decode_tok_s": r.decode_tokens_per_sec,
            "accept": r.accept_lengths,
            "draft_s": r.draft_seconds, "decode_s": r.decode_seconds,
            "drafted": [f"t{d}" if tree else str(d) for d, tree in zip(r.drafted, r.trees)],
            "positions": r.positions}



def head_to_head(target: Any, heads: dict, prompts: list[dict], *, trials: int = 3, max_new_tokens: int = 96,
                 temperature: float = 0.0, seed: int = 0, progress: bool = True,
                 vocab_ablation: bool = False, only: Sequence[str] = (), adapting: bool = False) -> "Any":
    """Every method on every prompt, `trials` times (median tok/s), after a warm-up. The trials take
    turns (every method once, then again): a machine whose speed drifts slows all of them alike.
    same_rounds: whether every trial committed the same rounds (draft lengths, trees, accepts).

    At T = 0 every method's tokens must equal our greedy baseline's: a mismatch raises. `only`: the rows
    whose name holds one of these words (our greedy, the reference, always runs)."""
    sampling = Sampling(temperature, seed=seed)
    ms = [m for m in methods(heads, vocab_ablation, adapting)
          if m.kind == "greedy" or not only or any(w.lower() in m.name.lower() for w in only)]
    encoded = [(p["domain"], target.encode_chat(p["prompt"])) for p in prompts]
    for m in ms:  # warm-up: compile paths, fill allocator caches
        run_method(target, heads, m, encoded[0][1], 16, sampling)
    rows = []
    bar = tqdm(total=len(encoded) * len(ms), desc="bench", unit="run", disable=not progress)
    for pi, (domain, ids) in enumerate(encoded):
        reference = None
        trial_runs = [[run_method(target, heads, m, ids, max_new_tokens, sampling) for m in ms] for _ in range(trials)]
        for mi, m in enumerate(ms):
            runs = [t[mi] for t in trial_runs]
            prof = run_method(target, heads, m, ids, max_new_tokens, sampling, profile=True) \
                if m.kind in ("dspark", "dflash", "lookup") else runs[0]
            out = runs[0]["ids"]
            if m.kind == "greedy":
                reference = out
            elif temperature == 0 and reference is not None and out != reference:
                where = common_prefix(out, reference)
                raise SpecError(f"{m.name} differs from greedy on prompt {pi} ({domain}) at token {where}")
            verify_s = prof["decode_s"] - prof["draft_s"]
            trial_tok_s = [r["tok_s"] for r in runs]
            rows.append({
                "domain": domain, "method": m.name, "prompt": pi, "tokens": len(out),
                "rounds": len(runs[0]["accept"]), "committed": sum(runs[0]["accept"]),
                "tok_s": float(np.median(trial_tok_s)),
                "decode_tok_s": float(np.median([r["decode_tok_s"] for r in runs])),
                "tok_s_trials": " ".join(f"{x:.2f}" for x in trial_tok_s),
                "spread": spread(trial_tok_s),
                "draft_ms_per_round": 1000 * prof["draft_s"] / max(1, len(prof["accept"])),
                "draft_share": prof["draft_s"] / verify_s if prof["draft_s"] and verify_s > 0 else 0.0,
                "drafted": " ".join(map(str, runs[0].get("drafted", []))),
                "same_rounds": len({(tuple(r.get("drafted", [])), tuple(r["accept"])) for r in runs}) == 1,
                **as_columns(runs[0].get("positions", [])),
            })
            bar.update(1)
    bar.close()
    return pd.DataFrame(rows)



def run_head_to_head(*, preset: str = "pocket", target: str | None = None, dspark: str | None = None,
                     dflash: str | None = None, prompts: str | Path | None = None, per_domain: int = 3,
                     trials: int = 3, max_new_tokens: int = 96, temperature: float = 0.0,
                     out: str | Path = "bench-results", only: Sequence[str] = (), vocab_ablation: bool = False,
                     adapting: bool = False) -> int:
    """The head to head on a preset's (or the given) models: prints the table, writes its files to `out`.
    only: the rows whose name holds one of these words (see head_to_head)."""
    def bench(arena: Any, chosen: list[dict]) -> tuple[Any, str]:
        runs = arena.call(lambda: head_to_head(
            arena.target, arena.heads, chosen, trials=trials, max_new_tokens=max_new_tokens,
            temperature=temperature, vocab_ablation=vocab_ablation, adapting=adapting, only=only))
        auto = runs["method"].str.contains(" auto").any()
        return runs, cost_model(arena, target or preset) if auto else ""

    chosen, (runs, costs) = on_arena(bench, preset=preset, target=target, dspark=dspark, dflash=dflash,
                                     prompts=prompts, per_domain=per_domain)
    header = header_of(f"{len(chosen)} prompts, {trials} trials, {max_new_tokens} new tokens, T={temperature}",
                       preset=preset, target=target)
    paths = write_outputs(runs, summarise(runs), Path(out), header)
    if costs:
        paths[0].write_text(paths[0].read_text() + costs)
    print(paths[0].read_text())
    print("written: " + ", ".join(str(p) for p in paths))
    return 0
