"""Host APIs recorded before the collection start: the exports leave out those the reference drops
(msprof_kit/store/before_start.py; docs/exports.md, "Host APIs before the collection start").

The inputs are written again by tests/synth (`early_apis=3`); the reference's outputs for them
are stored in tests/reference/api_before_start{,_310p} (MANIFEST.txt there: the generator call,
the reference commit and the commands). 910B exports follow the reference's C++ flavour, 310P
exports its Python flavour, and `export db` on either chip the C++ writer's msprof.db."""
from __future__ import annotations

import csv
import glob
import json
import os
import re
import sqlite3
import subprocess
import sys
from typing import Dict, List, Set

import numpy as np
import pandas as pd
import pytest

import synth
from refcases import tree_digest
from conftest import COMPARE, HERE, needs_shared, run
from msprof_kit import store
from msprof_kit.store import before_start

REFERENCE = os.path.join(HERE, "reference")
CASES = {"910B": "api_before_start", "310P": "api_before_start_310p"}
BEGIN_US = synth.WALL0_US  # the collection start, µs since the epoch
ALL_CSV = "op_summary,op_statistic,api_statistic,task_time"


def write_input(out: str, chip: str, early: int = 3) -> str:
    """The case's raw collection (the call MANIFEST.txt names); returns the PROF directory."""
    return synth.write_collection(out, chip=chip, n_tasks=20, model_fraction=0.5, seed=5, early_apis=early)


def export(prof: str, capsys: pytest.CaptureFixture) -> None:
    for argv in (["import", "-dir", prof], ["export", "timeline", "-dir", prof], ["export", "summary", "-dir", prof]):
        code, _, err = run(argv, capsys)
        assert code == 0, err


def compare(ours: str, golden: str, kinds: str = "") -> str:
    argv = [sys.executable, COMPARE, ours, golden] + (["--kinds", kinds] if kinds else [])
    return subprocess.run(argv, capture_output=True, text=True).stdout


def timeline(prof: str) -> List[dict]:
    (path,) = glob.glob(os.path.join(prof, "mindstudio_profiler_output", "msprof_*.json"))
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def cann_events(events: List[dict]) -> List[dict]:
    """The X events of the CANN process."""
    procs = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "process_name"}
    return [e for e in events if e.get("ph") == "X" and procs.get(e["pid"]) == "CANN"]


def early_names(events: List[dict]) -> Set[str]:
    """Names of the CANN events that start before the collection start."""
    return {e["name"] for e in cann_events(events) if float(e["ts"]) < BEGIN_US}


@pytest.fixture(params=sorted(CASES))
def chip(request: pytest.FixtureRequest) -> str:
    return request.param


# ------------------------------------------------------------------------------------------------
# against the reference


@needs_shared
def test_the_inputs_are_the_ones_the_reference_read(tmp_path, chip):
    prof = write_input(str(tmp_path), chip)
    with open(os.path.join(REFERENCE, CASES[chip], "MANIFEST.txt"), encoding="utf-8") as f:
        stored = re.search(r"input sha256: ([0-9a-f]{64})", f.read())
    assert stored and tree_digest(prof) == stored.group(1), \
        "tests/synth writes another input now: run the reference again (MANIFEST.txt)"


#: the flavour each chip's exports follow, and what compare_exports says of the whole case: 910B the
#: C++ flavour (timeline, the four summaries and msprof_{ts}.db, written with them), 310P the Python one
FLAVOURS = {"910B": ("cpp", "verdict: equal (6 kinds equal)"), "310P": ("python", "verdict: equal (5 kinds equal)")}


@needs_shared
def test_equals_the_flavour_of_the_chip(tmp_path, capsys, chip):
    prof = write_input(str(tmp_path), chip)
    export(prof, capsys)
    flavour, verdict = FLAVOURS[chip]
    report = compare(prof, os.path.join(REFERENCE, CASES[chip], flavour))
    assert report.splitlines()[-1] == verdict, report


