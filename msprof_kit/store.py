"""Writing and opening the store: one sqlite database per collection.

The store lives at `PROF_xxx/sqlite/msprof_kit.db` (a folder the reference analysis skips), is
written in one transaction with indexes created after loading, and replaces the old store
atomically (temp file, then rename). `export_db` copies its unified tables to `msprof_{ts}.db`.
"""
from __future__ import annotations

import json
import os
import sqlite3
import time
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np
import pandas as pd

from . import schema
from .build import build
from .errors import Diagnostics, StoreError
from .layout import Collection

STORE_DIR = "sqlite"
STORE_NAME = "msprof_kit.db"
BATCH_ROWS = 50_000
ROWS_PER_INSERT = 200
Table = Union[pd.DataFrame, Dict[str, np.ndarray]]


def store_path(collection_path: str) -> str:
    return os.path.join(collection_path, STORE_DIR, STORE_NAME)


def encode_columns(table: str, frame: Table) -> Iterator[Tuple[object, ...]]:
    """KIT_COLUMNS rows of a columnar table: (table, column, dtype, bytes, labels)."""
    required = schema.COLUMNAR[table]
    missing = [c for c in required if c not in frame]
    if missing:
        raise StoreError(f"internal: table {table} lacks columns {missing}")
    for name in list(frame.keys()):
        values = np.asarray(frame[name])
        if values.dtype == object:
            codes, labels = pd.factorize(values, use_na_sentinel=False)
            yield (table, name, "<i4", codes.astype("<i4").tobytes(),
                   json.dumps([str(x) for x in labels], ensure_ascii=False))
        else:
            arr = np.ascontiguousarray(values.astype(values.dtype.newbyteorder("<")))
            yield (table, name, arr.dtype.str, arr.tobytes(), None)


def read_columns(conn: sqlite3.Connection, table: str) -> pd.DataFrame:
    """A columnar table back as a DataFrame (empty when absent)."""
    present = conn.execute("SELECT 1 FROM sqlite_master WHERE name='KIT_COLUMNS'").fetchone()
    if not present:
        return pd.DataFrame()
    data: Dict[str, np.ndarray] = {}
    for name, dtype, blob, labels in conn.execute(
            "SELECT name, dtype, data, labels FROM KIT_COLUMNS WHERE tableName = ? ORDER BY rowid", (table,)):
        arr = np.frombuffer(blob, dtype=np.dtype(dtype))
        data[name] = np.array(json.loads(labels), dtype=object)[arr] if labels is not None else arr
    return pd.DataFrame(data)


def _matrix(arrays: Sequence[np.ndarray], lo: int, hi: int) -> np.ndarray:
    """Rows lo:hi of the columns as one 2-D array: int64 when every column is integral, else object
    (whose tolist() gives the plain Python values sqlite can bind)."""
    part = [a[lo:hi] for a in arrays]
    if all(p.dtype.kind in "bi" or (p.dtype.kind == "u" and p.dtype.itemsize < 8) for p in part):
        return np.column_stack(part).astype(np.int64, copy=False) if part else np.zeros((hi - lo, 0), np.int64)
    out = np.empty((hi - lo, len(part)), dtype=object)
    for j, p in enumerate(part):
        out[:, j] = p
    return out


