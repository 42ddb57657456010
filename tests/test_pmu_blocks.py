"""ingest/pmu_blocks.py: FFTS PMU records attached to their tasks as pandas' merge_asof attached
them (ties of start and key to the last task, records after their task's end to none), the
carried tasks that can no longer hold records let go, and block PMU records summed per task and
core in windows as the whole collection would sum them."""
from __future__ import annotations

from fractions import Fraction
import os
from typing import Dict, List, Optional, Tuple

import numpy as np
import pandas as pd

from msprof_kit.arrays import last_seen
from msprof_kit.ingest import limits, pmu_blocks
from msprof_kit.ingest.columns import INVALID_CTX, frame_of
from msprof_kit.ingest.matching import match_keys
from msprof_kit.ingest.streams import RecordStream
from msprof_kit.parsers import device as device_parsers, records
from msprof_kit.spill import Runs
from msprof_kit.timebase import Clock

Columns = Dict[str, np.ndarray]


def _merge_asof_attach(carry: Optional[Columns], tasks: Columns, key: np.ndarray, t: np.ndarray) -> np.ndarray:
    """The definition attach keeps: merge_asof backward by key over the tasks sorted by start."""
    parts = [c for c in (carry, tasks) if c is not None]
    out = np.full(len(t), -1, dtype=np.int64)
    if not len(t):
        return out
    right = {k: np.concatenate([p[k] for p in parts]) for k in ("key", "start", "end", "row")}
    by_start = np.argsort(right["start"], kind="stable")
    left_order = np.argsort(t, kind="stable")
    m = pd.merge_asof(frame_of({"t": t[left_order], "k": key[left_order]}),
                      frame_of({"start": right["start"][by_start], "k": right["key"][by_start],
                                "end": right["end"][by_start], "row": right["row"][by_start]}),
                      left_on="t", right_on="start", by="k", direction="backward")
    row = m["row"].to_numpy()
    ok = ~np.isnan(row) & (m["t"].to_numpy() <= m["end"].fillna(-1).to_numpy())
    out[left_order[ok]] = row[ok].astype(np.int64)
    return out


def _tasks(rng: np.random.Generator, n: int, keys: int, span: int, base: int, ordered: bool) -> Columns:
    start = rng.integers(0, span, n)
    if ordered:
        start = np.sort(start)
    return {"key": rng.integers(0, keys, n), "start": start, "end": start + rng.integers(-2, 10, n),
            "row": base + np.arange(n)}


def test_attach_is_merge_asof_on_awkward_inputs():
    """Ties of start within a key, tasks that end before they begin, records before any task, of
    keys no task has, at a task's start and end, no tasks in the window (only a carry)."""
    rng = np.random.default_rng(27)
    for _ in range(2000):
        keys, span = int(rng.integers(1, 5)), int(rng.integers(1, 40))
        ordered = bool(rng.random() < 0.5)
        carry = _tasks(rng, int(rng.integers(0, 6)), keys, span, 1000, ordered) if rng.random() < 0.5 else None
        tasks = _tasks(rng, int(rng.integers(0, 30)), keys, span, 0, ordered)
        n = int(rng.integers(0, 30))
        key, t = rng.integers(0, keys + 1, n), rng.integers(-2, span + 10, n)
        got = pmu_blocks.attach(carry, tasks, key, t)
        assert (got == _merge_asof_attach(carry, tasks, key, t)).all()


def test_ending_after_keeps_the_tasks_open_at_the_edge():
    carry = {"key": np.array([1, 2, 3]), "end_ns": np.array([5, 10, 11])}
    assert pmu_blocks.ending_after(carry, None) is carry
    kept = pmu_blocks.ending_after(carry, 10)
    assert kept["key"].tolist() == [2, 3]


