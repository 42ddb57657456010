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

import json
import sqlite3
from typing import Iterator, List, Optional, Tuple

import numpy as np

from ... import schema
from ...native_impl import Slot, TextTable, fixed_slot, float_slot, format_rows, int_slot, text_slot, text_table
from ..context import ExportContext
from .files import csv_parts

BLOCK_ROWS = 200_000   # rows read from the store and rendered at a time
KB = 1024
UNKNOWN = "Unknown"
PYTHON_UNKNOWN = "other"   # the Python path's name of a module id its enum lacks

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


def _write_json(ctx: ExportContext, kind: str, keys: List[str], blocks: Iterator[Tuple[List[Slot], int]]) -> None:
    """`<kind>_<stamp>.json` as the Python path's JSON summaries (a list of one object per row, in
    `json.dump`'s separators), rendered a block at a time. Each slot renders one value: numbers
    bare, texts as JSON strings (the slot's texts are JSON-quoted already)."""
    pieces = [("{" if i == 0 else ", ").encode() + json.dumps(k).encode() + b": " for i, k in enumerate(keys)] + [b"}"]
    with open(ctx.path_for(kind, "json"), "wb") as out:
        out.write(b"[")
        sep = b""
        for slots, m in blocks:
            if m:
                out.write(sep + format_rows(pieces, slots, m, b", "))
                sep = b", "
        out.write(b"]")


def _python_kb(values: np.ndarray) -> Slot:
    """Sizes in bytes as the Python path prints KB: round(bytes / 1024, 3), a float."""
    return float_slot(np.round(values / KB, 3))


def _quoted(texts: List[str]) -> TextTable:
    return text_table(json.dumps(t) for t in texts)


def _several_devices(conn: sqlite3.Connection, table: str) -> bool:
    return conn.execute(f"SELECT COUNT(DISTINCT deviceId) FROM {table}").fetchone()[0] > 1


def write_npu_mem(ctx: ExportContext, flavour: str, fmt: str = "csv") -> bool:
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

    if fmt == "json" and flavour == "python":
        several = _several_devices(conn, "NPU_MEM")
        quoted = _quoted(["APP", "Device", UNKNOWN])

        def json_blocks() -> Iterator[Tuple[List[Slot], int]]:
            for rows in row_blocks(conn, "SELECT deviceId, type, ddr, hbm, timestampNs FROM NPU_MEM ORDER BY rowid", 5):
                ddr, hbm = rows[:, 2], rows[:, 3]
                stamps = _quoted_stamps(rows[:, 4])
                slots = [text_slot(event_codes(rows[:, 1], ids), quoted), _python_kb(ddr), _python_kb(hbm),
                         _python_kb(ddr + hbm), stamps]
                yield ([int_slot(rows[:, 0])] if several else []) + slots, len(rows)

        keys = NPU_MEM_HEADER if several else NPU_MEM_HEADER[1:]
        _write_json(ctx, "npu_mem", keys, json_blocks())
        return True
    pieces = [b"", b",", b",", b",", b",", b",", b"\t\n"]
    _write_parts(ctx, "npu_mem", NPU_MEM_HEADER, n, flavour, blocks(), pieces)
    return True


def module_names(ids: np.ndarray, unknown: str = UNKNOWN) -> Tuple[np.ndarray, List[str]]:
    """(codes, names) of module ids: ENUM_MODULE's names, `unknown` for the others."""
    enum = dict(schema.ENUM_ROWS["ENUM_MODULE"])
    uniq, codes = np.unique(ids, return_inverse=True)
    return codes, [enum.get(int(u), unknown) for u in uniq.tolist()]


def _quoted_stamps(ns: np.ndarray) -> Slot:
    """Times in ns as the JSON string of their µs with 3 decimals and the trailing TAB."""
    us: np.ndarray = ns.astype(np.int64)
    whole, frac = np.divmod(us, 1000)
    texts = np.char.add(np.char.add(whole.astype(str), "."), np.char.zfill(frac.astype(str), 3))
    uniq, codes = np.unique(texts, return_inverse=True)
    return text_slot(codes, text_table(json.dumps(t + "\t") for t in uniq.tolist()))


def write_npu_module_mem(ctx: ExportContext, flavour: str, fmt: str = "csv") -> bool:
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
            yield [int_slot(rows[:, 0]), text_slot(codes, text_table(names)), fixed_slot(rows[:, 2], 3),
                   int_slot(kb), text_slot(device_texts, text_table(f"NPU:{d}" for d in devices.tolist()))], len(rows)

    if fmt == "json" and flavour == "python":
        several = _several_devices(conn, "NPU_MODULE_MEM")

        def json_blocks() -> Iterator[Tuple[List[Slot], int]]:
            sql = ("SELECT deviceId, moduleId, timestampNs, totalReserved FROM NPU_MODULE_MEM "
                   "ORDER BY moduleId, timestampNs, rowid")
            for rows in row_blocks(conn, sql, 4):
                codes, names = module_names(rows[:, 1], PYTHON_UNKNOWN)
                quoted = _quoted(names)
                size = rows[:, 3]
                kb = np.where(size < 0, size.astype(np.float64), np.round(size / KB, 3))
                devices, device_codes = np.unique(rows[:, 0], return_inverse=True)
                slots = [text_slot(codes, quoted), _quoted_stamps(rows[:, 2]), float_slot(kb),
                         text_slot(device_codes, _quoted([f"NPU:{d}" for d in devices.tolist()]))]
                yield ([int_slot(rows[:, 0])] if several else []) + slots, len(rows)

        keys = NPU_MODULE_MEM_HEADER if several else NPU_MODULE_MEM_HEADER[1:]
        _write_json(ctx, "npu_module_mem", keys, json_blocks())
        return True
    pieces = [b"", b",", b",", b"\t,", b",", b"\n"]
    _write_parts(ctx, "npu_module_mem", NPU_MODULE_MEM_HEADER, n, flavour, blocks(), pieces)
    return True


def write_memory_summaries(ctx: ExportContext, flavour: str, fmt: str = "csv") -> List[str]:
    """npu_mem and npu_module_mem where the store has their samples (JSON where `fmt` asks for it
    and the Python path would write it); the kinds written."""
    done: List[Optional[str]] = ["npu_mem" if write_npu_mem(ctx, flavour, fmt) else None,
                                 "npu_module_mem" if write_npu_module_mem(ctx, flavour, fmt) else None]
    return [k for k in done if k]