@needs_shared
def test_export_db_follows_the_cpp_writer_on_both_chips(tmp_path, capsys, chip):
    """`export db` alone: CANN_API and STRING_IDS as the C++ writer's (on 310P too, whose
    msprof.db a CANN install writes with it)."""
    prof = write_input(str(tmp_path), chip)
    code, _, err = run(["export", "db", "-dir", prof], capsys)
    assert code == 0, err
    report = compare(prof, os.path.join(REFERENCE, CASES[chip], "cpp"), "db")
    assert report.splitlines()[-1] == "verdict: equal (1 kinds equal)", report


# ------------------------------------------------------------------------------------------------
# what each flavour drops, said directly


def test_what_each_flavour_keeps(tmp_path, capsys, chip):
    """C++ (910B): the APIs that end after the start, and those within the ModelLoad of their
    thread; Python (310P): those that start after it, and those that start within the ModelLoad.
    The store keeps all 56."""
    prof = write_input(str(tmp_path), chip)
    export(prof, capsys)
    events = timeline(prof)
    early = {(e["name"], e["tid"]) for e in cann_events(events) if float(e["ts"]) < BEGIN_US}
    inside = {("Model@ModelLoad", 4012), ("Runtime@StreamCreate", 4012)}
    if chip == "910B":
        assert early == inside | {("AscendCL@aclnnAdd", 4012), ("Node@launch", 4012), ("Runtime@KernelLaunch", 4012)}
    else:
        assert early == inside | {("Runtime@ModelBindStream", 4012)}
    threads = {e["tid"] for e in events if e.get("ph") == "M" and e["name"] == "thread_name"
               and e["args"]["name"].startswith("Thread ")}
    assert threads == {4012}  # thread 4812 has no API left
    conn = store.open_store(prof)
    try:
        assert conn.execute("SELECT COUNT(*) FROM CANN_API").fetchone()[0] == 56
    finally:
        conn.close()
    assert len(cann_events(events)) == (48 if chip == "910B" else 46)
    (path,) = glob.glob(os.path.join(prof, "mindstudio_profiler_output", "api_statistic_*.csv"))
    with open(path, newline="", encoding="utf-8") as f:
        counts = {row["API Name"]: int(row["Count"]) for row in csv.DictReader(f)}
    if chip == "910B":  # C++: api_statistic leaves them out too
        assert counts["KernelLaunch"] == 18 and counts["StreamCreate"] == 1 and "ModelBindStream" not in counts
    else:  # Python: api_statistic counts every API
        assert counts["KernelLaunch"] == 20 and counts["StreamCreate"] == 2 and counts["ModelBindStream"] == 1


def test_arrows_of_dropped_launches(tmp_path, capsys, chip):
    """910B: the ops whose launch was dropped have no arrow (the reference writes their ends
    alone; msprof-kit only complete arrows). 310P: arrows start at the host task records, so all
    20 stay, three of them starting before the collection start."""
    prof = write_input(str(tmp_path), chip)
    export(prof, capsys)
    events = timeline(prof)
    starts = {e["id"]: float(e["ts"]) for e in events if e.get("ph") == "s"}
    ends = {e["id"] for e in events if e.get("ph") == "f"}
    assert set(starts) == ends
    assert len(starts) == (18 if chip == "910B" else 20)
    assert sum(ts < BEGIN_US for ts in starts.values()) == (1 if chip == "910B" else 3)


def test_db_string_ids_lose_only_the_names_of_dropped_apis(tmp_path, capsys):
    prof = write_input(str(tmp_path), "910B")
    code, _, err = run(["export", "db", "-dir", prof], capsys)
    assert code == 0, err
    (db,) = glob.glob(os.path.join(prof, "msprof_*.db"))
    conn = sqlite3.connect(db)
    try:
        values = {r[0] for r in conn.execute("SELECT value FROM STRING_IDS")}
        names = {r[0] for r in conn.execute("SELECT s.value FROM CANN_API c JOIN STRING_IDS s ON s.id = c.name")}
        assert conn.execute("SELECT COUNT(*) FROM CANN_API").fetchone()[0] == 48
        assert conn.execute("SELECT COUNT(*) FROM CANN_API WHERE name NOT IN (SELECT id FROM STRING_IDS)").fetchone()[0] == 0
    finally:
        conn.close()
    assert not {"aclnnMatMulV3", "ModelBindStream"} & values
    assert {"aclnnMatMul", "ModelLoad", "StreamCreate", "MatMulV3", "MatMul"} <= values  # op names and types stay
    assert "aclnnMatMul" in names


