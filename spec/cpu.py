"""Make MLX fast on a Linux CPU by swapping in an optimized BLAS (see docs/cpu.md).

The mlx-cpu wheel ships the reference netlib BLAS, with which a 16-token verify costs about as
much as 16 single steps, so speculative decoding cannot win. MLX's CPU matmuls call cblas_sgemm;
an optimized OpenBLAS (Debian package libopenblas0-pthread) that is in the process's global symbol
scope *before* MLX's native library loads takes those calls over. Two ways to get there:

- in-process (preferred): if MLX is not imported yet, dlopen OpenBLAS with RTLD_GLOBAL; libmlx,
  loaded afterwards, binds cblas_sgemm to it. No restart, nothing runs twice.
- re-exec: if MLX is already loaded, restart the process once with LD_PRELOAD set (a guard
  variable prevents loops).

Opt out with SPEC_ARENA_BLAS=stock (or `enabled=False`); SPEC_ARENA_BLAS=/path/libopenblas.so
picks another build. Nothing happens on macOS, nor when MLX's default device is a GPU.
"""

from __future__ import annotations

import ctypes
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

# Debian / Ubuntu package libopenblas0-pthread (x86_64 and arm64).
OPENBLAS_CANDIDATES = (
    "/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0",
    "/usr/lib/aarch64-linux-gnu/openblas-pthread/libopenblas.so.0",
)
ENV_CHOICE = "SPEC_ARENA_BLAS"  # "stock" opts out; unset/"openblas" = default; or a library path
ENV_GUARD = "SPEC_ARENA_BLAS_REEXEC"  # set in a re-executed process: never exec twice
STOCK_WORDS = ("stock", "off", "0", "no", "none", "bundled")
# OpenBLAS threads. On the 2-core probe box one thread was as fast as two for a 1-token step and
# faster and steadier for 4..16-token verifies whenever anything else ran (README's BLAS table), so
# small machines get 1. Bigger machines get their cores (at most 8; not measured here).
# OPENBLAS_NUM_THREADS in the environment always wins.
MAX_THREADS = 8
# On few cores, spinning OpenBLAS / OpenMP threads caused random ~350 ms stalls (docs/cpu.md).
QUIET_THREADS = {"OMP_WAIT_POLICY": "PASSIVE", "OPENBLAS_THREAD_TIMEOUT": "4"}

_loaded: ctypes.CDLL | None = None  # keeps the in-process OpenBLAS alive


@dataclass
class BlasPlan:
    """What ensure_fast_blas will do ("none", "load" in-process, "reexec"), decided without side effects."""

    action: str
    reason: str
    lib: str | None = None
    env: dict[str, str] = field(default_factory=dict)


def default_threads() -> int:
    """OpenBLAS threads when the user sets none: 1 on <= 2 cores, else the cores (capped)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return 1 if cores <= 2 else min(cores, MAX_THREADS)


def find_openblas(choice: str | None = None) -> str | None:
    """An optimized OpenBLAS to use: an explicit path in SPEC_ARENA_BLAS, else Debian's."""
    if choice and "/" in choice:
        return choice if Path(choice).is_file() else None
    return next((p for p in OPENBLAS_CANDIDATES if Path(p).is_file()), None)


def _split_preload(value: str) -> list[str]:
    return [p for p in value.replace(":", " ").split() if p]


def blas_env(env: Mapping[str, str], lib: str, threads: int | None = None, preload: bool = True) -> dict[str, str]:
    """`env` plus what a process needs to run MLX on `lib`; the user's own thread settings win."""
    new = dict(env)
    if preload:
        libs = _split_preload(new.get("LD_PRELOAD", ""))
        if lib not in libs:
            new["LD_PRELOAD"] = " ".join([lib, *libs])
    for k, v in QUIET_THREADS.items():
        new.setdefault(k, v)
    if threads is not None:
        new["OPENBLAS_NUM_THREADS"] = str(threads)
    else:
        new.setdefault("OPENBLAS_NUM_THREADS", str(default_threads()))
    return new


