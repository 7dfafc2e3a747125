"""The race's knobs, ONE table: the page's sliders and checkboxes, the settings a race runs with, and the
API's parameters (names, types, defaults, descriptions) are all built from it, so the page and the API
offer the same things with the same limits and the same defaults (draft lengths: auto)."""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass
from typing import Any, Callable

import gradio as gr

from spec.errors import SpecError
from spec.race.settings import AUTO, RENAMED, RaceSettings, upgraded

MAX_NEW_TOKENS = 2048  # the page's slider and the API's limit


@dataclass(frozen=True)
class Knob:
    name: str  # the RaceSettings field and the API parameter
    label: str  # the page's (short: a long one wraps into a tall pill)
    info: str  # the page's help line; with `api`, the API's description
    default: Any
    lo: float | None = None
    hi: float | None = None
    step: float | None = None
    api: str = ""  # the API's description when it differs from `info`


KNOBS = (
    Knob("max_new_tokens", "Max new tokens", f"1 to {MAX_NEW_TOKENS}", 128, 1, MAX_NEW_TOKENS, 1),
    Knob("temperature", "Temperature", "0 = greedy; above 0 every lane samples", 0.0, 0, 2, 0.05),
    Knob("top_p", "Top-p", "1 = off", 1.0, 0.05, 1, 0.01),
    Knob("top_k", "Top-k", "0 = off", 0, 0, 200, 1),
    Knob("seed", "Seed", "the sampling seed (T > 0)", 0),
    Knob("dspark_max_draft", "DSpark draft length", "drafts per round; 0 = the head's block", AUTO, 0, 16, 1,
         api="'auto' (the page's default: chosen every round from measured costs and acceptance) or a number "
             "of drafts per round, 0 = the head's block"),
    Knob("dspark_threshold", "DSpark confidence", "0 = off; cuts a draft where the head's confidence falls "
         "below it", 0.0, 0, 0.95, 0.05),
    Knob("dspark_markov", "DSpark Markov head", "off: DSpark drafts its slots in parallel, as DFlash does (an "
         "ablation; still lossless)", True),
    Knob("dflash_max_draft", "DFlash draft length", "drafts per round; 0 = the full block", AUTO, 0, 16, 1,
         api="'auto' (the page's default) or a number of drafts per round, 0 = the full block"),
    Knob("tree", "Tree drafts", "drafts a round as a tree; 0 = chains", AUTO, 0, 16, 1,
         api="'auto' (the default everywhere: with auto draft lengths a tree of up to the head's block, chain or "
             "tree chosen every round; chains at a fixed length) or a number of drafts a round may verify as a "
             "tree of the head's likeliest guesses (at most this many with auto lengths, exactly this many with a "
             "fixed length); 0 = chains only"),
    Knob("baseline", "Greedy baseline lane", "the target alone, the reference of every speedup", True),
    Knob("thinking", "Let the model think", "the chat template's enable_thinking (Qwen3's <think>)", False),
    # new knobs go last: API callers that pass parameters by position keep their meaning
    Knob("lookup", "Prompt lookup lane", "the head-free racer: drafts by copying what followed the newest tokens "
         "earlier in the prompt or the answer", False),
    Knob("lookup_max_draft", "Lookup draft length", "drafts per round; 0 = its whole block (15)", AUTO, 0, 15, 1,
         api="'auto' (the page's default) or a number of drafts per round, 0 = its whole block (15)"),
    Knob("lookup_branch", "Lookup in the heads' trees", "the heads' rounds also verify what prompt lookup "
         "copies from the text, as one more branch (auto grafts it where it pays)", True),
)
DRAFT_KNOBS = ("dspark_max_draft", "dflash_max_draft", "lookup_max_draft")  # their sliders end at the blocks
AUTO_KNOBS = (*DRAFT_KNOBS, "tree")  # "auto" or a number: the page's Auto box covers them, a slider each
ZERO = {"dspark_max_draft": "the head's whole block", "dflash_max_draft": "the head's whole block",
        "lookup_max_draft": "its whole block", "tree": "chains"}
