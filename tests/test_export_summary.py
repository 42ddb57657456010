"""`export summary`: every golden case equals the reference's op_summary, op_statistic, api_statistic
and task_time per compare_exports.py, plus the formatting rules those files rely on."""
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

from conftest import COMPARE, DEGRADED_CASES, GOLDEN, INTACT_CASES, copy_input, needs_shared, run

from msprof_kit import store
from msprof_kit.arrays import py_round_units
from msprof_kit.exporters.summary import api_statistic, columns, files, tasks
from msprof_kit.exporters.summary.cells import (cpp_round3, csv_field, decimal_text, double_to_str, fixed_ns, int_text,
                                                json_value, repr_us, sqlite_round_units, stamp_ns, with_na)
from msprof_kit.exporters.summary.files import csv_parts
from msprof_kit.exporters.summary.op_summary import _wait_cells, _wait_ns
from msprof_kit.exporters.summary.pmu import pmu_header
from msprof_kit.exporters.summary.task_time import _task_time_keep
from msprof_kit.exporters.summary.tasks import INVALID_CONTEXT

KINDS = "op_summary,op_statistic,api_statistic,task_time"



def export_summary(case: str, tmp_path, capsys, *extra: str) -> str:
    prof = copy_input(case, str(tmp_path))
    code, _, err = run(["export", "summary", "-dir", prof, *extra], capsys)
    assert code == 0, err
    return prof


def compare(prof: str, golden: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, COMPARE, prof, golden, "--kinds", KINDS], capture_output=True, text=True)


def outputs(prof: str, kind: str, ext: str = "csv") -> list:
    return sorted(glob.glob(os.path.join(prof, "mindstudio_profiler_output", f"{kind}_*.{ext}")))


def ns(cell: str) -> int:
    """A µs cell with 3 decimals as integer ns, without going through a float."""
    whole, frac = cell.strip().split(".")
    return int(whole) * 1000 + int(frac)


def read_csv(path: str) -> list:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


# degraded_e's EXPECT names `op_statistic = cpp`: the Python flavour lost every op name to one damaged
# API record (40 ungrouped rows), so the comparison holds op_statistic to the C++ flavour's 13 rows.
CASES = INTACT_CASES + DEGRADED_CASES


@needs_shared
@pytest.mark.parametrize("case", CASES)
def test_summary_equals_the_reference(case, tmp_path, capsys):
    prof = export_summary(case, tmp_path, capsys)
    res = compare(prof, os.path.join(GOLDEN, case))
    assert res.returncode == 0, res.stdout
    assert res.stdout.strip().splitlines()[-1].startswith("verdict: equal")


@needs_shared
def test_degraded_e_equals_the_cpp_flavour(tmp_path, capsys):
    prof = export_summary("degraded_e", tmp_path, capsys)
    res = compare(prof, os.path.join(GOLDEN, "degraded_e", "cpp"))
    assert res.returncode == 0, res.stdout


@needs_shared
def test_iteration_export_equals_the_reference(tmp_path, capsys):
    prof = export_summary("910b_steps", tmp_path, capsys, "--model-id", "1", "--iteration-id", "3")
    res = compare(prof, os.path.join(GOLDEN, "910b_steps", "cpp_model1_iter3"))
    assert res.returncode == 0, res.stdout


@needs_shared
@pytest.mark.parametrize("case, flavour", [("min_910b", "cpp"), ("310p_hwts", "python")])
def test_files_are_byte_identical_where_the_reference_is_right(case, flavour, tmp_path, capsys):
    """No wait-time or quoting difference in these cases: every byte matches, TABs included."""
    prof = export_summary(case, tmp_path, capsys)
    for kind in KINDS.split(","):
        (ours,) = outputs(prof, kind)
        with open(ours, "rb") as a, open(os.path.join(GOLDEN, case, flavour, f"{kind}.csv"), "rb") as b:
            assert a.read() == b.read(), kind


@needs_shared
def test_a_comma_in_an_op_name_is_quoted(tmp_path, capsys):
    prof = export_summary("910b_mixed", tmp_path, capsys)
    rows = read_csv(outputs(prof, "op_summary")[0])
    assert all(len(r) == len(rows[0]) for r in rows)
    assert any(r[4] == "model/ffn,gate/ReduceSum_17" for r in rows[1:])
    shapes = rows[0].index("Input Shapes")
    assert all(r[shapes] == "N/A" or (r[shapes].startswith('"') and r[shapes].endswith('"')) for r in rows[1:])


