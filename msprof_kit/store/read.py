"""Reading a store: opening it, the warnings its import reported, its identity, and the
iterations of its step trace."""
from __future__ import annotations

import os
import sqlite3
import zlib
from typing import Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from ..errors import Diagnostics, StoreError
from .paths import NO_STORE, file_uri, store_path, store_problem


def open_store(collection_path: str) -> sqlite3.Connection:
    """The store of a collection, read-only; a StoreError when it is missing or cannot be used."""
    path = store_path(collection_path)
    problem = store_problem(collection_path)
    if problem == NO_STORE:
        raise StoreError("no store here; run 'msprof-kit import' first", path=path)
    if problem is not None:
        raise StoreError(f"{problem}; import the collection again (msprof-kit import -dir {collection_path})",
                         path=path)
    return sqlite3.connect(file_uri(path) + "?mode=ro", uri=True)


def import_warnings(collection_path: str) -> Tuple[int, List[str]]:
    """How many warnings the import of a collection reported (KIT_WARNINGS), and the first ones
    (up to 3)."""
    conn = open_store(collection_path)
    try:
        if not conn.execute("SELECT 1 FROM sqlite_master WHERE name='KIT_WARNINGS'").fetchone():
            return 0, []
        n = conn.execute("SELECT COUNT(*) FROM KIT_WARNINGS").fetchone()[0]
        return n, [r[0] for r in conn.execute("SELECT message FROM KIT_WARNINGS ORDER BY rowid LIMIT 3")]
    finally:
        conn.close()


def repeat_warnings(collection_path: str, diag: Diagnostics) -> None:
    """One warning summing up those the import of a collection reported (docs/store.md)."""
    n, first = import_warnings(collection_path)
    if n == 1:
        diag.warn(f"the import of {collection_path} reported 1 warning: {first[0]}")
    elif n > 1:
        diag.warn(f"the import of {collection_path} reported {n} warnings: {first[0]}, ... "
                  f"(msprof-kit import -dir {collection_path} shows them all)")


def iterations(steps: List[Tuple[int, int, int]]) -> List[Tuple[int, int, int, int]]:
    """(model, index, start, end) from step-trace (model, timestamp, tag) records (KIT_STEP_TRACE):
    per model in time order, MODEL_START (tag 0) opens iteration 1, 2, ...; MODEL_END (1) closes it;
    ITER_END (4) closes it and opens the next. An iteration still open at the end is discarded."""
    if not steps:
        return []
    model, stamp, tag = (np.array(col, dtype=np.int64) for col in zip(*steps))
    return iteration_spans(model, stamp, tag).iterations


class IterationSpans(NamedTuple):
    """The iterations of step-trace records and where they lie among them: `order` sorts the
    records by model, then time (ties in their given order); iteration k opens at the record
    `order[start_at[k]]` and closes at `order[end_at[k]]`."""

    iterations: List[Tuple[int, int, int, int]]  # (model, index, start, end), by model, then time
    order: np.ndarray
    start_at: np.ndarray
    end_at: np.ndarray


def iteration_spans(model: np.ndarray, stamp: np.ndarray, tag: np.ndarray) -> IterationSpans:
    """`iterations` of step-trace records given as columns, with the positions of each iteration's
    opening and closing record in the records' (model, time) order: a record strictly between
    them belongs to the iteration."""
    order = np.lexsort((stamp, model))
    tags = tag[order]
    bounds = np.flatnonzero((tags == 0) | (tags == 1) | (tags == 4))
    out: List[Tuple[int, int, int, int]] = []
    start_at: List[int] = []
    end_at: List[int] = []
    index: Dict[int, int] = {}  # per model: the number of its next iteration
    opened: Dict[int, Optional[int]] = {}  # per model: the position of its open iteration's start
    models, stamps = model[order], stamp[order]
    for pos, m, t, g in zip(bounds.tolist(), models[bounds].tolist(), stamps[bounds].tolist(), tags[bounds].tolist()):
        index.setdefault(m, 1)
        began = opened.setdefault(m, None)
        if g == 0 and began is None:
            opened[m] = pos
        elif g in (1, 4) and began is not None:
            out.append((m, index[m], int(stamps[began]), t))
            start_at.append(began)
            end_at.append(pos)
            index[m] += 1
            opened[m] = pos if g == 4 else None
    return IterationSpans(out, order, np.array(start_at, dtype=np.int64), np.array(end_at, dtype=np.int64))


def store_identity(collection_path: str) -> int:
    """A number that changes whenever the store is written again: a CRC-32 (31 bits, to fit
    sqlite's signed user_version) of the store file's device, inode, size and modification time
    in ns. An import replaces the store by a rename, so every import gives a new identity."""
    st = os.stat(store_path(collection_path))
    return zlib.crc32(f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}".encode()) & 0x7FFFFFFF




