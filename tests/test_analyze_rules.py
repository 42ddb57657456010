"""msprof_kit.exporters.analyze against the reference's `msprof.py analyze --rule
communication,communication_matrix` outputs (oracle tests, STYLE 12c).

Inputs are the reference's own unified db (C++ flavour msprof.db of each golden case), read with
plain SQL that resolves STRING_IDS and the ENUM_HCCL_* tables, plus two facts that db lacks and the
store must keep: the raw hash id of each group name (from the collection's host hash_dic) and the
collection start (SESSION_TIME_INFO.startTimeNs). Outputs are compared with compare_exports.py.
"""
from __future__ import annotations

import glob
import json
import os
import sqlite3
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from msprof_kit.errors import NoData, OutputError
from msprof_kit.exporters import analyze as an

GOLDEN = "/work/shared/golden"
COMPARE = "/work/shared/tools/compare_exports.py"

TASK_INFO_SQL = """
SELECT n.value AS name, t.globalTaskId, k.value AS taskType, t.planeId, g.value AS groupName,
       r.name AS rdmaType, t.srcRank, t.dstRank, tr.name AS transportType, t.size, d.name AS dataType,
       l.name AS linkType, t.opId, t.isMaster, t.notifyId, t.bandwidth
FROM COMMUNICATION_TASK_INFO t
LEFT JOIN STRING_IDS n ON n.id = t.name
LEFT JOIN STRING_IDS k ON k.id = t.taskType
LEFT JOIN STRING_IDS g ON g.id = t.groupName
LEFT JOIN ENUM_HCCL_RDMA_TYPE r ON r.id = t.rdmaType
LEFT JOIN ENUM_HCCL_TRANSPORT_TYPE tr ON tr.id = t.transportType
LEFT JOIN ENUM_HCCL_DATA_TYPE d ON d.id = t.dataType
LEFT JOIN ENUM_HCCL_LINK_TYPE l ON l.id = t.linkType
"""
TASK_SQL = "SELECT startNs, endNs, globalTaskId, deviceId, streamId, taskId FROM TASK"


def rank_of(prof: str) -> int:
    info = glob.glob(os.path.join(prof, "device_*", "info.json.*"))[0]
    with open(info, encoding="utf-8") as f:
        return int(json.load(f)["rank_id"])


def cases():
    """(label, msprof.db, raw PROF (for its hash_dic), golden folder for compare_exports)."""
    out = []
    case = os.path.join(GOLDEN, "910b_hccl")
    if os.path.isdir(case):
        out.append(("910b_hccl", os.path.join(case, "cpp", "msprof.db"), glob.glob(f"{case}/input/PROF_*")[0], case))
    for multi, prefix in (("910b_hccl_2ranks", "cpp_rank"), ("910b_hccl_8ranks", "reference_rank")):
        profs = {rank_of(p): p for p in glob.glob(os.path.join(GOLDEN, multi, "input", "CLUSTER_*", "PROF_*"))}
        for rank, prof in sorted(profs.items()):
            gold = os.path.join(GOLDEN, multi, f"{prefix}{rank}")
            if all(os.path.isfile(os.path.join(gold, f)) for f in ("msprof.db", "communication.json")):
                out.append((f"{multi}/{prefix}{rank}", os.path.join(gold, "msprof.db"), prof, gold))
    return out


CASES = cases()


def group_ids(prof: str) -> dict:
    """Resolved string -> raw hash id, from the host hash dictionary ("id:text" lines)."""
    ids = {}
    for path in sorted(glob.glob(os.path.join(prof, "host", "data", "*hash_dic*"))):
        with open(path, encoding="utf-8") as f:
            for line in f:
                key, sep, text = line.rstrip("\n").partition(":")
                if sep:
                    ids.setdefault(text, key)
    return ids


