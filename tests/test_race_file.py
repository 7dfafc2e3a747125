"""A race you can share (spec.race_file): saved, then loaded back without a model, it is the same race: table,
texts, verdicts, meters round by round, per-slot counts, confidence, replay timing; malformed or foreign files
get one clear error; the CLI opens it and prints a Markdown summary."""

import json
import subprocess
import sys

import pytest

from spec.errors import SpecError
from spec.heads.registry import load_dflash, load_dspark
from spec.race.file import race_record, read_race
from spec.race.run import replay, run_race
from spec.race.settings import RaceSettings
from spec.report import race_markdown, results_table
from spec.target import load_target


@pytest.fixture(scope="module")
def raced(tiny_dir):
    t = load_target(str(tiny_dir / "qwen3"))
    heads = {"dspark": load_dspark(str(tiny_dir / "dspark-qwen3"), t),
             "dflash": load_dflash(str(tiny_dir / "dflash-qwen3"), t)}
    settings = RaceSettings(max_new_tokens=24, dspark_max_draft=4, dflash_max_draft=5, tree=6, dspark_threshold=0.2)
    events = list(run_race(t, heads, "Tell me about rivers.", settings))
    return events, race_record(events, "Tell me about rivers.", {"target": "tiny"})


def test_a_saved_race_loads_back_as_the_same_race(raced, tmp_path):
    events, record = raced
    path = tmp_path / "race.json"
    path.write_text(json.dumps(record))
    loaded, header = read_race(str(path))
    assert header["prompt"] == "Tell me about rivers." and header["models"] == {"target": "tiny"}
    assert {"machine", "versions", "timestamp", "settings"} <= set(header)
    a, b = events[-1], loaded[-1]
    assert results_table(a.outcome, a.verdicts).equals(results_table(b.outcome, b.verdicts))
    assert a.outcome.record() == b.outcome.record()  # places, band, headline, positions, confidence
    assert {n: r.text for n, r in a.results.items()} == {n: r.text for n, r in b.results.items()}
    assert loaded[0].settings == events[0].settings
    assert [e.kind for e in loaded] == [e.kind for e in events]
    for x, y in zip(events, loaded):
        if x.kind == "round":
            assert (x.engine, x.round, x.lane_clock) == (y.engine, y.round, y.lane_clock)
            assert (x.meter.tokens, x.meter.accept_lengths, x.meter.slots.rows()) == (
                y.meter.tokens, y.meter.accept_lengths, y.meter.slots.rows())
            assert x.meter.clock == pytest.approx(y.meter.clock, abs=1e-9)
    order = [(e.kind, e.engine) for e in replay(events, speed=1e6)]
    assert order == [(e.kind, e.engine) for e in replay(loaded, speed=1e6)]  # the replay plays the same clocks


@pytest.mark.parametrize("content, words", [
    ("hello", "not JSON"),
    ("[1, 2]", "no spec_arena_results"),
    ('{"spec_arena_results": 3, "per_round": {}}', "holds no events"),
    ('{"spec_arena_results": 4, "events": [{"kind": "start"}]}', "damaged"),
    ('{"spec_arena_results": 4, "events": []}', "damaged"),
])
def test_a_malformed_or_foreign_file_gets_one_clear_error(tmp_path, content, words):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(SpecError, match=words):
        read_race(str(path))
    with pytest.raises(SpecError, match="cannot read"):
        read_race(str(tmp_path / "missing.json"))


def test_the_markdown_summary_holds_the_table_verdicts_and_settings(raced):
    events, record = raced
    header = {k: v for k, v in record.items() if k != "events"}
    md = race_markdown(events[-1], header)
    assert md.startswith("**Spec Arena race**: " + events[-1].outcome.headline())
    assert "| place | engine | speedup |" in md and "identical to greedy" in md
    assert "per draft slot" in md and "confidence cut 0.2" in md and "Models: target tiny." in md


@pytest.mark.slow  # CLI subprocesses
def test_the_cli_opens_a_saved_race_without_a_model(raced, tmp_path):
    events, record = raced
    path = tmp_path / "race.json"
    path.write_text(json.dumps(record))
    run = subprocess.run([sys.executable, "-m", "spec", "race", "--load", str(path), "--markdown"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.startswith("**Spec Arena race**") and "raced" in run.stderr
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    run = subprocess.run([sys.executable, "-m", "spec", "race", "--load", str(bad)], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 2 and run.stderr.strip().startswith("error: not a race file")


def test_settings_in_words():
    from spec.report import settings_words

    words = settings_words(RaceSettings.from_dict(dict(max_new_tokens=64, temperature=0.7, dspark_max_draft=0,
                                                       dspark_markov=False, dflash_max_draft=4, tree=0,
                                                       baseline=False, lookup_branch=False)).as_dict())
    assert words == ("64 new tokens, T = 0.7, top-p 1.0, top-k 0, seed 0, DSpark draft length the whole block, chains "
                     "only, without its Markov head, DFlash draft length 4, chains only, no greedy lane")
    assert settings_words({}) == "not recorded"
    default = settings_words(RaceSettings().as_dict())  # the heads race with the lookup branch unless it is off
    assert "with prompt lookup's guess as one more branch" in default and "prompt-lookup lane" not in default
    assert "branch" not in settings_words({"max_new_tokens": 8})  # a file saved before the branch raced without it
