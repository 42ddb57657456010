"""Issue 26, msproftx / mstx on 910b_aicpu_freq_tx (conftest runs every test with the C extension and
its Python twin): msprof_tx.csv equal to the golden one, the timeline's msproftx process (`python3`,
label CPU) and msprof_tx.json as the C++ path writes them, MSTX_EVENTS and its STRING_IDS in the
unified DB; and the named warnings of bad msproftx input, the rest exported.

The case's timeline and DB also hold the real AI Core frequency and the memcpy args, which other
work adds: the whole-file kinds are checked here for lines about this work only."""
from __future__ import annotations

import glob
import json
import os
import sqlite3
import subprocess
import sys
from typing import Dict, List

import numpy as np
import pytest

from conftest import COMPARE, GOLDEN, copy_input, needs_shared, run

from msprof_kit import cli
from msprof_kit.parsers.msproftx import MSPROFTX

pytestmark = needs_shared

CASE = os.path.join(GOLDEN, "910b_aicpu_freq_tx")
TX_SLICE = os.path.join("host", "data", "aging.additional.msproftx.slice_0")


def export_all(prof: str) -> None:
    for what in ("summary", "timeline", "db"):
        assert cli.main(["export", what, "-dir", prof]) == 0, what


def compare(ours: str, golden: str, kinds: str) -> List[str]:
    res = subprocess.run([sys.executable, COMPARE, ours, golden, "--kinds", kinds], capture_output=True, text=True)
    return res.stdout.strip().splitlines()


def out_dir(prof: str) -> str:
    return os.path.join(prof, "mindstudio_profiler_output")


def trace(path: str) -> List[dict]:
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    return data["traceEvents"] if isinstance(data, dict) else data


def tx_process(events: List[dict]) -> List[dict]:
    """The events of the msproftx process (the CPU-labelled process named python3)."""
    pids = {e["pid"] for e in events if e.get("name") == "process_name" and e["args"]["name"] == "python3"}
    return [e for e in events if e.get("pid") in pids]


def canonical(events: List[dict]) -> List[str]:
    return sorted(json.dumps(e, sort_keys=True) for e in events)


@pytest.fixture
def exported(tmp_path, capsys: pytest.CaptureFixture) -> str:
    """The case exported (summary, timeline, db) with the twin of the test (native_implementation,
    an autouse fixture, runs first)."""
    prof = copy_input("910b_aicpu_freq_tx", str(tmp_path))
    export_all(prof)
    capsys.readouterr()
    return prof


def test_msprof_tx_csv_equal(exported: str) -> None:
    for flavour in ("cpp", "python"):  # (the same file in both paths)
        lines = compare(exported, os.path.join(CASE, flavour), "msprof_tx")
        assert lines[-1].startswith("verdict: equal"), lines
    ours = glob.glob(os.path.join(out_dir(exported), "msprof_tx_*.csv"))
    with open(ours[0], "rb") as a, open(os.path.join(CASE, "cpp", "msprof_tx.csv"), "rb") as b:
        assert a.read() == b.read()


def test_hand_checked_push_pop(exported: str) -> None:
    """push_pop_all: start tick 100010000000, end 100010460760. host_start.log: cntvct 100000000000 at
    clock_monotonic_raw 1000000000000 ns, info.json CPU 100 MHz, start_info: 1700902984000000 µs at
    monotonic 1000000000000 ns. So the start is 1700902984000000000 + (10000000 ticks / 100 MHz = 0.1 s)
    ns = 1700902984100000.000 µs, the end 4607.6 µs later (460760 ticks / 100 MHz)."""
    with open(glob.glob(os.path.join(out_dir(exported), "msprof_tx_*.csv"))[0], encoding="utf-8") as f:
        rows = [line.rstrip("\n").split(",") for line in f]
    row = next(r for r in rows if r[10] == "push_pop_all")
    assert row[4] == "push/pop" and row[7] == "1700902984100000.000\t" and row[8] == "1700902984104607.600\t"
    assert (row[3], row[5], row[6]) == ("3", "1", "7")
    joined = next(r for r in rows if r[10].startswith("iteration 1 checkpoint"))
    assert joined[10] == "iteration 1 checkpoint; " * 8 and joined[11] == "default" and joined[3] == "N/A"


def test_timeline_tx_process(exported: str) -> None:
    ours = tx_process(trace(glob.glob(os.path.join(out_dir(exported), "msprof_2*.json"))[0]))
    gold = tx_process(trace(os.path.join(CASE, "cpp", "msprof.json")))
    assert canonical(ours) == canonical(gold)
    assert len([e for e in ours if e["ph"] == "X"]) == 22
    labels = [e["args"] for e in ours if e["name"] in ("process_labels", "process_sort_index")]
    assert labels == [{"labels": "CPU"}, {"sort_index": 6}]
    alone = trace(glob.glob(os.path.join(out_dir(exported), "msprof_tx_*.json"))[0])
    assert canonical(alone) == canonical(trace(os.path.join(CASE, "cpp", "msprof_tx.json")))
    # the whole-file comparison names nothing of this process
    lines = compare(exported, CASE, "timeline")
    assert not [x for x in lines if x.startswith("DIFFER") and ("python3" in x or "MsTx" in x)], lines