def load(db: str, prof: str) -> pd.DataFrame:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        info = pd.read_sql_query(TASK_INFO_SQL, conn)
        task = pd.read_sql_query(TASK_SQL, conn)
        start = conn.execute("SELECT startTimeNs FROM SESSION_TIME_INFO").fetchone()[0]
    return an.hccl_events(info, task, group_ids=group_ids(prof), start_ns=int(start))


def compare(ours: str, golden: str) -> str:
    run = subprocess.run([sys.executable, COMPARE, ours, golden, "--kinds", "communication,communication_matrix"],
                         capture_output=True, text=True)
    return run.stdout + run.stderr


@pytest.mark.parametrize("label,db,prof,golden", CASES, ids=[c[0] for c in CASES])
def test_golden_equal(tmp_path, label, db, prof, golden):
    ev = load(db, prof)
    ours = tmp_path / "PROF_ours"
    paths = an.write_analyze(str(ours), an.analyze(ev))
    assert sorted(os.path.basename(p) for p in paths) == ["communication.json", "communication_matrix.json"]
    report = compare(str(ours), golden)
    assert report.strip().splitlines()[-1].startswith("verdict: equal"), report


def test_cases_present():
    labels = [c[0] for c in CASES]
    assert "910b_hccl" in labels and "910b_hccl_2ranks/cpp_rank1" in labels, labels


@pytest.mark.parametrize("label,db,prof,golden", CASES, ids=[c[0] for c in CASES])
def test_same_text_as_reference(tmp_path, label, db, prof, golden):
    """Byte for byte the C++ flavour's files: json.dump defaults (", " and ": ", no indent, no final
    newline), its op and key order, its int-or-float types (a sum of nothing is 0, not 0.0) and its
    float sums (accumulated in the reference's order)."""
    ours = tmp_path / "PROF_ours"
    an.write_analyze(str(ours), an.analyze(load(db, prof)))
    flavour = os.path.join(golden, "cpp") if os.path.isdir(os.path.join(golden, "cpp")) else golden
    for name in ("communication.json", "communication_matrix.json"):
        with open(os.path.join(flavour, name), encoding="utf-8") as g, \
                open(ours / "analyze" / name, encoding="utf-8") as o:
            gold_text, our_text = g.read(), o.read()
        if our_text != gold_text:
            at = next(i for i, (x, y) in enumerate(zip(our_text + "\0", gold_text + "\0")) if x != y)
            pytest.fail(f"{label} {name}: first difference at char {at}: ours ...{our_text[at - 60:at + 40]!r} "
                        f"vs golden ...{gold_text[at - 60:at + 40]!r}")


