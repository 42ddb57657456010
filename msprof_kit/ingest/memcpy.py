"""memcpy_info (host compact records, level 5000; the C++ layout of formats_more.md §3.3) joined
with the MEMCPY_ASYNC tasks into MEMCPY_INFO, as the reference's C++ path joins them
(csrc/domain/services/persistence/host/memcpy_info_dumper.cpp):

* a memcpy_info record belongs to the MEMCPY_ASYNC tasks whose task_track has the same thread and
  timestamp (the last record of a (thread, timestamp) wins);
* those tasks, in (batch, task id) order, split its dataSize: each takes maxSize until the rest is
  smaller; a task after the size is used up gets 0 bytes and operation 65535 ("other"), as a task
  without any record does; a direction above 7 is "other" too.

msprof-kit reads the MEMCPY_ASYNC tasks from the device tasks matched with a host track (noted by
`MemcpyTasks` while they are matched), so each row has the TASK row's globalTaskId; the reference
reads its host task table, so a MEMCPY_ASYNC track with no device task would get a row (and a
globalTaskId of its own) there and gets none here (docs/store.md).
"""
from __future__ import annotations

from typing import Dict, List

import numpy as np
import pandas as pd

from ..errors import Diagnostics
from ..layout import Collection, data_files
from ..parsers import host as host_parsers
from .clocks import host_clock_of
from .columns import frame_of
from .names import group_paths, where_text
from .sink import TableSink
from .streams import compact_stream

MEMCPY_ASYNC = "MEMCPY_ASYNC"
KIND = "memcpy_info"
LAST_OPERATION = 7      # directions 0..7 have names (ENUM_MEMCPY_OPERATION)
OTHER_OPERATION = 65535  # "other": an unknown direction, or no record for the task
TASK_FIELDS = ("thread_id", "ts_ns", "batch", "task_id", "gid")


class MemcpyTasks:
    """The matched device tasks whose host type is MEMCPY_ASYNC, noted a window at a time (`take`).
    `type_texts`: the host/device task type texts by code."""

    def __init__(self, type_texts: np.ndarray) -> None:
        self.is_memcpy = where_text(type_texts, lambda k: k == MEMCPY_ASYNC)
        self.parts: List[pd.DataFrame] = []

    def take(self, matched: np.ndarray, host_type: np.ndarray, cols: Dict[str, np.ndarray]) -> None:
        """Note the window's matched MEMCPY_ASYNC tasks; `cols`: TASK_FIELDS, one value per task
        (thread_id and ts_ns: the host track's)."""
        mine = matched & self.is_memcpy[host_type]
        if mine.any():
            self.parts.append(frame_of({k: np.asarray(cols[k])[mine].astype(np.int64) for k in TASK_FIELDS}))

    def frame(self) -> pd.DataFrame:
        """The noted tasks (TASK_FIELDS), in TASK order."""
        if not self.parts:
            return pd.DataFrame({k: np.zeros(0, np.int64) for k in TASK_FIELDS})
        return pd.concat(self.parts, ignore_index=True)


def _records(coll: Collection, diag: Diagnostics) -> pd.DataFrame:
    """The host's memcpy_info records (unaging, then aging) with their times in local ns."""
    assert coll.host is not None
    rd = coll.host
    parts: List[pd.DataFrame] = []
    for _, paths in group_paths(data_files(rd, diag), KIND):
        stream = compact_stream(KIND, paths)
        for arr, offsets in stream.chunks():
            c = host_parsers.compact_columns(KIND, arr, offsets)
            parts.append(frame_of({"thread_id": c["thread_id"].astype(np.int64),
                                   "timestamp": c["timestamp"].astype(np.int64),
                                   "data_size": c["data_size"].astype(np.int64),
                                   "max_size": c["max_size"].astype(np.int64),
                                   "direction": c["direction"].astype(np.int64)}))
        diag.extend(stream.issues)
    if not parts:
        return pd.DataFrame()
    records = pd.concat(parts, ignore_index=True)
    clock = host_clock_of(rd, coll, Diagnostics())  # (its warnings are the host import's)
    records["ts_ns"] = clock.to_ns(records["timestamp"].to_numpy())
    return records


def left_for(data_size: np.ndarray, max_size: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Bytes of a record left when its k-th task (0-based) comes (the reference's remainSize):
    each task before took maxSize, or the rest when less was left. A maxSize of 0 leaves the
    whole size to every task (which takes 0 bytes of it)."""
    taken = np.minimum(k, data_size // np.maximum(max_size, 1) + 1) * max_size  # (no overflow)
    return np.maximum(data_size - taken, 0)


def write_memcpy(coll: Collection, tasks: MemcpyTasks, put: TableSink, diag: Diagnostics) -> None:
    """MEMCPY_INFO: one row per matched MEMCPY_ASYNC task, in (batch, task id) order, when the host
    has memcpy_info records (none otherwise, as the reference writes none)."""
    if coll.host is None:
        return
    records = _records(coll, diag)
    if records.empty:
        return
    where = f"{coll.host.data_dir}/*.{KIND}.slice_N"
    records = records.drop_duplicates(["thread_id", "ts_ns"], keep="last")
    t = tasks.frame()
    t = t.iloc[np.lexsort((t["task_id"].to_numpy(), t["batch"].to_numpy()))].reset_index(drop=True)
    joined = t.merge(records, on=["thread_id", "ts_ns"], how="left", indicator=True)
    found = (joined["_merge"] == "both").to_numpy()
    k = joined.groupby(["thread_id", "ts_ns"], sort=False).cumcount().to_numpy(np.int64)
    data_size = joined["data_size"].fillna(0).to_numpy(np.int64)
    max_size = joined["max_size"].fillna(0).to_numpy(np.int64)
    direction = joined["direction"].fillna(OTHER_OPERATION).to_numpy(np.int64)
    left = left_for(data_size, max_size, k)
    size = np.where(found, np.minimum(left, max_size), 0)
    operation = np.where(found & (left > 0) & (direction <= LAST_OPERATION), direction, OTHER_OPERATION)
    no_record = int((~found).sum())
    if no_record:
        diag.warn(f"{where}: {no_record} of {len(found)} MEMCPY_ASYNC tasks have no memcpy_info record of their "
                  f"thread and time; they are kept with size 0 and operation 'other', as the reference keeps them")
    used = pd.MultiIndex.from_frame(t[["thread_id", "ts_ns"]])
    orphans = int((~pd.MultiIndex.from_frame(records[["thread_id", "ts_ns"]]).isin(used)).sum())
    if orphans:
        diag.warn(f"{where}: {orphans} of {len(records)} memcpy_info records have no MEMCPY_ASYNC task with their "
                  f"thread and time; their sizes are left out of MEMCPY_INFO and the timeline")
    if len(joined):
        put("MEMCPY_INFO", frame_of({"globalTaskId": joined["gid"].to_numpy(np.int64), "size": size,
                                     "memcpyOperation": operation}))