def test_db_mstx_events(exported: str) -> None:
    lines = compare(exported, CASE, "db")
    assert not [x for x in lines if x.startswith("DIFFER") and ("MSTX" in x or "STRING_IDS" in x)], lines
    sql = ("SELECT m.startNs, m.endNs, m.eventType, m.rangeId, m.category, s.value, m.globalTid, m.endGlobalTid, "
           "d.value, m.connectionId FROM MSTX_EVENTS m JOIN STRING_IDS s ON s.id = m.message "
           "JOIN STRING_IDS d ON d.id = m.domainId ORDER BY m.rowid")
    ours_db = sorted(glob.glob(os.path.join(exported, "msprof_*.db")))[-1]
    with sqlite3.connect(ours_db) as a, sqlite3.connect(os.path.join(CASE, "cpp", "msprof.db")) as b:
        assert a.execute(sql).fetchall() == b.execute(sql).fetchall()
        assert a.execute("SELECT * FROM ENUM_MSTX_EVENT_TYPE").fetchall() == \
            b.execute("SELECT * FROM ENUM_MSTX_EVENT_TYPE").fetchall()


# ---------------------------------------------------------------------------------------------
# bad input: the golden slice with records changed


def records(prof: str) -> np.ndarray:
    return np.fromfile(os.path.join(prof, TX_SLICE), dtype=MSPROFTX.dtype)


def rewrite(prof: str, arr: np.ndarray) -> None:
    arr.tofile(os.path.join(prof, TX_SLICE))


def by_message(arr: np.ndarray, start: str) -> np.ndarray:
    return np.flatnonzero(np.char.startswith(arr["message"], start.encode()))


def bad_case(tmp_path: str, change: str) -> Dict[str, object]:
    prof = copy_input("910b_aicpu_freq_tx", tmp_path)
    arr = records(prof)
    if change == "never_closed":  # a start/end and the push/pop without their end
        arr["end_time"][by_message(arr, "step_0")] = 0
        arr["end_time"][by_message(arr, "push_pop_all")] = 0
    elif change == "no_first_piece":  # mstx mark 2 loses its first piece
        arr = np.delete(arr, by_message(arr, "iteration 2 checkpoint; iteration 2 checkpoint;"))
    elif change == "unknown_info_type":
        arr["info_type"][by_message(arr, "marker_8")] = 7
    rewrite(prof, arr)
    return {"prof": prof}


@pytest.mark.parametrize("change, warning, rows", [
    ("never_closed", "2 msproftx ranges were never closed", 20),
    ("no_first_piece", "1 mstx messages lack pieces (1 of them their first piece", 22),
    ("unknown_info_type", "1 msproftx records have an unknown info type (7;", 21),
])
def test_bad_tx_input(change: str, warning: str, rows: int, tmp_path, capsys: pytest.CaptureFixture) -> None:
    prof = str(bad_case(str(tmp_path), change)["prof"])
    code, out, err = run(["import", "-dir", prof], capsys)
    assert code == 0, err
    assert warning in err, err
    for what in ("summary", "timeline", "db"):
        code, out, err = run(["export", what, "-dir", prof], capsys)
        assert code == 0 and "Traceback" not in err, err
    with open(glob.glob(os.path.join(out_dir(prof), "msprof_tx_*.csv"))[0], encoding="utf-8") as f:
        lines = f.read().splitlines()
    assert len(lines) == 1 + rows
    events = tx_process(trace(glob.glob(os.path.join(out_dir(prof), "msprof_2*.json"))[0]))
    assert len([e for e in events if e["ph"] == "X"]) == rows
    if change == "no_first_piece":  # kept with the piece there is, as the reference keeps it
        assert any(line.split(",")[10] == "ion 2 checkpoint; iteration 2 checkpoint; " for line in lines[1:])
    if change == "never_closed":
        assert not any(",push_pop_all," in line or ",step_0," in line for line in lines)


def test_python_flavour_events(exported: str) -> None:
    """The layer by the Python path's rules (non-910B chips): every event kept, flows named by mark id
    with "bp": "e"; equal to the Python path's msprof_tx.json (durations to the ns)."""
    from msprof_kit.exporters.context import open_context
    from msprof_kit.exporters.timeline.facts import load_facts
    from msprof_kit.exporters.timeline.msproftx import tx_events

    ctx = open_context(exported)
    try:
        facts = load_facts(ctx)
        facts.python_rules = True
        ours = json.loads("[" + ",".join(tx_events(ctx, facts)) + "]")
    finally:
        ctx.conn.close()

    def rounded(events: List[dict]) -> List[str]:
        return sorted(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in e.items()},
                                 sort_keys=True) for e in events)

    assert rounded(ours) == rounded(trace(os.path.join(CASE, "python", "msprof_tx.json")))
