"""task_time (outputs.md §7.1): one row per device task, FFTS+ subtasks grouped."""
from __future__ import annotations

from typing import List, Optional, Tuple

import numpy as np

from ...arrays import group_ids, in_marked_groups
from ..context import ExportContext
from .cells import NA
from .columns import BlockTable, Column, coded, coded_numbers, durations, ints, stamps
from .tasks import INVALID_CONTEXT, Tasks, keep_after_start, ordered, session_start


def _task_time_keep(device: np.ndarray, stream: np.ndarray, task: np.ndarray, batch: np.ndarray,
                    ctx_id: np.ndarray) -> np.ndarray:
    """Tasks grouped by (device, stream, task id, batch): a single task stays; a group holding a
    context id other than 0 is FFTS+ and goes; a group holding context 0 (MIX) keeps only that one;
    any other group (a static graph executed repeatedly) stays whole. Only the groups holding a
    task with a context id are grouped: every other task stays."""
    keep: np.ndarray = np.ones(len(ctx_id), dtype=bool)
    marked = ctx_id != INVALID_CONTEXT
    if not marked.any():
        return keep
    keys = [device, stream, task, batch]
    at = np.flatnonzero(in_marked_groups(keys, marked))
    del marked
    group = group_ids([k[at] for k in keys])
    ctx_id = ctx_id[at]
    size = np.bincount(group)
    ffts = np.bincount(group, weights=(ctx_id != 0) & (ctx_id != INVALID_CONTEXT)) > 0
    zero = np.bincount(group, weights=ctx_id == 0) > 0
    keep[at] = (size[group] == 1) | (~ffts[group] & (~zero[group] | (ctx_id == 0)))
    return keep


class Kernels:
    """KIT_TASK's kernel names of the tasks: a code per TASK row into `names` (-1: none), read at
    the rows asked for; none for a store without them."""

    def __init__(self, ctx: ExportContext, tasks: Tasks) -> None:
        kit = ctx.stored("KIT_TASK")
        labels = kit.labels("kernelName") if len(kit) == tasks.stored and "kernelName" in kit else None
        self.kit = kit if labels is not None else None
        self.names = labels if labels is not None else np.array([""], dtype=object)
        self.has_name = np.array([bool(k) for k in self.names.tolist()], dtype=bool)

    def of(self, rows: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """(kernel name, whether there is one) of these TASK rows."""
        if self.kit is None:
            return np.full(len(rows), "", dtype=object), np.zeros(len(rows), dtype=bool)
        code: np.ndarray = self.kit.take("kernelName", rows).astype(np.int64)
        return self.names[np.maximum(code, 0)], self.has_name[np.maximum(code, 0)] & (code >= 0)


def _batches(ctx: ExportContext, tasks: Tasks) -> np.ndarray:
    """KIT_TASK's batch id per task (zeros for a store without it)."""
    kit = ctx.stored("KIT_TASK")
    if len(kit) != tasks.stored or "batchId" not in kit:
        return np.zeros(len(tasks), dtype=np.int64)
    batch = kit.read("batchId")
    return batch if tasks.row is None else batch[tasks.row]


def task_time_table(ctx: ExportContext, tasks: Tasks, flavour: str) -> Optional[BlockTable]:
    """One row per device task (§7.1), by start time (C++) or by device and start time (Python)."""
    keep = _task_time_keep(tasks.stored_col("deviceId"), tasks.stored_col("streamId"), tasks.stored_col("taskId"),
                           _batches(ctx, tasks), tasks.col("contextId"))
    begin = session_start(ctx)
    for at in tasks.spans():
        keep[at] &= keep_after_start(tasks.col("startNs", at), tasks.col("endNs", at), begin, flavour)
    if not keep.any():
        return None
    idx = ordered(tasks, np.flatnonzero(keep), by_device=flavour != "cpp")
    del keep
    devices = len(np.unique(tasks.col("deviceId", idx)))
    kernels = Kernels(ctx, tasks)

    def block(lo: int, hi: int) -> List[Column]:
        at = idx[lo:hi]
        b_start, b_end = tasks.col("startNs", at), tasks.col("endNs", at)
        kernel, named = kernels.of(tasks.rows(at))
        if tasks.info is not None:
            op_name = tasks.text(tasks.info_ids("name", at))
            ge_type = tasks.text(tasks.info_ids("taskType", at))
        else:
            op_name = ge_type = np.full(len(at), NA, dtype=object)
        # kernel_name: the runtime's kernel name, else the op name; kernel_type: the op's task type,
        # else the task's own (host runtime type, or the device's for a task no host record launched)
        name = np.where(named, kernel, op_name)
        kind = np.where(ge_type != NA, ge_type, tasks.text(tasks.col("taskType", at)))
        return [
            coded_numbers("Device_id", tasks.col("deviceId", at)),
            coded("kernel_name", name),
            coded("kernel_type", kind),
            ints("stream_id", tasks.col("streamId", at)),
            ints("task_id", tasks.col("taskId", at)),
            durations("task_time(us)", b_end - b_start, flavour),
            stamps("task_start(us)", b_start),
            stamps("task_stop(us)", b_end),
        ]

    return BlockTable(block, len(idx), counts={"Device_id": devices})
