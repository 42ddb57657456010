"""Issue 23 item 1: every PMU metric group the reference knows, in the column names, order and values
of the flavour a CANN install ships (C++ on 910B, Python on 310P), per compare_exports.py against the
reference's exports stored in tests/reference/<case>/ (tests/metric_cases.py says how each input is
made; each case's MANIFEST.txt how the reference was run).

compare_exports checks the unified DB's tables, columns and row counts only; the metric values in
TASK_PMU_INFO are compared here, task by task and metric by metric."""
from __future__ import annotations

import csv
import glob
import json
import os
import sqlite3
import subprocess
import sys

import numpy as np
import pytest

from conftest import COMPARE, needs_shared, run, run_once_with_c
import metric_cases
import synth

from msprof_kit import metrics

pytestmark = needs_shared


def export(prof: str, capsys) -> str:
    """timeline, then summary (on 910B these also write the unified DB); returns stderr."""
    errs = []
    for what in ("timeline", "summary"):
        code, _, err = run(["export", what, "-dir", prof], capsys)
        assert code == 0, err
        errs.append(err)
    return "".join(errs)


def pmu_values(db: str) -> dict:
    """TASK_PMU_INFO as {(start ns, stream, task, context, metric name): value}."""
    con = sqlite3.connect(db)
    try:
        rows = con.execute("SELECT t.startNs, t.streamId, t.taskId, t.contextId, s.value, p.value "
                           "FROM TASK_PMU_INFO p JOIN STRING_IDS s ON s.id = p.name "
                           "JOIN TASK t ON t.globalTaskId = p.globalTaskId").fetchall()
    finally:
        con.close()
    return {row[:5]: row[5] for row in rows}


def header(path: str) -> list:
    with open(path, newline="", encoding="utf-8") as f:
        return next(csv.reader(f))


