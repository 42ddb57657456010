"""Which host APIs recorded before the collection start the reference's exports keep.

Both paths of the reference drop the host APIs that lie before the collection start
(start_info's collectionTimeBegin), except those inside a ModelLoad of the same thread
(docs/exports.md, "Host APIs before the collection start"):

* C++ (analysis/csrc/domain/data_process/ai_task/api_processor.cpp:26-35 and 73-84): an API is
  kept when it ends at or after the start, or lies within a ModelLoad (it starts at or after the
  ModelLoad's start and ends at or before its end);
* Python (analysis/viewer/api_viewer.py:86-94 and 151-166): an API is kept when it starts at or
  after the start, or starts within a ModelLoad (at or after its start, at or before its end).

A ModelLoad always lies within itself, so it is kept too. The rule is applied where the
reference applies it: the C++ flavour's timeline CANN layer, api_statistic and the unified DB's
CANN_API; the Python flavour's timeline CANN layer only. The store keeps every API.
"""
from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Optional, Protocol

import numpy as np
import pandas as pd

LEVEL_ACL = 20000
MODEL_LOAD = "ModelLoad"  # the struct type name of the GE model load event pair (level 15000)


SCAN_ROWS = 1 << 20  # rows of CANN_API's mirror read at a time (a 10M-task store has 29M APIs)


class Columns(Protocol):
    """A column-wise copy of CANN_API (columns.StoredColumns)."""

    def __contains__(self, name: str) -> bool: ...

    def __len__(self) -> int: ...

    def read(self, name: str, lo: int = 0, hi: Optional[int] = None) -> np.ndarray: ...

    def take(self, name: str, rows: np.ndarray) -> np.ndarray: ...


def _earliest(mirror: Columns, column: str) -> Optional[int]:
    """The least value of a mirror column (None when it has no rows), read SCAN_ROWS at a time."""
    least: Optional[int] = None
    for lo in range(0, len(mirror), SCAN_ROWS):
        part = int(mirror.read(column, lo, min(len(mirror), lo + SCAN_ROWS)).min())
        least = part if least is None else min(least, part)
    return least


def _model_loads(mirror: Columns, load_id: int) -> np.ndarray:
    """The rows of the ModelLoads that are not ACL-level APIs, read SCAN_ROWS at a time."""
    rows = []
    for lo in range(0, len(mirror), SCAN_ROWS):
        hi = min(len(mirror), lo + SCAN_ROWS)
        rows.append(lo + np.flatnonzero((mirror.read("name", lo, hi) == load_id)
                                        & (mirror.read("type", lo, hi) != LEVEL_ACL)))
    return np.concatenate(rows) if rows else np.zeros(0, np.int64)


@dataclass(frozen=True)
class ApiRule:
    """The reference's rule for APIs before the collection start, with the ModelLoads it needs.

    Times are local ns; threads are CANN_API globalTid values (pid << 32 | thread id). The
    ModelLoads are sorted by (thread, start); `reach` is the latest end among a thread's
    ModelLoads up to each one, so an API lies within some ModelLoad of its thread that starts at
    or before it exactly when that running end reaches the API's end (C++) or start (Python)."""

    begin: int               #: the collection start, local ns
    by_end: bool             #: C++: an API is judged by its end; Python: by its start
    load_tid: np.ndarray     #: globalTid of each ModelLoad
    load_start: np.ndarray   #: its start, ns
    load_reach: np.ndarray   #: running maximum of the ends of its thread's ModelLoads, ns

    @property
    def flavour(self) -> str:
        return "cpp" if self.by_end else "python"

    def keep(self, start: np.ndarray, end: np.ndarray, tid: np.ndarray) -> np.ndarray:
        """Which of these APIs the reference keeps (bool per API)."""
        start = np.asarray(start, dtype=np.int64)
        end = np.asarray(end, dtype=np.int64)
        judged = end if self.by_end else start
        kept = judged >= self.begin
        early = np.flatnonzero(~kept)
        if len(early) and len(self.load_tid):
            kept[early] = self._inside(np.asarray(tid, dtype=np.int64)[early], start[early], judged[early])
        return kept

    def _inside(self, tid: np.ndarray, start: np.ndarray, limit: np.ndarray) -> np.ndarray:
        """Whether each API (thread, start) has a ModelLoad of its thread that starts at or before
        it and ends at or after `limit`: the ModelLoads and the APIs are merged in (thread, start)
        order, a ModelLoad before an API of the same start, and each API looks at the last
        ModelLoad before it."""
        n_load = len(self.load_tid)
        kind = np.concatenate([np.zeros(n_load, np.int8), np.ones(len(tid), np.int8)])
        order = np.lexsort((kind, np.concatenate([self.load_start, start]), np.concatenate([self.load_tid, tid])))
        last_load = np.cumsum(order < n_load) - 1    # per merged position: the ModelLoad at or before it
        at: np.ndarray = np.empty(len(tid), dtype=np.int64)
        at[order[order >= n_load] - n_load] = last_load[order >= n_load]
        found = at >= 0
        at = np.where(found, at, 0)
        return found & (self.load_tid[at] == tid) & (self.load_reach[at] >= limit)


