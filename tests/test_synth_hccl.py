"""tests/synth's communication option (write_collection(hccl_ops=N)): the collection imports without
warnings, and the store, communication_statistic and analyze's communication.json count N ops."""
from __future__ import annotations

import csv
import glob
import json
import os
import sqlite3
import sys

import numpy as np
import pytest

from conftest import run

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import synth  # noqa: E402
from synth.hccl import HCCL_PATTERN, hccl_period_ns  # noqa: E402

N_OPS, N_COMPUTE = 7, 40


@pytest.fixture
def prof(tmp_path):
    return synth.write_collection(str(tmp_path), n_tasks=N_COMPUTE, hccl_ops=N_OPS, seed=3)


def _warnings(err: str) -> list:
    return [line for line in err.splitlines() if line.startswith("Warning: ")]


def _rows(prof: str, sql: str) -> list:
    with sqlite3.connect(os.path.join(prof, "sqlite", "msprof_kit.db")) as con:
        return con.execute(sql).fetchall()


def test_without_the_option_nothing_changes(tmp_path):
    plain = synth.write_collection(str(tmp_path / "a"), n_tasks=N_COMPUTE, seed=3)
    zero = synth.write_collection(str(tmp_path / "b"), n_tasks=N_COMPUTE, seed=3, hccl_ops=0, hccl_tasks_per_op=5)
    files = sorted(os.path.relpath(p, plain) for p in glob.glob(os.path.join(plain, "**", "*"), recursive=True)
                   if os.path.isfile(p))
    for rel in files:
        with open(os.path.join(plain, rel), "rb") as a, open(os.path.join(zero, rel), "rb") as b:
            assert a.read() == b.read(), rel
    assert not glob.glob(os.path.join(plain, "host", "data", "*hccl*"))


def test_imports_exports_and_analyzes_n_ops(prof, capsys):
    code, _, err = run(["import", "-dir", prof], capsys)
    assert code == 0 and not _warnings(err), err
    assert _rows(prof, "SELECT COUNT(*) FROM COMMUNICATION_OP") == [(N_OPS,)]
    assert _rows(prof, "SELECT COUNT(*) FROM COMMUNICATION_TASK_INFO") == [(N_OPS * len(HCCL_PATTERN),)]
    code, _, err = run(["export", "summary", "-dir", prof], capsys)
    assert code == 0 and not _warnings(err), err
    stat = glob.glob(os.path.join(prof, "mindstudio_profiler_output", "communication_statistic_*.csv"))
    with open(stat[0], newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert [(r["OP Type"], int(r["Count"])) for r in rows] == [("HcomAllReduce", N_OPS)]
    # Hand-checked: an op lasts from its first master task's start (task 0, 17 us after its API
    # begins) to its last master task's end (task 10, 50 us later, 1..3.9 us long): 51..53.9 us.
    assert 51.0 <= float(rows[0]["Min Time(us)"]) <= float(rows[0]["Max Time(us)"]) <= 53.9
    assert float(rows[0]["Ratio(%)"]) == 100
    code, _, err = run(["analyze", "-dir", prof], capsys)
    assert code == 0 and not _warnings(err), err
    with open(os.path.join(prof, "analyze", "communication.json"), encoding="utf-8") as f:
        comm = json.load(f)
    assert len(comm) == N_OPS + 1 and "Total HCCL Operators" in comm


def test_host_and_device_records(prof):
    """One hccl_op_info per collective, one hccl_info and ACSQ pair per task, the collectives one
    hccl_period_ns apart on the host."""
    from msprof_kit.parsers import records
    host = os.path.join(prof, "host", "data")
    opi = np.fromfile(os.path.join(host, "aging.compact.hccl_op_info.slice_0"), dtype=records.HCCL_OP_INFO.dtype)
    info = np.fromfile(os.path.join(host, "aging.additional.hccl_info.slice_0"), dtype=records.HCCL_INFO.dtype)
    assert len(opi) == N_OPS and len(info) == N_OPS * 11
    assert set(np.diff(opi["timestamp"].astype(np.int64)).tolist()) == {hccl_period_ns(11) // 10}
    assert (info["ctx_id"] == 0xFFFFFFFF).all()
    soc = np.fromfile(os.path.join(prof, "device_0", "data", "stars_soc.data.0.slice_0"),
                      dtype=records.STARS_LOG.dtype)
    assert len(soc) == 2 * (N_COMPUTE + N_OPS * 11)
    assert (np.diff(soc["syscnt"].astype(np.int64)) >= 0).all()
    assert np.isin(soc["stream_raw"], [5, 6]).sum() == 2 * N_OPS * 11


def test_collectives_on_the_first_device_only(tmp_path, capsys):
    """hccl_devices=1 with two devices: device 1 keeps only its compute tasks; analyze covers all ops."""
    prof = synth.write_collection(str(tmp_path), n_tasks=10, devices=2, hccl_ops=3, hccl_devices=1)
    assert not glob.glob(os.path.join(prof, "device_1", "data", "ts_track*"))
    code, _, err = run(["import", "-dir", prof], capsys)
    assert code == 0 and not _warnings(err), err
    assert _rows(prof, "SELECT COUNT(*) FROM COMMUNICATION_OP") == [(3,)]
    assert _rows(prof, "SELECT COUNT(*) FROM TASK") == [(2 * 10 + 3 * 11,)]
    code, _, err = run(["analyze", "-dir", prof], capsys)
    assert code == 0 and not _warnings(err), err
    with open(os.path.join(prof, "analyze", "communication.json"), encoding="utf-8") as f:
        assert len(json.load(f)) == 3 + 1
