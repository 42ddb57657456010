"""Issue 25, the timeline of communication: the Communication process (group and plane threads, op
and task slices with the reference's args), the HostToDevice arrows that end at the ops, and the
Overlap Analysis lanes Communication / Communication(Not Overlapped), against the golden exports of
910b_hccl (whole and model 1 iteration 2) and of each rank of 910b_hccl_2ranks."""
from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
from collections import Counter, defaultdict
from typing import Dict, List, Tuple

import numpy as np
import pytest

from conftest import COMPARE, GOLDEN, copy_input, needs_shared

from msprof_kit import cli
from msprof_kit.intervals import interval_gaps, subtract_intervals

pytestmark = needs_shared

sys.path.insert(0, os.path.dirname(COMPARE))
import compare_exports  # noqa: E402  (the shared tool's own reading of traces)

# Lanes this work writes; the others (and the CANN events' Mode of level-5500 APIs, which KIT_API
# carries, and the step-trace events of steps.py) are other branches' and the verdict test's.
MINE = ("Communication", "Overlap Analysis")


def export_timeline(prof: str, *extra: str) -> List[dict]:
    assert cli.main(["export", "timeline", "-dir", prof, *extra]) == 0
    out = os.path.join(prof, "mindstudio_profiler_output")
    return compare_exports.load_trace(sorted(glob.glob(os.path.join(out, "msprof_*.json"))))


def golden_trace(folder: str) -> List[dict]:
    return compare_exports.load_trace(sorted(glob.glob(os.path.join(folder, "msprof*.json"))))


def my_events(events: List[dict]) -> Tuple[Counter, Counter, Dict[Tuple[str, str], List[str]]]:
    """(X events of MINE keyed by lane, name, ts and args; flows that end in MINE as (start lane,
    start ts, end lane, end ts) the way compare_exports pairs them; the thread names by process)."""
    proc, thread = compare_exports.names(events)
    xs: Counter = Counter()
    lanes: Dict[Tuple[str, str], List[str]] = defaultdict(list)
    starts, ends = {}, {}
    for e in events:
        where = compare_exports.lane(e, proc, thread)
        if e.get("ph") == "X" and where[0].split(" [")[0] in MINE:
            args = {k: str(v) for k, v in (e.get("args") or {}).items() if k != "connection_id"}
            xs[(where, e["name"], compare_exports.ts(e), float(e.get("dur", 0)), json.dumps(args, sort_keys=True))] += 1
        elif e.get("ph") == "s":
            starts[e["id"]] = (where, compare_exports.ts(e))
        elif e.get("ph") == "f":
            ends[e["id"]] = (where, compare_exports.ts(e))
    for (pid, tid), name in thread.items():
        if proc.get(pid, "").startswith("Communication"):
            lanes[(proc[pid], name)].append(str(tid))
    flows = Counter((starts[i], ends[i]) for i in starts if i in ends and ends[i][0][0].split(" [")[0] in MINE)
    return xs, flows, lanes


def assert_mine_equal(ours: List[dict], gold: List[dict]) -> None:
    oxs, oflows, olanes = my_events(ours)
    gxs, gflows, glanes = my_events(gold)
    assert sorted(olanes) == sorted(glanes)
    assert sum(gxs.values()) > 0
    assert oxs - gxs == Counter() and gxs - oxs == Counter(), (list((oxs - gxs).items())[:5],
                                                                 list((gxs - oxs).items())[:5])
    assert oflows == gflows


def rank_prof(case_dir: str, rank: int) -> str:
    for info in glob.glob(os.path.join(case_dir, "CLUSTER_*", "PROF_*", "device_*", "info.json*")):
        with open(info, encoding="utf-8") as f:
            if json.load(f).get("rank_id") == rank:
                return os.path.dirname(os.path.dirname(info))
    raise AssertionError(f"no PROF of rank {rank}")


def test_whole_export_communication_lanes(tmp_path, capsys):
    prof = copy_input("910b_hccl", str(tmp_path))
    ours = export_timeline(prof)
    capsys.readouterr()
    assert_mine_equal(ours, golden_trace(os.path.join(GOLDEN, "910b_hccl", "cpp")))


