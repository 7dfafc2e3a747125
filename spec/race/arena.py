"""The Arena: one loaded target and its drafters (its heads, and prompt lookup), served by one MLX thread that every call goes through.

MLX streams may not cross threads and the shared target must never run two forwards at once: so the
app, the CLI and the benches hand their work to the Arena's thread and read results (or a race's events)
back through futures and queues.
"""

from __future__ import annotations

import atexit
import queue
import threading
import weakref
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Callable, Iterator

from ..errors import SpecError
from ..heads.lookup import PromptLookup
from ..heads.registry import load_dflash, load_dspark
from ..loop.calibrate import costs_for
from ..presets import PRESETS, get_preset, resolve
from ..progress import Progress, quiet
from ..prompts import build_sets, load_prompts
from ..prompts.edit_tasks import EDIT
from ..target import Target, load_target
from .run import RaceEvent, run_race
from .settings import RaceSettings
from .sweep import DOMAINS


class MLXThread:
    """A daemon thread that runs the calls given to it, in order, and never ends: idle ones wait in a
    pool for the next Arena. MLX keeps per-thread state (mx.compile's cache) whose destructor takes the
    GIL, so a worker thread that ended while the interpreter shut down aborted the process ("terminate
    called without an active exception", exit 134) after every script that raced."""

    _idle: list["MLXThread"] = []
    _idle_lock = threading.Lock()

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        threading.Thread(target=self._serve, name="mlx", daemon=True).start()

    @classmethod
    def take(cls) -> "MLXThread":
        with cls._idle_lock:
            return cls._idle.pop() if cls._idle else cls()

    def release(self) -> None:
        with self._idle_lock:
            self._idle.append(self)

    def submit(self, fn: Callable, *args: Any) -> Future:
        fut: Future = Future()
        self._jobs.put((fut, fn, args))
        return fut

    def _serve(self) -> None:
        while True:
            fut, fn, args = self._jobs.get()
            if fut.set_running_or_notify_cancel():
                try:
                    fut.set_result(fn(*args))
                except BaseException as e:  # handed to whoever waits on the future
                    fut.set_exception(e)



class Arena:
    """One target and its heads, owned by ONE worker thread; every MLX call goes through it.

    A Gradio handler (or any thread) calls race(); events come back through a queue. stop() is
    honoured within one round and leaves the target ready for the next race."""

    def __init__(self, loader: Callable[[], tuple[Target, dict[str, Any], dict[str, str]]]):
        self._worker: MLXThread | None = MLXThread.take()
        _OPEN.add(self)
        self._stop = threading.Event()
        self._lock = threading.Lock()  # one race at a time on the shared target
        self.missing: dict[str, str] = {}  # head kind -> why this arena has none (a preset's gap)
        try:
            self.target, self.heads, self.info = self.call(loader)
        except BaseException:
            self.close()
            raise

    def call(self, fn: Callable, *args: Any) -> Any:
        """Run fn on the MLX thread and wait for it (exceptions are re-raised here)."""
        return self._submit(fn, *args).result()

    def _submit(self, fn: Callable, *args: Any) -> Future:
        if self._worker is None:
            raise SpecError("this arena was closed")
        return self._worker.submit(fn, *args)

    def stop(self) -> None:
        self._stop.set()

    @property
    def stopping(self) -> bool:
        """Stop was pressed and the race has not ended yet."""
        return self._stop.is_set() and self._lock.locked()

    def race(self, prompt: str, settings: RaceSettings) -> Iterator[RaceEvent]:
        with self._lock:
            self._stop.clear()
            events: queue.Queue = queue.Queue()
            done = object()

            def work() -> None:
                try:
                    for ev in run_race(self.target, self.heads, prompt, settings, self._stop):
                        events.put(ev)
                except BaseException as e:  # handed to the caller's thread
                    events.put(e)
                finally:
                    events.put(done)

            fut = self._submit(work)
            try:
                while (ev := events.get()) is not done:
                    if isinstance(ev, BaseException):
                        raise ev
                    yield ev
            finally:  # the caller went away (cancelled, closed): stop the worker and wait for it
                self._stop.set()
                fut.result()

    def close(self) -> None:
        """Stop a race in progress, wait for the MLX thread to be idle, and hand it back to the pool."""
        self._stop.set()
        if self._worker is not None:
            worker, self._worker = self._worker, None
            worker.submit(lambda: None).result()
            worker.release()



_OPEN: "weakref.WeakSet[Arena]" = weakref.WeakSet()



@atexit.register
def _close_open_arenas() -> None:
    """At exit, stop the races scripts left running (an abandoned generator): a daemon thread caught
    inside MLX while the interpreter shuts down would abort the process."""
    for arena in list(_OPEN):
        arena.close()



def load_preset_arena(preset: str = "pocket", target: str | None = None, dspark: str | None = None,
                      dflash: str | None = None, drafter_bits: int | None = None,
                      progress: Progress = quiet) -> Arena:
    """An Arena over a preset (or explicit target / head ids or folders), ready to race: the pocket
    target converted and each head's `auto` costs measured on a first start (reported to `progress`)."""

    def loader() -> tuple[Target, dict[str, Any], dict[str, str]]:
        p = get_preset(preset) if (target is None or preset in PRESETS) else None
        t_ref = target or resolve(p.target, "target", progress)
        progress("loading the target", 0.0)
        t = load_target(t_ref)
        progress("loading the target", 1.0)
        heads: dict[str, Any] = {}
        info = {"target": t_ref}
        for kind, ref, load in (("dspark", dspark, load_dspark), ("dflash", dflash, load_dflash)):
            ref = ref or (resolve(getattr(p, kind), kind, progress) if p else None)
            if ref:
                try:
                    heads[kind] = load(ref, t, drafter_bits=drafter_bits)
                except SpecError as e:  # the head's fault, not the target's: say which head and why
                    raise SpecError(head_error(kind, ref, e)) from e
                info[kind] = ref
                costs_for(t, heads[kind], "auto", progress)  # auto's costs, measured once per machine
        heads["lookup"] = PromptLookup().bind(t)  # the head-free racer: any target can race it
        costs_for(t, heads["lookup"], "auto", progress)
        return t, heads, info


    arena = Arena(loader)
    if target is None and preset in PRESETS:  # heads the preset has none of, and not given here
        arena.missing = {k: why for k, why in PRESETS[preset].absent().items() if not {"dspark": dspark,
                                                                                       "dflash": dflash}[k]}
    return arena



def head_error(kind: str, ref: str, e: Exception) -> str:
    """'DFlash head 'x': why' (the loaders' own messages may or may not name the head already)."""
    name = {"dspark": "DSpark head", "dflash": "DFlash head"}[kind]
    why = str(e)
    return why if why.startswith(name) else f"{name} {ref!r} could not be loaded: {why}"


def default_prompts(per_domain: int) -> list[dict]:
    """The held-out demo prompts (assets/prompts), then more held-out prompts from spec.prompts; and the
    edit prompts (answers that quote the prompt: where prompt lookup shines; never trained on)."""
    assets = Path(__file__).resolve().parents[2] / "assets" / "prompts"
    out = []
    for domain in DOMAINS:
        pool = load_prompts(assets / f"{domain}.jsonl") if (assets / f"{domain}.jsonl").exists() else []
        if domain != EDIT:
            held = build_sets(1, seed=0)[domain]["heldout"]
            pool += [p for p in held if p["prompt"] not in {q["prompt"] for q in pool}]
        out += pool[:per_domain]
    return out
