"""Where the page and the API take the same setting they take one range with one message (demo.knobs,
issue 39): the API once raced at temperature 5 and trees of 64 the page never offers, and said "outside
1..15" of a draft length where 0 is valid too. An unknown preset stops `python -m demo` before it serves,
and the thinking switch is offered only to a chat template that has it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from demo.knobs import KNOBS, head_blocks, knob_params, settings_of  # noqa: E402
from spec.errors import SpecError  # noqa: E402


class Head:
    def __init__(self, max_drafts: int):
        self.max_drafts = max_drafts


class Arena:
    heads = {"dspark": Head(7), "dflash": Head(15)}


@pytest.mark.parametrize("values, message", [
    ({"temperature": 5}, r"^temperature must be between 0 and 2 \(it was 5\)$"),
    ({"temperature": -0.1}, r"^temperature must be between 0 and 2 \(it was -0.1\)$"),
    ({"tree": 64}, r"^tree \(Tree drafts\) must be auto or between 0 and 16 \(0 = chains; it was 64\)$"),
    ({"top_p": 0}, r"^top_p must be between 0.05 and 1 \(it was 0\)$"),
    ({"top_k": 500}, r"^top_k must be between 0 and 200 \(it was 500\)$"),
    ({"dspark_threshold": 0.99}, r"^dspark_threshold \(DSpark confidence\) must be between 0 and 0.95"),
    ({"max_new_tokens": 5000}, r"^max_new_tokens must be between 1 and 2048 \(it was 5000\)$"),
    ({"dflash_max_draft": 99}, r"^dflash_max_draft \(DFlash draft length\) must be auto or between 0 and 15 \(0 = the head's "
                         r"whole block; it was 99\)$"),
    ({"dspark_max_draft": 8}, r"^dspark_max_draft \(DSpark draft length\) must be auto or between 0 and 7 "),
    ({"dspark_max_draft": "soon"}, r"^dspark_max_draft \(DSpark draft length\) must be auto or a whole number, not .soon.$"),
    ({"top_k": 2.5}, r"^top_k must be a whole number, not 2.5$"),
])
def test_a_setting_outside_the_pages_range_gets_one_message(values, message):
    with pytest.raises(SpecError, match=message):
        settings_of(values, Arena())


def test_the_pages_ends_are_accepted_and_0_is_the_whole_block():
    s = settings_of({"temperature": 2, "tree": 16, "dflash_max_draft": 0, "dspark_max_draft": 7, "top_p": 0.05, "top_k": 200,
                     "seed": None}, Arena())
    assert (s.sampling.temperature, s.tree, s.dflash_max_draft, s.dspark_max_draft, s.sampling.top_p, s.sampling.top_k,
            s.sampling.seed) == (2, 16, 0, 7, 0.05, 200, 0)
    assert settings_of({"dspark_max_draft": "auto", "dflash_max_draft": "15"}, Arena()).dflash_max_draft == 15
    assert settings_of({}).dflash_max_draft == "auto"  # the page's defaults


def test_the_sliders_and_the_api_end_at_the_same_place():
    """The page's draft-length sliders end at each head's block (handlers.block_sizes) and the API checks
    the same ends; the API's descriptions name the page's range."""
    from demo.handlers import block_sizes

    class Stage:
        arena = Arena()

    assert block_sizes(Stage()) == (7, 15)
    assert head_blocks(None) == {"dspark_max_draft": 16, "dflash_max_draft": 16, "lookup_max_draft": 15}
    described = {name: desc for name, _, _, desc in knob_params()}
    assert described["temperature"].endswith("(0 to 2)") and described["tree"].endswith("(0 to 16)")
    assert described["max_new_tokens"].count("1 to 2048") == 1
    sliders = {k.name: (k.lo, k.hi) for k in KNOBS if k.lo is not None}
    assert sliders["temperature"] == (0, 2) and sliders["tree"] == (0, 16)


def test_an_unknown_preset_stops_before_serving(capsys):
    """One line naming the presets and exit code 2, as the command line's bad input (it once printed the
    error and served a page reading "Ready." with Run on)."""
    from demo.app import parse_args
    from spec.presets import PRESETS

    said = f"error: unknown preset 'nosuch' (choose from {', '.join(PRESETS)})"
    with pytest.raises(SystemExit) as e:
        parse_args(["--preset", "nosuch"])
    assert e.value.code == 2 and capsys.readouterr().err == said + "\n"
    assert parse_args(["--preset", "nosuch", "--target", "some/folder"]).target == "some/folder"  # custom: no preset


@pytest.mark.slow  # the app's command in a subprocess
def test_the_app_command_stops_on_an_unknown_preset_before_serving():
    from spec.presets import PRESETS

    said = f"error: unknown preset 'nosuch' (choose from {', '.join(PRESETS)})"
    run = subprocess.run([sys.executable, "-m", "demo", "--preset", "nosuch", "--port", "7919"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "Running on" not in run.stdout + run.stderr, run.stdout + run.stderr
    assert run.stderr.strip().endswith(said), run.stderr


def test_thinking_is_offered_only_where_the_chat_template_has_the_switch(qwen3):
    """Target.can_think reads the template (SmolLM2's and the tiny models' have no enable_thinking)."""
    assert not qwen3.can_think

    class Tokenizer:
        chat_template = "{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>{% endif %}"

    class Fake:
        tokenizer = Tokenizer()

    from spec.target import Target

    assert Target.can_think.fget(Fake())
    Tokenizer.chat_template = {"default": "{{ messages }}", "tool_use": "{{ enable_thinking }}"}  # named templates
    assert Target.can_think.fget(Fake())
    Tokenizer.chat_template = None
    assert not Target.can_think.fget(Fake())


def test_the_settings_offer_thinking_only_for_such_a_model():
    from demo.handlers import knob_limits

    class Stage:
        arena = Arena()

    for can in (True, False):
        Stage.arena.target = type("T", (), {"can_think": can})()
        box = knob_limits(Stage())[-2]  # after the draft-length sliders, before the lookup box
        assert box.visible is can and (can or box.value is False)  # hidden: also off
