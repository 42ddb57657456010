"""Communication at scale, part 2 (issue 25, "Speed"): the host's communication records spilled to
scratch and put together a column at a time (ingest/hccl.py), narrow task columns, the tables
written a small block at a time, and the timeline's Communication layer a writer chunk at a time:
the same results (hand-checked records; the golden communication exports with tiny blocks, both
twins through conftest)."""
from __future__ import annotations

import glob
import os
import sqlite3
import subprocess
import sys
from typing import cast

import numpy as np

from conftest import COMPARE, GOLDEN, copy_input, needs_shared

from msprof_kit import cli
from msprof_kit.exporters.timeline import communication, writer
from msprof_kit.ingest import hccl_ops, limits
from msprof_kit.ingest.api_windows import ApiWindows, bounded_edges
from msprof_kit.ingest.hccl import INFO_FIELDS, TRACK_COLUMNS, HcclHost, _narrowed
from msprof_kit.spill import Runs
from msprof_kit.timebase import Clock
from test_hccl_golden import rank_of


def test_narrowed_keeps_the_values_in_the_narrowest_type():
    assert _narrowed(np.array([0, 1, 127], np.int64)).dtype == np.int8
    assert _narrowed(np.array([-129, 5], np.int64)).dtype == np.int16
    assert _narrowed(np.array([0, 70000], np.int64)).dtype == np.int32
    assert _narrowed(np.array([0, 70000], np.uint32)).dtype == np.uint32  # int32 is no narrower
    assert _narrowed(np.array([1 << 40], np.int64)).dtype == np.int64
    assert _narrowed(np.array([0xFFFFFFFF], np.uint32)).dtype == np.uint32  # no narrower type holds it
    assert _narrowed(np.array([2.5])).dtype == np.float64
    assert _narrowed(np.array([300, -2], np.int64)).tolist() == [300, -2]


def _tracks(pos, api):
    n = len(pos)
    cols = {name: np.full(n, 7, np.int64) for name in TRACK_COLUMNS}
    cols["pos"], cols["api"] = np.array(pos, np.int64), np.array(api, np.int64)
    cols["host_ns"] = np.array(pos, np.int64) * 1000
    return cols


def _infos(pos, api):
    return {"api": np.array(api, np.int64), "pos": np.array(pos, np.int64)}


def _info_fields(items):
    """Every hccl_info record's fields in record order: `items` their item ids."""
    n = len(items)
    cols = {name: np.zeros(n, np.uint32) for name in INFO_FIELDS}
    cols["item_id"] = np.array(items, np.uint64)
    cols["duration_estimated"] = np.array(items, np.float64) / 4
    return cols


def test_host_records_spilled_and_put_together_by_record_position(tmp_path):
    """Two association windows whose records come out of position order: the tasks in record
    order, each with the last hccl_info under its API by position (API 20 has two: pos 12's, item
    5, wins over pos 4's), API 40's info without a track counted as untracked, API 30 without
    info; the records' fields read back by position from their own spill (two chunks, positions
    following on); the runs removed, the task columns spilled until closed."""
    host = HcclHost(cast(Clock, None), {}, str(tmp_path))
    items = [0] * 14
    items[12], items[2], items[4], items[13] = 5, 8, 6, 9
    host.add_info_fields(_info_fields(items[:5]))
    host.add_info_fields(_info_fields(items[5:]))
    host.tracks.add(_tracks([9, 3], [30, 20]))
    host.infos.add(_infos([12, 2], [20, 10]))
    host.tracks.add(_tracks([1], [10]))
    host.infos.add(_infos([4, 13], [20, 40]))
    assert os.listdir(tmp_path)
    data = host.finish()
    assert data is not None
    tasks = data.tasks
    assert tasks["api"].tolist() == [10, 20, 30]
    assert tasks["host_ns"].tolist() == [1000, 3000, 9000]
    assert tasks["item_id"].tolist() == [8, 5, 0]
    assert tasks["duration_estimated"].tolist() == [2.0, 1.25, 0.0]
    assert tasks["has_info"].tolist() == [1, 1, 0]
    assert tasks["stream_id"].dtype == np.int8 and tasks["item_id"].dtype == np.uint64
    assert "pos" not in tasks
    assert data.untracked == 1
    assert all(name.startswith("hccl.task.") for name in os.listdir(tmp_path))  # the task columns, spilled
    tasks.hold = True
    assert tasks["api"] is tasks["api"]
    tasks.close()
    assert os.listdir(tmp_path) == []


def test_no_communication_records(tmp_path):
    assert HcclHost(cast(Clock, None), {}, str(tmp_path)).finish() is None


