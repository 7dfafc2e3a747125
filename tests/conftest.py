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