def _insert_frame(conn: sqlite3.Connection, table: str, cols: Sequence[schema.Column], frame: pd.DataFrame) -> None:
    """Insert a frame's rows, ROWS_PER_INSERT rows per statement (sqlite's per-statement cost, not
    the binding, dominates single-row inserts), BATCH_ROWS rows converted to Python values at a time."""
    names = [c[0] for c in cols]
    arrays = [frame[n].to_numpy() for n in names]
    width = len(names)
    k = max(1, min(ROWS_PER_INSERT, 30000 // width))
    multi = f"INSERT INTO {table} VALUES " + ",".join(["(" + ",".join("?" * width) + ")"] * k)
    single = schema.insert_sql(table, cols)
    step = max(k, BATCH_ROWS - BATCH_ROWS % k)
    n = len(frame)
    for lo in range(0, n, step):
        block = _matrix(arrays, lo, min(n, lo + step))
        whole = len(block) - len(block) % k
        if whole:
            conn.executemany(multi, block[:whole].reshape(-1, width * k).tolist())
        if whole < len(block):
            conn.executemany(single, block[whole:].tolist())


def _is_empty(frame: Optional[Table]) -> bool:
    if frame is None:
        return True
    if isinstance(frame, dict):
        return not frame or len(next(iter(frame.values()))) == 0
    return frame.empty


class TableWriter:
    """A new database written table by table, then put in place atomically.

    Tables are written as soon as they are final, so the caller can drop them: the import never
    holds the whole store in memory. Empty tables are skipped (the reference creates only tables
    with rows). Use as a context manager; an error removes the temporary file."""

    def __init__(self, path: str) -> None:
        self.path = path
        folder = os.path.dirname(path) or "."
        os.makedirs(folder, exist_ok=True)
        self.tmp = os.path.join(folder, f".{os.path.basename(path)}.tmp-{os.getpid()}")
        if os.path.exists(self.tmp):
            os.remove(self.tmp)
        self.conn = sqlite3.connect(self.tmp)
        self.conn.execute("PRAGMA journal_mode=OFF")
        self.conn.execute("PRAGMA synchronous=OFF")
        self.conn.execute("BEGIN")
        self.tables: List[str] = []

    def __enter__(self) -> "TableWriter":
        return self

    def __exit__(self, kind, exc, tb) -> None:
        if kind is None:
            self._finish()
            return
        self.conn.close()
        if os.path.exists(self.tmp):
            os.remove(self.tmp)
        if isinstance(exc, sqlite3.Error):
            raise StoreError(f"cannot write the database: {exc}", path=self.path) from exc

    def put(self, table: str, frame: Optional[Table]) -> None:
        """Write one table: a DataFrame, or for a columnar table also a dict of column arrays."""
        if _is_empty(frame):
            return
        if table in schema.COLUMNAR:
            cols = schema.EXTENSIONS["KIT_COLUMNS"]
            if "KIT_COLUMNS" not in self.tables:
                self.conn.execute(schema.create_sql("KIT_COLUMNS", cols))
                self.tables.append("KIT_COLUMNS")
            self.conn.executemany(schema.insert_sql("KIT_COLUMNS", cols), encode_columns(table, frame))
            return
        if isinstance(frame, dict):
            frame = pd.DataFrame(frame)
        cols = schema.ALL_TABLES[table]
        missing = [c[0] for c in cols if c[0] not in frame.columns]
        if missing:
            raise StoreError(f"internal: table {table} lacks columns {missing}", path=self.path)
        self._create(table, cols)
        _insert_frame(self.conn, table, cols, frame)

    def put_rows(self, table: str, cols: Sequence[schema.Column], rows: Iterable[Tuple[object, ...]]) -> None:
        self._create(table, cols)
        self.conn.executemany(schema.insert_sql(table, cols), rows)

    def _create(self, table: str, cols: Sequence[schema.Column]) -> None:
        if table in self.tables:
            raise StoreError(f"internal: table {table} written twice", path=self.path)
        self.conn.execute(schema.create_sql(table, cols))
        self.tables.append(table)

    def _finish(self) -> None:
        try:
            if "TASK" in self.tables:
                for sql in schema.INDEXES:
                    self.conn.execute(sql)
            self.conn.commit()
        finally:
            self.conn.close()
        os.replace(self.tmp, self.path)


def write_tables(path: str, tables: Dict[str, pd.DataFrame]) -> None:
    """Write `tables` into a new database at `path`, atomically."""
    with TableWriter(path) as out:
        for table, frame in tables.items():
            out.put(table, frame)


def write_store(collection_path: str, coll: Collection, diag: Diagnostics) -> str:
    """Build a collection and write its store table by table; returns the store's path."""
    path = store_path(collection_path)
    with TableWriter(path) as out:
        info = build(coll, diag, out.put)
        for name, cols, rows in (
                ("KIT_INFO", schema.EXTENSIONS["KIT_INFO"], list(info)),
                ("KIT_WARNINGS", schema.EXTENSIONS["KIT_WARNINGS"], [(w,) for w in diag.warnings]),
                ("META_DATA", schema.UNIFIED["META_DATA"], list(schema.META_ROWS))):
            if rows:
                out.put_rows(name, cols, rows)
        for name, rows in schema.ENUM_ROWS.items():
            out.put_rows(name, schema.UNIFIED[name], list(rows))
    return path


def open_store(collection_path: str) -> sqlite3.Connection:
    path = store_path(collection_path)
    if not os.path.exists(path):
        raise StoreError("no store here; run 'msprof-kit import' first", path=path)
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


def export_db(collection_path: str, stamp: Optional[str] = None) -> str:
    """Write `msprof_{ts}.db` at the collection root from the store's unified tables.

    TASK_PMU_INFO (one row per task and metric) is built here from the store's wide PMU table,
    on chips whose unified DB carries it (the STARS family)."""
    src = open_store(collection_path)
    try:
        present = [r[0] for r in src.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        tables: Dict[str, pd.DataFrame] = {}
        for name in schema.UNIFIED:
            if name in present:
                tables[name] = pd.read_sql_query(f'SELECT * FROM "{name}"', src)
        info = dict(src.execute("SELECT name, value FROM KIT_INFO WHERE deviceId = -1").fetchall()) \
            if "KIT_INFO" in present else {}
        wide = read_columns(src, "KIT_TASK_PMU")
        if not wide.empty and info.get("pmu_prefixed") == "1":
            tables["TASK_PMU_INFO"] = _long_pmu(wide, tables["STRING_IDS"])
    finally:
        src.close()
    stamp = stamp or time.strftime("%Y%m%d%H%M%S")
    out = os.path.join(collection_path, f"msprof_{stamp}.db")
    write_tables(out, tables)
    return out


def _long_pmu(wide: pd.DataFrame, string_ids: pd.DataFrame) -> pd.DataFrame:
    metric_cols = [c for c in wide.columns if c not in ("taskRow", "globalTaskId")]
    ids = dict(zip(string_ids["value"], string_ids["id"]))
    first = ~wide["globalTaskId"].duplicated()
    w = wide[first.to_numpy()]
    long = w.melt(id_vars=["globalTaskId"], value_vars=metric_cols, var_name="metric", value_name="value")
    long["name"] = long["metric"].map(ids)
    return long[["globalTaskId", "name", "value"]]