def int_blocks(conn: sqlite3.Connection, table: str, exprs: Sequence[str],
               size: int = 262144) -> Iterator[Dict[str, np.ndarray]]:
    """Integer expressions of a table's rows (`exprs`: columns, or SQL over them, each giving an
    integer, never NULL), in rowid order, `size` rows at a time as int64 arrays keyed by expression,
    with the rows' rowids under "rowid": only these columns are read, and never all rows at once."""
    sql = f"SELECT rowid, {', '.join(exprs)} FROM {table} WHERE rowid > ? ORDER BY rowid LIMIT ?"
    last = -(1 << 62)
    while True:
        values = fetch_ints(conn.execute(sql, (last, size)), len(exprs) + 1)
        if not len(values):
            return
        last = int(values[-1, 0])
        block = {e: values[:, j + 1] for j, e in enumerate(exprs)}
        block["rowid"] = values[:, 0]
        yield block
        if len(values) < size:
            return


FETCH_ROWS = 32768  # rows turned from sqlite's Python tuples into arrays at a time


def string_table(conn: sqlite3.Connection, missing: str) -> np.ndarray:
    """STRING_IDS as an object array indexed by id, `missing` at ids no row has (empty without
    rows). Ids 0 to n - 1, as the stores and unified DBs have them, are read as the values in id
    order alone."""
    n, lo, hi = conn.execute("SELECT COUNT(*), MIN(id), MAX(id) FROM STRING_IDS").fetchone()
    if not n:
        return np.zeros(0, dtype=object)
    if lo == 0 and hi == n - 1:
        out: np.ndarray = np.empty(n, dtype=object)
        out[:] = [v for (v,) in conn.execute("SELECT value FROM STRING_IDS ORDER BY id")]
        return out
    rows = conn.execute("SELECT id, value FROM STRING_IDS WHERE id >= 0").fetchall()  # (no text has id -1)
    out = np.full(max(int(hi) + 1, 0), missing, dtype=object)
    values: np.ndarray = np.empty(len(rows), dtype=object)
    values[:] = [r[1] for r in rows]
    out[np.array([r[0] for r in rows], dtype=np.int64)] = values
    return out


def fetch_ints(cursor: sqlite3.Cursor, width: int) -> np.ndarray:
    """The rows of a cursor of `width` integer columns as an int64 array (rows x width), taken
    FETCH_ROWS at a time: never a Python tuple per row for all of them at once."""
    parts: List[np.ndarray] = []
    while True:
        rows = cursor.fetchmany(FETCH_ROWS)
        if not rows:
            break
        parts.append(np.array(rows, dtype=np.int64).reshape(len(rows), width))
    return np.concatenate(parts) if parts else np.zeros((0, width), np.int64)


def int_columns(conn: sqlite3.Connection, table: str, exprs: Sequence[str]) -> Dict[str, np.ndarray]:
    """`int_blocks` of every row, joined (with "rowid")."""
    parts = list(int_blocks(conn, table, exprs))
    return {e: np.concatenate([p[e] for p in parts]) if parts else np.zeros(0, np.int64)
            for e in ["rowid", *exprs]}


def texts_of(conn: sqlite3.Connection, ids: np.ndarray) -> np.ndarray:
    """The STRING_IDS texts of integer ids (an object array; NaN for an unknown id, as a lookup by pandas gives), each distinct
    id looked up once."""
    uniq, inverse = np.unique(np.asarray(ids, dtype=np.int64), return_inverse=True)
    found: Dict[int, str] = {}
    listed = uniq.tolist()
    for lo in range(0, len(listed), 500):
        chunk = listed[lo:lo + 500]
        found.update(conn.execute(f"SELECT id, value FROM STRING_IDS WHERE id IN ({','.join('?' * len(chunk))})",
                                  chunk).fetchall())
    texts = np.array([found.get(i, np.nan) for i in listed], dtype=object)
    return texts[inverse.reshape(-1)] if len(listed) else np.zeros(0, dtype=object)


def real_values(conn: sqlite3.Connection, table: str, expr: str, where: str = "",
                size: int = 262144) -> np.ndarray:
    """A numeric expression of a table's rows (`where`: an SQL condition, or all rows) in rowid
    order, as float64 (NULL as NaN), fetched `size` rows at a time."""
    cursor = conn.execute(f"SELECT {expr} FROM {table}{f' WHERE {where}' if where else ''} ORDER BY rowid")
    parts: List[np.ndarray] = []
    while True:
        rows = cursor.fetchmany(size)
        if not rows:
            break
        parts.append(np.array([r[0] for r in rows], dtype=np.float64))
    return np.concatenate(parts) if parts else np.zeros(0, np.float64)
