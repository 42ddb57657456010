"""The unified DB `msprof_{ts}.db`: the store's unified tables as the reference's C++ writer lays
them out, written once per store (`current_db` finds the one made from the store as it is).

Tables are copied inside sqlite from the attached store, or written as pages from their
column-wise mirror; CANN_API leaves out the host APIs the reference drops (before_start), and
STRING_IDS the names only those had; TASK_PMU_INFO (one row per task and metric) is built from the
store's wide PMU table. The DB's header says which store it was made from: application_id
DB_APPLICATION_ID and user_version the store's identity (docs/store.md, "Exporting the unified DB
once"); no table or row of the reference's schema changes."""
from __future__ import annotations

import glob
import os
import sqlite3
import time
from dataclasses import dataclass
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Set

import numpy as np
import pandas as pd

from .. import memory, schema
from ..arrays import first_seen
from . import before_start, pages
from .columns import StoredColumns
from .paths import db_path, file_uri, output_root, store_path
from .read import open_store, store_identity
from .writer import TableWriter, insert_frame

DB_APPLICATION_ID = 0x4D534B44  # "MSKD"
UNIFIED_DB_GLOB = "msprof_" + "[0-9]" * 14 + ".db"

PMU_CHUNK = 100_000  # wide PMU rows put into the temporary table at a time
API_ROWS = 1 << 22  # CANN_API rows judged at a time (before_start) when the DB leaves some out
TEMP_CACHE_KIB = 64 * 1024  # page cache of the temporary wide PMU table
KEEP_FREE = 64 << 20  # free heap kept after a mirrored table is written (the writer runs beside an export's processes)


def current_db(collection_path: str) -> Optional[str]:
    """The newest `msprof_{ts}.db` at the collection root when msprof-kit made it from the store as
    it is now (its header names the store's identity) and it is newer than the store; else None."""
    found = sorted(glob.glob(os.path.join(glob.escape(output_root(collection_path)), UNIFIED_DB_GLOB)))
    if not found or not os.path.isfile(store_path(collection_path)):
        return None
    newest = found[-1]
    try:
        conn = sqlite3.connect(file_uri(newest) + "?mode=ro", uri=True)
        try:
            app = conn.execute("PRAGMA application_id").fetchone()[0]
            made_from = conn.execute("PRAGMA user_version").fetchone()[0]
        finally:
            conn.close()
        newer = os.stat(newest).st_mtime_ns >= os.stat(store_path(collection_path)).st_mtime_ns
    except (sqlite3.Error, OSError):  # unreadable or not a database: not current, written anew
        return None
    return newest if app == DB_APPLICATION_ID and made_from == store_identity(collection_path) and newer else None


