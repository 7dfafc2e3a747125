"""The command line, as a user or a script runs it."""

import json
import subprocess
import sys


def spec(*args, check=True):
    p = subprocess.run([sys.executable, "-m", "spec", *args], capture_output=True, text=True, timeout=300)
    if check:
        assert p.returncode == 0, p.stderr
    return p


def test_json_for_scripts(tiny_dir):
    common = ["--target", str(tiny_dir / "qwen3"), "--prompt", "hello", "--max-new-tokens", "12", "--json"]
    base = json.loads(spec("--mode", "baseline", *common).stdout)
    for mode, head in (("dflash", "dflash-qwen3"), ("dspark", "dspark-qwen3")):
        out = json.loads(spec("--mode", mode, f"--{mode}", str(tiny_dir / head), "--max-draft", "3", *common).stdout)
        assert set(out) >= {"text", "token_ids", "accept_lengths", "rounds", "tokens_per_sec", "decode_tokens_per_sec",
                            "prefill_seconds", "finish_reason"}
        assert out["token_ids"] == base["token_ids"] and out["text"] == base["text"]
        tree = spec("--mode", mode, f"--{mode}", str(tiny_dir / head), "--max-draft", "3", "--tree", "5", *common)
        assert json.loads(tree.stdout)["token_ids"] == base["token_ids"]
    lookup = json.loads(spec("--mode", "lookup", "--max-draft", "5", *common).stdout)  # no head to name
    assert lookup["token_ids"] == base["token_ids"]


def test_streaming_text_and_summary(tiny_dir):
    p = spec("--mode", "dflash", "--target", str(tiny_dir / "qwen3"), "--dflash", str(tiny_dir / "dflash-qwen3"),
             "--prompt", "hi", "--max-new-tokens", "8", "--temperature", "0.7", "--top-p", "0.9", "--seed", "3")
    assert "# accept" in p.stdout and "tok/s" in p.stdout and "rounds" in p.stdout
    assert "BLAS" in p.stderr  # the header names the device and the BLAS in use


def test_bad_input_is_one_clear_line(tiny_dir):
    cases = [
        (["--mode", "baseline", "--target", str(tiny_dir / "qwen3"), "--prompt", " "], "prompt is empty"),
        (["--mode", "baseline", "--target", str(tiny_dir / "qwen3"), "--max-new-tokens", "0"], "max new tokens"),
        (["--mode", "dflash", "--target", str(tiny_dir / "qwen3"), "--dflash", str(tiny_dir / "dflash-qwen3"),
          "--max-draft", "99"], "max draft 99 is outside 1..7"),
        (["--mode", "dflash", "--target", str(tiny_dir / "qwen3"), "--dflash", str(tiny_dir / "dflash-qwen3"),
          "--tree", "-2"], "tree must be auto or a number of drafted nodes in 0..64"),
        (["--mode", "dspark", "--target", str(tiny_dir / "qwen3"), "--dspark", str(tiny_dir / "missing")], "not found"),
        (["--preset", "nope"], "unknown preset 'nope'"),
        (["--mode", "lookup", "--target", str(tiny_dir / "qwen3"), "--lookup-ngram", "4-2"], "1 <= min <= max"),
        (["--preset", "qwen3.5", "--mode", "dspark"], "no DSpark head is published for Qwen3.5"),  # before any download
    ]
    for args, words in cases:
        p = spec(*args, check=False)
        assert p.returncode == 2 and words in p.stderr and "Traceback" not in p.stderr, (args, p.stderr)
