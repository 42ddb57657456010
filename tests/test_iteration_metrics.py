"""Iteration exports on 910B print the PMU metrics by the reference's Python rules, for every metric
group: the export `--model-id 1 --iteration-id 2` of one synthetic collection per group equals the
reference's C++-install export (which runs its Python path there), per compare_exports.py; the
whole export of the same collection keeps the C++ rules (tests/test_metric_groups.py).

The inputs are written again by tests/synth (tests/iteration_metric_cases.py); the reference's
outputs are stored in tests/reference/iter_metrics_<group>/ (MANIFEST.txt there: the generator call,
the input's sha256, the reference commit and the commands)."""
from __future__ import annotations

import contextlib
import csv
import glob
import os
import re
import sqlite3
import subprocess
import sys
from typing import Dict, List

import numpy as np
import pytest

from conftest import COMPARE, needs_shared, run, run_once_with_c
import iteration_metric_cases
from refcases import tree_digest
import synth

from msprof_kit import metrics, store

pytestmark = needs_shared


def export_summary(prof: str, capsys, *extra: str) -> str:
    """`export summary` (importing first); returns the op_summary written."""
    code, _, err = run(["export", "summary", "-dir", prof, *extra], capsys)
    assert code == 0, err
    return max(glob.glob(os.path.join(prof, "mindstudio_profiler_output", "op_summary_*.csv")), key=os.path.getmtime)


def op_summary(path: str) -> Dict[str, Dict[str, str]]:
    """Rows by task id (the task ids of these inputs are unique)."""
    with open(path, newline="", encoding="utf-8") as f:
        return {row["Task ID"]: row for row in csv.DictReader(f)}


def header(path: str) -> List[str]:
    with open(path, newline="", encoding="utf-8") as f:
        return next(csv.reader(f))


@pytest.mark.parametrize("name", sorted(iteration_metric_cases.CASES))
def test_the_input_is_the_one_the_reference_read(name, tmp_path, native_implementation):
    run_once_with_c(native_implementation, "writes the input only")
    manifest = open(os.path.join(iteration_metric_cases.REFERENCE, name, "MANIFEST.txt"), encoding="utf-8").read()
    stored = re.search(r"input sha256: ([0-9a-f]{64})", manifest)
    assert stored and tree_digest(iteration_metric_cases.generate(name, str(tmp_path))) == stored.group(1), \
        "tests/synth writes another input now: run tests/reference/refresh_iter_metric_refs.py"