def stock_env(env: Mapping[str, str]) -> dict[str, str]:
    """`env` for the stock configuration: OpenBLAS preloads removed and the opt-out set."""
    new = dict(env)
    libs = [p for p in _split_preload(new.get("LD_PRELOAD", "")) if "openblas" not in p]
    if libs:
        new["LD_PRELOAD"] = " ".join(libs)
    else:
        new.pop("LD_PRELOAD", None)
    new[ENV_CHOICE] = "stock"
    return new


def _mlx_loaded() -> bool:
    """Whether MLX's native library is already in this process (then only a restart helps)."""
    if "mlx.core" in sys.modules:
        return True
    return any("libmlx" in Path(p).name for p in _mapped_libs())


def _mlx_on_cpu() -> bool:
    try:
        import mlx.core as mx

        return mx.default_device().type == mx.cpu
    except Exception:
        return False


def plan_fast_blas(
    env: Mapping[str, str],
    *,
    enabled: bool = True,
    reexec: bool = True,
    platform: str = sys.platform,
    mlx_loaded: bool = False,
    device_is_cpu: bool = True,
    active: str | None = None,
    lib: str | None = None,
) -> BlasPlan:
    """Decide how (and whether) to switch to an optimized BLAS. Pure: all facts are arguments.

    `active` is the BLAS already bound (a path), `lib` the OpenBLAS found on disk (None: none).
    """
    choice = env.get(ENV_CHOICE, "").strip()
    if not enabled:
        return BlasPlan("none", "disabled by the caller")
    if choice.lower() in STOCK_WORDS:
        return BlasPlan("none", f"{ENV_CHOICE}={choice}: keeping MLX's bundled BLAS")
    if not platform.startswith("linux"):
        return BlasPlan("none", f"not Linux ({platform}): nothing to do")
    if active and "openblas" in Path(active).name.lower():
        return BlasPlan("none", f"already using {active}")
    if lib is None:
        hint = f"{choice} not found" if "/" in choice else "apt-get install libopenblas0-pthread"
        return BlasPlan("none", f"no OpenBLAS ({hint}); MLX keeps its slow bundled BLAS")
    if not mlx_loaded:
        return BlasPlan("load", f"load {lib} before MLX", lib, blas_env(env, lib, preload=False))
    if not device_is_cpu:
        return BlasPlan("none", "MLX runs on a GPU: BLAS does not matter")
    if env.get(ENV_GUARD):
        return BlasPlan("none", "already re-executed once; the preload did not take")
    if not reexec:
        return BlasPlan("none", "MLX was imported first; call ensure_fast_blas() before importing mlx")
    new = blas_env(env, lib)
    new[ENV_GUARD] = "1"
    return BlasPlan("reexec", f"restart with LD_PRELOAD={lib}", lib, new)


def _reexec_argv() -> list[str] | None:
    """The command line that started this interpreter, or None when it cannot be replayed."""
    orig = list(getattr(sys, "orig_argv", []) or [])
    if len(orig) < 2 or sys.flags.interactive or not sys.argv or sys.argv[0] in ("", "-"):
        return None  # REPL, stdin script or embedded interpreter: do not replay
    return [sys.executable, *orig[1:]]


