"""Shared fixtures: where ../shared is, fresh copies of golden inputs, running the CLI in-process."""
from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import stat
import subprocess
from types import ModuleType
from typing import Dict, List, Tuple

import pytest

from msprof_kit import cli

# the fixtures of the board-collector tests (a local sshd, a throwaway user, the board program)
pytest_plugins = ["board_server"]

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.path.normpath(os.path.join(HERE, "..", "..", "shared"))
GOLDEN = os.path.join(SHARED, "golden")
COMPARE = os.path.join(SHARED, "tools", "compare_exports.py")
INTACT_CASES = ["min_910b", "910b_mixed", "310p_hwts", "910b_steps", "910b_two_devices", "910b_straddle"]
DEGRADED_CASES = ["degraded_a", "degraded_b", "degraded_c", "degraded_d", "degraded_e"]

needs_shared = pytest.mark.skipif(not os.path.isdir(GOLDEN), reason="../shared/golden is not beside the repo")


def bench_module(name: str) -> ModuleType:
    """bench/NAME.py loaded as a module (bench/ is not a package): the tests of its helpers."""
    spec = importlib.util.spec_from_file_location(f"bench_{name}", os.path.join(HERE, "..", "bench", f"{name}.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def copy_input(case: str, dest: str) -> str:
    """A writable copy of a golden case's raw input; returns the PROF directory."""
    src = os.path.join(GOLDEN, case, "input")
    shutil.copytree(src, dest, dirs_exist_ok=True)
    for root, dirs, files in os.walk(dest):
        for name in dirs + files:
            p = os.path.join(root, name)
            os.chmod(p, os.stat(p).st_mode | stat.S_IWUSR)
    profs = [os.path.join(dest, n) for n in os.listdir(dest) if n.startswith("PROF_")]
    assert len(profs) == 1
    return profs[0]


def run(argv: List[str], capsys: pytest.CaptureFixture) -> Tuple[int, str, str]:
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def tree_hashes(root: str) -> Dict[str, str]:
    """sha256 of every file below root (to prove raw files are untouched)."""
    out = {}
    for base, _, files in os.walk(root):
        for name in files:
            p = os.path.join(base, name)
            with open(p, "rb") as f:
                out[os.path.relpath(p, root)] = hashlib.sha256(f.read()).hexdigest()
    return out


@pytest.fixture(autouse=True, params=["c", "python"])
def native_implementation(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch):
    """Every test runs twice: against the C extension and against its pure-Python twin
    (msprof_kit.native_impl). The environment variable carries the choice into subprocesses."""
    from msprof_kit import native_impl
    if request.param == "c" and not native_impl.available():
        pytest.skip("the C extension msprof_kit._native is not built")
    monkeypatch.setenv(native_impl.ENV, request.param)
    previous = native_impl.use(request.param)
    yield request.param
    native_impl.use(previous)


def run_once_with_c(implementation: str, why: str) -> None:
    """For tests that choose the implementations themselves (`why`): skip the Python-twin run of
    `native_implementation`, and every run without the C extension."""
    from msprof_kit import native_impl
    if not native_impl.available():
        pytest.skip("the C extension msprof_kit._native is not built")
    if implementation != "c":
        pytest.skip(f"{why}; runs once")


def stop_with_signal(proc: "subprocess.Popen[bytes]", signame: str) -> str:
    """Send `signame` to a CLI process (started with start_new_session) and wait for it: it must
    end as the collectors promise, status 128 + N and a last line `Terminated (NAME)`, no
    traceback. Returns its stderr. The process group is killed if it outlives the wait."""
    import signal
    sig = getattr(signal, signame)
    try:
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    text = err.decode()
    assert proc.returncode == 128 + sig, text
    assert text.strip().splitlines()[-1] == f"Terminated ({signame})" and "Traceback" not in text
    return text
