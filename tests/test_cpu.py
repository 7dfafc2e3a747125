"""spec.cpu: the fast-BLAS decision (pure), its re-exec / in-process mechanics, and blas_info.

pytest itself is never re-executed: real switches happen in child interpreters.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from spec import cpu

ROOT = Path(__file__).resolve().parents[1]
LIB = "/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0"
BUNDLED = "/site-packages/mlx_cpu.libs/libblas-bd8a282c.so.3.10.0"
have_openblas = pytest.mark.skipif(
    not sys.platform.startswith("linux") or cpu.find_openblas() is None,
    reason="Linux with Debian's libopenblas0-pthread only",
)


def plan(env=None, **kw):
    args = dict(platform="linux", mlx_loaded=False, device_is_cpu=True, active=None, lib=LIB)
    args.update(kw)
    return cpu.plan_fast_blas(env or {}, **args)


# -- the decision ---------------------------------------------------------------------------------
def test_before_mlx_loads_openblas_in_process():
    p = plan()
    assert p.action == "load" and p.lib == LIB
    assert "LD_PRELOAD" not in p.env and p.env["OMP_WAIT_POLICY"] == "PASSIVE"
    assert p.env["OPENBLAS_THREAD_TIMEOUT"] == "4" and int(p.env["OPENBLAS_NUM_THREADS"]) >= 1


def test_after_mlx_loaded_reexecs_with_preload_and_guard():
    p = plan({"LD_PRELOAD": "/x/libfoo.so", "OPENBLAS_NUM_THREADS": "3"}, mlx_loaded=True)
    assert p.action == "reexec"
    assert p.env["LD_PRELOAD"] == f"{LIB} /x/libfoo.so"  # ours first, the user's kept
    assert p.env["OPENBLAS_NUM_THREADS"] == "3"  # the user's choice wins
    assert p.env[cpu.ENV_GUARD] == "1"


@pytest.mark.parametrize(
    "env, kw, why",
    [
        ({"SPEC_ARENA_BLAS": "stock"}, {}, "SPEC_ARENA_BLAS=stock"),
        ({"SPEC_ARENA_BLAS": "stock"}, {"mlx_loaded": True}, "SPEC_ARENA_BLAS=stock"),
        ({}, {"enabled": False}, "disabled"),
        ({}, {"platform": "darwin", "mlx_loaded": True}, "not Linux"),
        ({}, {"active": "/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblasp-r0.3.21.so"}, "already using"),
        ({}, {"lib": None}, "libopenblas0-pthread"),
        ({}, {"mlx_loaded": True, "device_is_cpu": False}, "GPU"),
        ({cpu.ENV_GUARD: "1"}, {"mlx_loaded": True}, "already re-executed"),
        ({}, {"mlx_loaded": True, "reexec": False}, "before importing mlx"),
    ],
)
def test_no_switch(env, kw, why):
    p = plan(env, **kw)
    assert p.action == "none" and why in p.reason


def test_stock_env_strips_only_openblas():
    env = cpu.stock_env({"LD_PRELOAD": f"{LIB} /x/libfoo.so", "A": "1"})
    assert env == {"LD_PRELOAD": "/x/libfoo.so", "A": "1", "SPEC_ARENA_BLAS": "stock"}
    assert "LD_PRELOAD" not in cpu.stock_env({"LD_PRELOAD": LIB})


def test_ensure_fast_blas_replays_the_command_line(monkeypatch):
    """The exec itself is intercepted: we check what would be run, for `python -m spec bench`."""
    calls = []

    class Exec(Exception):
        pass

    def fake_execve(path, argv, env):
        calls.append((path, argv, env))
        raise Exec

    monkeypatch.setattr(cpu.os, "execve", fake_execve)
    monkeypatch.setattr(cpu, "_mlx_loaded", lambda: True)
    monkeypatch.setattr(cpu, "_mlx_on_cpu", lambda: True)
    monkeypatch.setattr(cpu, "_sgemm_owner", lambda: BUNDLED)
    monkeypatch.setattr(cpu, "find_openblas", lambda choice=None: LIB)
    monkeypatch.setattr(cpu, "plan_fast_blas", _with_linux(cpu.plan_fast_blas))
    monkeypatch.setattr(sys, "orig_argv", ["python3", "-X", "utf8", "-m", "spec", "bench", "--curve"])
    for k in (cpu.ENV_GUARD, cpu.ENV_CHOICE, "LD_PRELOAD"):
        monkeypatch.delenv(k, raising=False)

    with pytest.raises(Exec):
        cpu.ensure_fast_blas()
    path, argv, env = calls[0]
    assert path == sys.executable and argv == [sys.executable, "-X", "utf8", "-m", "spec", "bench", "--curve"]
    assert env["LD_PRELOAD"].split()[0] == LIB and env[cpu.ENV_GUARD] == "1"

    # Opt-outs never exec.
    assert "disabled" in cpu.ensure_fast_blas(enabled=False)
    assert "before importing mlx" in cpu.ensure_fast_blas(reexec=False)
    monkeypatch.setenv(cpu.ENV_CHOICE, "stock")
    assert "stock" in cpu.ensure_fast_blas()
    assert len(calls) == 1


def _with_linux(fn):
    def wrapped(env, **kw):
        kw["platform"] = "linux"
        return fn(env, **kw)

    return wrapped


# -- what is actually active ----------------------------------------------------------------------
def test_blas_info_reports_the_active_blas():
    info = cpu.blas_info()
    assert isinstance(info, str) and info
    if sys.platform.startswith("linux"):
        assert "BLAS" in info
        if any("openblas" in p for p in os.environ.get("LD_PRELOAD", "").split()):
            assert info.startswith("OpenBLAS")


def _child(code: str, tmp_path: Path, args=(), env_extra=None, module=False) -> str:
    """Run `code` as a script (or `-m` module) in a clean child interpreter; return its stdout."""
    (tmp_path / "blascheck.py").write_text(textwrap.dedent(code))
    env = {k: v for k, v in os.environ.items()
           if k not in ("LD_PRELOAD", cpu.ENV_GUARD, cpu.ENV_CHOICE, "OPENBLAS_NUM_THREADS")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.update(env_extra or {})
    entry = ["-m", "blascheck"] if module else [str(tmp_path / "blascheck.py")]
    cmd = [sys.executable, *entry, *args]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


REEXEC = """
    import sys
    import mlx.core  # MLX first: only a restart can switch the BLAS now
    print("run", sys.argv[1:])
    from spec.cpu import blas_info, ensure_fast_blas
    print("plan", ensure_fast_blas())
    print("info", blas_info())