@needs_shared
def test_wait_time_is_exact_and_restarts_on_each_device(tmp_path, capsys):
    prof = export_summary("910b_two_devices", tmp_path, capsys)
    rows = read_csv(outputs(prof, "op_summary")[0])
    h = rows[0]
    dev, start, dur, wait = (h.index(c) for c in ("Device_id", "Task Start Time(us)", "Task Duration(us)",
                                                  "Task Wait Time(us)"))
    body = rows[1:]
    assert body[0][wait] == "0"
    for prev, row in zip(body, body[1:]):
        if row[dev] != prev[dev]:
            assert row[wait] == "0.000000"
            continue
        gap_ns = ns(row[start]) - ns(prev[start]) - ns(prev[dur])
        assert row[wait] == f"{max(gap_ns, 0) / 1000:.6f}"


@needs_shared
def test_timestamps_carry_a_tab_and_durations_three_decimals(tmp_path, capsys):
    prof = export_summary("910b_mixed", tmp_path, capsys)
    with open(outputs(prof, "task_time")[0], encoding="utf-8") as f:
        lines = f.read().split("\n")
    assert lines[-1] == "" and "\r" not in "".join(lines)
    for line in lines[1:-1]:
        cells = line.split(",")
        assert cells[6].endswith("\t") and cells[7].endswith("\t")
        assert len(cells[5].split(".")[1]) == 3 and len(cells[6].strip().split(".")[1]) == 3


@needs_shared
def test_json_format_on_the_python_flavour(tmp_path, capsys):
    prof = export_summary("310p_hwts", tmp_path, capsys, "--format", "json")
    assert not outputs(prof, "op_summary")
    (path,) = outputs(prof, "op_summary", "json")
    with open(path, encoding="utf-8") as f:
        rows = json.load(f)
    assert len(rows) == 200 and "Device_id" not in rows[0]
    assert rows[0]["Task Start Time(us)"].endswith("\t") and isinstance(rows[0]["Task ID"], int)
    assert rows[0]["Task Wait Time(us)"] == 0 and isinstance(rows[1]["Task Duration(us)"], float)
    golden = read_csv(os.path.join(GOLDEN, "310p_hwts", "python", "op_summary.csv"))
    assert list(rows[0]) == golden[0][1:]


@needs_shared
def test_json_format_keeps_csv_on_the_cpp_flavour(tmp_path, capsys):
    prof = export_summary("min_910b", tmp_path, capsys, "--format", "json")
    assert outputs(prof, "op_summary") and not outputs(prof, "op_summary", "json")


@needs_shared
def test_large_files_are_sliced(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(files, "CSV_LIMIT", 100)
    monkeypatch.setattr(columns, "CHUNK_ROWS", 30)
    prof = export_summary("910b_mixed", tmp_path, capsys)
    parts = outputs(prof, "op_summary_slice")
    assert [os.path.basename(p).split("_")[3] for p in parts] == ["0", "1", "2"]
    assert [len(read_csv(p)) - 1 for p in parts] == [100, 100, 100]
    assert len(outputs(prof, "op_statistic")) == 1


@needs_shared
def test_no_device_data_means_no_device_summaries(tmp_path, capsys):
    prof = export_summary("degraded_d", tmp_path, capsys)
    names = os.listdir(os.path.join(prof, "mindstudio_profiler_output"))
    assert any(n.startswith("api_statistic_") for n in names)
    assert not any(n.startswith(("op_summary_", "op_statistic_", "task_time_")) for n in names)


# ------------------------------------------------------------------------------------------------
# Formatting rules


def test_fixed_ns_shifts_the_decimal_point():
    ns = np.array([0, 20, 3240, 1700902984100045020, 123456789012, -1500])
    assert fixed_ns(ns).tolist() == ["0.000", "0.020", "3.240", "1700902984100045.020", "123456789.012",
                                       "-1.500"]
    assert stamp_ns(ns[3:4]).tolist() == ["1700902984100045.020\t"]


def test_repr_us_is_pythons_repr_of_the_microseconds():
    ns = np.array([0, 20, 3240, 99_999, 100_000, 171_000, 1_000_000_000, 123456789012345, -1500])
    assert repr_us(ns).tolist() == [repr(x / 1000) for x in ns.tolist()]
    assert int_text(np.array([0, 7, 99_999, 100_000, 4294967295])).tolist() == \
        ["0", "7", "99999", "100000", "4294967295"]


def test_python_round_is_reproduced_at_halves():
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.random(20000) * 1000, (rng.integers(0, 10**6, 2000) + 0.5) / 1000,
                        np.array([21.225, 1.745, 2.675, 0.0005])])
    for decimals in (2, 3):
        expected = [round(round(v, decimals) * 10 ** decimals) for v in x.tolist()]
        assert py_round_units(x, decimals).tolist() == expected


