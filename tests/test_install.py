"""Packaging: what a wheel holds and what a missing extra says. CI (.ci/run) builds the wheel and
installs it on Python 3.9 and 3.13 for the whole check; these are the quick parts of it."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from conftest import copy_input, needs_shared, run

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_every_source_folder_is_a_package():
    """setup.py finds the packages (find_packages): a folder of modules without __init__.py would
    be left out of the wheel, as msprof_kit/exporters once was from a hand-kept list."""
    for top in ("msprof_kit", "parsers", "collectors"):
        for base, dirs, files in os.walk(os.path.join(ROOT, top)):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            if any(f.endswith(".py") for f in files):
                assert "__init__.py" in files, f"{base} holds modules but no __init__.py"


def test_setup_finds_the_installed_packages():
    """The package list setup.py computes covers every package, mapped folders included."""
    pytest.importorskip("setuptools", reason="setuptools is not installed here (Python 3.12+ venvs lack it)")
    code = ("import json, setuptools; setuptools.setup = lambda **kw: print(json.dumps(kw['packages'])); "
            "exec(open('setup.py').read())")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    packages = json.loads(out)
    assert {"msprof_kit", "msprof_kit.exporters", "msprof_kit.parsers", "msprof_kit.collectors"} <= set(packages)
    assert "tests" not in " ".join(packages) and "bench" not in " ".join(packages)


@needs_shared
@pytest.mark.parametrize("argv", [["plot"], ["compare", "--plot"]])
def test_a_missing_plot_extra_is_one_line(argv, tmp_path, capsys, monkeypatch):
    prof = copy_input("min_910b", str(tmp_path))
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name.split(".")[0] == "matplotlib" else real(name, *a))
    args = [argv[0], "-dir", prof] + (["-dir", prof] if argv[0] == "compare" else []) + argv[1:]
    code, out, err = run(args, capsys)
    assert code == 1 and out == ""
    assert err == "Error: plotting needs matplotlib: pip install 'msprof-kit[plot]'\n"
