"""The memory report and the memory-over-time series of a collection, from its store (NPU_MEM,
NPU_MODULE_MEM). Everything is aggregated inside sqlite, so millions of samples never come into
memory: the report is one row per (device, component), the series at most SERIES_POINTS buckets
per line (each bucket's largest value, so peaks survive the thinning).

Report rows (MEMORY_COLUMNS), in this order per device: `Device` and `APP` (npu_mem: peak total
memory and when, its average, peak DDR and peak HBM, in KB), then each module of npu_module_mem
(its peak reserved memory and when, and its average; DDR/HBM N/A), by peak. The operators holding
the most memory follow as rows of Kind `operator` (`operator_memory_rows`: the largest allocations
of KIT_OPERATOR_MEMORY, from sources/memory_ops.py)."""
from __future__ import annotations

import sqlite3
from typing import Any, Dict, List, Optional

import numpy as np
import pandas as pd

from .. import schema
from .frames import DEVICE
from .memory_ops import ALLOCATED, SIZE, largest, stored_allocations
from .memory_ops import DEVICE as TOP_DEVICE
from .memory_ops import NAME as OP_NAME

COMPONENT = "Component"
KIND = "Kind"
PEAK = "Peak Memory(KB)"
PEAK_TIME = "Peak Time(us)"
AVERAGE = "Avg Memory(KB)"
PEAK_DDR = "Peak DDR(KB)"
PEAK_HBM = "Peak HBM(KB)"
MEMORY_COLUMNS = (DEVICE, COMPONENT, KIND, PEAK, PEAK_TIME, AVERAGE, PEAK_DDR, PEAK_HBM)
SERIES_COLUMNS = (DEVICE, COMPONENT, KIND, "Timestamp(us)", "Memory(KB)")
SERIES_POINTS = 2000   # buckets per line of the memory-over-time series
KB = 1024.0
TOP_OPERATORS = 10   # operator rows of the report: the largest allocations


def _has(conn: sqlite3.Connection, table: str) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (table,)).fetchone() is not None


def _event_names(conn: sqlite3.Connection) -> Dict[int, str]:
    ids = dict(conn.execute("SELECT id, value FROM STRING_IDS WHERE value IN ('app', 'device')").fetchall()) \
        if _has(conn, "STRING_IDS") else {}
    return {k: {"app": "APP", "device": "Device"}[v] for k, v in ids.items()}


def _module_name(module_id: int) -> str:
    return dict(schema.ENUM_ROWS["ENUM_MODULE"]).get(int(module_id), f"module {module_id}")


def sample_rows(conn: sqlite3.Connection) -> List[Dict[str, Any]]:
    """Device and APP rows of the report from NPU_MEM (empty without it)."""
    if not _has(conn, "NPU_MEM"):
        return []
    names = _event_names(conn)
    # one MAX() per query: sqlite then takes the bare timestampNs from the row of the maximum
    peaks = conn.execute("SELECT deviceId, type, MAX(ddr + hbm), timestampNs FROM NPU_MEM "
                         "GROUP BY deviceId, type").fetchall()
    more = {(d, t): (avg, ddr, hbm) for d, t, avg, ddr, hbm in conn.execute(
        "SELECT deviceId, type, AVG(ddr + hbm), MAX(ddr), MAX(hbm) FROM NPU_MEM GROUP BY deviceId, type")}
    rows = []
    for dev, kind, peak, ts in peaks:
        avg, ddr, hbm = more[(dev, kind)]
        rows.append({DEVICE: str(dev), COMPONENT: names.get(kind, str(kind)), KIND: "sampled", PEAK: peak / KB,
                     PEAK_TIME: ts / 1000.0, AVERAGE: avg / KB, PEAK_DDR: ddr / KB, PEAK_HBM: hbm / KB})
    order = {"Device": 0, "APP": 1}
    return sorted(rows, key=lambda r: (int(r[DEVICE]), order.get(r[COMPONENT], 2)))


