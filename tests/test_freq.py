"""Issue 26, the real AI Core frequency (lpmFreqConv.data, ingest/freq.py), on 910b_aicpu_freq_tx with the C
extension and its Python twin (conftest runs every test with both):

* op_summary equals the golden one: each task's PMU times use the frequency in force at its context PMU
  record's end;
* AICORE_FREQ (store and `export db`) and the timeline's `AI Core Freq` counter hold the change points,
  one of each (the C++ golden repeats them: the one db difference compare_exports reports, docs/exports.md);
* bad lpmFreqConv input: a record cut short, points before the device start or out of time order, a
  frequency of 0: named warnings with counts, everything else exported."""
from __future__ import annotations

import csv
import glob
import json
import os
import sqlite3
import subprocess
import sys
from typing import List, Tuple

import numpy as np
import pytest

from conftest import COMPARE, GOLDEN, copy_input, needs_shared, run

from msprof_kit.parsers import records

pytestmark = needs_shared

CASE = "910b_aicpu_freq_tx"
START, END = 1700902984000000000, 1700902984154599000  # start_info / end_info, ns
# the change points after the device start (dev_start.log cntvct 50000000000 at START; 50 MHz counter)
GOLDEN_POINTS = [(START, 1800), (1700902984100894000, 1800), (1700902984101934000, 1650),
                 (1700902984102388000, 1800), (1700902984103563000, 1800), (1700902984104557000, 1550),
                 (1700902984104991000, 1800), (END, 1800)]
# the MatMul launched at 1700902984101979.980 us ran at 1650 MHz: at the nominal 1800 MHz its aicore_time
# would be 53.403 us, so the real one is 53.403 * 1800 / 1650 = 58.258 us (the golden value)
MATMUL_START = "1700902984101979.980"


def export_all(prof: str, capsys: pytest.CaptureFixture) -> str:
    """summary, timeline and db; returns what they wrote to stderr."""
    err = ""
    for what in ("summary", "timeline", "db"):
        code, _, e = run(["export", what, "-dir", prof], capsys)
        assert code == 0, e
        err += e
    return err


def compare(prof: str, kinds: str) -> List[str]:
    res = subprocess.run([sys.executable, COMPARE, prof, os.path.join(GOLDEN, CASE), "--kinds", kinds],
                         capture_output=True, text=True)
    return res.stdout.splitlines()


def db_points(prof: str) -> List[Tuple[int, int]]:
    (path,) = glob.glob(os.path.join(prof, "msprof_*.db"))
    with sqlite3.connect(path) as conn:
        return [(int(t), int(f)) for t, f in conn.execute(
            "SELECT timestampNs, freq FROM AICORE_FREQ WHERE deviceId = 0 ORDER BY rowid")]


def aicore_time(prof: str, start: str) -> str:
    (path,) = glob.glob(os.path.join(prof, "mindstudio_profiler_output", "op_summary_*.csv"))
    with open(path, newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["Task Start Time(us)"].strip() == start]
    assert len(rows) == 1
    return rows[0]["aicore_time(us)"]


def timeline_points(prof: str) -> List[Tuple[str, int]]:
    events = []
    for path in glob.glob(os.path.join(prof, "mindstudio_profiler_output", "msprof_*.json")):
        with open(path) as f:
            events += json.load(f)
    return [(e["ts"], e["args"]["MHz"]) for e in events if e.get("name") == "AI Core Freq"]


def test_golden(tmp_path, capsys):
    prof = copy_input(CASE, str(tmp_path))
    err = export_all(prof, capsys)
    assert "lpmFreqConv" not in err  # the one point before the device start is the usual starting value
    out = compare(prof, "op_summary,timeline,db")
    assert "equal   op_summary: 60 rows x 46 columns equal" in out, out
    freq_lines = [line for line in out if line.startswith("DIFFER") and "FREQ" in line.upper()]
    assert freq_lines == ["DIFFER  db: table AICORE_FREQ: 8 rows in ours vs 16 in golden"], out
    assert db_points(prof) == GOLDEN_POINTS
    assert aicore_time(prof, MATMUL_START) == "58.258"
    with open(os.path.join(GOLDEN, CASE, "cpp", "msprof.json")) as f:
        golden = sorted({(e["ts"], e["args"]["MHz"]) for e in json.load(f) if e.get("name") == "AI Core Freq"})
    assert timeline_points(prof) == golden  # the C++ points, one of each


