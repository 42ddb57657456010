"""Issue 26, device memory: npu_mem / npu_module_mem samples on 910b_memory equal the reference's
exports (npu_mem, npu_module_mem, the timeline's NPU MEM process, NPU_MEM / NPU_MODULE_MEM and
their STRING_IDS in the unified DB), with the C extension and its Python twin (conftest runs every
test with both); the `memory` report and chart; and each bad-input warning.

The timeline and db kinds compare whole files, of which the operator memory (NPU_OP_MEM, its 'GE'
string) is another part of issue 26: for those only the lines about our parts must be absent."""
from __future__ import annotations

import glob
import os
import sqlite3
import struct
import subprocess
import sys

import pytest

from conftest import COMPARE, GOLDEN, copy_input, needs_shared, run

from msprof_kit import cli, sources
from msprof_kit.sources.memory import memory_series, memory_table

pytestmark = needs_shared
CASE = os.path.join(GOLDEN, "910b_memory")
OURS = ("NPU MEM", "NPU_MEM", "NPU_MODULE_MEM", "'app'", "'device'", "npu_mem", "npu_module_mem")


def compare(prof: str, kinds: str, golden: str = CASE) -> str:
    return subprocess.run([sys.executable, COMPARE, prof, golden, "--kinds", kinds], capture_output=True,
                          text=True).stdout


def exported(prof: str, capsys: pytest.CaptureFixture) -> None:
    for what in ("timeline", "summary", "db"):
        assert cli.main(["export", what, "-dir", prof]) == 0
    capsys.readouterr()


def output(prof: str, kind: str) -> str:
    return glob.glob(os.path.join(prof, "mindstudio_profiler_output", f"{kind}_[0-9]*.csv"))[0]


def test_910b_memory_equal(tmp_path, capsys):
    prof = copy_input("910b_memory", str(tmp_path))
    exported(prof, capsys)
    for golden in (CASE, os.path.join(CASE, "python")):
        out = compare(prof, "npu_mem,npu_module_mem", golden)
        assert out.strip().splitlines()[-1].startswith("verdict: equal"), out
    out = compare(prof, "timeline,db")
    ours = [line for line in out.splitlines() if line.startswith("DIFFER") and any(k in line for k in OURS)]
    assert not ours, out
    assert "equal   timeline" in out, out   # NPU MEM was the timeline's only missing part


def test_json_format_of_the_python_path(tmp_path, capsys):
    """--format json, where the Python path writes JSON (a chip whose analysis has no C++
    exporters): one object per row without Device_id (one device), cells as the Python golden CSV."""
    import csv
    import json
    import re
    prof = copy_input("910b_memory", str(tmp_path))
    for info in glob.glob(os.path.join(prof, "**", "info.json*"), recursive=True):
        with open(info, encoding="utf-8") as f:
            text = f.read()
        with open(info, "w", encoding="utf-8") as f:
            f.write(re.sub(r'"platform_version":\s*"\d+"', '"platform_version": "2"', text))
    assert cli.main(["export", "summary", "--format", "json", "-dir", prof]) == 0
    capsys.readouterr()
    for kind in ("npu_mem", "npu_module_mem"):
        (path,) = glob.glob(os.path.join(prof, "mindstudio_profiler_output", f"{kind}_[0-9]*.json"))
        with open(path, encoding="utf-8") as f:
            ours = json.load(f)
        with open(os.path.join(CASE, "python", f"{kind}.csv"), encoding="utf-8", newline="") as f:
            golden = list(csv.DictReader(f))
        assert len(ours) == len(golden) and list(ours[0]) == [k for k in golden[0] if k != "Device_id"]
        for mine, theirs in zip(ours, golden):
            assert {k: str(v) for k, v in mine.items()} == {k: v for k, v in theirs.items() if k != "Device_id"}
    assert not glob.glob(os.path.join(prof, "mindstudio_profiler_output", "npu_mem_*.csv"))


def test_910b_memory_hand_checked(tmp_path, capsys):
    """The Device sample at 1 ms lands at ...000999.936 µs: the Python parser's float arithmetic
    (1700901984000000.0 µs of local offset x 1000 in a float64 has 256-ns steps), which the C++
    path reads back; 45056 KB of DDR = 46137344 bytes / 1024. Its timeline counter is the same."""
    prof = copy_input("910b_memory", str(tmp_path))
    exported(prof, capsys)
    with open(output(prof, "npu_mem"), encoding="utf-8") as f:
        lines = f.read().splitlines()
    assert lines[2] == "0,Device,45056,2228384,2273440,1700902984000999.936\t"
    db = glob.glob(os.path.join(prof, "msprof_*.db"))[0]
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("SELECT ddr, timestampNs FROM NPU_MEM LIMIT 1 OFFSET 1").fetchone() == \
            (46137344, 1700902984000999936)
        strings = {v for (v,) in conn.execute("SELECT value FROM STRING_IDS")}
        assert {"app", "device"} <= strings
        assert conn.execute("SELECT COUNT(*) FROM NPU_MODULE_MEM").fetchone()[0] == 405
    finally:
        conn.close()
    with open(output(prof, "npu_module_mem"), encoding="utf-8") as f:
        assert f.read().splitlines()[1] == "0,HCCL,1700902984000000.000\t,8192,NPU:0"


