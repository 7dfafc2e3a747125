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


def test_the_readmes_table_is_the_shipped_measurement():
    """Every cell of "Measured: who wins where" is the shipped bench folder's (the page's story reads the same
    folder), so the front page and the page cannot drift apart."""
    import json

    import pandas as pd

    from spec.race.story import SHIPPED

    bench = pd.DataFrame(json.loads((SHIPPED / "table.json").read_text())).set_index(["method", "domain"])
    names = {"DSpark auto, chains only": "DSpark auto, chains", "DFlash auto, chains only": "DFlash auto, chains",
             "prompt lookup, full block (15)": "lookup full (15)", "prompt lookup auto (its lane)": "lookup auto"}
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Measured: who wins where"):text.index("## Command line")]
    lines = [l for l in section.splitlines() if l.startswith("| ") and "---" not in l]
    domains = [c.strip() for c in lines[0].strip("|").split("|")][1:]
    assert SHIPPED.name in section and len(lines) > 10
    for line in lines[1:]:
        name, *cells = [c.strip().replace("**", "") for c in line.strip("|").split("|")]
        name = names.get(name, name.replace(" branch (the race's default)", "").replace(" (the race's default)", ""))
        for domain, cell in zip(domains, cells):
            r = bench.loc[(name, domain)]
            assert cell == f"{r['accept']:.2f} / {r['tok/s']:.1f} / {r['speedup']:.2f}x", (name, domain)