KNOB = {k.name: k for k in KNOBS}


def settings_of(values: dict[str, Any], arena: Any = None) -> Any:
    """RaceSettings from knob values (missing ones: their defaults), each checked against the range its
    page control has, with one message (the page, the API and the sweep all come here). The draft lengths
    end at the loaded heads' blocks (`arena`), as their sliders do."""
    values = upgraded({k: v for k, v in values.items() if k not in RENAMED or v is not None})
    ends = head_blocks(arena)
    return RaceSettings.from_dict({k.name: checked(k, values.get(k.name, k.default), ends.get(k.name))
                                   for k in KNOBS})


def checked(k: Knob, value: Any, hi: float | None = None) -> Any:
    """One knob's value as the race takes it, or a SpecError naming the knob and its range."""
    hi = k.hi if hi is None else hi
    name = k.name if re.sub(r"\W", "_", k.label.lower()) == k.name else f"{k.name} ({k.label})"
    if isinstance(k.default, bool):
        return bool(value)
    if value is None or value == "":  # an emptied number box
        value = k.default
    if k.name in AUTO_KNOBS and str(value).strip().lower() == AUTO:
        return AUTO
    whole = isinstance(k.default, int) or k.name in AUTO_KNOBS
    try:
        x = float(value)
        if whole and not x.is_integer():
            raise ValueError
    except (TypeError, ValueError, OverflowError):
        kind = "a whole number" if whole else "a number"
        auto = "auto or " if k.name in AUTO_KNOBS else ""
        raise SpecError(f"{name} must be {auto}{kind}, not {value!r}") from None
    x = int(x) if whole else x
    if k.lo is not None and not k.lo <= x <= hi:
        if k.name in AUTO_KNOBS:
            raise SpecError(f"{name} must be auto or between {k.lo:g} and {hi:g} (0 = {ZERO[k.name]}; it was {x:g})")
        raise SpecError(f"{name} must be between {k.lo:g} and {hi:g} (it was {x:g})")
    return x


def head_blocks(arena: Any) -> dict[str, int]:
    """Where the draft-length sliders end: each loaded head's block (the knob table's end without one)."""
    heads = arena.heads if arena is not None else {}
    return {n: int(getattr(heads.get(kind), "max_drafts", 0) or KNOB[n].hi)
            for n, kind in zip(DRAFT_KNOBS, ("dspark", "dflash", "lookup"))}


def lookup_on(arena: Any) -> bool:
    """The page's lookup box, ticked where the loaded preset misses a head (a lane races in its place) and
    unticked otherwise (the pocket race stays three lanes); the API's default stays off."""
    return bool(getattr(arena, "missing", None))


def echo(settings: Any) -> dict[str, Any]:
    """The settings a race ran with, as results and downloads echo them."""
    return settings.as_dict()


# -- the page --------------------------------------------------------------------------------------

def page_controls(cap_max: int, len_max: int, can_think: bool = True) -> tuple[gr.Checkbox, dict[str, Any]]:
    """The Settings' controls, in the table's order: (the Auto box, {knob name: component}); the thinking
    box only where the target's chat template has the switch (can_think)."""
    out: dict[str, Any] = {}
    auto = None
    with gr.Row(elem_classes=["knobs"]):
        for k in KNOBS[:5]:
            out[k.name] = control(k)
    with gr.Row(elem_classes=["knobs"]):
        auto = gr.Checkbox(True, label="Auto draft length", info="length and tree chosen every round from measured "
                           "costs and acceptance; off: the fixed values beside it", elem_id="auto-length")
        for k in KNOBS[5:]:
            hi = {"dspark_max_draft": cap_max, "dflash_max_draft": len_max}.get(k.name)
            out[k.name] = control(k, hi, interactive=k.name not in AUTO_KNOBS,
                                  visible=k.name != "thinking" or can_think)
    return auto, out