@pytest.mark.parametrize("name", sorted(iteration_metric_cases.CASES))
def test_iteration_export_equals_the_reference(name, tmp_path, capsys):
    prof = iteration_metric_cases.generate(name, str(tmp_path))
    export_summary(prof, capsys, *iteration_metric_cases.ITERATION)
    res = subprocess.run([sys.executable, COMPARE, prof, iteration_metric_cases.stored(name),
                          "--kinds", ",".join(iteration_metric_cases.KINDS)], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout
    assert res.stdout.strip().splitlines()[-1] == f"verdict: equal ({len(iteration_metric_cases.KINDS)} kinds equal)"


def test_where_the_rule_sets_branch_apart_both_exports_equal_the_reference(tmp_path, capsys, native_implementation):
    """A task without cycles and one without icache requests, in a group whose rule sets otherwise
    agree (tests/reference/iter_metrics_branches/MANIFEST.txt): the iteration export prints the
    Python path's raw counters and misses per cycle, the whole export the C++ path's zeros. The
    store keeps the Python rules' values of those two tasks only."""
    run_once_with_c(native_implementation, "two exports")
    reference = os.path.join(iteration_metric_cases.REFERENCE, iteration_metric_cases.BRANCHES)
    manifest = open(os.path.join(reference, "MANIFEST.txt"), encoding="utf-8").read()
    prof = iteration_metric_cases.generate_branches(str(tmp_path))
    assert tree_digest(prof) == re.search(r"input sha256: ([0-9a-f]{64})", manifest).group(1)
    export_summary(prof, capsys, *iteration_metric_cases.ITERATION)
    kinds = iteration_metric_cases.KINDS
    res = subprocess.run([sys.executable, COMPARE, prof, iteration_metric_cases.stored(iteration_metric_cases.BRANCHES),
                          "--kinds", ",".join(kinds)], capture_output=True, text=True)
    assert res.stdout.strip().splitlines()[-1] == f"verdict: equal ({len(kinds)} kinds equal)", res.stdout
    iteration = op_summary(max(glob.glob(os.path.join(prof, "mindstudio_profiler_output", "op_summary_*.csv")),
                               key=os.path.getmtime))
    assert (iteration["16"]["aic_total_cycles"], iteration["16"]["aic_mac_ratio"]) == ("0", "15266.0")
    for path in glob.glob(os.path.join(prof, "mindstudio_profiler_output", "*")):
        os.remove(path)
    export_summary(prof, capsys)
    res = subprocess.run([sys.executable, COMPARE, prof, os.path.join(reference, "cpp"),
                          "--kinds", "op_summary"], capture_output=True, text=True)
    assert res.stdout.strip().splitlines()[-1] == "verdict: equal (1 kinds equal)", res.stdout
    with contextlib.closing(sqlite3.connect(store.store_path(prof))) as conn:
        python = store.read_columns(conn, "KIT_TASK_PMU_PY")
        task = dict(conn.execute("SELECT rowid - 1, taskId FROM TASK").fetchall())
    assert sorted(task[r] for r in python["taskRow"]) == [16, 19]


def test_where_the_rules_differ_the_iteration_and_the_whole_export_differ(tmp_path, capsys, native_implementation):
    """The three groups whose Python rules are not the C++ ones, task by task: Memory loses its L2
    columns and doubles aic_l1_write_bw, MemoryL0 halves aic_l0b_read_bw and quarters the cube L0C
    bandwidths, MemoryAccess has no PMU column at all; the main core's cycles stay."""
    run_once_with_c(native_implementation, "exports only")
    scale = {"iter_metrics_Memory": {"aic_l1_write_bw(GB/s)": 2.0, "aic_l1_read_bw(GB/s)": 1.0,
                                     "aiv_ub_read_bw(GB/s)": 1.0, "aiv_main_mem_write_bw(GB/s)": 1.0},
             "iter_metrics_MemoryL0": {"aic_l0b_read_bw(GB/s)": 0.5, "aic_l0c_read_bw_cube(GB/s)": 0.25,
                                       "aic_l0c_write_bw_cube(GB/s)": 0.25, "aic_l0a_read_bw(GB/s)": 1.0,
                                       "aic_l0b_write_bw(GB/s)": 1.0}}
    for name in ("iter_metrics_Memory", "iter_metrics_MemoryL0", "iter_metrics_MemoryAccess"):
        prof = iteration_metric_cases.generate(name, str(tmp_path / name))
        iteration_path = export_summary(prof, capsys, *iteration_metric_cases.ITERATION)
        iteration, head = op_summary(iteration_path), header(iteration_path)
        os.remove(iteration_path)  # the whole export may get the same time stamp
        whole_path = export_summary(prof, capsys)
        whole, whole_head = op_summary(whole_path), header(whole_path)
        pmu = head[head.index("Context ID") + 1:]
        if name == "iter_metrics_MemoryAccess":
            assert pmu == [] and "aic_read_main_memory_datas(KB)" in whole_head
            continue
        if name == "iter_metrics_Memory":
            assert not [h for h in pmu if "l2_" in h]
            assert [h for h in whole_head if "l2_" in h] == \
                ["aic_l2_read_bw(GB/s)", "aic_l2_write_bw(GB/s)", "aiv_l2_read_bw(GB/s)", "aiv_l2_write_bw(GB/s)"]
        checked = 0
        for task, row in iteration.items():
            if row["Task Type"] not in ("AI_CORE", "AI_VECTOR_CORE"):
                continue  # a MIX op's other core is 0 in an iteration export (tests/test_mixed_iteration.py)
            full = whole[task]
            for core in ("aic_", "aiv_"):
                assert row[f"{core}total_cycles"] == full[f"{core}total_cycles"]
            for column, factor in scale[name].items():
                assert float(row[column]) == pytest.approx(float(full[column]) * factor, abs=2e-3), (task, column)
                checked += float(full[column]) != 0
        assert checked >= 4


def test_the_store_keeps_python_rule_rows_only_where_they_differ(tmp_path, capsys, native_implementation):
    """The default groups (AIC PipeUtilizationExct, AIV PipeUtilization) give the same values under
    both rules: the store keeps no extra PMU row, only the list of the iteration columns. Memory's
    l1_write_bw differs on every task that has L1 traffic; a 310P store (Python rules throughout)
    keeps neither."""
    run_once_with_c(native_implementation, "imports only")
    def imported(**keywords) -> contextlib.closing:
        prof = synth.write_collection(str(tmp_path / str(len(os.listdir(tmp_path)))), n_tasks=60, seed=5, **keywords)
        assert run(["import", "-dir", prof], capsys)[0] == 0
        return contextlib.closing(sqlite3.connect(store.store_path(prof)))
    with imported(chip="910B", model_fraction=0.5, mix_fraction=0.2, steps=True) as conn:
        assert store.StoredColumns(conn, "KIT_TASK_PMU_PY").names == []
        listed = conn.execute("SELECT value FROM KIT_INFO WHERE name = 'pmu_iteration_columns'").fetchall()
        assert [v.split(",")[:4] for v, in listed] == [["aic_total_time", "aic_total_cycles", "aic_mac_time",
                                                         "aic_mac_ratio"]]
    with imported(chip="910B", metrics="Memory") as conn:
        py = store.read_columns(conn, "KIT_TASK_PMU_PY")
        assert len(py) == 60 and "aic_l1_write_bw" in py.columns and "aic_l2_read_bw" not in py.columns
    with imported(chip="310P") as conn:
        assert store.StoredColumns(conn, "KIT_TASK_PMU_PY").names == []
        assert not conn.execute("SELECT 1 FROM KIT_INFO WHERE name = 'pmu_iteration_columns'").fetchall()


def test_python_rule_columns_of_a_stars_device():
    """MemoryAccess on either core leaves both without a column (one table for both cores)."""
    py = metrics.iteration_rules(metrics.rules_for(5))
    assert py == metrics.Rules("python") and metrics.iteration_rules(metrics.rules_for(4)) is None
    memory = metrics.parse_events(synth.GROUP_EVENTS["Memory"])
    access = metrics.parse_events(synth.GROUP_EVENTS["MemoryAccess"])
    got = metrics.ffts_python_columns({"aic": ("Memory", memory), "aiv": ("Memory", memory)}, py)
    assert got["aic"][2:] == ["ub_read_bw", "ub_write_bw", "l1_read_bw", "l1_write_bw", "main_mem_read_bw",
                              "main_mem_write_bw"]
    assert metrics.ffts_python_columns({"aic": ("Memory", memory), "aiv": ("MemoryAccess", access)}, py) == \
        {"aic": [], "aiv": []}


def test_the_rule_sets_agree_off_their_branches():
    """rules_agree tries both rule sets on tasks with cycles and icache requests; branch_rows finds
    the tasks off that path (a task with every counter 0 gives 0 under both)."""
    cpp, py = metrics.Rules("cpp"), metrics.Rules("python")
    agree = {g: metrics.rules_agree(metrics.parse_events(e), g, cpp, py) for g, e in synth.GROUP_EVENTS.items()}
    assert [g for g, same in agree.items() if not same] == ["ArithmeticUtilization", "Memory", "MemoryL0"]
    events = metrics.parse_events(synth.GROUP_EVENTS["PipeUtilization"])  # 0x54 in slot 6
    cycles = np.array([0, 0, 100, 100, 100, 100])
    counters = np.ones((6, 8), np.int64)
    counters[1] = 0          # no cycles, no counts: nothing to part
    counters[3, 6] = 0       # no icache requests
    freq = np.array([1.8e9, 1.8e9, 1.8e9, 1.8e9, 0.0, 1.8e9])
    assert metrics.branch_rows(events, cycles, counters, freq).tolist() == [True, False, False, True, True, False]