def _collection(rng: np.random.Generator, n: int) -> Tuple[Columns, Columns]:
    """Device tasks (TASK_COLUMNS, start_ns) and block PMU records, some lying in no task."""
    stream, task = rng.integers(0, 3, n), rng.integers(0, 6, n)
    ffts = rng.random(n) < 0.5
    ctx = np.where(ffts, rng.integers(0, 3, n), INVALID_CTX)
    start = np.sort(rng.integers(0, 40 * n, n))
    tasks = {"stream_id": stream, "task_id": task, "ctx": ctx, "start": start, "end": start + rng.integers(0, 60, n),
             "dev_type": np.zeros(n, np.int64), "tie": rng.integers(0, 3, n), "start_ns": start * 20}
    m = 6 * n
    of = rng.integers(0, n, m)
    end = tasks["start"][of] + rng.integers(-3, 70, m)
    blk = {"stream_id": stream[of], "task_id": task[of],
           "subtask_id": np.where(ffts[of], ctx[of], rng.integers(0, 3, m)),
           "ffts_type": np.where(ffts[of], device_parsers.FFTS_PLUS, 0).astype(np.uint8),
           "core_type": rng.integers(0, 3, m).astype(np.uint8), "total_cycle": rng.integers(0, 1000, m),
           "pmu": rng.integers(0, 1000, (m, 8)), "end_syscnt": end, "end_ns": end * 20}
    return tasks, blk


def _spilled(folder: str, prefix: str, cols: Columns, key: str, parts: int, sample: int = 0) -> Runs:
    runs = Runs(folder, prefix, key, sample)
    for piece in np.array_split(np.arange(len(cols[key])), parts):
        runs.add({k: v[piece] for k, v in cols.items()})
    return runs


def _whole_sums(tasks: Columns, blk: Columns) -> Dict[Tuple[int, int, int], np.ndarray]:
    """The record-by-record sums: each block record attached to the tasks of the whole collection
    at once (merge_asof), summed per (task key, task start, core type 0 or 1)."""
    order = np.lexsort((tasks["tie"], tasks["task_id"], tasks["stream_id"], tasks["start"]))
    whole = {"key": match_keys(tasks["stream_id"][order], tasks["task_id"][order], tasks["ctx"][order]),
             "start": tasks["start"][order], "end": tasks["end"][order], "row": np.arange(len(order))}
    bctx = np.where(blk["ffts_type"] == device_parsers.FFTS_PLUS, blk["subtask_id"], INVALID_CTX)
    row = _merge_asof_attach(None, whole, match_keys(blk["stream_id"], blk["task_id"], bctx), blk["end_syscnt"])
    want: Dict[Tuple[int, int, int], np.ndarray] = {}
    for i in np.flatnonzero((row >= 0) & (blk["core_type"] <= 1)):
        k = (int(whole["key"][row[i]]), int(whole["start"][row[i]]), int(blk["core_type"][i]))
        want[k] = want.get(k, np.zeros(9, np.int64)) + np.concatenate([[blk["total_cycle"][i]], blk["pmu"][i]])
    return want


def _raw_blocks(folder: str, blk: Columns, slices: int) -> List[str]:
    """The block records `blk` written as FFTS PMU records (128 bytes) to `slices` slice files."""
    arr = np.zeros(len(blk["end_syscnt"]), dtype=records.FFTS_PMU.dtype)
    arr["head"] = records.pack_bits(records.FFTS_PMU, "head", func_type=device_parsers.BLOCK_PMU)
    arr["stream_raw"], arr["task_raw"] = blk["stream_id"], blk["task_id"]
    arr["subtask_id"] = blk["subtask_id"]
    arr["word20"] = (blk["core_type"] & 1) | (blk["ffts_type"].astype(np.int64) << 13)
    arr["total_cycle"], arr["pmu"] = blk["total_cycle"], blk["pmu"]
    arr["start_syscnt"], arr["end_syscnt"] = blk["end_syscnt"] - 5, blk["end_syscnt"]
    paths = []
    for i, part in enumerate(np.array_split(arr, slices)):
        paths.append(os.path.join(folder, f"ffts_profile.data.0.slice_{i}"))
        part.tofile(paths[-1])
    return paths