def test_hand_checked_allreduce_and_rdma():
    """Numbers from 910b_hccl read straight from msprof.db, not through the module."""
    label, db, prof, golden = CASES[0]
    result = an.communication(load(db, prof))
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT k.value, t.planeId, t.isMaster, s.startNs, s.endNs, r.name FROM COMMUNICATION_TASK_INFO t "
            "JOIN STRING_IDS n ON n.id = t.name JOIN STRING_IDS k ON k.id = t.taskType "
            "JOIN TASK s ON s.globalTaskId = t.globalTaskId JOIN ENUM_HCCL_RDMA_TYPE r ON r.id = t.rdmaType "
            "WHERE n.value = ? ORDER BY s.startNs, t.globalTaskId", ("hcom_allReduce__483_0_1",)).fetchall()
        gather = conn.execute(
            "SELECT r.name, s.startNs, s.endNs FROM COMMUNICATION_TASK_INFO t JOIN STRING_IDS n ON n.id = t.name "
            "JOIN TASK s ON s.globalTaskId = t.globalTaskId JOIN ENUM_HCCL_RDMA_TYPE r ON r.id = t.rdmaType "
            "WHERE n.value = ? AND t.isMaster = 1 ORDER BY s.startNs", ("hcom_allGather__134_0_1",)).fetchall()
    # all-reduce 0, master plane 0: waits 77.70 us (before the Reduce_Inline: synchronization), 1.18 + 0.82 us after
    master = [r for r in rows if r[1] == 0]
    waits = [(e - s) for name, _, _, s, e, _ in master if name == "Notify_Wait"]
    reduce_ns = [(e - s) for name, _, _, s, e, _ in master if name == "Reduce_Inline"]
    assert waits == [77700, 1180, 820] and reduce_ns == [74440]
    info = result["hcom_allReduce__483_0_1@7415574198778220483"]["Communication Time Info"]
    assert info["Wait Time(ms)"] == pytest.approx(0.0797), f"golden 0.0797 ms = 77.70 + 1.18 + 0.82 us; ours {info}"
    assert info["Synchronization Time(ms)"] == pytest.approx(0.0777), \
        f"golden 0.0777 ms: the wait before the transit; {info}"
    assert info["Transit Time(ms)"] == pytest.approx(0.07444), f"golden 0.07444 ms: the Reduce_Inline; {info}"
    assert info["Wait Time Ratio"] == 0.5171, f"golden round(0.0797 / (0.0797 + 0.07444), 4) = 0.5171; {info}"
    # all-gather 0: [Memcpy, 4 payloads, notify, wait, notify, wait, Memcpy]: jump 5 closes 4 + 5 - 2 rows on
    kinds = [g[0] for g in gather]
    first = kinds.index("RDMA_SEND_PAYLOAD")
    close = first + 4 + 5 - 2
    transit = (gather[close][2] - gather[first][1]) / 1e6
    gi = result["hcom_allGather__134_0_1@3269652295830915134"]
    assert transit == pytest.approx(0.4236), f"golden 0.4236 ms from the first payload to the 2nd wait; ours {transit}"
    ours = gi["Communication Time Info"]["Transit Time(ms)"]
    assert ours == pytest.approx(0.4236), \
        f"golden 0.4236 ms: the RDMA window runs from the 1st payload to the task 4 + 5 - 2 places on; ours {ours}"
    assert gi["Communication Time Info"]["Wait Time(ms)"] == 0, "waits inside the RDMA window are not waits"
    assert gi["Communication Bandwidth Info"]["RDMA"]["Size Distribution"] == {"0.262144": [1, pytest.approx(0.4236)]}


def frame(rows):
    """Synthetic events: rows (op, plane, master, task, rdma, transport, link, size, src, dst, start, end)."""
    cols = ["name", "planeId", "isMaster", "taskType", "rdmaType", "transportType", "linkType", "size", "srcRank",
            "dstRank", "startNs", "endNs"]
    df = pd.DataFrame(rows, columns=cols)
    df["globalTaskId"] = np.arange(len(df))
    df["groupName"] = "g"
    return an.hccl_events(df.drop(columns=["startNs", "endNs"]), df[["globalTaskId", "startNs", "endNs"]])


