"""The chat templates as the real targets ship them: a thinking switch, off by default (as the heads'
published benchmarks run), reaches the template's enable_thinking from the library, the CLI, the race
and the app's API."""

import json
import shutil
import subprocess
import sys

import pytest
import shrunk

from spec.loop.engine import Engine
from spec.race.run import run_race
from spec.race.settings import RaceSettings

QWEN, GEMMA = shrunk.TARGETS[:2]
PROMPT = "Why is the sky blue?"


def rendered(target, thinking):
    return target.decode(target.encode_chat(PROMPT, thinking=thinking))


def test_qwen3_template_thinks_only_when_asked(shrunk_targets):
    t = shrunk_targets[QWEN]
    assert rendered(t, False).endswith(f"<|im_start|>user\n{PROMPT}<|im_end|>\n<|im_start|>assistant\n"
                                       "<think>\n\n</think>\n\n")  # Qwen3's way of saying "no thinking"
    assert rendered(t, True).endswith("<|im_start|>assistant\n")
    assert t.encode_chat(PROMPT) == t.encode_chat(PROMPT, thinking=False)  # off by default


def test_gemma4_template_thinks_only_when_asked(shrunk_targets):
    t = shrunk_targets[GEMMA]
    assert rendered(t, False).endswith("<|turn>model\n<|channel>thought\n<channel|>")
    assert "<|think|>" not in rendered(t, False) and "<|think|>" in rendered(t, True)


def test_engine_race_and_cli_pass_the_switch(shrunk_targets, shrunk_dir):
    t = shrunk_targets[QWEN]
    on, off = t.encode_chat(PROMPT, thinking=True), t.encode_chat(PROMPT)
    assert Engine(t).start(PROMPT, 1).prompt_ids == off
    assert Engine(t, thinking=True).start(PROMPT, 1).prompt_ids == on
    for thinking, ids in ((True, on), (False, off)):
        *_, last = run_race(t, {}, PROMPT, RaceSettings(max_new_tokens=1, thinking=thinking))
        assert last.results["greedy"].prompt_tokens == len(ids)
    cli = [sys.executable, "-m", "spec", "--mode", "baseline", "--model", str(shrunk_dir / QWEN), "--json",
           "--max-new-tokens", "1", "--prompt", PROMPT]
    for extra, ids in (([], off), (["--thinking"], on)):
        out = subprocess.run(cli + extra, capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["prompt_tokens"] == len(ids)


@pytest.fixture(scope="module")
def qwen3_template_app(tiny_dir, tmp_path_factory):
    """The app on the tiny Qwen3 pair, its tokenizer carrying Qwen3's published template."""
    from served import App

    root = tmp_path_factory.mktemp("qwen3-template")
    target = root / "target"
    shutil.copytree(tiny_dir / "qwen3", target)
    tok = json.loads((target / "tokenizer_config.json").read_text())
    tok["chat_template"] = (shrunk.folder_of(QWEN) / "chat_template.jinja").read_text()
    (target / "tokenizer_config.json").write_text(json.dumps(tok))
    app = App(["--target", str(target), "--dspark", str(tiny_dir / "dspark-qwen3"), "--dflash",
               str(tiny_dir / "dflash-qwen3")], root / "app.log")
    yield app
    app.close()


def test_the_apps_api_passes_the_switch(qwen3_template_app):
    from gradio_client import Client

    c = Client(qwen3_template_app.url, verbose=False)
    off = c.predict(PROMPT, 2, api_name="/race")
    on = c.predict(PROMPT, 2, thinking=True, api_name="/race")
    thought = len("<think>\n\n</think>\n\n".encode())  # the tiny tokenizer is byte-level
    assert {r["prompt tokens"] for r in off["table"]} == {r["prompt tokens"] + thought for r in on["table"]}
    assert set(off["verdicts"].values()) == set(on["verdicts"].values()) == {"identical to greedy"}