def _grouped_sums(folder: str, tasks: Columns, blk: Columns, clock: Clock, chunk: int, core: np.ndarray,
                  slices: int = 2) -> Tuple[Dict[Tuple[int, int, int], np.ndarray], pmu_blocks.BlockGroups]:
    """block_sums of the records `blk` read from raw files `chunk` records at a time, grouped as the
    device's worker groups them (with core types `core`: those above 1 are dropped by the grouping,
    the files hold their low bit), per (task key, task start, core type)."""
    stream = RecordStream(records.FFTS_PMU, _raw_blocks(folder, blk, slices), *device_parsers.FFTS_VALID,
                          chunk_bytes=chunk * records.FFTS_PMU.size)
    groups = pmu_blocks.BlockGroups(folder, "blk", stream, clock)
    at = 0
    for arr, offsets in stream.chunks():
        cols = device_parsers.ffts_columns(arr, offsets)[1]
        cols["core_type"] = core[at:at + len(arr)].astype(np.uint8)
        at += len(arr)
        groups.add(cols)
    task_runs = _spilled(folder, "task", tasks, "start_ns", 3, sample=2)
    sums = pmu_blocks.block_sums(task_runs, groups, clock, folder, "sum")
    groups.close()
    sums.cut(np.zeros(0, np.int64))
    cols = sums.window(0)
    got: Dict[Tuple[int, int, int], np.ndarray] = {}
    for i in range(len(cols["key"]) if cols is not None else 0):
        assert cols is not None
        k = (int(cols["key"][i]), int(cols["start"][i]), int(cols["core_type"][i]))
        got[k] = got.get(k, np.zeros(9, np.int64)) + np.concatenate([[cols["total_cycle"][i]], cols["pmu"][i]])
    sums.close()
    task_runs.close()
    return got, groups


def test_block_sums_in_windows_are_the_whole_collection_s(tmp_path, monkeypatch):
    """Summed a window of a few tasks at a time from groups of records read a few at a time, the
    sums are those of every record attached to the tasks of the whole collection at once, per
    task and core type (0 or 1): groups summed whole, counting nowhere, taken apart (a task begins
    or ends among their records) and of two windows all met."""
    rng = np.random.default_rng(5)
    tasks, blk = _collection(rng, 300)
    clock = Clock(base_ticks=0, base_ns=0, mhz=Fraction(50))  # 20 ns a tick, as start_ns and end_ns
    core = blk["core_type"]
    blk["core_type"] = core & 1  # (what the files hold)
    want = _whole_sums(tasks, {**blk, "core_type": core})
    monkeypatch.setattr(limits, "TASK_ROWS", 16)
    got, groups = _grouped_sums(str(tmp_path), tasks, blk, clock, 200, core)
    assert len(got) > 50
    assert got.keys() == want.keys()
    assert all((got[k] == want[k]).all() for k in want)
    assert min(groups.whole, groups.nowhere, groups.apart, groups.straddling) > 0


def _task(stream: int, task: int, start: int, end: int, tie: int = 0) -> Columns:
    return {"stream_id": np.array([stream]), "task_id": np.array([task]), "ctx": np.array([INVALID_CTX]),
            "start": np.array([start]), "end": np.array([end]), "dev_type": np.zeros(1, np.int64),
            "tie": np.array([tie]), "start_ns": np.array([start * 20])}


def _blocks(stream: int, task: int, ends: List[int], core: int = 0) -> Columns:
    n = len(ends)
    return {"stream_id": np.full(n, stream), "task_id": np.full(n, task), "subtask_id": np.zeros(n, np.int64),
            "ffts_type": np.zeros(n, np.uint8), "core_type": np.full(n, core, np.uint8),
            "total_cycle": 1 + np.arange(n) * 7, "pmu": np.arange(8 * n).reshape(n, 8) * 3 + 1,
            "end_syscnt": np.array(ends), "end_ns": np.array(ends) * 20}