def test_memory_report_and_chart(tmp_path, capsys):
    """Peak Device memory 2273536 KB (at 43 ms: the golden npu_mem's largest memory(KB)); DEVMM
    peaks at 1058816 KB and averages 1053696 KB over its 81 samples (golden npu_module_mem)."""
    prof = copy_input("910b_memory", str(tmp_path))
    assert cli.main(["import", "-dir", prof]) == 0
    capsys.readouterr()
    conn = sqlite3.connect(os.path.join(prof, "sqlite", "msprof_kit.db"))
    try:
        table = memory_table(conn)
        series = memory_series(conn, points=50)
    finally:
        conn.close()
    assert table is not None and series is not None
    device = table[table["Component"] == "Device"].iloc[0]
    assert device["Peak Memory(KB)"] == 2273536.0
    assert abs(device["Peak Time(us)"] - 1700902984043000.064) < 1
    devmm = table[table["Component"] == "DEVMM"].iloc[0]
    assert (devmm["Peak Memory(KB)"], devmm["Avg Memory(KB)"]) == (1058816.0, 1053696.0)
    assert list(table["Component"])[:2] == ["Device", "APP"]
    assert series.groupby(["Component", "Kind"]).size().max() <= 50
    code, out, _ = run(["show", "-dir", prof, "-r", "memory", "--format", "csv"], capsys)
    assert code == 0 and out.splitlines()[0].startswith("Component,Kind,Peak Memory(KB)")
    assert "memory" in sources.REPORTS
    pytest.importorskip("matplotlib")
    code, out, _ = run(["plot", "-dir", prof, "--out", str(tmp_path / "plots")], capsys)
    assert code == 0 and "memory.png: 7 memory lines" in out


def _patch(path: str, offset: int, fmt: str, value: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(struct.pack(fmt, value))


def _import_warnings(prof: str, capsys: pytest.CaptureFixture) -> str:
    code, _, err = run(["export", "summary", "-dir", prof], capsys)
    assert code == 0
    return err


def _rows(prof: str, kind: str) -> int:
    with open(output(prof, kind), encoding="utf-8") as f:
        return len(f.read().splitlines()) - 1


def test_truncated_sample_file(tmp_path, capsys):
    prof = copy_input("910b_memory", str(tmp_path))
    path = os.path.join(prof, "device_0", "data", "npu_mem.data.0.slice_0")
    os.truncate(path, os.path.getsize(path) - 5)
    err = _import_warnings(prof, capsys)
    assert "offset 5120: truncated npu_mem record: 27 of 32 bytes; dropped" in err
    assert _rows(prof, "npu_mem") == 321   # the last Device sample is lost, the rest exported


def test_time_going_backwards(tmp_path, capsys):
    prof = copy_input("910b_memory", str(tmp_path))
    path = os.path.join(prof, "device_0", "data", "npu_mem.app.0.slice_0")
    _patch(path, 32 * 10, "<I", 0)
    _patch(path, 32 * 10 + 8, "<Q", 0)
    err = _import_warnings(prof, capsys)
    assert "1 npu_mem.app samples earlier than the sample before them (time going backwards); kept" in err
    assert _rows(prof, "npu_mem") == 322
    with open(output(prof, "npu_mem"), encoding="utf-8") as f:
        app = [line for line in f.read().splitlines() if ",APP," in line]
    assert app[10].endswith(",1700902984000000.000\t")   # in file order, as the reference keeps it


def test_unknown_event_and_reversed_size(tmp_path, capsys):
    prof = copy_input("910b_memory", str(tmp_path))
    _patch(os.path.join(prof, "device_0", "data", "npu_mem.app.0.slice_0"), 32 * 20 + 4, "<I", 5)
    _patch(os.path.join(prof, "device_0", "data", "npu_module_mem.data.0.slice_0"), 24 * 3 + 16, "<Q", 2 ** 64 - 1)
    err = _import_warnings(prof, capsys)
    assert "offset 640: npu_mem record with an event other than 0 (APP) or 1 (Device); dropped" in err
    assert "1 npu_module_mem samples with a total size beyond 2^63 - 1 bytes" in err
    assert _rows(prof, "npu_mem") == 321 and _rows(prof, "npu_module_mem") == 405
    with open(output(prof, "npu_module_mem"), encoding="utf-8") as f:
        assert sum(1 for line in f if ",-1,NPU:0" in line) == 1


def test_samples_before_the_start(tmp_path, capsys):
    """The device's sync point 3 ms before start_info's: its first three samples of each kind fall
    before the collection start and are dropped, as the reference's C++ path drops them."""
    prof = copy_input("910b_memory", str(tmp_path))
    path = os.path.join(prof, "device_0", "host_start.log.0")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    with open(path, "w", encoding="utf-8") as f:
        f.write(text.replace("clock_monotonic_raw: 1000000000000", "clock_monotonic_raw: 999997000000"))
    err = _import_warnings(prof, capsys)
    assert "3 npu_mem.data samples before the collection start (start_info); dropped" in err
    assert "3 npu_mem.app samples before the collection start" in err
    assert _rows(prof, "npu_mem") == 316