def export_db(collection_path: str, stamp: Optional[str] = None) -> str:
    """Write `msprof_{ts}.db` at the collection root from the store's unified tables.

    The tables are copied inside sqlite (the store is attached to the new database), so no row
    passes through Python. TASK_PMU_INFO (one row per task and metric) is built from the store's
    wide PMU table on chips whose unified DB carries it (the STARS family). As the reference's
    C++ writer (the only one of this file), CANN_API leaves out the host APIs before the
    collection start that it drops (before_start), and STRING_IDS the names only those had."""
    src = open_store(collection_path)
    try:
        present = {r[0] for r in src.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        info = dict(src.execute("SELECT name, value FROM KIT_INFO WHERE deviceId = -1").fetchall()) \
            if "KIT_INFO" in present else {}
        made_from = store_identity(collection_path)
        out = db_path(output_root(collection_path), stamp or time.strftime("%Y%m%d%H%M%S"))
        mirrored = "KIT_COLUMNS" in present
        rule = before_start.api_rule(src, "cpp", StoredColumns(src, "CANN_API") if mirrored else None)
        dropped = _dropped_apis(src, rule, mirrored) if rule is not None else None
        with TableWriter(out) as dest:
            dest.attach(store_path(collection_path))
            paged = dest.paged and mirrored
            for name, cols in schema.UNIFIED.items():
                if name in present:
                    out_of = dropped if dropped is not None and name == "CANN_API" else None
                    if paged and name in schema.MIRRORED and _paged_mirror(
                            dest, name, cols, StoredColumns(src, name), out_of.rows if out_of is not None else None):
                        memory.give_back(KEEP_FREE)  # else the PMU pages touch all the heap this table grew
                        continue
                    dest.copy(name, cols)
                    if out_of is not None:
                        dest.conn.executemany("DELETE FROM main.CANN_API WHERE connectionId = ?",
                                              ((int(c),) for c in out_of.conns))
            pmu = info.get("pmu_prefixed") == "1" and mirrored and "STRING_IDS" in present
            if pmu:
                _put_long_pmu(dest, src)
            if dropped is not None and len(dropped.names) and "STRING_IDS" in present:
                _drop_unused_strings(dest, src, dropped.names, present, pmu)
            dest.conn.execute(f"PRAGMA application_id = {DB_APPLICATION_ID}")   # made from this store
            dest.conn.execute(f"PRAGMA user_version = {made_from}")
    finally:
        src.close()
    return out


def _paged_mirror(dest: TableWriter, table: str, cols: Sequence[schema.Column], stored: StoredColumns,
                  drop: Optional[np.ndarray] = None) -> bool:
    """Write a mirrored table from its column-wise copy as pages, pages.CHUNK_ROWS rows at a time,
    but the rows `drop` marks (False, and nothing written, when the mirror lacks a column)."""
    if any(name not in stored for name, _ in cols):
        return False
    n = len(stored)
    if n == 0 or (drop is not None and drop.all()):
        return True
    kinds = b"".join(b"k" if "PRIMARY KEY" in decl else b"i" for _, decl in cols)
    dest.create(table, cols)
    with dest.pages_of(table) as out:
        for lo in range(0, n, pages.CHUNK_ROWS):
            hi = min(n, lo + pages.CHUNK_ROWS)
            part: List[np.ndarray] = [stored.read(name, lo, hi).astype(np.int64, copy=False) for name, _ in cols]
            if drop is not None and drop[lo:hi].any():
                keep = ~drop[lo:hi]
                part = [values[keep] for values in part]
            out.add(kinds, part, len(part[0]))
    dest.index(table)
    return True


@dataclass
class DroppedApis:
    """The CANN_API rows a unified DB leaves out: which (bool per row, in row order), their
    connection ids, and the name ids that only they have."""
    rows: np.ndarray
    conns: np.ndarray
    names: np.ndarray


def _dropped_apis(src: sqlite3.Connection, rule: before_start.ApiRule, mirrored: bool) -> DroppedApis:
    """The CANN_API rows of the store `rule` drops, read API_ROWS at a time."""
    names = ("startNs", "endNs", "globalTid", "connectionId", "name")
    stored = StoredColumns(src, "CANN_API") if mirrored else None
    if stored is not None and all(c in stored for c in names):
        n = len(stored)
        blocks: Iterator[Dict[str, np.ndarray]] = (
            {c: stored.read(c, lo, lo + API_ROWS).astype(np.int64) for c in names} for lo in range(0, n, API_ROWS))
    else:
        cursor = src.execute(f"SELECT {', '.join(names)} FROM CANN_API ORDER BY rowid")
        blocks = (dict(zip(names, np.array(rows, dtype=np.int64).reshape(-1, len(names)).T))
                  for rows in iter(lambda: cursor.fetchmany(API_ROWS), []))
    drop, conns, dropped_names, kept_names = [], [], [], []
    for b in blocks:
        gone = ~rule.keep(b["startNs"], b["endNs"], b["globalTid"])
        drop.append(gone)
        conns.append(b["connectionId"][gone])
        dropped_names.append(np.unique(b["name"][gone]))
        kept_names.append(np.unique(b["name"][~gone]))
    if not drop:
        return DroppedApis(np.zeros(0, bool), np.zeros(0, np.int64), np.zeros(0, np.int64))
    only = np.setdiff1d(np.concatenate(dropped_names), np.concatenate(kept_names))
    return DroppedApis(np.concatenate(drop), np.concatenate(conns), only)


def _drop_unused_strings(dest: TableWriter, src: sqlite3.Connection, candidates: np.ndarray, present: Set[str],
                         pmu: bool) -> None:
    """Delete from the DB's STRING_IDS the `candidates` (ids) that none of its other tables uses
    (schema.STRING_ID_COLUMNS; TASK_PMU_INFO's names are the PMU metric names), as the reference
    writes only the strings its tables refer to."""
    used: List[np.ndarray] = []
    for table, columns in schema.STRING_ID_COLUMNS.items():
        if table == "CANN_API" or table not in present:
            continue
        stored = StoredColumns(src, table) if table in schema.MIRRORED else None
        for column in columns:
            if stored is not None and column in stored:
                values = stored.read(column)
            else:
                values = np.array([r[0] for r in src.execute(f"SELECT DISTINCT {column} FROM {table}")
                                   if isinstance(r[0], int)], dtype=np.int64)
            used.append(np.unique(values).astype(np.int64))
    metrics = [m for m in StoredColumns(src, "KIT_TASK_PMU").names if m not in ("taskRow", "globalTaskId")] \
        if pmu else []
    if metrics:
        used.append(np.array([r[0] for r in src.execute(
            f"SELECT id FROM STRING_IDS WHERE value IN ({','.join('?' * len(metrics))})", metrics)], dtype=np.int64))
    unused = np.setdiff1d(candidates, np.concatenate(used)) if used else candidates
    dest.conn.executemany("DELETE FROM main.STRING_IDS WHERE id = ?", ((int(i),) for i in unused))


def _put_long_pmu(dest: TableWriter, src: sqlite3.Connection) -> None:
    """TASK_PMU_INFO rows (globalTaskId, name id, value), metric by metric, from the first PMU row of
    each task. The wide rows go into a temporary table PMU_CHUNK rows at a time (each column's
    slice read from its BLOB), then each metric is one INSERT..SELECT."""
    stored = StoredColumns(src, "KIT_TASK_PMU")
    if "globalTaskId" not in stored:
        return
    metrics = [m for m in stored.names if m not in ("taskRow", "globalTaskId")]
    # (only the metrics' rows: STRING_IDS holds every op name and tensor text of the collection)
    metric_ids = dict(src.execute(f"SELECT value, id FROM STRING_IDS WHERE value IN ({','.join('?' * len(metrics))})",
                                  metrics).fetchall()) if metrics else {}
    column = stored.read
    gid = column("globalTaskId")
    n = len(gid)
    first = first_seen(gid)
    if dest.paged:
        _paged_long_pmu(dest, gid, first, metrics, metric_ids, column)
        return
    cols = [("globalTaskId", "INTEGER")] + [(f"m{i}", "") for i in range(len(metrics))]
    dest.conn.execute(f"PRAGMA temp.cache_size = -{TEMP_CACHE_KIB}")  # small runs never touch the disk
    dest.conn.execute("CREATE TEMP TABLE wide_pmu (" + ", ".join(f"{c} {t}" for c, t in cols) + ")")
    for lo in range(0, n, PMU_CHUNK):
        hi = min(n, lo + PMU_CHUNK)
        keep = first[lo:hi]
        part: Dict[str, np.ndarray] = {"globalTaskId": gid[lo:hi][keep]}
        for i, metric in enumerate(metrics):
            part[f"m{i}"] = column(metric, lo, hi)[keep]
        insert_frame(dest.conn, "temp.wide_pmu", cols, pd.DataFrame(part))
    del gid, first
    dest.create("TASK_PMU_INFO", schema.UNIFIED["TASK_PMU_INFO"])
    for i, metric in enumerate(metrics):
        dest.conn.execute(f"INSERT INTO TASK_PMU_INFO SELECT globalTaskId, ?, m{i} FROM temp.wide_pmu "
                          "ORDER BY rowid", (metric_ids.get(metric),))
    dest.conn.execute("DROP TABLE temp.wide_pmu")


def _paged_long_pmu(dest: TableWriter, gid: np.ndarray, first: np.ndarray, metrics: Sequence[str],
                    metric_ids: Dict[str, int], column: Callable[[str, int, int], np.ndarray]) -> None:
    """TASK_PMU_INFO as pages: metric by metric, pages.CHUNK_ROWS wide rows at a time, in the order
    of the sqlite path (and with its NUMERIC affinity: whole values stored as integers)."""
    dest.create("TASK_PMU_INFO", schema.UNIFIED["TASK_PMU_INFO"])
    n = len(gid)
    with dest.pages_of("TASK_PMU_INFO") as out:
        for metric in metrics:
            name_id = metric_ids.get(metric)
            for lo in range(0, n, pages.CHUNK_ROWS):
                hi = min(n, lo + pages.CHUNK_ROWS)
                keep = first[lo:hi]
                ids = gid[lo:hi][keep]
                values = column(metric, lo, hi)[keep]
                kind_v = b"i" if values.dtype.kind in "iub" else b"n"
                if name_id is None:  # no STRING_IDS row: a NULL name, as sqlite binds None
                    names, kind_n = np.full(len(ids), np.nan), b"n"
                else:
                    names, kind_n = np.full(len(ids), name_id, dtype=np.int64), b"i"
                out.add(b"i" + kind_n + kind_v, [ids, names, values], len(ids))