def collection_start(conn: sqlite3.Connection) -> Optional[int]:
    """The collection start of a store (SESSION_TIME_INFO, from start_info), local ns; None when
    the store does not know it."""
    if not _has(conn, "SESSION_TIME_INFO"):
        return None
    row = conn.execute("SELECT MIN(startTimeNs) FROM SESSION_TIME_INFO").fetchone()
    return int(row[0]) if row and row[0] else None


def api_rule(conn: sqlite3.Connection, flavour: str, mirror: Optional[Columns] = None) -> Optional[ApiRule]:
    """The rule of a flavour ('cpp' or 'python') for the CANN_API of a store or unified DB, or
    None when it keeps every API there (none before the start, or no known start). `mirror`:
    CANN_API's column-wise copy, read instead of the table when it has the columns."""
    begin = collection_start(conn)
    if begin is None or not _has(conn, "CANN_API"):
        return None
    by_end = flavour == "cpp"
    column = "endNs" if by_end else "startNs"
    if mirror is not None and all(c in mirror for c in ("startNs", "endNs", "globalTid", "name", "type")):
        earliest = _earliest(mirror, column)
        if earliest is None or earliest >= begin:
            return None
        load_id = _string_id(conn, MODEL_LOAD)
        rows: np.ndarray = np.zeros(0, np.int64)
        if load_id is not None:
            rows = _model_loads(mirror, load_id)
        loads = pd.DataFrame({"tid": mirror.take("globalTid", rows).astype(np.int64),
                              "start": mirror.take("startNs", rows).astype(np.int64),
                              "end": mirror.take("endNs", rows).astype(np.int64)})
    else:
        row = conn.execute(f"SELECT MIN({column}) FROM CANN_API").fetchone()
        if row is None or row[0] is None or int(row[0]) >= begin:
            return None
        loads = pd.read_sql_query(
            "SELECT globalTid AS tid, startNs AS start, endNs AS end FROM CANN_API WHERE type != ? AND name IN "
            "(SELECT id FROM STRING_IDS WHERE value = ?)", conn, params=(LEVEL_ACL, MODEL_LOAD)).astype(np.int64)
    loads = loads.sort_values(["tid", "start"], kind="stable")
    reach = loads.groupby("tid", sort=False)["end"].cummax()
    return ApiRule(begin, by_end, loads["tid"].to_numpy(), loads["start"].to_numpy(), reach.to_numpy(np.int64))


def _has(conn: sqlite3.Connection, table: str) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (table,)).fetchone() is not None


def _string_id(conn: sqlite3.Connection, text: str) -> Optional[int]:
    if not _has(conn, "STRING_IDS"):
        return None
    row = conn.execute("SELECT id FROM STRING_IDS WHERE value = ?", (text,)).fetchone()
    return int(row[0]) if row else None