def module_rows(conn: sqlite3.Connection) -> List[Dict[str, Any]]:
    """Per-module rows of the report from NPU_MODULE_MEM (sizes of -1, unknown, left out)."""
    if not _has(conn, "NPU_MODULE_MEM"):
        return []
    peaks = conn.execute("SELECT deviceId, moduleId, MAX(totalReserved), timestampNs FROM NPU_MODULE_MEM "
                         "WHERE totalReserved >= 0 GROUP BY deviceId, moduleId").fetchall()
    avg = {(d, m): a for d, m, a in conn.execute(
        "SELECT deviceId, moduleId, AVG(totalReserved) FROM NPU_MODULE_MEM WHERE totalReserved >= 0 "
        "GROUP BY deviceId, moduleId")}
    rows = [{DEVICE: str(dev), COMPONENT: _module_name(mod), KIND: "module", PEAK: peak / KB, PEAK_TIME: ts / 1000.0,
             AVERAGE: avg[(dev, mod)] / KB, PEAK_DDR: np.nan, PEAK_HBM: np.nan} for dev, mod, peak, ts in peaks]
    return sorted(rows, key=lambda r: (int(r[DEVICE]), -r[PEAK]))


def operator_memory_rows(conn: sqlite3.Connection, limit: int = TOP_OPERATORS) -> Optional[pd.DataFrame]:
    """The `limit` largest operator allocations (memory_ops.stored_allocations) as rows of
    MEMORY_COLUMNS with Kind `operator`: Component the op name, Peak Memory the allocation, Peak
    Time when it was made (the other columns N/A); None when the store has no operator memory."""
    found = stored_allocations(conn)
    if found is None or found.empty:
        return None
    top = largest(found, limit)
    nothing = np.full(len(top), np.nan)
    return pd.DataFrame({DEVICE: top[TOP_DEVICE].astype(str).to_numpy(), COMPONENT: top[OP_NAME].to_numpy(),
                         KIND: "operator", PEAK: top[SIZE].to_numpy(), PEAK_TIME: top[ALLOCATED].to_numpy(),
                         AVERAGE: nothing, PEAK_DDR: nothing, PEAK_HBM: nothing})


def memory_table(conn: sqlite3.Connection) -> Optional[pd.DataFrame]:
    """The memory report of a store (None when it holds no memory samples)."""
    rows = sample_rows(conn) + module_rows(conn)
    frame = pd.DataFrame(rows, columns=list(MEMORY_COLUMNS))
    ops = operator_memory_rows(conn)
    if ops is not None and not ops.empty:
        both: List[pd.DataFrame] = [frame, pd.DataFrame(ops, columns=list(MEMORY_COLUMNS))]
        frame = pd.concat(both, ignore_index=True)
    return frame if not frame.empty else None


def memory_series(conn: sqlite3.Connection, points: int = SERIES_POINTS) -> Optional[pd.DataFrame]:
    """Memory over time (SERIES_COLUMNS): the Device and APP totals (Kind `sampled`) and each
    module's reserved memory (Kind `module`), each line thinned to at most `points` buckets of
    equal time (the bucket's largest value, at its first sample's time)."""
    names = _event_names(conn)
    parts = []
    for table, key, value, kind in (("NPU_MEM", "type", "ddr + hbm", "sampled"),
                                    ("NPU_MODULE_MEM", "moduleId", "totalReserved", "module")):
        if not _has(conn, table):
            continue
        lo, hi = conn.execute(f"SELECT MIN(timestampNs), MAX(timestampNs) FROM {table}").fetchone()
        if lo is None:
            continue
        width = max(1, (int(hi) - int(lo)) // points + 1)
        rows = conn.execute(f"SELECT deviceId, {key}, MIN(timestampNs), MAX({value}) FROM {table} "
                            f"GROUP BY deviceId, {key}, (timestampNs - ?) / ? ORDER BY 1, 2, 3", (lo, width)).fetchall()
        if not rows:
            continue
        arr = np.array(rows, dtype=np.float64)
        comp = [names.get(int(k), str(int(k))) if kind == "sampled" else _module_name(int(k)) for k in arr[:, 1]]
        parts.append(pd.DataFrame({DEVICE: arr[:, 0].astype(np.int64).astype(str), COMPONENT: comp, KIND: kind,
                                   "Timestamp(us)": arr[:, 2] / 1000.0, "Memory(KB)": arr[:, 3] / KB}))
    return pd.concat(parts, ignore_index=True) if parts else None