def control(k: Knob, hi: float | None = None, interactive: bool = True, visible: bool = True) -> Any:
    eid = k.name.replace("_", "-")
    if isinstance(k.default, bool):
        return gr.Checkbox(k.default, label=k.label, info=k.info, elem_id=eid, visible=visible)
    if k.lo is None:
        return gr.Number(k.default, precision=0, label=k.label, info=k.info, elem_id=eid)
    value = 0 if k.default == AUTO else k.default
    return gr.Slider(k.lo, hi if hi is not None else k.hi, value=value, step=k.step, label=k.label, info=k.info,
                     elem_id=eid, interactive=interactive)


def page_values(data: dict, auto: Any, controls: dict[str, Any]) -> dict[str, Any]:
    """The page's control values (an event's inputs given as a set: {component: value}) as knob values;
    the Auto box on: both draft lengths and the tree auto."""
    out = {name: data[c] for name, c in controls.items()}
    if data[auto]:
        out.update({n: AUTO for n in AUTO_KNOBS})
    return out


def fixed_lengths(auto: bool) -> tuple:
    """The fixed-length sliders are live only while Auto is off (they look it, too)."""
    return tuple(gr.Slider(interactive=not auto) for _ in AUTO_KNOBS)


# -- the API ---------------------------------------------------------------------------------------

def api_type(k: Knob) -> type:
    return str if k.default == AUTO else type(k.default)


def described(fn: Callable, params: list[tuple[str, type, Any, str]], doc: str, returns: Any) -> Callable:
    """`fn(**named values)` as an endpoint Gradio can type and describe: a signature of `params` (name,
    type, default or inspect.Parameter.empty, description) and a docstring whose Args lines Gradio reads."""
    sig = inspect.Signature([inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=d, annotation=t)
                             for n, t, d, _ in params], return_annotation=returns)

    if inspect.isgeneratorfunction(fn):
        def endpoint(*args: Any, **kwargs: Any) -> Any:
            yield from fn(**bound(sig, args, kwargs))
    else:
        def endpoint(*args: Any, **kwargs: Any) -> Any:
            return fn(**bound(sig, args, kwargs))
    endpoint.__signature__ = sig  # type: ignore[attr-defined]
    endpoint.__annotations__ = {n: t for n, t, _, _ in params} | {"return": returns}
    endpoint.__doc__ = doc + "\n\nArgs:\n" + "\n".join(f"    {n}: {d}" for n, _, _, d in params)
    endpoint.__name__ = fn.__name__
    return endpoint


def bound(sig: inspect.Signature, args: tuple, kwargs: dict) -> dict[str, Any]:
    b = sig.bind(*args, **kwargs)
    b.apply_defaults()
    return dict(b.arguments)


def knob_params() -> list[tuple[str, type, Any, str]]:
    """Each knob as an API parameter, described with the page's range (the draft lengths end at the head's block)."""
    out = []
    for k in KNOBS:
        desc = k.api or k.info
        if k.lo is not None and k.name not in DRAFT_KNOBS and f"{k.lo:g} to" not in desc:
            desc += f" ({k.lo:g} to {k.hi:g})"
        out.append((k.name, api_type(k), k.default, desc))
    out += [(old, str, None, f"deprecated: the old name of {new}, still read") for old, new in RENAMED.items()]
    return out


def name_api_inputs(demo: gr.Blocks, api_name: str, params: list[tuple[str, type, Any, str]]) -> None:
    """gr.api labels its inputs '1st', '2nd', ... with no description: give each its name and its line."""
    fn = next(f for f in demo.fns.values() if f.api_name == api_name)
    for comp, (name, _, _, desc) in zip(fn.inputs, params):
        comp.label = name
        comp._api_info = {**comp._api_info, "additional_description": desc}