@needs_shared
def test_910b_hccl_with_tiny_blocks(tmp_path, capsys, monkeypatch):
    """The import's task blocks and the timeline's Communication blocks far smaller than the case's
    134 tasks: the db, communication and timeline kinds still equal the golden ones, and the first
    op and its tasks as before."""
    monkeypatch.setattr(hccl_ops, "TASK_BLOCK", 16)
    monkeypatch.setattr(communication, "COMM_BLOCK", 7)
    monkeypatch.setattr(writer, "CHUNK", 5)
    prof = copy_input("910b_hccl", str(tmp_path))
    for argv in (["import"], ["export", "db"], ["export", "timeline"], ["analyze"]):
        assert cli.main([*argv, "-dir", prof]) == 0, argv
    capsys.readouterr()
    res = subprocess.run([sys.executable, COMPARE, prof, os.path.join(GOLDEN, "910b_hccl"), "--kinds",
                          "db,timeline,communication,communication_matrix"], capture_output=True, text=True)
    assert res.stdout.strip().splitlines()[-1].startswith("verdict: equal"), res.stdout
    conn = sqlite3.connect(os.path.join(prof, "sqlite", "msprof_kit.db"))
    first = conn.execute("SELECT opName, groupHash, groupIndex, cppOrder FROM KIT_HCCL_OP ORDER BY opId LIMIT 1").fetchone()
    assert first == ("hcom_allReduce__483_0_1", "7415574198778220483", 0, 12)
    assert conn.execute("SELECT COUNT(*), COUNT(DISTINCT opId), SUM(iteration) FROM KIT_HCCL_TASK").fetchone()[:2] == \
        (134, 13)
    names = conn.execute("SELECT COUNT(DISTINCT hcclName) FROM KIT_HCCL_TASK").fetchone()[0]
    distinct = conn.execute("SELECT COUNT(DISTINCT taskType) FROM COMMUNICATION_TASK_INFO").fetchone()[0]
    assert names == distinct > 1


@needs_shared
def test_910b_hccl_2ranks_timeline_with_tiny_blocks(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(communication, "COMM_BLOCK", 3)
    monkeypatch.setattr(writer, "CHUNK", 2)
    subprocess.run(["cp", "-a", os.path.join(GOLDEN, "910b_hccl_2ranks", "input") + "/.", str(tmp_path)], check=True)
    subprocess.run(["chmod", "-R", "u+w", str(tmp_path)], check=True)
    profs = {rank_of(p): p for p in glob.glob(os.path.join(str(tmp_path), "*", "PROF_*"))}
    assert sorted(profs) == [0, 1]
    for rank, prof in profs.items():
        assert cli.main(["export", "timeline", "-dir", prof]) == 0
        capsys.readouterr()
        res = subprocess.run([sys.executable, COMPARE, prof, os.path.join(GOLDEN, "910b_hccl_2ranks", f"cpp_rank{rank}"),
                              "--kinds", "timeline"], capture_output=True, text=True)
        assert res.stdout.strip().splitlines()[-1].startswith("verdict: equal"), (rank, res.stdout)


def test_windows_cut_by_tracks_as_well_as_by_apis():
    """The APIs' edges 40 and 80, and windows of at most 10 sampled track times: the tracks (dense
    before 30) cut at 10 and 20 first, then the APIs' edges are kept, no track being left for a
    cut; equal keys are never split (the window at 1 holds four); no tracks: the APIs' edges."""
    assert bounded_edges(np.array([40, 80]), np.arange(30), 10).tolist() == [10, 20, 40, 80]
    assert bounded_edges(np.array([15]), np.arange(30), 10).tolist() == [10, 15, 25]
    assert bounded_edges(np.zeros(0, np.int64), np.array([1, 1, 1, 1, 2, 3]), 2).tolist() == [1, 2]
    assert bounded_edges(np.array([5]), np.zeros(0, np.int64), 3).tolist() == [5]


def test_a_communication_collection_is_cut_by_its_tracks(tmp_path, monkeypatch):
    """ApiWindows.edges with the tracks' runs (1.35 APIs a track): windows of at most 1000 APIs
    and 400 tracks hold no more of either (of the tracks, give or take the sampling: one time in
    4 is kept), where the APIs alone let a window hold 740 tracks."""
    monkeypatch.setattr(limits, "WINDOW_TRACKS", 400)
    times = np.arange(0, 2700, dtype=np.int64) * 10
    apis = Runs(str(tmp_path), "a", "begin", 4)
    apis.add({"begin": np.sort(np.concatenate([times, times[::3] + 1]))[:2700]})
    tracks = Runs(str(tmp_path), "t", "timestamp", 4)
    tracks.add({"timestamp": times[:2000] + 2})
    windows = ApiWindows.__new__(ApiWindows)
    windows.runs = apis
    alone = windows.edges(1000)
    cut = windows.edges(1000, tracks)
    track_times, api_times = tracks.read("timestamp", 0, tracks.rows), apis.read("begin", 0, apis.rows)
    per_window = np.diff(np.searchsorted(track_times, np.concatenate([[0], cut, [1 << 40]])))
    assert per_window.max() <= 400 + 4 and 700 < np.diff(np.searchsorted(track_times, np.concatenate([[0], alone]))).max()
    assert np.diff(np.searchsorted(api_times, np.concatenate([[0], cut, [1 << 40]]))).max() <= 1000
    apis.close()
    tracks.close()
