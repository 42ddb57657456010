"""npu_mem and npu_module_mem (formats_more.md §2.1-§2.2), streamed from NPU_MEM / NPU_MODULE_MEM a
block of rows at a time, so a collection of millions of samples is never held whole.

Both follow the reference's C++ assemblers (summary/npu_memory_assembler.cpp,
npu_module_mem_assembler.cpp), the flavour the 910B family ships: sizes in KB as whole numbers
(bytes / 1024, truncated), where the Python path prints `round(bytes / 1024, 3)` (`45056.0`);
times as µs with 3 decimals and the trailing TAB. npu_mem keeps the stored order (each device's
Device samples, then its APP samples); npu_module_mem is sorted by module id, then time. A module
id the enum does not name is `Unknown` (the Python path: `other`); a total size stored as -1 (a
negative size written unsigned) prints -1, as the Python path prints it."""
from __future__ import annotations

import sqlite3
from typing import Iterator, List, Optional, Tuple

import numpy as np

from ... import schema
from ...native_impl import Slot, TextTable, fixed_slot, format_rows, int_slot, text_slot, text_table
from ..context import ExportContext
from .files import csv_parts

BLOCK_ROWS = 200_000   # rows read from the store and rendered at a time
KB = 1024
UNKNOWN = "Unknown"

NPU_MEM_HEADER = ["Device_id", "event", "ddr(KB)", "hbm(KB)", "memory(KB)", "timestamp(us)"]
NPU_MODULE_MEM_HEADER = ["Device_id", "Component", "Timestamp(us)", "Total Reserved(KB)", "Device"]


def row_blocks(conn: sqlite3.Connection, sql: str, width: int, size: int = BLOCK_ROWS) -> Iterator[np.ndarray]:
    """The rows of an all-integer query as (n, width) int64 arrays of at most `size` rows."""
    cursor = conn.execute(sql)
    while True:
        rows = cursor.fetchmany(size)
        if not rows:
            return
        yield np.array(rows, dtype=np.int64).reshape(len(rows), width)


def event_ids(conn: sqlite3.Connection) -> Tuple[int, int]:
    """The STRING_IDS ids of 'app' and 'device' (NPU_MEM.type), -1 where absent."""
    ids = dict(conn.execute("SELECT value, id FROM STRING_IDS WHERE value IN ('app', 'device')").fetchall())
    return int(ids.get("app", -1)), int(ids.get("device", -1))


def event_codes(types: np.ndarray, ids: Tuple[int, int]) -> np.ndarray:
    """NPU_MEM.type as 0 (APP), 1 (Device), 2 (other), given `event_ids`."""
    return np.where(types == ids[0], 0, np.where(types == ids[1], 1, 2))


EVENT_TEXTS = text_table(["APP", "Device", UNKNOWN])


def _write_parts(ctx: ExportContext, kind: str, header: List[str], n: int, flavour: str,
                 blocks: Iterator[Tuple[List[Slot], int]], pieces: List[bytes]) -> None:
    """`<kind>_<stamp>.csv` (or its parts of CSV_LIMIT rows) from rendered blocks of rows."""
    head = (",".join(header) + "\n").encode("utf-8")
    parts = csv_parts(n, flavour)
    index = 0
    out = None
    left = 0
    try:
        for slots, m in blocks:
            lo = 0
            while lo < m:
                if out is None or left == 0:
                    if out is not None:
                        out.close()
                    part, first, end = parts[index]
                    index += 1
                    out = open(ctx.path_for(kind, "csv", part), "wb")
                    out.write(head)
                    left = end - first
                take = min(left, m - lo)
                rows = slice(lo, lo + take)
                out.write(format_rows(pieces, [s.take(rows) for s in slots], take, b""))
                lo += take
                left -= take
    finally:
        if out is not None:
            out.close()


def write_npu_mem(ctx: ExportContext, flavour: str) -> bool:
    """npu_mem_{stamp}.csv from NPU_MEM; False when the store has no samples."""
    if not ctx.has("NPU_MEM"):
        return False
    n = int(ctx.conn.execute("SELECT COUNT(*) FROM NPU_MEM").fetchone()[0])
    if not n:
        return False
    conn = ctx.conn

    ids = event_ids(conn)

    def blocks() -> Iterator[Tuple[List[Slot], int]]:
        for rows in row_blocks(conn, "SELECT deviceId, type, ddr, hbm, timestampNs FROM NPU_MEM ORDER BY rowid", 5):
            ddr, hbm = rows[:, 2], rows[:, 3]
            yield [int_slot(rows[:, 0]), text_slot(event_codes(rows[:, 1], ids), EVENT_TEXTS), int_slot(ddr // KB),
                   int_slot(hbm // KB), int_slot((ddr + hbm) // KB), fixed_slot(rows[:, 4], 3)], len(rows)

    pieces = [b"", b",", b",", b",", b",", b",", b"\t\n"]
    _write_parts(ctx, "npu_mem", NPU_MEM_HEADER, n, flavour, blocks(), pieces)
    return True


def module_names(ids: np.ndarray) -> Tuple[np.ndarray, TextTable]:
    """(codes, text table) of module ids: ENUM_MODULE's names, `Unknown` for the others."""
    enum = dict(schema.ENUM_ROWS["ENUM_MODULE"])
    uniq, codes = np.unique(ids, return_inverse=True)
    return codes, text_table(enum.get(int(u), UNKNOWN) for u in uniq.tolist())


def write_npu_module_mem(ctx: ExportContext, flavour: str) -> bool:
    """npu_module_mem_{stamp}.csv from NPU_MODULE_MEM, by module id, then time; False when empty."""
    if not ctx.has("NPU_MODULE_MEM"):
        return False
    n = int(ctx.conn.execute("SELECT COUNT(*) FROM NPU_MODULE_MEM").fetchone()[0])
    if not n:
        return False
    conn = ctx.conn

    def blocks() -> Iterator[Tuple[List[Slot], int]]:
        sql = ("SELECT deviceId, moduleId, timestampNs, totalReserved FROM NPU_MODULE_MEM "
               "ORDER BY moduleId, timestampNs, rowid")
        for rows in row_blocks(conn, sql, 4):
            codes, names = module_names(rows[:, 1])
            size = rows[:, 3]
            kb = np.where(size < 0, size, size // KB)
            devices, device_texts = np.unique(rows[:, 0], return_inverse=True)
            yield [int_slot(rows[:, 0]), text_slot(codes, names), fixed_slot(rows[:, 2], 3),
                   int_slot(kb), text_slot(device_texts, text_table(f"NPU:{d}" for d in devices.tolist()))], len(rows)

    pieces = [b"", b",", b",", b"\t,", b",", b"\n"]
    _write_parts(ctx, "npu_module_mem", NPU_MODULE_MEM_HEADER, n, flavour, blocks(), pieces)
    return True


def write_memory_summaries(ctx: ExportContext, flavour: str) -> List[str]:
    """npu_mem and npu_module_mem where the store has their samples; the kinds written."""
    done: List[Optional[str]] = ["npu_mem" if write_npu_mem(ctx, flavour) else None,
                                 "npu_module_mem" if write_npu_module_mem(ctx, flavour) else None]
    return [k for k in done if k]
