"""mypy, run as a developer runs it (a bare `mypy` from the repository root, configured by setup.cfg's
[mypy] section), checks every module of msprof_kit, parsers and collectors and reports nothing."""
from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("msprof_kit", "parsers", "collectors")  # parsers/ and collectors/ install as msprof_kit.*


def _sources() -> int:
    return sum(1 for folder in PACKAGES for _ in (ROOT / folder).rglob("*.py"))


@pytest.fixture(scope="module")
def mypy_run() -> subprocess.CompletedProcess:
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed; it comes with the test extra (pip install -e '.[test]')")
    env = {k: v for k, v in os.environ.items() if k != "MYPYPATH"}
    return subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)


def test_mypy_reports_nothing(mypy_run: subprocess.CompletedProcess) -> None:
    assert mypy_run.returncode == 0, f"mypy found problems:\n{mypy_run.stdout}{mypy_run.stderr}"


def test_mypy_checks_every_module(mypy_run: subprocess.CompletedProcess) -> None:
    # .typecheck/msprof_kit/{parsers,collectors} must be symlinks to the two folders (setup.cfg says why):
    # when they are missing or became plain files, mypy checks fewer modules
    checked = re.search(r"in (\d+) source files?", mypy_run.stdout)
    assert checked is not None, mypy_run.stdout + mypy_run.stderr
    assert int(checked.group(1)) == _sources()
