"""memory_record, operator_memory and static_op_mem: GE's operator memory (ingest/memory_ops.py).

Both reference paths write these three with the Python exporter (golden/README.md, 910b_memory),
so they look alike in either flavour: sizes in KB as Python's `round(bytes / 1024, 3)` repr
(`512.0`), timestamps as local µs with 3 decimals and a TAB, durations as `round(µs, 3)` repr.

memory_record and operator_memory are host data that the reference exports from every device
folder (its task_memory.db is looked up in the host's sqlite whichever folder asks), so each row
appears once per device of the collection, under that device's Device_id ('host' without any
device); its per-folder JSON holds the rows once, without Device_id. static_op_mem is exported
from the host folder only (Device_id 'host'); its size is GE's op_mem_size / 1024, which sqlite
keeps as an integer when it is whole (`64`) and as a real otherwise (`0.5`)."""
from __future__ import annotations

from typing import List, Optional

import numpy as np

from ...native_impl import trim_slot
from ..context import ExportContext
from .columns import Coded, Column, Rendered, Table, coded, ints, stamps

HOST = "host"


def kb_units(size: np.ndarray) -> np.ndarray:
    """Bytes as thousandths of KB, rounded as Python's round(bytes / 1024, 3) (half to even on the
    exact binary value: bytes / 1024 is exact in a double)."""
    b = np.asarray(size).astype(np.int64)
    q, r = np.divmod(b * 125, 128)  # b / 1024 * 1000
    return q + ((2 * r > 128) | ((2 * r == 128) & (q % 2 == 1)))


def _repr3(name: str, units: np.ndarray) -> Rendered:
    """Thousandths as Python's float repr of the rounded value ('512.0', '24.04')."""
    units = np.asarray(units, dtype=np.int64)
    return Rendered(name, lambda rows: trim_slot(units[rows], 3))


def device_ids(ctx: ExportContext) -> List[str]:
    """The Device_id texts the reference's merge gives a device folder's host-data rows: each
    device of the collection in the merge's folder order (device_0, device_1, device_10, device_2 ...),
    'host' when there is none."""
    ids = sorted(int(i) for i in ctx.frame("SELECT id FROM NPU_INFO")["id"] if int(i) >= 0) \
        if ctx.has("NPU_INFO") else []
    return sorted((str(i) for i in ids), key=lambda d: f"device_{d}") or [HOST]


def _per_device(ctx: ExportContext, n: int, json: bool) -> np.ndarray:
    """Row indexes repeated once per device (the rows once for the JSON file)."""
    return np.arange(n) if json else np.tile(np.arange(n), len(device_ids(ctx)))


def _device_column(ctx: ExportContext, n: int) -> List[Column]:
    ids = np.array(device_ids(ctx), dtype=object)
    return [Coded("Device_id", np.repeat(np.arange(len(ids)), n), ids)]


def _npu(devices: np.ndarray) -> Coded:
    """The Device column: 'NPU:<id>' of each row's device id."""
    labels, codes = np.unique(np.asarray(devices, dtype=np.int64), return_inverse=True)
    return Coded("Device", codes, np.array([f"NPU:{d}" for d in labels.tolist()], dtype=object))


def memory_record_table(ctx: ExportContext, json: bool = False) -> Optional[Table]:
    """memory_record: one GE row per task memory record (KIT_MEMORY_RECORD)."""
    if not ctx.has("KIT_MEMORY_RECORD"):
        return None
    f = ctx.frame("SELECT timestampNs, totalAllocate, totalReserve, deviceId FROM KIT_MEMORY_RECORD ORDER BY rowid")
    n = len(f)
    rows = _per_device(ctx, n, json)
    cols: List[Column] = [] if json else _device_column(ctx, n)
    cols += [coded("Component", np.full(len(rows), "GE", dtype=object)),
             stamps("Timestamp(us)", f["timestampNs"].to_numpy()[rows]),
             _repr3("Total Allocated(KB)", kb_units(f["totalAllocate"].to_numpy()[rows])),
             _repr3("Total Reserved(KB)", kb_units(f["totalReserve"].to_numpy()[rows])),
             _npu(f["deviceId"].to_numpy()[rows])]
    return Table(cols, len(rows))


def operator_memory_table(ctx: ExportContext, json: bool = False) -> Optional[Table]:
    """operator_memory: each allocation with its release (KIT_OPERATOR_MEMORY); one never
    released shows 0.0 as its duration and release totals, as the reference."""
    if not ctx.has("KIT_OPERATOR_MEMORY"):
        return None
    f = ctx.frame("SELECT * FROM KIT_OPERATOR_MEMORY ORDER BY rowid")
    n = len(f)
    rows = _per_device(ctx, n, json)

    def col(name: str) -> np.ndarray:
        return f[name].to_numpy()[rows]
    cols: List[Column] = [] if json else _device_column(ctx, n)
    cols += [coded("Name", col("name").astype(object)),
             _repr3("Size(KB)", kb_units(col("size"))),
             stamps("Allocation Time(us)", col("allocationNs")),
             _repr3("Duration(us)", col("durationNs")),
             _repr3("Allocation Total Allocated(KB)", kb_units(col("allocationTotalAllocate"))),
             _repr3("Allocation Total Reserved(KB)", kb_units(col("allocationTotalReserve"))),
             _repr3("Release Total Allocated(KB)", kb_units(col("releaseTotalAllocate"))),
             _repr3("Release Total Reserved(KB)", kb_units(col("releaseTotalReserve"))),
             _npu(f["deviceId"].to_numpy()[rows])]
    return Table(cols, len(rows))


def static_op_mem_table(ctx: ExportContext, json: bool = False) -> Optional[Table]:
    """static_op_mem: the static graphs' memory plans (KIT_STATIC_OP_MEM), from the host folder."""
    if not ctx.has("KIT_STATIC_OP_MEM"):
        return None
    f = ctx.frame("SELECT * FROM KIT_STATIC_OP_MEM ORDER BY rowid")
    n = len(f)
    size = f["size"].to_numpy().astype(np.int64)
    whole = size % 1024 == 0
    texts = np.where(whole, (size // 1024).astype(str), (size / 1024).astype(str)).astype(object)
    cols: List[Column] = [] if json else [coded("Device_id", np.full(n, HOST, dtype=object))]
    cols += [coded("Op Name", f["opName"].to_numpy().astype(object)),
             coded("Model Name", f["modelName"].to_numpy().astype(object)),
             ints("Graph ID", f["graphId"].to_numpy()), ints("Node Index Start", f["nodeIndexStart"].to_numpy()),
             ints("Node Index End", f["nodeIndexEnd"].to_numpy()), coded("Size(KB)", texts, number=True)]
    return Table(cols, n)


MEMORY_TABLES = (("memory_record", memory_record_table), ("operator_memory", operator_memory_table),
                 ("static_op_mem", static_op_mem_table))
