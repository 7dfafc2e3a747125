"""Where a checkpoint comes from and what it may bring: a local folder or a hub repo (huggingface_hub,
only config, weight and tokenizer files), its config.json, and the no-code rule (we never execute a
checkpoint's code; metadata that merely names code is fine)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from .errors import SpecError

# Files a checkpoint may bring: configs, weights, tokenizer files. Never *.py: we never run a checkpoint's code.
TARGET_FILES = ("*.json", "*.safetensors", "*.jinja", "tokenizer.model", "merges.txt", "vocab.txt")



HEAD_FILES = ("*.json", "*.safetensors")



def resolve_path(path_or_repo: str, allow_patterns: Sequence[str] = TARGET_FILES) -> Path:
    """A local folder as is; otherwise a hub repo id fetched by huggingface_hub (only `allow_patterns`).

    A repo downloaded once is reused from huggingface_hub's cache when the hub cannot be reached, and
    with HF_HUB_OFFLINE=1 (where huggingface_hub itself reads the cache only).
    """
    p = Path(path_or_repo).expanduser()
    if p.exists():
        if not p.is_dir():
            raise SpecError(f"{path_or_repo} is a file; expected a model folder or a hub repo id")
        return p
    if path_or_repo.startswith((".", "/", "~")) or path_or_repo.count("/") != 1:
        raise SpecError(f"model folder not found: {path_or_repo}")
    from huggingface_hub import snapshot_download

    patterns = list(allow_patterns)
    try:
        return Path(snapshot_download(path_or_repo, allow_patterns=patterns))
    except Exception as online:  # network, auth, missing repo
        try:  # the hub is out of reach: a copy downloaded before will do
            return Path(snapshot_download(path_or_repo, allow_patterns=patterns, local_files_only=True))
        except Exception:
            raise SpecError(hub_error(path_or_repo, online)) from online



def hub_error(repo: str, e: Exception) -> str:
    """One readable line for a failed download (huggingface_hub's own text is a stack of causes)."""
    kind = type(e).__name__
    if kind in ("RepositoryNotFoundError", "RevisionNotFoundError"):
        return f"{repo!r} does not exist on the hub (or is private)"
    if kind == "GatedRepoError":
        return f"{repo!r} is gated on the hub: accept its licence there and log in (huggingface-cli login)"
    if kind in ("LocalEntryNotFoundError", "OfflineModeIsEnabled") or "connect" in str(e).lower():
        return (f"{repo!r} is not in the local hub cache and the hub cannot be reached "
                "(offline?): download it once with a network")
    return f"could not download {repo!r} from the hub: {kind}: {str(e).splitlines()[0] if str(e) else ''}"



def read_config(folder: Path) -> dict:
    """config.json of a model folder. Keys that name code (auto_map) are metadata: we never import it."""
    cfg_path = folder / "config.json"
    if not cfg_path.exists():
        raise SpecError(f"{folder} has no config.json: not a model folder")
    try:
        cfg = json.loads(cfg_path.read_text())
    except json.JSONDecodeError as e:
        raise SpecError(f"{cfg_path} is not valid JSON: {e}") from e
    if not isinstance(cfg, dict):
        raise SpecError(f"{cfg_path} is not a JSON object")
    return cfg



def refuse_code(folder: Path, cfg: dict) -> None:
    """Refuse a target only for what would really run its code: mlx-lm's `model_file` (a module
    built from the checkpoint) or a tokenizer class that exists only as the checkpoint's code."""
    why = None
    if cfg.get("model_file"):
        why = f"its config asks mlx-lm to run {cfg['model_file']!r} (model_file)"
    tok_path = folder / "tokenizer_config.json"
    if why is None and tok_path.exists():
        try:
            tok = json.loads(tok_path.read_text())
        except json.JSONDecodeError as e:
            raise SpecError(f"{tok_path} is not valid JSON: {e}") from e
        auto = (tok.get("auto_map") or {}).get("AutoTokenizer")
        cls = tok.get("tokenizer_class")
        if auto and not _builtin_tokenizer(cls):
            why = f"its tokenizer class {cls or auto!r} exists only as code in the checkpoint (auto_map)"
    if why:
        raise SpecError(f"{folder} needs remote code: {why}; we never execute code from a checkpoint")



def _builtin_tokenizer(name: str | None) -> bool:
    """Whether transformers ships tokenizer class `name` itself (then auto_map is never imported)."""
    if not name:
        return False
    import transformers

    return any(getattr(transformers, n, None) is not None for n in (name, name.removesuffix("Fast"), name + "Fast"))
