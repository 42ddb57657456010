"""Issue 25, step trace: FP/BP tags and all-reduce tags give step_trace.csv its training-trace
columns and Reduce pairs, and the timeline's step-trace thread its FP_BP Time, Iteration Refresh,
Data_aug Bound and Reduce events (910b_hccl, whole and iteration export, against the reference's
golden files), and the pairing rules hold on hand-made step traces."""
from __future__ import annotations

import csv
import glob
import json
import os
import re
import sqlite3
import subprocess
import sys
from typing import List, Tuple

import pytest

from conftest import COMPARE, GOLDEN, copy_input, needs_shared

from msprof_kit import cli
from msprof_kit.exporters.training import training_trace

HCCL = os.path.join(GOLDEN, "910b_hccl")


def export_both(prof: str, *extra: str) -> None:
    for what in ("summary", "timeline"):
        assert cli.main(["export", what, "-dir", prof, *extra]) == 0


def compare(ours: str, golden: str, kinds: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, COMPARE, ours, golden, "--kinds", kinds], capture_output=True, text=True)


def step_lanes(events: List[dict]) -> List[dict]:
    """The events of the step-trace threads (`Step Trace(Model ID:m)`, or `Model ID:m` in an
    iteration export's step_trace.json) with their process and thread metadata."""
    lanes = {(e["pid"], e["tid"]) for e in events if e.get("name") == "thread_name"
             and ("Step Trace" in e["args"]["name"] or e["args"]["name"].startswith("Model ID"))}
    pids = {p for p, _ in lanes}
    return [e for e in events
            if (e.get("ph") == "M" and e.get("pid") in pids and (e.get("tid", 0) == 0 or (e["pid"], e["tid"]) in lanes))
            or (e.get("ph") != "M" and (e.get("pid"), e.get("tid")) in lanes)]


def flow_points(events: List[dict]) -> List[Tuple[str, str, str, str]]:
    return sorted((e["ph"], e["name"], e["ts"], json.dumps(e.get("args"), sort_keys=True))
                  for e in events if e.get("ph") in ("s", "t"))


def assert_step_events_equal(ours_file: str, golden_file: str, tmp: str) -> None:
    """The step-trace threads of two trace files hold the same X events (compare_exports' timeline
    rules) and the same Data_aug Bound flow points."""
    picked = []
    for name, path in (("ours", ours_file), ("golden", golden_file)):
        with open(path, encoding="utf-8") as f:
            events = step_lanes(json.load(f))
        folder = os.path.join(tmp, name)
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "msprof.json"), "w", encoding="utf-8") as f:
            json.dump(events, f)
        picked.append(events)
    res = compare(os.path.join(tmp, "ours"), os.path.join(tmp, "golden"), "timeline")
    assert res.returncode == 0, res.stdout
    assert flow_points(picked[0]) == flow_points(picked[1])
    assert sum(e.get("ph") != "M" for e in picked[0]) == sum(e.get("ph") != "M" for e in picked[1])


def output_file(prof: str, kind: str, ext: str) -> str:
    found = glob.glob(os.path.join(prof, "mindstudio_profiler_output", f"{kind}_*.{ext}"))
    assert len(found) == 1, found
    return found[0]


@needs_shared
def test_hccl_whole_export_step_trace_and_step_events(tmp_path, capsys):
    prof = copy_input("910b_hccl", str(tmp_path / "in"))
    export_both(prof)
    capsys.readouterr()
    res = compare(prof, HCCL, "step_trace")  # EXPECT: step_trace = python
    assert res.returncode == 0, res.stdout
    assert_step_events_equal(output_file(prof, "msprof", "json"), os.path.join(HCCL, "cpp", "msprof.json"),
                             str(tmp_path / "timeline"))
    assert_step_events_equal(output_file(prof, "step_trace", "json"), os.path.join(HCCL, "cpp", "step_trace.json"),
                             str(tmp_path / "step_json"))


@needs_shared
@pytest.mark.parametrize("flavour", ["python_model1_iter2", "cpp_model1_iter2"])
def test_hccl_iteration_export(flavour, tmp_path, capsys):
    prof = copy_input("910b_hccl", str(tmp_path / "in"))
    export_both(prof, "--model-id", "1", "--iteration-id", "2")
    capsys.readouterr()
    golden = os.path.join(HCCL, flavour)
    res = compare(prof, golden, "step_trace")
    assert res.returncode == 0, res.stdout
    assert_step_events_equal(output_file(prof, "msprof", "json"), os.path.join(golden, "msprof.json"),
                             str(tmp_path / "timeline"))
    assert_step_events_equal(output_file(prof, "step_trace", "json"), os.path.join(golden, "step_trace.json"),
                             str(tmp_path / "step_json"))


