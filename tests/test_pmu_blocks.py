"""ingest/pmu_blocks.py: FFTS PMU records attached to their tasks as pandas' merge_asof attached
them (ties of start and key to the last task, records after their task's end to none), the
carried tasks that can no longer hold records let go, and block PMU records summed per task and
core in windows as the whole collection would sum them."""
from __future__ import annotations

from fractions import Fraction
from typing import Dict, Optional, Tuple

import numpy as np
import pandas as pd

from msprof_kit.arrays import last_seen
from msprof_kit.ingest import limits, pmu_blocks
from msprof_kit.ingest.columns import INVALID_CTX, frame_of
from msprof_kit.ingest.matching import match_keys
from msprof_kit.parsers import device as device_parsers
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


def test_block_sums_in_windows_are_the_whole_collection_s(tmp_path, monkeypatch):
    """Summed a window of a few tasks at a time, the sums are those of every record attached to
    the tasks of the whole collection at once, per task and core type (0 or 1)."""
    rng = np.random.default_rng(5)
    tasks, blk = _collection(rng, 300)
    clock = Clock(base_ticks=0, base_ns=0, mhz=Fraction(50))  # 20 ns a tick, as start_ns and end_ns
    order = np.lexsort((tasks["tie"], tasks["task_id"], tasks["stream_id"], tasks["start"]))
    whole = {"key": match_keys(tasks["stream_id"][order], tasks["task_id"][order], tasks["ctx"][order]),
             "start": tasks["start"][order], "end": tasks["end"][order], "row": np.arange(len(order))}
    bctx = np.where(blk["ffts_type"] == device_parsers.FFTS_PLUS, blk["subtask_id"], INVALID_CTX)
    row = _merge_asof_attach(None, whole, match_keys(blk["stream_id"], blk["task_id"], bctx), blk["end_syscnt"])
    want: Dict[Tuple[int, int, int], np.ndarray] = {}
    for i in np.flatnonzero((row >= 0) & (blk["core_type"] <= 1)):
        k = (int(whole["key"][row[i]]), int(whole["start"][row[i]]), int(blk["core_type"][i]))
        want[k] = want.get(k, np.zeros(9, np.int64)) + np.concatenate([[blk["total_cycle"][i]], blk["pmu"][i]])
    monkeypatch.setattr(limits, "TASK_ROWS", 16)
    got: Dict[Tuple[int, int, int], np.ndarray] = {}
    task_runs = _spilled(str(tmp_path), "task", tasks, "start_ns", 3, sample=2)
    sums = pmu_blocks.block_sums(task_runs, _spilled(str(tmp_path), "blk", blk, "end_ns", 4), clock,
                                 str(tmp_path), "sum")
    sums.cut(np.zeros(0, np.int64))
    cols = sums.window(0)
    assert cols is not None
    for i in range(len(cols["key"])):
        k = (int(cols["key"][i]), int(cols["start"][i]), int(cols["core_type"][i]))
        got[k] = got.get(k, np.zeros(9, np.int64)) + np.concatenate([[cols["total_cycle"][i]], cols["pmu"][i]])
    assert len(got) > 50
    assert got.keys() == want.keys()
    assert all((got[k] == want[k]).all() for k in want)


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
