"""`show -r communication` and `plot`'s communication chart on 910b_hccl (golden input): the numbers
against the golden communication_statistic.csv and communication.json, from a store and from exported
files only; a collection without communication says so."""
from __future__ import annotations

import csv
import json
import os
import shutil

import pytest

from conftest import GOLDEN, copy_input, needs_shared, run

GOLD = os.path.join(GOLDEN, "910b_hccl", "cpp")


def golden_expectation():
    """HcomAllReduce's count and total time (communication_statistic.csv), and its wait time and
    elapse summed over its ops in communication.json (keys hcom_allReduce_...)."""
    with open(os.path.join(GOLD, "communication_statistic.csv"), encoding="utf-8") as f:
        rows = {r["OP Type"]: r for r in csv.DictReader(f)}
    with open(os.path.join(GOLD, "communication.json"), encoding="utf-8") as f:
        ops = json.load(f)
    times = [v["Communication Time Info"] for k, v in ops.items() if k.startswith("hcom_allReduce_")]
    wait = sum(t["Wait Time(ms)"] for t in times) * 1000
    elapse = sum(t["Elapse Time(ms)"] for t in times) * 1000
    return rows, wait, elapse


def check_table(out: str) -> None:
    doc = json.loads(out)
    table = {row["OP Type"]: row for row in doc["communication"]}
    assert list(table) == ["HcomAllReduce", "HcomAllGather", "HcomSend"]   # by total time
    rows, wait, elapse = golden_expectation()
    reduce = table["HcomAllReduce"]
    # hand-checked: 10 all-reduces, 2657.88 µs in all, the longest 575.12 µs
    assert reduce["Count"] == 10 and reduce["Total Time(us)"] == pytest.approx(2657.88)
    assert reduce["Max Time(us)"] == pytest.approx(575.12) and reduce["Avg Time(us)"] == pytest.approx(265.788)
    # the whole run's Notify_Wait time (communication.json totals: 1.40984 ms) is the all-reduces'
    assert reduce["Wait Time(us)"] == pytest.approx(1409.84, abs=1e-3) == pytest.approx(wait, abs=1e-3)
    assert reduce["Wait Ratio"] == pytest.approx(round(wait / elapse, 3), abs=1e-3)
    for op_type, row in table.items():
        assert row["Count"] == int(rows[op_type]["Count"])
        assert row["Total Time(us)"] == pytest.approx(float(rows[op_type]["Total Time(us)"]))
    assert table["HcomAllGather"]["Wait Time(us)"] == 0 and table["HcomSend"]["Wait Ratio"] == 0


@needs_shared
def test_show_communication_from_store(tmp_path, capsys):
    prof = copy_input("910b_hccl", str(tmp_path / "in"))
    code, out, err = run(["show", "-dir", prof, "-r", "communication", "--format", "json", "-q"], capsys)
    assert code == 0, err
    check_table(out)
    assert "msprof_kit.db" in json.loads(out)["sources"]["communication"]
    code, out, err = run(["show", "-dir", prof, "-r", "hccl"], capsys)
    assert code == 0 and "Communication: all 3 op types" in out and "Wait Ratio" in out


@needs_shared
def test_show_communication_from_exported_files(tmp_path, capsys):
    prof = tmp_path / "PROF_exported"
    (prof / "mindstudio_profiler_output").mkdir(parents=True)
    (prof / "analyze").mkdir()
    for name in ("op_summary.csv", "communication_statistic.csv"):
        shutil.copy(os.path.join(GOLD, name), prof / "mindstudio_profiler_output" / name.replace(".csv", "_1.csv"))
    shutil.copy(os.path.join(GOLD, "communication.json"), prof / "analyze" / "communication.json")
    code, out, err = run(["show", "-dir", str(prof), "-r", "communication", "--format", "json"], capsys)
    assert code == 0, err
    check_table(out)
    assert "communication_statistic" in json.loads(out)["sources"]["communication"]
    assert "Traceback" not in err


@needs_shared
def test_show_communication_from_op_summary_only(tmp_path, capsys):
    """Without communication_statistic: the counts and times from op_summary's COMMUNICATION rows."""
    prof = tmp_path / "PROF_ops"
    (prof / "mindstudio_profiler_output").mkdir(parents=True)
    (prof / "analyze").mkdir()
    shutil.copy(os.path.join(GOLD, "op_summary.csv"), prof / "mindstudio_profiler_output" / "op_summary_1.csv")
    shutil.copy(os.path.join(GOLD, "communication.json"), prof / "analyze" / "communication.json")
    code, out, err = run(["show", "-dir", str(prof), "-r", "communication", "--format", "json"], capsys)
    assert code == 0, err
    check_table(out)


@needs_shared
def test_plot_communication(tmp_path, capsys):
    prof = copy_input("910b_hccl", str(tmp_path / "in"))
    out_dir = tmp_path / "plots"
    code, out, err = run(["plot", "-dir", prof, "--out", str(out_dir), "-q"], capsys)
    assert code == 0, err
    png = out_dir / "communication.png"
    assert png.is_file() and png.stat().st_size > 0
    assert "communication.png: 3 collective types" in out


@needs_shared
def test_no_communication_says_so(tmp_path, capsys):
    prof = copy_input("min_910b", str(tmp_path / "in"))
    code, out, err = run(["show", "-dir", prof, "-r", "communication"], capsys)
    assert code != 0 and "no communication data" in err and "no communication (HCCL) ops" in err
    assert "Traceback" not in err
    code, out, err = run(["plot", "-dir", prof, "--out", str(tmp_path / "plots")], capsys)
    assert code == 0 and "Skipped communication: no communication (HCCL) ops" in out
    assert not (tmp_path / "plots" / "communication.png").exists()