def test_sqlite_round_is_reproduced_near_halves():
    # values a few ulps below a half that SQLite (and the golden files) round up
    cases = [2.8024999999999993, 39.2025, 11.2585, 38.4705, 0.0625, 1.2425000000000002]
    rng = np.random.default_rng(5)
    x = np.array(cases + (rng.random(5000) * 500).tolist())
    con = sqlite3.connect(":memory:")
    expected = [round(con.execute("SELECT ROUND(?, 3)", (v,)).fetchone()[0] * 1000) for v in x.tolist()]
    assert sqlite_round_units(x, 3).tolist() == expected
    assert sqlite_round_units(np.array(cases), 3).tolist() == [2803, 39203, 11259, 38471, 63, 1243]


def test_cpp_statistic_texts():
    assert [double_to_str(v) for v in (12.5, 3.0, 0.0, 171.0, 36.3636, 1e-4)] == ["12.5", "3", "0", "171",
                                                                                      "36.364", "0"]
    assert cpp_round3(51.2075) == 51.208 and cpp_round3(-0.0005) == -0.001 and cpp_round3(2.0004) == 2.0
    assert decimal_text(np.array([31760000, 0]), 6).tolist() == ["31.760000", "0.000000"]


def test_na_and_quoting():
    cells = with_na(int_text(np.array([0, 4294967295])), np.array([True, False]))
    assert cells.tolist() == ["0", "N/A"]
    assert csv_field('"8,1024;512"') == '"""8,1024;512"""'
    assert csv_field("model/ffn,gate/ReduceSum_17") == '"model/ffn,gate/ReduceSum_17"'
    assert csv_field("1700902984100045.020\t") == "1700902984100045.020\t"
    assert json_value("N/A", True) == '"N/A"' and json_value("3.24", True) == "3.24"


def test_wait_is_the_gap_since_the_previous_end_on_the_same_device():
    rank = np.array([0, 0, 0, 1, 1])
    start = np.array([100, 150, 160, 120, 300])
    end = np.array([140, 170, 200, 130, 310])
    wait, first = _wait_ns(rank, start, end)
    assert wait.tolist() == [0, 10, 0, 0, 170] and first.tolist() == [True, False, False, True, False]
    cpp = _wait_cells(wait, first, "cpp", top=True).render(slice(0, 5)).tolist()
    py = _wait_cells(wait, first, "python", top=True).render(slice(0, 5)).tolist()
    assert cpp == ["0", "0.010000", "0.000000", "0.000000", "0.170000"]
    assert py == ["0", "0.01", "0.0", "0", "0.17"]
    # a later block of the table: C++ writes its first row as any other
    assert _wait_cells(wait, first, "cpp", top=False).render(slice(0, 2)).tolist() == ["0.000000", "0.010000"]


def test_csv_parts_follow_each_writers_naming():
    limit = files.CSV_LIMIT
    assert csv_parts(5, "cpp") == [(None, 0, 5)]
    assert csv_parts(limit, "cpp") == [(None, 0, limit)]
    assert csv_parts(limit, "python") == [(0, 0, limit)]
    assert csv_parts(limit + 1, "cpp") == [(0, 0, limit), (1, limit, limit + 1)]
    assert csv_parts(limit + 1, "python") == [(0, 0, limit), (1, limit, limit + 1)]


def test_pmu_headers():
    assert [pmu_header(n, "cpp") for n in ("aic_total_time", "total_time", "aiv_total_time", "aic_mac_time",
                                             "aic_mac_ratio", "ub_read_bw", "l2_datas")] == \
        ["aicore_time(us)", "aicore_time(us)", "aiv_time(us)", "aic_mac_time(us)", "aic_mac_ratio",
         "ub_read_bw(GB/s)", "l2_datas(KB)"]
    assert pmu_header("l2_datas", "python") == "l2_datas"


