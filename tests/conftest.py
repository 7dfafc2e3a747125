import atexit
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from spec.cpu import ensure_fast_blas

ensure_fast_blas(reexec=False)  # before MLX loads: the fast CPU BLAS for the whole test session
# draft-length calibrations of this session's random models (and of servers it starts) stay out of the
# user's cache, where each session's temporary model paths would add new ones
os.environ["SPEC_ARENA_CALIBRATION"] = tempfile.mkdtemp(prefix="spec-arena-calibration-")
atexit.register(shutil.rmtree, os.environ["SPEC_ARENA_CALIBRATION"], True)
os.environ.setdefault("SPEC_ARENA_CALIBRATION_RUNS", "3")  # the tests need costs, not this machine's best ones

import pytest  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
import tiny  # noqa: E402

# `pytest -m "not slow"` is the quick run (issue 40). Slow: every test in these files (published formats,
# recurrent and other families, the bench), every browser or pocket test, and tests marked
# @pytest.mark.slow where they stand (CLI subprocesses, chi-square exact-sample tests).
SLOW_FILES = ("formats/", "test_recurrent.py", "test_families.py", "test_bench.py", "test_tree_estimate.py",
              "test_cli.py")
SLOW_MARKERS = ("browser", "pocket")


@pytest.hookimpl(tryfirst=True)  # before -m deselects
def pytest_collection_modifyitems(config, items):
    here = Path(__file__).parent
    for item in items:
        where = item.path.relative_to(here).as_posix() if item.path.is_relative_to(here) else ""
        if where.startswith(SLOW_FILES) or any(item.get_closest_marker(m) for m in SLOW_MARKERS):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory) -> Path:
    """Tiny random Qwen3 and llama targets, a DFlash head and a DSpark head, in the published formats."""
    root = tmp_path_factory.mktemp("tiny")
    for family in ("qwen3", "llama"):
        tiny.make_target(root / family, family=family)
        cfg = json.loads((root / family / "config.json").read_text())
        tiny.make_dflash_head(root / f"dflash-{family}", cfg)
        tiny.make_dspark_head(root / f"dspark-{family}", cfg)
    return root


@pytest.fixture(scope="session")
def qwen3(tiny_dir):
    from spec.target import load_target

    return load_target(str(tiny_dir / "qwen3"))


@pytest.fixture(scope="session")
def llama(tiny_dir):
    from spec.target import load_target

    return load_target(str(tiny_dir / "llama"))


@pytest.fixture(scope="session")
def pocket_home(tmp_path_factory) -> dict:
    """The pocket app's model cache and calibration folder: empty for the first app of the session (a
    first start), reused by later ones."""
    home = tmp_path_factory.mktemp("pocket-home")
    return {"SPEC_ARENA_CACHE": str(home / "cache"), "SPEC_ARENA_CALIBRATION": str(home / "calibration")}


# -- served apps and the browser: one of each for the session (tests/served.py) ---------------------------
# Each test leaves a server serving what it served (a failed load says "Still serving"), so modules share
# them instead of starting their own.

@pytest.fixture(scope="session")
def app(tiny_dir, tmp_path_factory):
    """`python -m demo` on the tiny qwen3 target with both heads, ready."""
    from served import App

    a = App(["--target", str(tiny_dir / "qwen3"), "--dspark", str(tiny_dir / "dspark-qwen3"),
             "--dflash", str(tiny_dir / "dflash-qwen3")], tmp_path_factory.mktemp("app") / "app.log")
    yield a
    a.close()


@pytest.fixture(scope="session")
def browser():
    from served import CHROMIUM, CHROMIUM_ARGS

    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="session")
def pocket_app(tmp_path_factory, browser, pocket_home):
    """`python -m demo --preset pocket`, ready. Started on an empty pocket_home (a cold start), it first
    takes the page's look while it prepares (app.first_look; else None)."""
    from served import App, first_look

    from spec.errors import SpecError
    from spec.presets import resolve

    try:
        for kind in ("target", "dspark", "dflash"):
            resolve("pocket", kind)
    except SpecError as e:
        pytest.skip(str(e))
    cold = not Path(pocket_home["SPEC_ARENA_CALIBRATION"]).exists()
    app = App(["--preset", "pocket"], tmp_path_factory.mktemp("pocket") / "app.log", timeout=60, ready=False,
              env=pocket_home)
    try:
        app.first_look = first_look(browser, app.url) if cold else None
        app.wait_ready(600)
    except BaseException:
        app.close()
        raise
    yield app
    app.close()
