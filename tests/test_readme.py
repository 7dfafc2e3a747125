"""The README's commands and code as written: what needs no download runs here, exactly as a reader
would paste it (the library's race from a script, the one-line generation with today's and the old flags)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README, re.S)


def run(args: list[str], env: dict, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=ROOT, env={**os.environ, **env}, capture_output=True,
                          text=True, timeout=timeout)


def test_the_library_block_names_what_spec_exports():
    import spec

    first = python_blocks()[0]
    names = re.search(r"from spec import (.+)", first).group(1)
    assert all(hasattr(spec, n.strip()) for n in names.split(","))


@pytest.mark.pocket
def test_the_readmes_race_from_a_script_runs_as_written(pocket_home):
    script = next(b for b in python_blocks() if "load_preset_arena" in b)
    assert script.startswith("import spec\n")  # as written: nothing imported but the package
    p = run(["-c", script], pocket_home)
    assert p.returncode == 0, p.stderr[-2000:]
    lines = p.stdout.strip().splitlines()
    assert len(lines) == 4, p.stdout  # the headline, then the three lanes
    assert {ln.split(":")[0] for ln in lines[1:]} == {"greedy", "dspark", "dflash"}


@pytest.mark.pocket
def test_the_one_line_generation_with_todays_flags_and_the_old_ones(pocket_home):
    for flags, note in ((["--preset", "pocket"], ""), (["--family", "pocket"], "note: --family is deprecated, use --preset")):
        p = run(["-m", "spec", *flags, "--mode", "baseline", "--max-new-tokens", "4"], pocket_home)
        assert p.returncode == 0 and "4 tokens in" in p.stdout, p.stderr[-2000:]
        assert note in p.stderr