def _files(prof: str) -> dict:
    """The summary files of an export by kind (the stamp left out), with their bytes."""
    out = {}
    for path in glob.glob(os.path.join(prof, "mindstudio_profiler_output", "*_*.*")):
        name = os.path.basename(path)
        if name.split("_")[0] in ("op", "api", "task"):
            with open(path, "rb") as f:
                out[name.rsplit("_", 1)[0] + os.path.splitext(name)[1]] = f.read()
    return out


@needs_shared
@pytest.mark.parametrize("case, extra", [(c, ()) for c in INTACT_CASES + DEGRADED_CASES]
                         + [("910b_steps", ("--model-id", "1", "--iteration-id", "3")),
                            ("310p_hwts", ("--format", "json"))])
def test_blocks_of_a_few_rows_write_the_same_files(case, extra, tmp_path, capsys, monkeypatch):
    """Per-task summaries are built BLOCK_ROWS rows at a time, tasks are selected and op_statistic
    grouped TASK_BLOCK tasks at a time, columns are read at a block's rows by runs of rows at most
    RUN_GAP apart, and api_statistic reads CANN_API API_BLOCK rows at a time: with blocks of a few
    rows (wait times, first rows, groups and sums crossing block edges) every file is byte for byte
    the one-block export."""
    whole = _files(export_summary(case, tmp_path / "whole", capsys, *extra))
    assert whole
    monkeypatch.setattr(tasks, "TASK_BLOCK", 4)
    monkeypatch.setattr(store.columns, "RUN_GAP", 2)
    monkeypatch.setattr(columns, "BLOCK_ROWS", 7)
    monkeypatch.setattr(api_statistic, "API_BLOCK", 5)
    monkeypatch.setattr(columns, "CHUNK_ROWS", 3)
    assert _files(export_summary(case, tmp_path / "blocks", capsys, *extra)) == whole


def _task_time_keep_by_rows(device, stream, task, batch, ctx_id):
    """task_time's rule, group by group in plain Python."""
    groups = {}
    for i, key in enumerate(zip(device, stream, task, batch)):
        groups.setdefault(key, []).append(i)
    keep = [True] * len(ctx_id)
    for rows in groups.values():
        ctxs = [ctx_id[i] for i in rows]
        if len(rows) == 1:
            continue
        if any(c not in (0, INVALID_CONTEXT) for c in ctxs):
            for i in rows:
                keep[i] = False
        elif 0 in ctxs:
            for i in rows:
                keep[i] = ctx_id[i] == 0
    return keep


@pytest.mark.parametrize("seed, wide", [(0, False), (1, False), (2, True)])
def test_task_time_keep_equals_the_rule_group_by_group(seed, wide):
    """Only the groups holding a task with a context id are grouped; the rest stay. The same
    keep as the rule applied to every group, with a packed key and (wide batch ids, more than 63
    bits of key) without."""
    rng = np.random.default_rng(seed)
    n = 3000
    device = rng.integers(0, 2, n)
    stream = rng.integers(0, 4, n)
    task = rng.integers(0, 60, n)
    batch = rng.integers(-1, 2, n) * (2 ** 61 if wide else 1)
    ctx_id = rng.choice([INVALID_CONTEXT] * 6 + [0, 0, 1, 5], n).astype(np.int64)
    got = _task_time_keep(device, stream, task, batch, ctx_id)
    want = _task_time_keep_by_rows(device.tolist(), stream.tolist(), task.tolist(), batch.tolist(), ctx_id.tolist())
    assert got.tolist() == want
    assert 0 < got.sum() < n
    none_marked = np.full(n, INVALID_CONTEXT, dtype=np.int64)
    assert _task_time_keep(device, stream, task, batch, none_marked).all()


@pytest.mark.parametrize("values", [np.array([3, 1, 3, 0, -5, 2 ** 40]), np.zeros(0, dtype=np.int64),
                                    np.array([7, 7, 2 ** 64 - 1], dtype=np.uint64), np.array([1, 2, 1], dtype=np.int8),
                                    np.array([1.0, -0.0, 0.0, np.nan, np.nan, 1.5])])
def test_ids_coded_as_numbers_give_the_codes_and_labels_of_their_texts(values):
    from msprof_kit.exporters.summary.columns import coded, coded_numbers
    texts, numbers = coded("x", values.astype(str), number=True), coded_numbers("x", values)
    assert numbers.codes.tolist() == texts.codes.tolist() and numbers.number
    assert [(type(v), v) for v in numbers.labels] == [(type(v), v) for v in texts.labels]