"""


@have_openblas
@pytest.mark.parametrize("module", [True, False], ids=["python -m", "python script.py"])
def test_reexec_for_real_in_a_child(tmp_path, module):
    out = _child(REEXEC, tmp_path, ["--flag", "x y"], module=module)
    assert out.count("run ['--flag', 'x y']") == 2  # ran, re-executed with the same arguments
    info = next(line for line in out.splitlines() if line.startswith("info"))
    assert "OpenBLAS" in info and "preloaded" in info


@have_openblas
def test_opt_out_in_a_child(tmp_path):
    out = _child(REEXEC, tmp_path, env_extra={"SPEC_ARENA_BLAS": "stock"})
    assert out.count("run") == 1 and "bundled" in out and "OpenBLAS" not in out


@have_openblas
def test_in_process_load_before_mlx(tmp_path):
    """spec/cpu.py loaded on its own (the package would import mlx), then MLX binds to OpenBLAS."""
    code = f"""
        import importlib.util, sys
        spec = importlib.util.spec_from_file_location("spec_cpu", {str(ROOT / "spec" / "cpu.py")!r})
        cpu = sys.modules["spec_cpu"] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(cpu)
        assert "mlx.core" not in sys.modules
        print("plan", cpu.ensure_fast_blas())
        import mlx.core as mx
        mx.eval(mx.ones((16, 64)) @ mx.ones((64, 64)))
        print("info", cpu.blas_info())
    """
    out = _child(code, tmp_path)
    assert "in-process" in out and "info OpenBLAS" in out


# -- the bench's configurations (no model run: that is `python -m spec bench --curve`) -------------
def test_bench_configs_and_table(monkeypatch):
    from spec.bench import curve as bench
    from spec.report import to_markdown

    monkeypatch.setenv("LD_PRELOAD", f"{LIB} /x/libfoo.so")
    monkeypatch.setattr(cpu, "find_openblas", lambda choice=None: LIB)
    configs = dict(bench.curve_configs([1, 2]))
    assert list(configs) == ["stock", "openblas 1t", "openblas 2t"]
    stock = configs["stock"]
    assert stock["LD_PRELOAD"] == "/x/libfoo.so" and stock["SPEC_ARENA_BLAS"] == "stock"
    fast = configs["openblas 2t"]
    assert fast["LD_PRELOAD"].split()[0] == LIB and fast["OPENBLAS_NUM_THREADS"] == "2"
    assert "SPEC_ARENA_BLAS" not in fast and all(env[cpu.ENV_GUARD] == "1" for env in configs.values())

    def result(scale, tok_s):
        return {"curve_ms": {str(t): 100.0 * (1 + scale * (t - 1)) for t in bench.CURVE_TS}, "greedy_tok_s": tok_s}

    table = to_markdown(bench.curve_table([("stock", result(1.0, 5.0)), ("openblas 1t", result(0.05, 10.0))]))
    lines = table.splitlines()
    assert lines[0].startswith("| config | T=1 ms") and len(lines) == 4
    assert "| stock | 100.0 (1.00x)" in lines[2] and "| 16.00 | 5.0 | 1.00x |" in lines[2]
    assert "175.0 (1.75x)" in lines[3] and lines[3].endswith("| 1.75 | 10.0 | 2.00x |")
    joined = bench.combine([result(1.0, 4.0), result(1.0, 6.0), result(1.0, 9.0)])
    assert joined["greedy_tok_s"] == 6.0
