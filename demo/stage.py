"""The arena a server races on (one target and its heads, loaded from a preset or custom ids), its
preparation on a first start (the steps the page shows while the server already answers), and the
header chips that say what is loaded and where it runs."""

from __future__ import annotations

import platform
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mlx.core as mx

from demo.download import hub_refs, is_hub_id
from demo.exposure import Exposure
from demo.lanes import esc
from demo.view import readable
from spec.cpu import blas_info
from spec.errors import SpecError
from spec.hub import resolve_path
from spec.presets import PRESETS, get_preset, pocket_name
from spec.progress import Console, Progress, quiet
from spec.prompts import load_prompts
from spec.race.arena import load_preset_arena
from spec.race.file import NOT_INSTALLED, versions

CUSTOM_LABEL = "custom: your own target and heads"
PROMPTS = Path(__file__).resolve().parents[1] / "assets" / "prompts"


@dataclass(frozen=True)
class Choice:
    """What the arena is loaded from: a preset, or explicit target / head ids or folders."""

    preset: str = "pocket"
    target: str | None = None
    dspark: str | None = None
    dflash: str | None = None

    @classmethod
    def of(cls, preset: str, target: str = "", dspark: str = "", dflash: str = "") -> "Choice":
        """The Settings' fields as a Choice (the id fields count for "custom" only)."""
        return (cls("custom", target.strip() or None, dspark.strip() or None, dflash.strip() or None)
                if preset == "custom" else cls(preset))

    @property
    def label(self) -> str:
        return self.preset if self.preset != "custom" else short(self.target or "custom")


@dataclass
class Preparation:
    """A load in the background, step by step as spec reports them (converting the pocket target,
    loading it, calibrating each head), for the page to show while the server already answers."""

    label: str
    steps: dict[str, float] = field(default_factory=dict)  # step -> fraction done, in the order they came
    started: float = field(default_factory=time.monotonic)

    def __call__(self, step: str, fraction: float) -> None:
        self.steps[step] = fraction


@dataclass
class Stage:
    """The ONE arena this server races on; replaced only by one that loaded without error.

    Stop is per browser session: only the session whose race is running may stop it, and a Stop
    pressed while one's own run still waits in the queue cancels that run before it starts."""

    arena: Any = None
    choice: Choice | None = None
    error: str = ""
    owner: str | None = None
    cancelled: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)
    recordings: dict[str, list] = field(default_factory=dict)  # session -> events of its last finished race
    headers: dict[str, dict] = field(default_factory=dict)  # session -> its last race's header (spec.race_file)
    exposure: Exposure = field(default_factory=Exposure)
    preparing: Preparation | None = None  # the first load, while it runs: Run waits for it

    def start(self, choice: Choice) -> threading.Thread:
        """Load `choice` in the background, so the page answers at once and shows the steps; the console
        shows them as progress bars. A failure is kept in `error` (the page says why; nothing else is lost)."""
        self.choice, self.preparing = choice, Preparation(choice.label)

        def prepare() -> None:
            steps = Console(also=self.preparing)
            try:
                self.load(choice, steps)
                took = ", ".join(f"{s} {d:.0f} s" for s, d in steps.durations.items() if d >= 1)
                print(f"spec-arena: {choice.label} is ready" + (f" ({took})" if took else ""), file=sys.stderr)
            except Exception as e:  # serve anyway: the page shows why and lets the user pick another preset
                self.error = self.tell(f"could not load {choice.label}: {self.tell(e)}")
                print(f"spec-arena: {self.error}", file=sys.stderr)
            finally:
                steps.close()
                self.preparing = None

        worker = threading.Thread(target=prepare, name="prepare", daemon=True)
        worker.start()
        return worker

    def tell(self, what: BaseException | str) -> str:
        """One readable line for a visitor (server paths scrubbed when served beyond this machine)."""
        return self.exposure.scrub(what if isinstance(what, str) else readable(what))

    @property
    def serving(self) -> str:
        """The preset (or "custom") of the arena served now."""
        return self.choice.preset if self.choice else "pocket"

    def failure(self, choice: Choice, e: BaseException) -> str:
        """Why loading `choice` failed, blaming the part that failed (a head names itself), and what is
        still served."""
        why = self.tell(e)
        what = why if why.startswith(("DSpark head", "DFlash head")) else f"could not load {choice.label}: {why}"
        keep = f" Still serving {self.choice.label}." if self.arena is not None and self.choice else ""
        return self.tell(what.rstrip(". ") + "." + keep)

    def names(self) -> dict[str, str]:
        """What is loaded, in words (never a server folder): target / dspark / dflash -> name."""
        return model_names(self.choice, self.arena.info if self.arena is not None else {})

    def record(self, session: str | None, events: list, header: dict) -> None:
        """Keep a session's last race for its replay (the most recent 32 sessions), with its race file's
        header (prompt, models, machine, versions; "source": the file it was opened from, in words)."""
        self.recordings.pop(session, None)
        self.recordings[session], self.headers[session] = events, header
        while len(self.recordings) > 32:
            self.headers.pop(old := next(iter(self.recordings)), None)
            self.recordings.pop(old)

    def load(self, choice: Choice, progress: Progress = quiet) -> None:
        """Load `choice` next to the current arena; swap only on success (errors leave it serving).
        progress(step, fraction): downloads, a first start's conversion and calibrations."""
        if choice.preset == "custom" and not choice.target:
            raise SpecError("give a target (a hub id or a folder) and at least one head")
        if choice.preset != "custom":
            get_preset(choice.preset)  # "not yet supported" before any download
        prefetch(choice, progress)
        new = load_preset_arena(choice.preset, choice.target, choice.dspark, choice.dflash, progress=progress)
        with self.lock:
            old, self.arena, self.choice, self.error = self.arena, new, choice, ""
        if old is not None:
            old.close()


