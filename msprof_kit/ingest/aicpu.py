"""AI CPU kernel runs (device aicpu.data AICPU_NODE records, formats_more.md §3.1) joined with their
AI CPU tasks into KIT_AICPU_NODE, as the reference's Python path joins them for aicpu.csv
(viewer/aicpu_viewer.py, which both paths run):

* a run belongs to a device task of the same (stream, task id) whose host type is KERNEL_AICPU;
  per (stream, task id), runs in start order and tasks in start order are walked together, and a
  run takes the task the walk stands on when the run's end lies in it (a task whose end is before
  the run's end is passed; a run that ends before the task starts is left unmatched);
* the matched task gives the run its batch id and globalTaskId, through which the summary names
  it (the op of that task in COMPUTE_TASK_INFO, when its GE task type is AI_CPU).

`AicpuTasks` notes the KERNEL_AICPU tasks while the device tasks are matched (a window at a
time); `write_aicpu` reads each device's aicpu.data a chunk at a time and writes the table. Only
AICPU_NODE records are read; the other types of aicpu.data are not (formats_more.md §4).
"""
from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

import numpy as np
import pandas as pd

from ..errors import Diagnostics
from ..layout import ResultDir, data_files
from ..parsers import aicpu as aicpu_parsers
from ..timebase import Clock
from .columns import frame_of
from .names import where_text
from .sink import TableSink
from .streams import RecordStream

KERNEL_AICPU = "KERNEL_AICPU"  # the host task type of an AI CPU kernel launch
STREAM = "aicpu.data"          # the device data kind (aicpu.data.N.slice_M)
TASK_FIELDS = ("stream_id", "task_id", "start_ns", "end_ns", "batch", "gid")


class AicpuTasks:
    """The device tasks whose host type is KERNEL_AICPU, per device, noted a window of matched
    tasks at a time (`take`). `type_texts`: the host/device task type texts by code."""

    def __init__(self, type_texts: np.ndarray) -> None:
        self.is_aicpu = where_text(type_texts, lambda k: k == KERNEL_AICPU)
        self.parts: List[Tuple[int, pd.DataFrame]] = []

    def take(self, device_id: int, host_type: np.ndarray, cols: Dict[str, np.ndarray]) -> None:
        """Note the window's KERNEL_AICPU tasks; `cols`: TASK_FIELDS, one value per task."""
        mine = self.is_aicpu[host_type]
        if mine.any():
            self.parts.append((device_id, frame_of({k: np.asarray(cols[k])[mine] for k in TASK_FIELDS})))

    def of_device(self, device_id: int) -> pd.DataFrame:
        """The noted tasks of one device, in the order they were noted (TASK order)."""
        frames = [f for d, f in self.parts if d == device_id]
        if not frames:
            return pd.DataFrame({k: np.zeros(0, np.int64) for k in TASK_FIELDS})
        return pd.concat(frames, ignore_index=True)


def walk_match(run_key: np.ndarray, run_end: np.ndarray, task_key: np.ndarray, task_start: np.ndarray,
               task_end: np.ndarray) -> np.ndarray:
    """The task each run takes (-1: none) in the reference's walk, for runs and tasks each in start
    order. Per key, the walk stands at run i on the first task (in start order) whose end is at
    least the largest run end so far; the run takes it when that task starts at or before the
    run's end. Vectorised: the queries (the running largest end) and the tasks (their running
    largest end) are sorted together by key and value, queries first on ties, and each query takes
    the next task of its key."""
    n, m = len(run_key), len(task_key)
    out: np.ndarray = np.full(n, -1, dtype=np.int64)
    if not n or not m:
        return out
    want = pd.Series(run_end).groupby(run_key, sort=False).cummax().to_numpy(np.int64)
    reach = pd.Series(task_end).groupby(task_key, sort=False).cummax().to_numpy(np.int64)
    key = np.concatenate([run_key, task_key])
    value = np.concatenate([want, reach])
    is_task = np.concatenate([np.zeros(n, np.int8), np.ones(m, np.int8)])
    pos = np.concatenate([np.arange(n), np.arange(m)])
    order = np.lexsort((pos, is_task, value, key))
    # for each sorted place, the sorted place of the next task at or after it
    place = np.where(is_task[order] == 1, np.arange(n + m), n + m)
    next_task = np.minimum.accumulate(place[::-1])[::-1]
    queries = np.flatnonzero(is_task[order] == 0)
    at = next_task[queries]
    found = at < n + m
    run = pos[order[queries]]
    cand = order[np.where(found, at, 0)]
    task = np.where(found, pos[cand], 0)  # (a task's position where found)
    found &= key[cand] == run_key[run]
    found &= task_start[task] <= run_end[run]
    out[run[found]] = task[found]
    return out


