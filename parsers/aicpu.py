"""AI CPU records of a device (device_N/data/aicpu.data.N.slice_M, 256 bytes each): the AICPU_NODE
kind (type 0), one per AI CPU kernel run (formats_more.md §3.1).

The file holds other record types too (data-preprocess, model, KFC/MC2 communication); only type
0 is decoded here, the others are counted and skipped. Times stay raw: device syscnt for the
ticks, µs for the *Time fields as the AI CPU scheduler reports them.
"""
from __future__ import annotations

from typing import Tuple

import numpy as np

from . import records
from .device import stars_ids
from .stream import Columns, Validity

AICPU_NODE_TYPE = 0  # header type of an AICPU_NODE record

AICPU_NODE = records.checked(records.Record("aicpu_node", [
    ("magic", "H", "0x5A5A"),
    ("level", "H", "6000 (AICPU)"),
    ("type", "I", "0 AICPU_NODE; other types are other AI CPU record kinds"),
    ("thread_id", "I", "reporter thread"),
    ("data_len", "I", "payload bytes (128 for AICPU_NODE)"),
    ("timestamp", "Q", "not used for AICPU_NODE"),
    ("stream_raw", "H", "stream id as the SQE carries it (STARS id rules, device_formats.md §3.2)"),
    ("task_raw", "H", "task id as the SQE carries it"),
    ("_rev", "4x", ""),
    ("run_start_time", "Q", "run start, µs (not used)"),
    ("run_start_tick", "Q", "run start, device syscnt; 0: the record is not a run and is dropped"),
    ("compute_start", "Q", "compute start, µs"),
    ("memcpy_start", "Q", "memcpy start, µs (compute time = memcpy_start - compute_start)"),
    ("memcpy_end", "Q", "memcpy end, µs (memcpy time = memcpy_end - memcpy_start)"),
    ("run_end_time", "Q", "run end, µs (not used)"),
    ("run_end_tick", "Q", "run end, device syscnt; 0 drops the record"),
    ("kernel_thread", "I", "AI CPU thread"),
    ("device_id", "I", "device id"),
    ("submit_tick", "Q", "submission, device syscnt (total time = tick_after_run - submit_tick)"),
    ("schedule_tick", "Q", "scheduling, device syscnt"),
    ("tick_before_run", "Q", "device syscnt"),
    ("tick_after_run", "Q", "device syscnt"),
    ("kernel_type", "I", "kernel type"),
    ("dispatch_time", "I", "dispatch time, µs"),
    ("total_time", "I", "total time as reported, µs (not used: recomputed from the ticks)"),
    ("ffts_thread", "H", "FFTS+ thread id"),
    ("version", "B", "record version"),
    ("_rsv", "113x", ""),
], size=256))

NODE_FIELDS = ("run_start_tick", "run_end_tick", "compute_start", "memcpy_start", "memcpy_end", "submit_tick",
               "tick_after_run", "dispatch_time")


def _aicpu_valid(arr: np.ndarray) -> np.ndarray:
    return arr["magic"] == records.HOST_MAGIC


#: the validity check of aicpu.data records, and what it asks for
AICPU_VALID: Tuple[Validity, str] = (_aicpu_valid, f"without magic 0x{records.HOST_MAGIC:04X}")


def aicpu_node_columns(arr: np.ndarray, offsets: np.ndarray) -> Tuple[Columns, int, int]:
    """AICPU_NODE runs of a chunk of aicpu.data records: (columns, records of other types, AICPU_NODE
    records without a start or end tick). Columns: stream_id and task_id (STARS rules), NODE_FIELDS
    as int64, offset (byte offset in the stream)."""
    node = arr["type"] == AICPU_NODE_TYPE
    run = node & (arr["run_start_tick"] != 0) & (arr["run_end_tick"] != 0)
    kept = arr[run]
    stream, task = stars_ids(kept["stream_raw"], kept["task_raw"])
    cols: Columns = {"stream_id": stream, "task_id": task, "offset": np.asarray(offsets)[run]}
    for name in NODE_FIELDS:
        cols[name] = kept[name].astype(np.int64)
    return cols, int((~node).sum()), int((node & ~run).sum())
