"""Safety means never running a checkpoint's code, not refusing metadata that names code; targets we
cannot verify on are refused with the reason; a preset downloaded once runs offline from the hub cache."""

import fnmatch
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from spec import load_dflash, load_dspark
from spec.errors import SpecError
from spec.target import load_target

ZLAB, DSPARK, QWEN = "z-lab/Qwen3-4B-DFlash-b16", "deepseek-ai/dspark_qwen3_4b_block7", "mlx-community/Qwen3-4B-8bit"
CODE_FILES = ("dflash.py", "modeling_dflash.py", "utils.py", "modeling.py", "tokenization_custom.py")


def plant_code(folder: Path, marker: Path) -> None:
    """The Python files a hub repo may carry (z-lab's ship dflash.py for their auto_map), each of which
    would leave `marker` behind if it were ever imported."""
    for name in CODE_FILES:
        (folder / name).write_text(f"open({str(marker)!r}, 'w').write({name!r})\n"
                                   "class DFlashDraftModel: pass\nclass Model: pass\nclass ModelArgs: pass\n")


def copy(src: Path, dst: Path, **config_edits) -> Path:
    shutil.copytree(src, dst)
    if config_edits:
        cfg = json.loads((dst / "config.json").read_text())
        cfg.update(config_edits)
        (dst / "config.json").write_text(json.dumps(cfg))
    return dst


def test_a_heads_auto_map_is_read_as_metadata_and_never_imported(shrunk_dir, shrunk_targets, tmp_path):
    marker = tmp_path / "imported"
    head_dir = copy(shrunk_dir / ZLAB, tmp_path / "zlab")
    assert json.loads((head_dir / "config.json").read_text())["auto_map"] == {"AutoModel": "dflash.DFlashDraftModel"}
    plant_code(head_dir, marker)
    before = set(sys.modules)
    head = load_dflash(str(head_dir), shrunk_targets[QWEN])
    assert head.config.block_size == 16
    assert not marker.exists() and not {"dflash", "modeling_dflash", "custom_model"} & (set(sys.modules) - before)


def test_no_python_file_is_ever_downloaded(monkeypatch, shrunk_dir):
    """Every hub download (targets and both heads) asks huggingface_hub for configs, weights and
    tokenizer files only: no pattern matches a .py file."""
    import huggingface_hub

    asked = []

    def fake_download(repo_id, allow_patterns=None, **kw):
        asked.append((repo_id, list(allow_patterns)))
        return str(shrunk_dir / repo_id)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_download)
    target = load_target(QWEN)
    load_dflash(ZLAB, target)
    load_dspark(DSPARK, target)
    assert [r for r, _ in asked] == [QWEN, ZLAB, DSPARK]
    for repo, patterns in asked:
        assert "*.safetensors" in patterns and "*.json" in patterns
        assert not [f for f in CODE_FILES if any(fnmatch.fnmatch(f, p) for p in patterns)], (repo, patterns)


def test_a_target_is_refused_only_for_code_it_would_run(shrunk_dir, tmp_path):
    marker = tmp_path / "imported"
    # metadata naming code: loads
    t = load_target(str(copy(shrunk_dir / QWEN, tmp_path / "meta", auto_map={"AutoModelForCausalLM": "modeling.M"})))
    assert t.num_layers == 36
    # mlx-lm's model_file would import the checkpoint's module: refused before anything runs
    code = copy(shrunk_dir / QWEN, tmp_path / "code", model_file="modeling.py")
    plant_code(code, marker)
    with pytest.raises(SpecError, match="needs remote code: its config asks mlx-lm to run 'modeling.py'"):
        load_target(str(code))
    # a tokenizer class that exists only as the checkpoint's code: refused; one transformers ships: loads
    for cls, refused in (("CustomTokenizer", True), ("PreTrainedTokenizerFast", False)):
        folder = copy(shrunk_dir / QWEN, tmp_path / cls)
        plant_code(folder, marker)
        tok = json.loads((folder / "tokenizer_config.json").read_text())
        tok.update(tokenizer_class=cls, auto_map={"AutoTokenizer": ["tokenization_custom.CustomTokenizer", None]})
        (folder / "tokenizer_config.json").write_text(json.dumps(tok))
        if refused:
            with pytest.raises(SpecError, match="needs remote code: its tokenizer class 'CustomTokenizer'"):
                load_target(str(folder))
        else:
            assert load_target(str(folder)).num_layers == 36
    assert not marker.exists()


# families mlx-lm loads but we cannot roll back: tests/test_families.py (every recurrent family, one by one)


def test_a_family_mlx_lm_does_not_know_is_one_clear_error(shrunk_dir, tmp_path):
    folder = copy(shrunk_dir / QWEN, tmp_path / "t", model_type="not_a_model")
    with pytest.raises(SpecError, match=r"mlx-lm \S+ cannot load model_type 'not_a_model'"):
        load_target(str(folder))


# -- the hub cache, offline -------------------------------------------------------------------------

def cache_repo(cache: Path, repo: str, src: Path, rev: str = "0123456789abcdef0123456789abcdef01234567") -> None:
    """Lay `src` out as huggingface_hub does: blobs/<hash>, snapshots/<rev>/<file> -> blob, refs/main."""
    import hashlib

    root = cache / ("models--" + repo.replace("/", "--"))
    (root / "refs").mkdir(parents=True)
    (root / "refs" / "main").write_text(rev)
    (root / "blobs").mkdir()
    snap = root / "snapshots" / rev
    snap.mkdir(parents=True)
    for f in sorted(src.iterdir()):
        data = f.read_bytes()
        blob = root / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        (snap / f.name).symlink_to(os.path.relpath(blob, snap))


def run_offline(args, cache, cwd, offline: bool):
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update(HF_HUB_CACHE=str(cache), HF_ENDPOINT="http://127.0.0.1:9", HF_HUB_DISABLE_TELEMETRY="1",
               PYTHONPATH=str(Path(__file__).parents[2]))
    if offline:
        env["HF_HUB_OFFLINE"] = "1"
    return subprocess.run([sys.executable, "-m", "spec", *args], capture_output=True, text=True, timeout=300,
                          env=env, cwd=cwd)


@pytest.mark.parametrize("offline", [True, False], ids=["HF_HUB_OFFLINE=1", "hub unreachable"])
def test_a_preset_downloaded_once_runs_from_the_hub_cache(offline, shrunk_dir, tmp_path):
    cache = tmp_path / "hub"
    for repo in (QWEN, ZLAB):
        cache_repo(cache, repo, shrunk_dir / repo)
    plant_code(next((cache / f"models--{ZLAB.replace('/', '--')}" / "snapshots").iterdir()), tmp_path / "imported")
    out = run_offline(["--family", "qwen3", "--mode", "dflash", "--max-draft", "3", "--max-new-tokens", "6",
                       "--prompt", "Hi", "--json"], cache, tmp_path, offline)
    assert out.returncode == 0, out.stderr
    assert len(json.loads(out.stdout)["token_ids"]) == 6 and not (tmp_path / "imported").exists()
    # a repo never downloaded: one readable line, exit 2
    missing = run_offline(["--family", "qwen3", "--mode", "dspark", "--max-new-tokens", "2"], cache, tmp_path, offline)
    assert missing.returncode == 2
    assert missing.stderr.strip().splitlines()[-1] == (
        f"error: {DSPARK!r} is not in the local hub cache and the hub cannot be reached (offline?): "
        "download it once with a network")
