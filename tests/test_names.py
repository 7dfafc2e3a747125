"""One name per setting: the draft length is max_draft and the tree's default is auto in the library, the
engine, `python -m spec`, the race command, the page and the API; the models are --preset / --target /
--dspark / --dflash in every command. The old names still work, each with one deprecation line."""

import inspect

import pytest

from demo.knobs import KNOB, knob_params, settings_of
from spec import errors
from spec.api import speculative_generate
from spec.cli import parser, upgrade
from spec.loop.engine import Engine, tree_setting
from spec.race import cli as race_cli
from spec.race.file import read_race
from spec.race.settings import RaceSettings


@pytest.fixture(autouse=True)
def fresh_notes(monkeypatch):
    monkeypatch.setattr(errors, "_told", set())  # each test sees its own deprecation lines


def default(fn, name):
    return inspect.signature(fn).parameters[name].default


def test_the_tree_has_one_default_everywhere():
    cli = parser().parse_args([]).tree
    assert {default(Engine.__init__, "tree"), default(speculative_generate, "tree"), RaceSettings().tree,
            KNOB["tree"].default, cli, tree_setting(None)} == {"auto"}
    with pytest.raises(errors.SpecError, match=r"^tree must be auto or a number of drafted nodes in 0\.\.64"):
        tree_setting("bushy")


def test_race_settings_hold_a_sampling_and_echo_the_apis_names():
    s = RaceSettings.from_dict({"temperature": 0.7, "seed": 3, "dflash_max_draft": 4})
    assert (s.sampling.temperature, s.sampling.seed, s.dflash_max_draft) == (0.7, 3, 4)
    flat = s.as_dict()
    api = {name for name, *_ in knob_params()}
    assert set(flat) <= api and "sampling" not in flat
    assert RaceSettings.from_dict(flat) == s


def test_old_names_in_an_api_call_or_a_race_file_still_read(capsys):
    s = settings_of({"dspark_cap": 3, "dflash_len": "auto", "dspark_max_draft": "auto"})  # as the API fills it in
    assert (s.dspark_max_draft, s.dflash_max_draft) == (3, "auto")
    assert settings_of({"dspark_cap": None}).dspark_max_draft == "auto"  # an API call that left the old one out
    err = capsys.readouterr().err
    assert "note: dspark_cap is deprecated, use dspark_max_draft" in err
    assert err.count("dflash_len is deprecated") == 1
    old_file = {"settings": {"max_new_tokens": 24, "temperature": 0.0, "dspark_cap": 4, "dflash_len": 5, "tree": 6},
                "spec_arena_results": 999, "events": []}
    with pytest.raises(errors.SpecError, match="damaged"):  # no events: but the settings were read first
        read_race(old_file)
    assert RaceSettings.from_dict(old_file["settings"]).dspark_max_draft == 4


def test_the_old_model_flags_of_python_m_spec_still_work(capsys):
    args = upgrade(parser().parse_args(["--mode", "dspark", "--family", "qwen3", "--model", "t/x", "--drafter", "h/y"]))
    assert (args.preset, args.target, args.dspark) == ("qwen3", "t/x", "h/y")
    err = capsys.readouterr().err
    for old, new in (("--family", "--preset"), ("--model", "--target"), ("--drafter", "--dspark")):
        assert f"note: {old} is deprecated, use {new}" in err
    new = parser().parse_args(["--preset", "pocket", "--mode", "baseline", "--max-new-tokens", "4", "--tree", "0"])
    assert (new.preset, new.tree, new.max_draft) == ("pocket", 0, 0)


def test_the_race_command_takes_todays_names_and_the_old_ones(monkeypatch, capsys):
    seen = {}

    def fake_run_here(a):
        seen["settings"] = RaceSettings.from_dict({k: getattr(a, k) for k in ("dspark_max_draft", "dflash_max_draft",
                                                                             "dspark_cap", "dflash_len", "tree")
                                                   if getattr(a, k) is not None})
        raise SystemExit(0)

    monkeypatch.setattr(race_cli, "run_here", fake_run_here)
    for argv, want in ((["--dspark-max-draft", "3", "--tree", "0"], (3, "auto", 0)),
                       (["--dspark-cap", "2", "--dflash-len", "5"], (2, 5, "auto"))):
        with pytest.raises(SystemExit):
            race_cli.main(["--prompt", "hi", *argv])
        s = seen["settings"]
        assert (s.dspark_max_draft, s.dflash_max_draft, s.tree) == want
    assert "note: dspark_cap is deprecated, use dspark_max_draft" in capsys.readouterr().err
