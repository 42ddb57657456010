"""Device memory samples (formats_more.md §2.1-§2.2): `npu_mem.data` / `npu_mem.app` (32 bytes, the
Device or the APP's DDR and HBM use) and `npu_module_mem.data` (24 bytes, one module's reserved
memory). Pure decoders: records in, column arrays out."""
from __future__ import annotations

from typing import Tuple

import numpy as np

from .records import Record, checked
from .stream import Columns, Validity

NPU_MEM = checked(Record("npu_mem", [
    ("timestamp_v1", "I", "µs since the device start (dev_start.log's clock_monotonic_raw), info.json version 1.0"),
    ("event", "I", "0 = APP, 1 = Device"),
    ("timestamp_v2", "Q", "µs since the device start, info.json version 2.0"),
    ("ddr", "Q", "DDR bytes in use"),
    ("hbm", "Q", "HBM bytes in use"),
], size=32))

NPU_MODULE_MEM = checked(Record("npu_module_mem", [
    ("module_id", "I", "module id (ENUM_MODULE: 3 HCCL, 7 RUNTIME, 22 DEVMM, 33 APP, 45 GE ...)"),
    ("_rsv", "4x", ""),
    ("syscnt", "Q", "host counter ticks (converted with the device dir's host_start.log.N)"),
    ("total_size", "Q", "bytes reserved by the module"),
], size=24))

EVENT_APP, EVENT_DEVICE = 0, 1
MODULE_ID_LIMIT = 1024  # module ids are below this (ENUM_MODULE stops at 77): a larger one is misread


def _mem_valid(arr: np.ndarray) -> np.ndarray:
    return arr["event"] <= EVENT_DEVICE


def _module_valid(arr: np.ndarray) -> np.ndarray:
    return arr["module_id"] < MODULE_ID_LIMIT


NPU_MEM_VALID: Tuple[Validity, str] = (_mem_valid, "with an event other than 0 (APP) or 1 (Device)")
NPU_MODULE_MEM_VALID: Tuple[Validity, str] = (_module_valid, f"with a module id of {MODULE_ID_LIMIT} or more")


def npu_mem_columns(arr: np.ndarray, version: str) -> Columns:
    """event (0 APP, 1 Device), timestamp (µs since the device start: the u32 at offset 0, or the u64
    at offset 8 where info.json's version is "2.0"), ddr and hbm (bytes)."""
    ts = arr["timestamp_v2"] if version == "2.0" else arr["timestamp_v1"]
    return {"event": arr["event"].astype(np.int64), "timestamp": ts.astype(np.int64),
            "ddr": arr["ddr"].astype(np.int64), "hbm": arr["hbm"].astype(np.int64)}


def npu_module_mem_columns(arr: np.ndarray) -> Columns:
    """module_id, syscnt (host counter ticks) and total_size (bytes; -1 where the value does not fit
    a signed 64-bit integer, as the reference stores it)."""
    size = arr["total_size"]
    return {"module_id": arr["module_id"].astype(np.int64), "syscnt": arr["syscnt"].astype(np.int64),
            "total_size": np.where(size > np.iinfo(np.int64).max, -1, size.astype(np.int64))}
