"""Before a load downloads from the hub, the user is asked, with the size: the real total of the files
we would fetch (huggingface_hub's repo metadata) when the hub answers, else the preset note's figure.
Repos already in the local hub cache download nothing and need no question."""

from __future__ import annotations

import fnmatch
import os
import re
from pathlib import Path
from typing import Any

from huggingface_hub import HfApi, try_to_load_from_cache

from spec.hub import HEAD_FILES, TARGET_FILES
from spec.presets import PRESETS


def hub_refs(choice: Any) -> dict[str, str]:
    """kind -> hub repo id this choice would fetch (local folders and the pocket preset fetch nothing)."""
    p = PRESETS.get(choice.preset)
    refs = {"target": choice.target or (p.target if p else None), "dspark": choice.dspark or (p.dspark if p else None),
            "dflash": choice.dflash or (p.dflash if p else None)}
    return {k: r for k, r in refs.items() if r and is_hub_id(r)}


def is_hub_id(ref: str) -> bool:
    return ref.count("/") == 1 and not ref.startswith((".", "/", "~")) and not Path(ref).expanduser().exists()


def cached(repo: str) -> bool:
    """Downloaded before: its config is in huggingface_hub's cache."""
    try:
        return isinstance(try_to_load_from_cache(repo, "config.json"), str)
    except Exception:  # a malformed id: the load itself will say why
        return False


def to_download(choice: Any) -> dict[str, str]:
    """The hub repos of `choice` not yet in the local cache (empty: the load needs no question)."""
    return {k: r for k, r in hub_refs(choice).items() if not cached(r)}


def repo_bytes(repo: str, patterns: tuple[str, ...]) -> int | None:
    """Total size of the files of `repo` we would fetch, from the hub's metadata; None offline."""
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        return None
    try:
        info = HfApi().model_info(repo, files_metadata=True, timeout=5)
    except Exception:  # unreachable, private, missing: the note's figure (or nothing) instead
        return None
    sizes = [s.size or 0 for s in info.siblings or [] if any(fnmatch.fnmatch(s.rfilename, p) for p in patterns)]
    return sum(sizes) if sizes else None


def note_size(preset: str) -> str | None:
    """'about 8 GB' from the preset's note (written for people: the figure offline)."""
    p = PRESETS.get(preset)
    m = re.search(r"about [0-9.]+ ?[GM]B", p.note) if p else None
    return m.group(0) if m else None


def gb(n: int) -> str:
    return f"{n / 1e9:.1f} GB" if n >= 1e8 else f"{n / 1e6:.0f} MB"


def download_question(choice: Any, repos: dict[str, str]) -> str:
    """What the confirmation says: the repos, and the size measured on the hub or the note's estimate."""
    sizes = {r: repo_bytes(r, TARGET_FILES if k == "target" else HEAD_FILES) for k, r in repos.items()}
    names = ", ".join(f"`{r}`" + (f" ({gb(sizes[r])})" if sizes[r] else "") for r in repos.values())
    if all(sizes.values()):
        size = f"{gb(sum(sizes.values()))} in all (measured on the hub)"
    else:
        size = note_size(choice.preset) or "a size the hub did not tell (it cannot be reached)"
        size = f"{size} (the preset's estimate: the hub cannot be reached)" if note_size(choice.preset) else size
    return (f"**Loading {choice.label} downloads {size}** from the Hugging Face hub: {names}. "
            "Nothing starts until you press **Download and load**.")