def write_lpm(prof: str, points: List[List[Tuple[int, int]]], extra: bytes = b"") -> None:
    """Replace the case's lpmFreqConv slice with records of (syscnt, MHz) points, then `extra` bytes."""
    (path,) = glob.glob(os.path.join(prof, "device_0", "data", "lpmFreqConv.data.0.slice_0"))
    arr = np.zeros(len(points), dtype=records.LPM_FREQ.dtype)
    for i, record in enumerate(points):
        arr[i]["count"] = len(record)
        for j, (syscnt, mhz) in enumerate(record):
            arr[i][f"f{j}_syscnt"] = syscnt
            arr[i][f"f{j}_mhz"] = mhz
    with open(path, "wb") as f:
        f.write(arr.tobytes() + extra)


def test_truncated_record(tmp_path, capsys):
    prof = copy_input(CASE, str(tmp_path))
    (path,) = glob.glob(os.path.join(prof, "device_0", "data", "lpmFreqConv.data.0.slice_0"))
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) - 100)  # the second record cut short
    err = export_all(prof, capsys)
    assert "truncated lpm_freq record: 788 of 888 bytes; dropped" in err
    assert db_points(prof) == GOLDEN_POINTS[:5] + [(END, 1800)]
    assert aicore_time(prof, MATMUL_START) == "58.258"  # its point came in the first record


def test_before_start_and_out_of_order(tmp_path, capsys):
    prof = copy_input(CASE, str(tmp_path))
    write_lpm(prof, [[(49999000000, 1400), (49999750000, 1550), (50005096700, 1650)],
                     [(50005044700, 1800), (50005119400, 1800)]])
    err = export_all(prof, capsys)
    assert "3 AI Core frequency change points lie before the device start" not in err
    assert "2 AI Core frequency change points lie before the device start" in err and ": 1 dropped" in err
    assert "1 AI Core frequency change points come before the point written ahead of them" in err
    assert db_points(prof) == [(START, 1550), (1700902984100894000, 1800), (1700902984101934000, 1650),
                               (1700902984102388000, 1800), (END, 1800)]
    assert aicore_time(prof, MATMUL_START) == "58.258"


def test_zero_frequency(tmp_path, capsys):
    prof = copy_input(CASE, str(tmp_path))
    write_lpm(prof, [[(49999750000, 1800), (50005044700, 1800), (50005096700, 0), (50005119400, 1800)]])
    err = export_all(prof, capsys)
    assert "1 AI Core frequency change points give 0 MHz; the PMU times of device 0 use the nominal 1800 MHz" in err
    assert (1700902984101934000, 0) in db_points(prof)
    assert aicore_time(prof, MATMUL_START) == "53.403"  # the nominal frequency, as the reference does


def test_pmu_hz_rule():
    """FreqChanges.pmu_hz against the reference's loop (ffts_pmu_calculator.py `_get_current_freq`), by hand."""
    from msprof_kit.ingest.freq import FreqChanges
    changes = FreqChanges(0, 1800, 1000, 1650, np.array([1500, 1500, 2000]), np.array([1400, 1550, 1800]))
    ends = np.array([999, 1000, 1499, 1500, 1999, 2000, 10 ** 12])

    def reference(t: int) -> float:
        current = 1800e6
        for syscnt, mhz in [(1000, 1650), (1500, 1400), (1500, 1550), (2000, 1800)]:
            if t < syscnt:
                break
            current = mhz * 1e6
        return current
    assert changes.pmu_hz(ends).tolist() == [reference(int(t)) for t in ends] \
        == [1800e6, 1650e6, 1650e6, 1550e6, 1550e6, 1800e6, 1800e6]
    zero = FreqChanges(0, 1800, 1000, 1650, np.array([1500]), np.array([0]))
    assert zero.pmu_hz(ends).tolist() == [1800e6] * len(ends)  # any 0 MHz point: nominal throughout
