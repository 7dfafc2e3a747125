import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import shrunk  # noqa: E402


@pytest.fixture(scope="session")
def shrunk_dir(tmp_path_factory) -> Path:
    """Every published checkpoint of shrunk.TARGETS and shrunk.HEADS, shrunk, under <root>/<org>/<name>."""
    root = tmp_path_factory.mktemp("published")
    for repo in (*shrunk.TARGETS, *shrunk.HEADS):
        shrunk.build(repo, root / repo)
    return root


@pytest.fixture(scope="session")
def shrunk_targets(shrunk_dir):
    from spec.target import load_target

    return {repo: load_target(str(shrunk_dir / repo)) for repo in shrunk.TARGETS}