def test_unclosed_run_and_overlapping_windows():
    P, W, N = "RDMA_SEND_PAYLOAD", "Notify_Wait", "RDMA_SEND_NOTIFY"
    # hcom_send (jump 3): payload, payload, notify, wait (closes 2 + 3 - 2 rows on), payload, wait
    # (1 + 3 - 2 = 2 rows on is past the end: that run does not close, the last wait is visited)
    rows = [("hcom_send_", 0, 1, "RDMASend", P, "RDMA", "ROCE", 1_000_000, 0, 1, 0, 10),
            ("hcom_send_", 0, 1, "RDMASend", P, "RDMA", "ROCE", 1_000_000, 0, 1, 10, 20),
            ("hcom_send_", 0, 1, "RDMASend", N, "RDMA", "ROCE", 0, 0, 1, 20, 30),
            ("hcom_send_", 0, 1, W, "RESERVED", "RDMA", "ROCE", 0, 0, 1, 30, 100),
            ("hcom_send_", 0, 1, "RDMASend", P, "RDMA", "ROCE", 2_000_000, 0, 1, 100, 110),
            ("hcom_send_", 0, 1, W, "RESERVED", "RDMA", "ROCE", 0, 0, 1, 110, 150)]
    res = an.communication(frame(rows))
    info = res["hcom_send_@g"]["Communication Time Info"]
    assert info["Transit Time(ms)"] == 100 / 1e6  # first window: 0 .. end of the wait (row 3)
    assert info["Wait Time(ms)"] == 40 / 1e6       # the last wait is visited (the 2nd run did not close)
    assert res["hcom_send_@g"]["Communication Bandwidth Info"]["RDMA"]["Size Distribution"] == {"2.0": [1, 100 / 1e6]}
    # a window that swallows the next run's start (jump 5, payload at +2): the walk loop path
    rows2 = [("hcom_allGather_", 0, 1, "RDMASend", P, "RDMA", "ROCE", 1_000_000, 0, 1, 0, 10),
             ("hcom_allGather_", 0, 1, "RDMASend", N, "RDMA", "ROCE", 0, 0, 1, 10, 20),
             ("hcom_allGather_", 0, 1, "RDMASend", P, "RDMA", "ROCE", 1_000_000, 0, 1, 20, 30),
             ("hcom_allGather_", 0, 1, W, "RESERVED", "RDMA", "ROCE", 0, 0, 1, 30, 40),
             ("hcom_allGather_", 0, 1, W, "RESERVED", "RDMA", "ROCE", 0, 0, 1, 40, 70),
             ("hcom_allGather_", 0, 1, W, "RESERVED", "RDMA", "ROCE", 0, 0, 1, 70, 75)]
    info2 = an.communication(frame(rows2))["hcom_allGather_@g"]["Communication Time Info"]
    assert info2["Transit Time(ms)"] == 70 / 1e6 and info2["Wait Time(ms)"] == 5 / 1e6, info2
    # matrix: the link with dst 0xFFFFFFFF is shown as src-src; an invalid src is skipped
    rows3 = [("hcom_allReduce_", 0, 1, "Memcpy", "RESERVED", "SDMA", "ON_CHIP", 4_000_000, 2, 0xFFFFFFFF, 0, 1000),
             ("hcom_allReduce_", 0, 1, "Memcpy", "RESERVED", "SDMA", "HCCS", 4_000_000, 0xFFFFFFFF, 3, 1000, 2000)]
    m = an.communication_matrix(frame(rows3))
    assert m["hcom_allReduce_@g"] == {"2-2": {"Transport Type": "LOCAL", "Transit Size(MB)": 4.0,
                                              "Transit Time(ms)": 0.001, "Bandwidth(GB/s)": 4000.0}}


def test_op_without_master_task():
    rows = [("hcom_allReduce_", 0, 0, "Notify_Wait", "RESERVED", "SDMA", "HCCS", 0, 0, 1, 0, 10)]
    with pytest.raises(an.NoMasterTask, match="1 HCCL op\\(s\\) without a master task, e.g. hcom_allReduce_@g"):
        an.communication(frame(rows))
    assert an.communication_matrix(frame(rows)) == {"hcom_allReduce_@g": {}, an.TOTAL: {}}


def test_no_events_and_failed_write(tmp_path):
    empty = pd.DataFrame(columns=list(an.TASK_INFO_COLUMNS))
    with pytest.raises(NoData):
        an.hccl_events(empty, pd.DataFrame(columns=list(an.TASK_COLUMNS)))
    prof = tmp_path / "PROF"
    prof.mkdir()
    bad = {"communication": {"x": 1}, "communication_matrix": {"y": object()}}  # not JSON: fails on the 2nd file
    with pytest.raises(OutputError):
        an.write_analyze(str(prof), bad)
    assert not (prof / "analyze").exists(), "a failed write leaves nothing behind"
    (prof / "analyze").mkdir()
    (prof / "analyze" / "communication.json").write_text("old")
    with pytest.raises(OutputError):
        an.write_analyze(str(prof), bad)
    assert os.listdir(prof / "analyze") == ["communication.json"]
    assert (prof / "analyze" / "communication.json").read_text() == "old"