def ensure_fast_blas(argv: Sequence[str] | None = None, enabled: bool = True, reexec: bool = True) -> str:
    """Switch MLX to an optimized BLAS when that helps; return what was done (for logs).

    Call it first thing in an entry point, ideally before anything imports mlx: then OpenBLAS is
    loaded in-process. Otherwise (and if `reexec`) the process restarts with LD_PRELOAD, replaying
    `argv` (default: sys.executable + sys.orig_argv[1:]); code before the call runs twice then.
    Test runners should pass reexec=False.
    """
    global _loaded
    loaded = _mlx_loaded()
    plan = plan_fast_blas(
        os.environ,
        enabled=enabled,
        reexec=reexec,
        mlx_loaded=loaded,
        device_is_cpu=_mlx_on_cpu() if loaded else True,
        active=_sgemm_owner(),
        lib=find_openblas(os.environ.get(ENV_CHOICE)),
    )
    if plan.action == "load":
        for k in ("OPENBLAS_NUM_THREADS", *QUIET_THREADS):  # read once, when the libraries start
            os.environ[k] = plan.env[k]
        try:
            _loaded = ctypes.CDLL(plan.lib, mode=ctypes.RTLD_GLOBAL)
        except OSError as e:
            return f"could not load {plan.lib}: {e}"
        return f"loaded {plan.lib} in-process"
    if plan.action != "reexec":
        return plan.reason
    cmd = list(argv) if argv is not None else _reexec_argv()
    if not cmd:
        return "cannot replay this command line (interactive or stdin); set LD_PRELOAD yourself"
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os.execve(cmd[0] if os.sep in cmd[0] else sys.executable, cmd, plan.env)
    return "unreachable"  # pragma: no cover


# -- reporting ------------------------------------------------------------------------------------
def _mapped_libs() -> list[str]:
    try:
        with open("/proc/self/maps") as fh:
            paths = [line.split(None, 5)[-1].strip() for line in fh if "/" in line]
    except OSError:
        return []
    return list(dict.fromkeys(p for p in paths if p.startswith("/")))


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def _sgemm_owner() -> str | None:
    """File of the process-global `cblas_sgemm` (what a later-loaded MLX binds to), if any."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        process = ctypes.CDLL(None)
        addr = ctypes.cast(process.cblas_sgemm, ctypes.c_void_p).value
        info = _DlInfo()
        if process.dladdr(ctypes.c_void_p(addr), ctypes.byref(info)) and info.dli_fname:
            return os.path.realpath(info.dli_fname.decode())
    except (OSError, AttributeError, ValueError):
        pass
    return None


def _openblas_details(path: str) -> str:
    try:
        lib = ctypes.CDLL(path)
        lib.openblas_get_config.restype = ctypes.c_char_p
        config = (lib.openblas_get_config() or b"").decode().split()
        threads = int(lib.openblas_get_num_threads())
    except (OSError, AttributeError, ValueError):
        return "OpenBLAS"
    version = config[1] if len(config) > 1 and config[0] == "OpenBLAS" else ""
    return f"OpenBLAS {version}".strip() + f", {threads} thread{'s' if threads != 1 else ''}"


def cpu_name() -> str:
    """The processor's model name (Linux: /proc/cpuinfo), else what platform knows."""
    import platform

    try:
        with open("/proc/cpuinfo") as fh:
            return next(line.split(":", 1)[1].strip() for line in fh if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def blas_info() -> str:
    """One line for the CLI / UI header: which BLAS MLX's CPU matmuls actually use."""
    import mlx.core as mx

    if sys.platform == "darwin":
        return "Metal GPU (Apple)" if mx.default_device().type == mx.gpu else "Accelerate (macOS)"
    if mx.default_device().type == mx.gpu:
        return "GPU (BLAS not used)"
    owner = _sgemm_owner()  # global: preloaded or loaded in-process before MLX
    if owner is None:  # not global: MLX bound the library bundled with it
        owner = next((p for p in _mapped_libs() if "mlx" in p and Path(p).name.startswith("libblas")), None)
    if owner is None:
        return "unknown BLAS"
    name = Path(owner).name
    if "openblas" in name.lower():
        preloaded = any("openblas" in p for p in _split_preload(os.environ.get("LD_PRELOAD", "")))
        how = "preloaded" if preloaded else "in-process"
        return f"{_openblas_details(owner)} ({how}, {owner})"
    if "mlx" in owner and name.startswith("libblas"):
        return f"stock reference BLAS bundled with mlx-cpu ({name}; slow, see {ENV_CHOICE})"
    return f"{name} ({owner})"