def preset_choices() -> list[tuple[str, str]]:
    """Dropdown entries from spec.presets: name, the first clause of its note, support."""
    out = []
    for name, p in PRESETS.items():
        label = f"{name}: {p.note.split(';')[0].split(':')[0].split(' (')[0].strip()}" if p.note else name
        out.append((label if p.supported else f"{name}: not yet supported", name))
    return out + [(CUSTOM_LABEL, "custom")]


def preset_note(preset: str) -> str:
    """What the preset is, as its note in spec.presets says (custom: what to type)."""
    if preset == "custom":
        return "Type a hub id or a local folder for the target and each head, then press **Load**."
    p = PRESETS.get(preset)
    return f"{p.note}." if p and p.note else ""


def prefetch(choice: Choice, progress: Progress) -> None:
    """Download hub ids here (not on the MLX thread) so the page's progress bar sees the tqdm bars."""
    hub = list(hub_refs(choice).values())
    for i, ref in enumerate(hub):
        progress(f"downloading {ref}", 0.0)
        resolve_path(ref)
        progress(f"downloading {ref}", 1.0)


def model_names(choice: Choice | None, info: dict[str, str]) -> dict[str, str]:
    """A hub id as is; the pocket preset's models by what they are; a local folder by its name."""
    out = {}
    for kind, ref in info.items():
        if choice is not None and choice.preset == "pocket":
            out[kind] = pocket_name(kind)
        else:
            given = getattr(choice, kind, None) or ref
            out[kind] = given if is_hub_id(given) else Path(given).name
    return out


def describe(stage: Stage) -> str:
    """Header chips: target, heads, device, BLAS, versions (device and BLAS asked on the MLX thread)."""
    chips: list[tuple[str, str, str]] = []
    a = stage.arena
    if a is None and stage.preparing is not None:
        chips.append(("model", f"preparing {stage.preparing.label}…", ""))
    elif a is None:
        chips.append(("model", "none loaded", ""))
    else:
        names = stage.names()
        for key, label in (("target", "target:"), ("dspark", "DSpark head:"), ("dflash", "DFlash head:")):
            why = a.missing.get(key, "")
            chips.append((label, names.get(key, "none published" if why else "none"),
                          names.get(key, why or "not loaded")))
        device, blas = a.call(_device_and_blas)
        chips += [("device", device, ""), ("BLAS", blas.split(" (")[0], stage.exposure.scrub(blas))]
    chips.append(("versions", " · ".join(f"{pkg} {v}" for pkg, v in versions().items()
                                         if pkg in ("mlx", "mlx-lm", "gradio") and v != NOT_INSTALLED), ""))
    body = "".join(f'<span class="chip" title="{esc(tip)}"><b>{esc(k)}</b> {esc(v)}</span>' for k, v, tip in chips)
    return f'<div class="chips">{body}</div>'


def preparation_html(stage: Stage) -> str:
    """While the served model is prepared: each step so far with its progress, and what Run waits for."""
    prep = stage.preparing
    if prep is None:
        return ""
    rows = "".join(
        f'<li class="{"done" if f >= 1 else "now"}"><span>{esc(step)}</span>'
        f'<progress max="100" value="{round(100 * f)}"></progress><b>{"done" if f >= 1 else f"{100 * f:.0f}%"}</b></li>'
        for step, f in prep.steps.items()) or '<li class="now"><span>starting…</span></li>'
    return (f'<div class="preparing"><p><span class="pulse"></span><b>Preparing {esc(prep.label)}</b> '
            f"({time.monotonic() - prep.started:.0f} s so far): Run starts as soon as it is ready. A first start "
            "measures what each draft length costs on this machine, for Auto (kept on disk: later starts take "
            f"seconds).</p><ul>{rows}</ul></div>")


def _device_and_blas() -> tuple[str, str]:
    gpu = mx.default_device().type == mx.gpu
    return ("GPU (Metal)" if gpu else f"CPU ({platform.machine()})"), blas_info()


def short(ref: str) -> str:
    p = Path(ref)
    return p.name if p.exists() else ref


# -- what the page offers and asks ------------------------------------------------------------------

def examples(domain: str, k: int = 6) -> list[str]:
    """The first `k` shipped prompts of a domain (assets/prompts); none when the file is missing."""
    try:
        return [row["prompt"] for row in load_prompts(PROMPTS / f"{domain}.jsonl")][:k]
    except (OSError, ValueError):
        return []