@needs_shared
def test_hccl_numbers_by_hand(tmp_path, capsys):
    """Iteration 2 of 910b_hccl: FP 103100.340, BP 103324.860, end 103672.140 (µs after
    1700902984000000); iteration 1 ended at 103040.980; its reduces 103373.460-103609.040 and
    103609.060-103671.140 (ts_track tags 10000/10001 on stream 5)."""
    prof = copy_input("910b_hccl", str(tmp_path / "in"))
    export_both(prof)
    capsys.readouterr()
    with open(output_file(prof, "step_trace", "csv"), newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    row = dict(zip(rows[0][:10], rows[2][:10]))
    assert row["Iteration ID"] == "2"
    assert row["FP Start(us)"] == "1700902984103100.340\t" and row["BP End(us)"] == "1700902984103324.860\t"
    assert float(row["FP to BP Time(us)"]) == pytest.approx(103324.860 - 103100.340)      # 224.52
    assert float(row["Iteration Refresh(us)"]) == pytest.approx(103672.140 - 103324.860)  # 347.28
    assert float(row["Data Aug Bound(us)"]) == pytest.approx(103100.340 - 103040.980)     # 59.36
    assert rows[2][10] == "1700902984103373.460\t"
    assert float(rows[2][11]) == pytest.approx(103609.040 - 103373.460)                   # 235.58
    assert float(rows[2][13]) == pytest.approx(103671.140 - 103609.060)                   # 62.08
    assert rows[1][8] == "N/A"  # iteration 1: no iteration ended before its FP start


@needs_shared
def test_unended_and_uneven_reduces(tmp_path, capsys):
    """A reduce start without its end: N/A duration, no timeline event, a warning; an iteration
    without reduces: its pairs are N/A."""
    prof = copy_input("910b_hccl", str(tmp_path / "in"))
    assert cli.main(["import", "-dir", prof]) == 0
    conn = sqlite3.connect(os.path.join(prof, "sqlite", "msprof_kit.db"))
    with conn:
        conn.execute("DELETE FROM KIT_STEP_TRACE WHERE timestampNs = 1700902984102979140")  # iteration 1's first end
        conn.execute("DELETE FROM KIT_STEP_TRACE WHERE indexId = 3 AND tagId >= 10000")
    conn.close()
    capsys.readouterr()
    export_both(prof)
    err = capsys.readouterr().err
    assert "step trace: 1 all-reduce start tag(s) without an end tag" in err and "Traceback" not in err
    with open(output_file(prof, "step_trace", "csv"), newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    assert rows[1][10:] == ["1700902984102555.860\t", "N/A", "1700902984102979.160\t", "60.820"]
    assert rows[3][10:] == ["N/A"] * 4
    with open(output_file(prof, "msprof", "json"), encoding="utf-8") as f:
        # the step-trace reduce events (Reduce_<iteration>_<k>), not the communication tasks named Reduce_Inline
        reduces = [e["name"] for e in json.load(f) if re.fullmatch(r"Reduce_\d+_\d+", str(e.get("name", "")))]
    assert reduces == ["Reduce_1_0", "Reduce_2_1", "Reduce_2_2"]


class StoreStub:
    """What training_trace reads of an export context: a connection and the table check."""

    def __init__(self, rows: List[Tuple[int, int, int, int, int]]) -> None:
        self.conn = sqlite3.connect(":memory:")
        self.conn.execute("CREATE TABLE KIT_STEP_TRACE (deviceId INTEGER, timestampNs INTEGER, indexId INTEGER, "
                          "modelId INTEGER, streamId INTEGER, taskId INTEGER, tagId INTEGER)")
        self.conn.executemany("INSERT INTO KIT_STEP_TRACE VALUES (0, ?, 0, ?, ?, 0, ?)", rows)

    def has(self, table: str) -> bool:
        return table == "KIT_STEP_TRACE"


def test_pairing_rules_on_a_hand_made_trace():
    """(ts, model, stream, tag) records of model 1, two iterations chained by ITER_END, and model
    2; stream 5 tags first in iteration 1, so its reduces come before stream 6's."""
    rows = [
        (5, 1, 5, 10001),     # before any iteration: dropped
        (10, 1, 1, 0),        # model 1 start
        (12, 1, 1, 2), (14, 1, 1, 2),  # two FP tags: the last counts
        (15, 1, 5, 10000), (20, 1, 6, 10002), (25, 1, 5, 10001), (30, 1, 5, 10000),
        (40, 1, 6, 10003), (50, 1, 5, 10001), (55, 1, 5, 10001),  # a second end moves the last reduce's end
        (60, 1, 1, 3),        # BP
        (100, 1, 1, 4),       # ITER_END: iteration 1 ends, 2 starts
        (110, 1, 5, 10001),   # an end before any start of the iteration: dropped
        (120, 1, 1, 2), (130, 1, 1, 3),
        (150, 1, 1, 1),       # model end
        (160, 1, 1, 2),       # between iterations: dropped
        (90, 2, 1, 0), (105, 2, 1, 2), (140, 2, 1, 1),  # model 2: FP after model 1's iteration 1 ended
    ]
    trace = training_trace(StoreStub([(ts, m, s, t) for ts, m, s, t in rows]))
    assert trace.fp == {(0, 1, 1): 14, (0, 1, 2): 120, (0, 2, 1): 105}
    assert trace.bp == {(0, 1, 1): 60, (0, 1, 2): 130}
    assert trace.reduces == {(0, 1, 1): [(15, 25), (30, 55), (20, 40)]}
    # ends in order: 100 (1/1), 140 (2/1), 150 (1/2); FP 120 follows end 100, FP 105 too; 1/1 has none before
    assert trace.data_aug == {(0, 1, 2): 20, (0, 2, 1): 5}
    assert trace.unended() == 0 and trace.most_reduces() == 3
    assert trace.reduces_before == {(0, 1, 1): 0}


def test_no_step_trace_no_points():
    stub = StoreStub([])
    stub.has = lambda table: False
    assert training_trace(stub).fp == {}