def _read_runs(paths: Sequence[str], diag: Diagnostics) -> Tuple[Dict[str, np.ndarray], int]:
    """The AICPU_NODE runs of one device's aicpu.data, read a chunk at a time: (columns, records
    without a start or end tick)."""
    stream = RecordStream(aicpu_parsers.AICPU_NODE, paths, *aicpu_parsers.AICPU_VALID)
    parts: List[Dict[str, np.ndarray]] = []
    no_tick = 0
    for arr, offsets in stream.chunks():
        cols, _, missing = aicpu_parsers.aicpu_node_columns(arr, offsets)
        no_tick += missing
        parts.append(cols)
    diag.extend(stream.issues)
    names = ("stream_id", "task_id") + aicpu_parsers.NODE_FIELDS
    return {k: np.concatenate([p[k] for p in parts]).astype(np.int64) if parts else np.zeros(0, np.int64)
            for k in names}, no_tick


def write_aicpu(devices: Sequence[Tuple[ResultDir, Clock]], tasks: AicpuTasks, put: TableSink,
                diag: Diagnostics) -> None:
    """KIT_AICPU_NODE from each device's aicpu.data (nothing where no device has one)."""
    frames: List[pd.DataFrame] = []
    for rd, clock in sorted(devices, key=lambda d: d[0].device_id):
        paths = data_files(rd, diag).get((STREAM, ""), [])
        if not paths:
            continue
        runs, no_tick = _read_runs(paths, diag)
        where = f"{rd.data_dir}/{STREAM}.{rd.device_id}.slice_N"
        if no_tick:
            diag.warn(f"{where}: {no_tick} AICPU_NODE records lack their run start or end tick; dropped, as the "
                      f"reference drops them")
        if not len(runs["stream_id"]):
            continue
        start = clock.to_ns(runs["run_start_tick"])
        end = clock.to_ns(runs["run_end_tick"])
        order = np.argsort(start, kind="stable")  # the reference reads the runs by start
        runs = {k: v[order] for k, v in runs.items()}
        start, end = start[order], end[order]
        dev_tasks = tasks.of_device(rd.device_id)
        t_order = np.argsort(dev_tasks["start_ns"].to_numpy(np.int64), kind="stable")
        t = {k: dev_tasks[k].to_numpy(np.int64)[t_order] for k in TASK_FIELDS}
        run_key = (runs["stream_id"] << 16) | runs["task_id"]
        task_key = (t["stream_id"] << 16) | t["task_id"]
        took = walk_match(run_key, end, task_key, t["start_ns"], t["end_ns"])
        hit = took >= 0
        lost = int((~hit).sum())
        if lost:
            diag.warn(f"{where}: {lost} of {len(hit)} AICPU_NODE records have no AI CPU task (KERNEL_AICPU) of their "
                      f"stream and task id whose run holds their end; they are kept in aicpu with node N/A")
        batch: np.ndarray = np.full(len(took), -1, dtype=np.int64)
        gid: np.ndarray = np.full(len(took), -1, dtype=np.int64)
        batch[hit] = t["batch"][took[hit]]
        gid[hit] = t["gid"][took[hit]]
        frames.append(frame_of({
            "deviceId": rd.device_id, "streamId": runs["stream_id"], "taskId": runs["task_id"],
            "startNs": start, "endNs": end,
            "computeUs": runs["memcpy_start"] - runs["compute_start"],
            "memcpyUs": runs["memcpy_end"] - runs["memcpy_start"],
            "dispatchUs": runs["dispatch_time"],
            "totalNs": clock.duration_ns(runs["tick_after_run"] - runs["submit_tick"]),
            "batchId": batch, "globalTaskId": gid}))
    if frames:
        put("KIT_AICPU_NODE", pd.concat(frames, ignore_index=True))