def test_pmu_times_of_ops_described_before_the_start(tmp_path, capsys, chip):
    """Python flavour (310P): the eager ops whose node_basic_info is stamped before the start (ops
    0..2) print 0 for aicore_time and every pipe time, as the reference's PMU pass reads no block
    number for them; their cycles and ratios stay. C++ flavour (910B): unaffected. The store keeps
    the true values (KIT_TASK.infoNs says when each op was described)."""
    prof = write_input(str(tmp_path), chip)
    export(prof, capsys)
    (path,) = glob.glob(os.path.join(prof, "mindstudio_profiler_output", "op_summary_*.csv"))
    with open(path, newline="", encoding="utf-8") as f:
        rows = {int(r["Task ID"]): r for r in csv.DictReader(f) if r["Stream ID"] == str(synth.EAGER_STREAM)}
    times = [c for c in next(iter(rows.values())) if c.endswith("_time(us)")]
    cycles = [c for c in next(iter(rows.values())) if c.endswith("total_cycles")]
    early = {1, 2, 3}  # task ids of ops 0..2 on the eager stream
    for task, row in rows.items():
        if task in early and chip == "310P":
            assert all(float(row[c]) == 0 for c in times), task
        assert sum(int(row[c]) for c in cycles) > 0, task
    if chip == "310P":
        assert all(float(rows[t]["aicore_time(us)"]) > 0 for t in rows if t not in early)
    else:
        assert all(sum(float(rows[t][c]) for c in times) > 0 for t in early)
    conn = store.open_store(prof)
    try:
        stamps = store.StoredColumns(conn, "KIT_TASK").read("infoNs")
        assert int((stamps < synth.WALL0_US * 1000).sum()) == 3 and int((stamps == -1).sum()) == 0
    finally:
        conn.close()


# ------------------------------------------------------------------------------------------------
# collections without early APIs are unchanged


def test_no_api_before_the_start_no_rule(tmp_path, capsys, chip):
    """Without APIs before the start neither flavour's rule applies, and every API is exported."""
    prof = write_input(str(tmp_path), chip, early=0)
    export(prof, capsys)
    conn = store.open_store(prof)
    try:
        assert before_start.api_rule(conn, "cpp") is None and before_start.api_rule(conn, "python") is None
        assert before_start.api_rule(conn, "cpp", store.StoredColumns(conn, "CANN_API")) is None
        n = conn.execute("SELECT COUNT(*) FROM CANN_API").fetchone()[0]
    finally:
        conn.close()
    assert len(cann_events(timeline(prof))) == n == 52


# ------------------------------------------------------------------------------------------------
# the rule itself


def rule(by_end: bool, loads: Dict[str, list], begin: int = 1000) -> before_start.ApiRule:
    frame = pd.DataFrame(loads).sort_values(["tid", "start"], kind="stable")
    reach = frame.groupby("tid", sort=False)["end"].cummax()
    return before_start.ApiRule(begin, by_end, frame["tid"].to_numpy(), frame["start"].to_numpy(), reach.to_numpy())


APIS = {  # start, end, thread: what C++ keeps, what Python keeps
    "the ModelLoad itself": (100, 200, 1, True, True),
    "within it": (120, 150, 1, True, True),
    "starts within, ends after it": (190, 250, 1, False, True),
    "starts before it": (90, 110, 1, False, False),
    "same start as it": (100, 120, 1, True, True),
    "within a later, shorter one": (160, 175, 1, True, True),
    "after the later one, within the first": (185, 195, 1, True, True),
    "within another thread's": (10, 40, 2, True, True),
    "leaves another thread's": (10, 60, 2, False, True),
    "ends at the start": (900, 1000, 3, True, False),
    "starts at the start": (1000, 1100, 3, True, True),
    "before, no ModelLoad on its thread": (150, 160, 3, False, False),
}


