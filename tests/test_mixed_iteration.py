"""Issue 23 item 2: the iteration export of a model whose iterations hold MIX_AIC / MIX_AIV ops
equals the reference's (C++ install, 910B), and so does the whole export of the same collection.

The input is written again by tests/synth; the reference's outputs for it are stored in
tests/reference/mixed_iteration (MANIFEST.txt there: the generator call, the reference commit
and the commands)."""
from __future__ import annotations

import csv
import glob
import os
import re
import subprocess
import sys
from typing import Dict, List

import pytest

from conftest import COMPARE, HERE, needs_shared

import synth
from refcases import tree_digest
from msprof_kit import cli

pytestmark = needs_shared

REFERENCE = os.path.join(HERE, "reference", "mixed_iteration")
ITERATION = ["--model-id", "1", "--iteration-id", "2"]


def write_input(out: str) -> str:
    """The case's raw collection (the call MANIFEST.txt names); returns the PROF directory."""
    return synth.write_collection(out, n_tasks=40, model_fraction=0.75, mix_fraction=0.3, steps=True, seed=1)


def export(prof: str, *extra: str) -> None:
    for what in ("timeline", "summary"):
        assert cli.main(["export", what, "-dir", prof, *extra]) == 0


def compare(prof: str, folder: str, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, COMPARE, prof, os.path.join(REFERENCE, folder), *extra],
                          capture_output=True, text=True)


def op_summary(path: str) -> List[Dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


@pytest.fixture
def prof(tmp_path) -> str:
    return write_input(str(tmp_path))


def test_the_input_is_the_one_the_reference_read(prof):
    manifest = open(os.path.join(REFERENCE, "MANIFEST.txt"), encoding="utf-8").read()
    stored = re.search(r"input sha256: ([0-9a-f]{64})", manifest)
    assert stored and tree_digest(prof) == stored.group(1), \
        "tests/synth writes another input now: run the reference again (MANIFEST.txt)"


def test_iteration_export_equals_the_reference(prof, capsys):
    export(prof, *ITERATION)
    capsys.readouterr()
    res = compare(prof, "cpp_model1_iter2")
    assert res.returncode == 0, res.stdout
    assert res.stdout.strip().splitlines()[-1] == "verdict: equal (6 kinds equal)"
    # the iteration export is the reference's Python path on both installs; only api_statistic
    # differs between them (the C++ host parse's ModelExecute row)
    res = compare(prof, "python_model1_iter2", "--kinds", "op_summary,op_statistic,task_time,step_trace,timeline")
    assert res.returncode == 0, res.stdout


def test_whole_export_equals_the_reference(prof, capsys):
    export(prof)
    capsys.readouterr()
    res = compare(prof, "cpp")
    assert res.returncode == 0, res.stdout
    assert res.stdout.strip().splitlines()[-1] == "verdict: equal (6 kinds equal)"


def test_a_mix_op_keeps_only_its_main_core_in_an_iteration(prof, capsys):
    """The AIV side of MIX_AIC ops and the AIC side of MIX_AIV ops (cycles, ratios, and with them
    cube_utilization) are 0 in the iteration export, and only there; the main core's cycles and
    ratios are those of the whole export."""
    export(prof, *ITERATION)
    (path,) = glob.glob(os.path.join(prof, "mindstudio_profiler_output", "op_summary_*.csv"))
    iteration = op_summary(path)
    export(prof)
    whole = {(r["Stream ID"], r["Task ID"]): r
             for r in op_summary(max(glob.glob(os.path.join(prof, "mindstudio_profiler_output", "op_summary_*.csv")),
                                     key=os.path.getmtime))}
    capsys.readouterr()
    mixed = [r for r in iteration if r["Task Type"] in ("MIX_AIC", "MIX_AIV")]
    assert [(r["Task ID"], r["Task Type"]) for r in mixed] == [("14", "MIX_AIV"), ("17", "MIX_AIC"), ("21", "MIX_AIV")]
    for row in mixed:
        main, other = ("aic_", "aiv_") if row["Task Type"] == "MIX_AIC" else ("aiv_", "aic_")
        full = whole[(row["Stream ID"], row["Task ID"])]
        assert int(full[f"{other}total_cycles"]) > 0
        for name, value in row.items():
            if name.startswith(other):
                assert float(value) == 0, (row["Task ID"], name)
            elif name.startswith(main) and not name.endswith("(us)"):
                assert value == full[name], (row["Task ID"], name)
        assert (row["cube_utilization(%)"] == "0") == (row["Task Type"] == "MIX_AIV")
