"""aicpu (formats_more.md §3.1; outputs.md: the aicpu columns): one row per AI CPU kernel run of
KIT_AICPU_NODE, as the reference's Python exporter writes it in both paths
(viewer/aicpu_viewer.py): the run start as a timestamp, the node (the op of the AI CPU task it
was matched with, when that op's GE task type is AI_CPU; N/A otherwise), compute and memcpy time
as the AI CPU scheduler recorded them, the run (task) time, dispatch time and the total from
submission to the end of the run, all µs printed as Python floats rounded to 3 decimals.

Runs that start before the collection start are left out; an iteration export keeps the runs
inside the device's iterations (start and end). Rows by device, then start."""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..context import ExportContext
from .cells import NA
from .columns import Table, coded, durations, ints, stamps
from .tasks import device_rank, session_start

COLUMNS = ("deviceId", "streamId", "taskId", "startNs", "endNs", "computeUs", "memcpyUs", "dispatchUs", "totalNs",
           "globalTaskId")
AI_CPU = "AI_CPU"  # the GE task type of an AI CPU op
US = 1000          # ns per µs


def _node_names(ctx: ExportContext, gid: np.ndarray, strings: np.ndarray) -> np.ndarray:
    """The op name of each run's task (COMPUTE_TASK_INFO by globalTaskId, GE task type AI_CPU),
    N/A where there is none."""
    out: np.ndarray = np.full(len(gid), NA, dtype=object)
    if not ctx.has("COMPUTE_TASK_INFO") or not len(gid):
        return out
    info = ctx.ints("COMPUTE_TASK_INFO", ("globalTaskId", "name", "taskType"))
    order = np.argsort(info["globalTaskId"], kind="stable")
    keys = info["globalTaskId"][order]
    if not len(keys):
        return out
    pos = np.minimum(np.searchsorted(keys, gid), len(keys) - 1)
    row = order[pos]
    found = (gid >= 0) & (keys[pos] == gid)
    texts = np.append(strings, NA).astype(object)
    last = len(strings)
    name_id = np.where(found, info["name"][row], last)
    type_id = np.where(found, info["taskType"][row], last)
    name_id = np.where((name_id >= 0) & (name_id < last), name_id, last)
    type_id = np.where((type_id >= 0) & (type_id < last), type_id, last)
    ok = found & (texts[type_id] == AI_CPU)
    out[ok] = texts[name_id[ok]]
    return out


def aicpu_table(ctx: ExportContext, strings: np.ndarray) -> Optional[Table]:
    """The aicpu rows of the runs in scope; None without KIT_AICPU_NODE rows."""
    if not ctx.has("KIT_AICPU_NODE"):
        return None
    rows = ctx.conn.execute(f"SELECT {', '.join(COLUMNS)} FROM KIT_AICPU_NODE ORDER BY rowid").fetchall()
    arr = np.array(rows, dtype=np.int64).reshape(len(rows), len(COLUMNS))
    c = {name: arr[:, j] for j, name in enumerate(COLUMNS)}
    keep: np.ndarray = np.ones(len(arr), dtype=bool)
    begin = session_start(ctx)
    if begin is not None:
        keep &= c["startNs"] >= begin
    if not ctx.scope.all_export:
        inside: np.ndarray = np.zeros(len(arr), dtype=bool)
        for dev, (lo, hi) in ctx.scope.windows.items():
            inside |= (c["deviceId"] == dev) & (c["startNs"] >= lo) & (c["endNs"] <= hi)
        keep &= inside
    if not keep.any():
        return None
    c = {k: v[keep] for k, v in c.items()}
    order = np.lexsort((c["startNs"], device_rank(c["deviceId"])))
    c = {k: v[order] for k, v in c.items()}
    return Table([ints("Device_id", c["deviceId"]),
                  stamps("Timestamp(us)", c["startNs"]),
                  coded("Node", _node_names(ctx, c["globalTaskId"], strings)),
                  durations("Compute_time(us)", c["computeUs"] * US, "python"),
                  durations("Memcpy_time(us)", c["memcpyUs"] * US, "python"),
                  durations("Task_time(us)", c["endNs"] - c["startNs"], "python"),
                  durations("Dispatch_time(us)", c["dispatchUs"] * US, "python"),
                  durations("Total_time(us)", c["totalNs"], "python"),
                  ints("Stream ID", c["streamId"]),
                  ints("Task ID", c["taskId"])], len(c["deviceId"]))