def test_iteration_export_communication_lanes(tmp_path, capsys):
    prof = copy_input("910b_hccl", str(tmp_path))
    ours = export_timeline(prof, "--model-id", "1", "--iteration-id", "2")
    capsys.readouterr()
    assert_mine_equal(ours, golden_trace(os.path.join(GOLDEN, "910b_hccl", "cpp_model1_iter2")))


@pytest.mark.parametrize("rank", [0, 1])
def test_each_rank_communication_lanes(rank, tmp_path, capsys):
    src = os.path.join(GOLDEN, "910b_hccl_2ranks", "input")
    subprocess.run(["cp", "-a", src + "/.", str(tmp_path)], check=True)
    subprocess.run(["chmod", "-R", "u+w", str(tmp_path)], check=True)
    ours = export_timeline(rank_prof(str(tmp_path), rank))
    capsys.readouterr()
    assert_mine_equal(ours, golden_trace(os.path.join(GOLDEN, "910b_hccl_2ranks", f"cpp_rank{rank}")))


def test_hand_checked_numbers(tmp_path, capsys):
    """Thread layout, a task's bandwidth, an op's arrow and the renumbered ops of an iteration export."""
    prof = copy_input("910b_hccl", str(tmp_path))
    ours = export_timeline(prof)
    capsys.readouterr()
    proc, thread = compare_exports.names(ours)
    comm = [pid for pid, name in proc.items() if name == "Communication [NPU 0]"]
    assert len(comm) == 1
    tids = {name: tid for (pid, tid), name in thread.items() if pid == comm[0] and name.startswith("Group")}
    # hccl_world_group (planes 0 and 1) first: its ops on tid 0, planes on 1 and 2; the RoCE group next
    assert tids == {"Group hccl_world_group Communication": 0,
                    "Group 10.20.0.1%enp189s0f0_60000_0_1700902984 Communication": 3}
    memcpy = [e for e in ours if e.get("ph") == "X" and e["pid"] == comm[0] and e["name"] == "Memcpy"
              and e["ts"] == "1700902984100511.400"]
    assert len(memcpy) == 1
    # 1 MiB in 18.36 µs: 1048576 / 18360 B/ns
    assert memcpy[0]["args"]["bandwidth(GB/s)"] == 1048576 / 18360 == 57.1119825708061
    assert memcpy[0]["tid"] == 1 and memcpy[0]["args"]["duration estimated(us)"] == 42.943
    first_op = [e for e in ours if e.get("ph") == "X" and e.get("name") == "hcom_allReduce__483_0_1"][0]
    assert first_op["args"]["relay"] == "no" and first_op["args"]["data_type"] == "FP32"
    ends = [e for e in ours if e.get("ph") == "f" and e["pid"] == comm[0] and e["ts"] == first_op["ts"]]
    assert [int(e["id"]) >> 32 for e in ends] == [first_op["args"]["connection_id"]]

    prof2 = copy_input("910b_hccl", str(tmp_path / "iter"))
    it = export_timeline(prof2, "--model-id", "1", "--iteration-id", "2")
    capsys.readouterr()
    ops = sorted(e["name"] for e in it if e.get("ph") == "X" and "rank_size" in (e.get("args") or {}))
    assert ops == ["hcom_allReduce__483_0_1", "hcom_allReduce__483_1_1"]  # the whole export's _6_1 and _7_1
    estimated = {e["args"]["duration estimated(us)"] for e in it if "notify_id" in (e.get("args") or {})}
    assert 1 in estimated and all(not (isinstance(v, float) and v.is_integer()) for v in estimated)


def test_intersection_by_hand():
    """A intersected with B, as A minus B's gaps (the overlap layer's Communication(Not Overlapped) is
    communication minus computing with the same subtract_intervals)."""
    a_s, a_e = np.array([0, 50]), np.array([30, 60])
    b_s, b_e = np.array([10, 25, 55]), np.array([20, 52, 70])
    s, e = subtract_intervals(a_s, a_e, *interval_gaps(-100, 100, b_s, b_e))
    assert s.tolist() == [10, 25, 50, 55] and e.tolist() == [20, 30, 52, 60]
