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
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np
import pandas as pd

from . import schema
from .build import Built
from .errors import StoreError

STORE_DIR = "sqlite"
STORE_NAME = "msprof_kit.db"
BATCH_ROWS = 50_000


def store_path(collection_path: str) -> str:
    return os.path.join(collection_path, STORE_DIR, STORE_NAME)


def encode_columns(table: str, frame: pd.DataFrame) -> List[Tuple[object, ...]]:
    """KIT_COLUMNS rows of a columnar table: (table, column, dtype, bytes, labels)."""
    rows: List[Tuple[object, ...]] = []
    required = schema.COLUMNAR[table]
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise StoreError(f"internal: table {table} lacks columns {missing}")
    for name in frame.columns:
        values = frame[name].to_numpy()
        if values.dtype == object:
            codes, labels = pd.factorize(values, use_na_sentinel=False)
            rows.append((table, name, "<i4", codes.astype("<i4").tobytes(),
                         json.dumps([str(x) for x in labels], ensure_ascii=False)))
        else:
            arr = np.ascontiguousarray(values.astype(values.dtype.newbyteorder("<")))
            rows.append((table, name, arr.dtype.str, arr.tobytes(), None))
    return rows


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


def _rows(frame: pd.DataFrame, names: Sequence[str]) -> Iterable[Tuple[object, ...]]:
    """Rows as tuples of plain Python values, produced in batches (sqlite cannot bind numpy scalars)."""
    for lo in range(0, len(frame), BATCH_ROWS):
        chunk = frame.iloc[lo:lo + BATCH_ROWS]
        cols = [chunk[n].tolist() for n in names]
        yield from zip(*cols)


def write_tables(path: str, tables: Dict[str, pd.DataFrame], only: Optional[Sequence[str]] = None,
                 extra: Iterable[Tuple[str, Sequence[schema.Column], List[Tuple[object, ...]]]] = ()) -> None:
    """Write `tables` (skipping empty ones: the reference creates only tables with rows) into a new
    database at `path`, atomically."""
    folder = os.path.dirname(path) or "."
    os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, f".{os.path.basename(path)}.tmp-{os.getpid()}")
    if os.path.exists(tmp):
        os.remove(tmp)
    try:
        conn = sqlite3.connect(tmp)
        conn.execute("PRAGMA journal_mode=OFF")
        conn.execute("PRAGMA synchronous=OFF")
        with conn:
            for table, frame in tables.items():
                if only is not None and table not in only:
                    continue
                if frame is None or frame.empty:
                    continue
                if table in schema.COLUMNAR:
                    cols = schema.EXTENSIONS["KIT_COLUMNS"]
                    if not conn.execute("SELECT 1 FROM sqlite_master WHERE name='KIT_COLUMNS'").fetchone():
                        conn.execute(schema.create_sql("KIT_COLUMNS", cols))
                    conn.executemany(schema.insert_sql("KIT_COLUMNS", cols), encode_columns(table, frame))
                    continue
                cols = schema.ALL_TABLES[table]
                names = [c[0] for c in cols]
                missing = [n for n in names if n not in frame.columns]
                if missing:
                    raise StoreError(f"internal: table {table} lacks columns {missing}", path=path)
                conn.execute(schema.create_sql(table, cols))
                conn.executemany(schema.insert_sql(table, cols), _rows(frame, names))
            for table, cols, rows in extra:
                if rows:
                    conn.execute(schema.create_sql(table, cols))
                    conn.executemany(schema.insert_sql(table, cols), rows)
            names_present = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if "TASK" in names_present:
                for sql in schema.INDEXES:
                    conn.execute(sql)
        conn.close()
        os.replace(tmp, path)
    except sqlite3.Error as exc:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise StoreError(f"cannot write the database: {exc}", path=path) from exc
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def write_store(collection_path: str, built: Built, warnings: Sequence[str]) -> str:
    """Write the store of a collection; returns its path."""
    path = store_path(collection_path)
    extra = [
        ("KIT_INFO", schema.EXTENSIONS["KIT_INFO"], list(built.info)),
        ("KIT_WARNINGS", schema.EXTENSIONS["KIT_WARNINGS"], [(w,) for w in warnings]),
        ("META_DATA", schema.UNIFIED["META_DATA"], list(schema.META_ROWS)),
    ] + [(name, schema.UNIFIED[name], list(rows)) for name, rows in schema.ENUM_ROWS.items()]
    write_tables(path, built.tables, extra=extra)
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