@pytest.mark.parametrize("name", sorted(metric_cases.CASES))
def test_group_equals_the_reference(name, tmp_path, capsys, native_implementation):
    run_once_with_c(native_implementation, "the metrics are numpy; the twins are compared elsewhere")
    case = metric_cases.CASES[name]
    prof = metric_cases.generate(case, str(tmp_path))
    export(prof, capsys)
    gold = metric_cases.stored(name, case.flavour)
    kinds = metric_cases.kinds_of(name, case.flavour)
    res = subprocess.run([sys.executable, COMPARE, prof, gold, "--kinds", ",".join(kinds)],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stdout
    assert res.stdout.strip().splitlines()[-1] == f"verdict: equal ({len(kinds)} kinds equal)"
    if "db" in kinds:
        ours = pmu_values(glob.glob(os.path.join(prof, "msprof_*.db"))[0])
        theirs = pmu_values(os.path.join(gold, "msprof.db"))
        assert ours.keys() == theirs.keys()
        names = sorted({k[4] for k in theirs})
        want = np.array([theirs[k] for k in theirs], dtype=np.float64)
        got = np.array([ours[k] for k in theirs], dtype=np.float64)
        close = np.isclose(got, want, rtol=1e-9, atol=1e-12)
        assert close.all(), [(k, ours[k], theirs[k]) for k, ok in zip(theirs, close) if not ok][:5]
        assert len(names) >= 4


@pytest.mark.parametrize("name", sorted(n for n, c in metric_cases.CASES.items() if c.chip == "910B"))
def test_every_stored_metric_column_is_exercised(name):
    """The inputs make every metric column nonzero somewhere (so order and formula errors show)."""
    path = os.path.join(metric_cases.stored(name, "cpp"), "op_summary.csv")
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    head, body = rows[0], [r for r in rows[1:] if len(r) == len(rows[0])]
    first = head.index("Context ID") + 1
    types = {r[head.index("Task Type")] for r in body}
    assert {"AI_CORE", "AI_VECTOR_CORE", "MIX_AIC", "MIX_AIV"} <= types
    for j in range(first, len(head)):
        assert any(r[j] != "N/A" and float(r[j]) != 0 for r in body), head[j]


def test_cpp_column_order_is_the_groups_not_the_events():
    """The C++ path prints a group's columns in its own order whatever the event order; the Memory
    group lists main memory before L2 (the order that was wrong, issue 23)."""
    events = metrics.parse_events("0x15,0x16,0x31,0x32,0xf,0x10,0x12,0x13")
    cols = metrics.metric_columns(events, "Memory", metrics.Rules("cpp"))
    assert cols == ["total_time", "total_cycles", "ub_read_bw", "ub_write_bw", "l1_read_bw", "l1_write_bw",
                    "main_mem_read_bw", "main_mem_write_bw", "l2_read_bw", "l2_write_bw"]
    assert metrics.metric_columns(list(reversed(events)), "Memory", metrics.Rules("cpp")) == cols
    stored = header(os.path.join(metric_cases.stored("metrics_Memory", "cpp"), "op_summary.csv"))
    assert [h for h in stored if h.startswith("aiv_") and "bw" in h] == \
        [f"aiv_{c}(GB/s)" for c in cols[2:] if not c.startswith("l1")]


def test_python_rules_drop_what_the_python_path_drops():
    py = metrics.Rules("python", v3=True)
    memory = metrics.metric_columns(metrics.parse_events("0x15,0x16,0x31,0x32,0xf,0x10,0x12,0x13"), "Memory", py)
    assert "l2_read_bw" not in memory and "l2_write_bw" not in memory
    ub = metrics.metric_columns(metrics.parse_events("0x10,0x13,0x37,0x38,0x3d,0x3e,0x43,0x44"), "MemoryUB", py)
    assert ub[2:] == ["ub_read_bw_vector", "ub_write_bw_vector", "ub_read_bw_scalar", "ub_write_bw_scalar"]


def test_values_are_computed_without_a_loop_over_tasks():
    """1M tasks of every group in well under a second or two each (numpy over whole columns)."""
    import time
    n = 1_000_000
    rng = np.random.default_rng(0)
    cycles = rng.integers(1, 10 ** 7, n).astype(np.uint64)
    counters = rng.integers(0, 10 ** 6, (n, 8)).astype(np.uint64)
    blocks = rng.integers(1, 48, n)
    freq = np.full(n, 1.8e9)
    for group, events in [*synth.GROUP_EVENTS.items(), (metric_cases.CUSTOM, metric_cases.CUSTOM.split(":", 1)[1])]:
        began = time.perf_counter()
        got = metrics.compute(metrics.parse_events(events), group, cycles, counters, blocks, 24, freq)
        assert time.perf_counter() - began < 3.0, group
        assert set(got) == set(metrics.metric_columns(metrics.parse_events(events), group))


def test_a_group_whose_events_are_missing_keeps_the_tasks(tmp_path, capsys, native_implementation):
    """The reference's C++ flavour refuses the PMU of such a collection and loses every device task
    with it (no op_summary, no task_time: tests/reference/metrics_unusable/MANIFEST.txt); msprof-kit
    keeps the tasks, leaves the group's columns out and says why (docs/exports.md)."""
    run_once_with_c(native_implementation, "one export")
    manifest = open(os.path.join(metric_cases.REFERENCE, "metrics_unusable", "MANIFEST.txt"), encoding="utf-8").read()
    assert "pmu_association.cpp:236" in manifest and "op_summary" not in manifest.split("cpp:")[1].split("python:")[0]
    def processes(path: str) -> set:
        with open(path, encoding="utf-8") as f:
            return {e["args"]["name"] for e in json.load(f) if e.get("ph") == "M" and e.get("name") == "process_name"}
    reference = metric_cases.stored("metrics_unusable", "cpp")
    assert "Ascend Hardware" not in processes(os.path.join(reference, "msprof.json"))
    prof = metric_cases.generate(metric_cases.UNUSABLE, str(tmp_path))
    err = export(prof, capsys)
    assert "Ascend Hardware" in processes(glob.glob(os.path.join(prof, "mindstudio_profiler_output", "msprof_*.json"))[0])
    assert "ai_core_metrics: metric group 'Memory' needs events" in err
    assert "aiv_metrics: metric group 'Memory' needs events" in err
    summary = glob.glob(os.path.join(prof, "mindstudio_profiler_output", "op_summary_*.csv"))[0]
    with open(summary, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    assert len(rows) == 1 + metric_cases.N_OPS
    assert rows[0][rows[0].index("Context ID") + 1:] == ["aicore_time(us)", "aic_total_cycles", "aiv_time(us)",
                                                          "aiv_total_cycles"]


def test_custom_lists_that_differ_per_core_name_each_cores_columns(tmp_path, capsys, native_implementation):
    """Custom event lists that differ between the cores: the reference names the AIV columns after
    the AI Core's list and prints every PMU cell N/A (tests/reference/metrics_custom_split); msprof-kit
    names each core's columns after its own list and prints the raw counters (docs/exports.md)."""
    run_once_with_c(native_implementation, "one export")
    theirs = os.path.join(metric_cases.stored("metrics_custom_split", "cpp"), "op_summary.csv")
    with open(theirs, newline="", encoding="utf-8") as f:
        ref = list(csv.reader(f))
    first = ref[0].index("Context ID") + 1
    assert [h for h in ref[0] if h.startswith("aiv_r")] == [f"aiv_r{e[2:]}" for e in metric_cases.CUSTOM[7:].split(",")]
    assert {c for row in ref[1:] for c in row[first:]} == {"N/A"}

    prof = metric_cases.generate(metric_cases.CUSTOM_SPLIT, str(tmp_path))
    export(prof, capsys)
    ours = header(glob.glob(os.path.join(prof, "mindstudio_profiler_output", "op_summary_*.csv"))[0])
    aiv_events = metric_cases.CUSTOM_SPLIT.synth["aiv_metrics"].split(":", 1)[1].split(",")  # type: ignore[union-attr]
    assert [h for h in ours if h.startswith("aiv_r")] == [f"aiv_r{e[2:]}" for e in aiv_events]
    assert [h for h in ours if h.startswith("aic_r")] == [f"aic_r{e[2:]}" for e in metric_cases.CUSTOM[7:].split(",")]
    with sqlite3.connect(glob.glob(os.path.join(prof, "msprof_*.db"))[0]) as con:
        raw = con.execute("SELECT COUNT(*) FROM TASK_PMU_INFO p JOIN STRING_IDS s ON s.id = p.name "
                          "WHERE s.value = 'aiv_r43' AND p.value > 0").fetchone()[0]
    assert raw > 0