@pytest.mark.parametrize("by_end", [True, False], ids=["cpp", "python"])
def test_rule(by_end):
    r = rule(by_end, {"tid": [1, 1, 2], "start": [100, 150, 0], "end": [200, 180, 50]})
    start, end, tid, cpp, python = (np.array(v) for v in zip(*APIS.values()))
    kept = r.keep(start, end, tid)
    want = cpp if by_end else python
    assert dict(zip(APIS, kept.tolist())) == dict(zip(APIS, want.tolist()))


def test_rule_without_model_loads():
    r = rule(True, {"tid": [], "start": [], "end": []})
    assert r.keep(np.array([10, 2000]), np.array([999, 2001]), np.array([1, 1])).tolist() == [False, True]


@pytest.mark.parametrize("scan_rows", [1 << 20, 1])
def test_rule_from_sqlite_equals_rule_from_mirror(tmp_path, capsys, chip, monkeypatch, scan_rows):
    """A store read through sqlite (no column mirror) gives the same rule; so does the mirror read
    a few rows at a time (SCAN_ROWS: a 10M-task store's 29M APIs are never read whole)."""
    monkeypatch.setattr(before_start, "SCAN_ROWS", scan_rows)
    prof = write_input(str(tmp_path), chip)
    code, _, err = run(["import", "-dir", prof], capsys)
    assert code == 0, err
    conn = store.open_store(prof)
    try:
        api = pd.read_sql_query("SELECT startNs, endNs, globalTid FROM CANN_API", conn)
        for flavour in ("cpp", "python"):
            by_sql = before_start.api_rule(conn, flavour)
            by_mirror = before_start.api_rule(conn, flavour, store.StoredColumns(conn, "CANN_API"))
            assert by_sql is not None and by_mirror is not None and len(by_sql.load_tid) == 1
            assert (by_sql.load_tid.tolist(), by_sql.load_start.tolist(), by_sql.load_reach.tolist()) == \
                (by_mirror.load_tid.tolist(), by_mirror.load_start.tolist(), by_mirror.load_reach.tolist())
            args = (api["startNs"].to_numpy(), api["endNs"].to_numpy(), api["globalTid"].to_numpy())
            assert by_sql.keep(*args).tolist() == by_mirror.keep(*args).tolist()
            assert int(by_sql.keep(*args).sum()) == (48 if flavour == "cpp" else 46)
    finally:
        conn.close()


class _Mirror:
    """A column-wise CANN_API in memory, read by row range as StoredColumns is."""

    def __init__(self, **columns: list) -> None:
        self.columns = {k: np.asarray(v, dtype=np.int64) for k, v in columns.items()}

    def __contains__(self, name: str) -> bool:
        return name in self.columns

    def __len__(self) -> int:
        return len(next(iter(self.columns.values())))

    def read(self, name: str, lo: int = 0, hi=None) -> np.ndarray:
        return self.columns[name][lo:hi]

    def take(self, name: str, rows: np.ndarray) -> np.ndarray:
        return self.columns[name][rows]


@pytest.mark.parametrize("scan_rows", [2, 3, 100])
def test_mirror_scans_find_what_a_whole_read_finds(monkeypatch, scan_rows):
    """The least end and the ModelLoad rows, read SCAN_ROWS rows at a time, wherever they lie."""
    monkeypatch.setattr(before_start, "SCAN_ROWS", scan_rows)
    mirror = _Mirror(endNs=[50, 40, 60, 7, 90, 80, 30], name=[1, 2, 9, 2, 9, 9, 1],
                     type=[5000, 5000, 15000, 5000, 20000, 15000, 5000])
    assert before_start._earliest(mirror, "endNs") == 7
    assert before_start._model_loads(mirror, 9).tolist() == [2, 5]
    assert before_start._earliest(_Mirror(endNs=[]), "endNs") is None