def _join(parts: List[Columns]) -> Columns:
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def test_hand_made_groups_take_every_branch(tmp_path, monkeypatch):
    """Groups of one read chunk: blocks straddling the reuse of a task id (a wrap: two tasks of one
    key), blocks past their task's end (a task ending inside a group), blocks of a task that lies
    across a window edge, blocks of no task, before their key's first task and all after their
    task's end (nowhere), two tasks of one key and start (the last wins), core type 2 (nowhere);
    summed as the whole collection's records are, whatever the windows and chunks."""
    tasks = _join([_task(1, 5, 100, 200), _task(1, 5, 300, 400),   # a task id used twice
                   _task(2, 6, 100, 150),                            # ends inside its blocks
                   _task(3, 7, 90, 5000),                            # across windows
                   _task(4, 8, 500, 600, 0), _task(4, 8, 500, 700, 1),  # tied starts
                   _task(5, 9, 1000, 1100)]
                  + [_task(6, i, 110 + 40 * i, 120 + 40 * i) for i in range(200)])  # (windows of a few tasks)
    blk = _join([_blocks(1, 5, [150, 190, 310, 390]), _blocks(1, 5, [160, 350], core=1),
                 _blocks(2, 6, [120, 140, 160, 170]),
                 _blocks(3, 7, [100, 2000, 4000, 4999]),
                 _blocks(4, 8, [510, 650, 690]),
                 _blocks(5, 9, [900, 950]), _blocks(5, 9, [1200, 1300]), _blocks(9, 9, [100, 200]),
                 _blocks(5, 9, [1010, 1020], core=1)]
                + [_blocks(6, i, [115 + 40 * i, 120 + 40 * i]) for i in range(0, 200, 3)])
    core = blk["core_type"].copy()
    core[-5:-3] = 2  # (blocks of task (5, 9) in its time: of core type 2, they count nowhere)
    clock = Clock(base_ticks=0, base_ns=0, mhz=Fraction(50))
    want = _whole_sums(tasks, {**blk, "core_type": core})
    monkeypatch.setattr(limits, "TASK_ROWS", 8)
    for chunk in (1000, 7, 1):
        got, groups = _grouped_sums(str(tmp_path), tasks, blk, clock, chunk, core, slices=3)
        assert got.keys() == want.keys()
        assert all((got[k] == want[k]).all() for k in want)
        if chunk == 1000:
            assert min(groups.whole, groups.nowhere, groups.apart, groups.straddling) > 0
    assert (want[(match_keys(np.array([4]), np.array([8]), np.array([INVALID_CTX]))[0], 500, 0)][0]
            == 1 + 8 + 15)  # (all three blocks to the tied task that ends last: the last of the tie)


def test_every_group_taken_apart_is_read_in_bounded_spans(tmp_path, monkeypatch):
    """When no group can be summed whole (tasks of one key begin among every group's records), the
    records are all read again, a span of a few records at a time, with the same sums."""
    n = 60
    tasks = _join([_task(1, 5, 10 * i, 10 * i + 4) for i in range(n)])
    blk = _join([_blocks(1, 5, [10 * i + 2, 10 * i + 3, 10 * i + 7]) for i in range(n)])
    clock = Clock(base_ticks=0, base_ns=0, mhz=Fraction(50))
    want = _whole_sums(tasks, blk)
    monkeypatch.setattr(limits, "TASK_ROWS", 1 << 20)
    monkeypatch.setattr(pmu_blocks, "GAP_BYTES", 256)
    monkeypatch.setattr(pmu_blocks, "SPAN_BYTES", 1024)
    got, groups = _grouped_sums(str(tmp_path), tasks, blk, clock, 50, blk["core_type"])
    assert groups.whole == groups.nowhere == 0 and groups.apart > 0
    assert got.keys() == want.keys()
    assert all((got[k] == want[k]).all() for k in want)


def test_gather_reads_spans_and_keeps_the_order():
    data = np.arange(1000) * 3
    reads: List[Tuple[int, int]] = []

    def read(lo: int, hi: int) -> np.ndarray:
        reads.append((lo, hi))
        return data[lo:hi]
    at = np.array([900, 3, 5, 500, 4, 999, 0, 501])
    assert (pmu_blocks._gather(read, at, 1, 10, 300) == data[at]).all()
    assert sorted(reads) == [(0, 6), (500, 502), (900, 901), (999, 1000)]


def test_latest_is_each_key_s_last_task_in_task_order():
    """KeyedTasks.latest keeps each key's last task of the carry and the window's, in their order,
    whether their starts ascend (carry before the window's) or not."""
    rng = np.random.default_rng(11)
    for _ in range(500):
        ordered = bool(rng.random() < 0.5)
        carry = _tasks(rng, int(rng.integers(0, 6)), 4, 20, 1000, ordered) if rng.random() < 0.5 else None
        tasks = _tasks(rng, int(rng.integers(0, 30)), 4, 20, 0, ordered)
        if ordered and carry is not None:
            carry["start"] = carry["start"] - 40
        both = {k: np.concatenate([p[k] for p in (carry, tasks) if p is not None]) for k in tasks}
        last = last_seen(both["key"])
        got = pmu_blocks.KeyedTasks(carry, tasks, ("key", "start", "end", "row")).latest()
        assert all((got[k] == both[k][last]).all() for k in both)
