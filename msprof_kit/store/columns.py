"""Column-wise tables in KIT_COLUMNS: how a column is encoded, and how it is read back.

A columnar table (schema.COLUMNAR) is stored one KIT_COLUMNS row per column: its values as one
little-endian BLOB (texts as int32 codes, their distinct texts as JSON labels). An all-integer
unified table (schema.MIRRORED) is mirrored there too, each column in the narrowest integer type
that holds it. `StoredColumns` reads a column whole or by row range without loading the rest of its
BLOB (docs/store.md).

Millions of API or task rows share a few hundred names: the ingest hands such a column over as
`CodedTexts` (codes into a table of texts), and the writer and the STRING_IDS pool number its
distinct texts in the order of their first row (`text_codes`)."""
from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Protocol, Sequence, Tuple, Union

import numpy as np
import pandas as pd

from .. import native_impl, schema
from ..arrays import ascending
from ..errors import StoreError

RUN_GAP = 1 << 16  # rows between two wanted rows of a column beyond which they are read apart


@dataclass
class CodedTexts:
    """A column of texts as codes into a table of texts (row i reads texts[codes[i]]; the table
    may hold a text more than once): millions of API rows share a few hundred names."""
    codes: np.ndarray
    texts: np.ndarray

    def first_seen(self) -> Tuple[np.ndarray, np.ndarray]:
        """(codes, labels) as pd.factorize gives them of the texts themselves: the distinct texts
        in the order of their first row, each row's position among them."""
        rows, used = pd.factorize(self.codes, use_na_sentinel=False)
        canon, labels = pd.factorize(np.asarray(self.texts, dtype=object)[used], use_na_sentinel=False)
        return canon[rows], labels


ColumnValues = Union[np.ndarray, CodedTexts]  # a column as the ingest hands it over
Table = Union[pd.DataFrame, Dict[str, ColumnValues]]  # a table as the ingest hands it over


def text_codes(values: ColumnValues) -> Tuple[np.ndarray, np.ndarray]:
    """(codes, labels) of a column of texts, given as texts or as CodedTexts: the distinct texts in
    the order of their first row, each row's position among them."""
    if isinstance(values, CodedTexts):
        return values.first_seen()
    return pd.factorize(np.asarray(values, dtype=object), use_na_sentinel=False)


class BlobHandle(Protocol):
    """An open BLOB (sqlite3.Blob, Python 3.11+), as blob_slice reads it."""

    def seek(self, offset: int, origin: int = 0, /) -> None: ...

    def read(self, length: int = -1, /) -> bytes: ...

    def close(self) -> None: ...


def check_columnar(table: str, frame: Table) -> None:
    """A StoreError unless `frame` has every column of the columnar table (schema.COLUMNAR)."""
    missing = [c for c in schema.COLUMNAR[table] if c not in frame]
    if missing:
        raise StoreError(f"internal: table {table} lacks columns {missing}")


def column_array(values: ColumnValues) -> Tuple[np.ndarray, Optional[np.ndarray]]:
    """A columnar table's column as stored: (little-endian values, None), or for texts (int32
    codes, the distinct texts in the order of their first row)."""
    if not isinstance(values, CodedTexts):
        arr = np.asarray(values)
        if arr.dtype != object:
            return np.ascontiguousarray(arr.astype(arr.dtype.newbyteorder("<"), copy=False)), None
    codes, labels = text_codes(values)
    return codes.astype("<i4"), labels


def encode_columns(table: str, frame: Table) -> Iterator[Tuple[object, ...]]:
    """KIT_COLUMNS rows of a columnar table: (table, column, dtype, bytes, labels)."""
    check_columnar(table, frame)
    for name in list(frame.keys()):
        arr, labels = column_array(frame[name])
        yield (table, name, arr.dtype.str, arr.data,
               None if labels is None else native_impl.json_list([str(x) for x in labels]))


NARROW: Tuple[np.dtype, ...] = tuple(np.dtype(t) for t in ("<i1", "<i2", "<i4"))  # the types below int64


def narrowest_type(lo: int, hi: int) -> np.dtype:
    """The smallest signed little-endian integer type that holds lo..hi (int64 at most)."""
    for dtype in NARROW:
        info = np.iinfo(dtype)
        if info.min <= lo and hi <= info.max:
            return dtype
    return np.dtype("<i8")


def narrowest(values: np.ndarray) -> np.ndarray:
    """Integers in the smallest signed little-endian type that holds them all (int64 at most)."""
    if len(values):
        dtype = narrowest_type(int(values.min()), int(values.max()))
        if dtype in NARROW:
            return values.astype(dtype)
    return np.ascontiguousarray(values.astype("<i8", copy=False))


def encode_ints(table: str, cols: Sequence[schema.Column], frame: pd.DataFrame) -> Iterator[Tuple[object, ...]]:
    """KIT_COLUMNS rows mirroring an all-integer unified table (schema.MIRRORED), in schema order,
    each column in the narrowest integer type that holds it (readers widen them to int64)."""
    for name, _ in cols:
        arr = narrowest(frame[name].to_numpy())
        yield (table, name, arr.dtype.str, arr.data, None)


class StoredColumns:
    """The columns of a column-wise table in KIT_COLUMNS, read whole or by row range without
    loading the rest of the BLOB (docs/store.md). Values come as stored: the narrowest integer
    type of a mirror, int32 codes of a text column (`labels` gives its distinct texts)."""

    def __init__(self, conn: sqlite3.Connection, table: str) -> None:
        self.conn, self.table = conn, table
        self._open: Dict[int, BlobHandle] = {}  # BLOB handles kept open, by KIT_COLUMNS rowid (blob_slice)
        self.where: Dict[str, Tuple[int, np.dtype, int]] = {}
        if conn.execute("SELECT 1 FROM sqlite_master WHERE name='KIT_COLUMNS'").fetchone():
            for rowid, name, dtype, size in conn.execute(
                    "SELECT rowid, name, dtype, length(data) FROM KIT_COLUMNS WHERE tableName = ? ORDER BY rowid",
                    (table,)):
                kind = np.dtype(dtype)
                self.where[name] = (int(rowid), kind, int(size) // kind.itemsize)

    @property
    def names(self) -> List[str]:
        return list(self.where)

    def __contains__(self, name: str) -> bool:
        return name in self.where

    def __len__(self) -> int:
        """Rows of the table (of its first column; 0 when it has none)."""
        return next(iter(self.where.values()))[2] if self.where else 0

    def read(self, name: str, lo: int = 0, hi: Optional[int] = None) -> np.ndarray:
        """Rows lo:hi of a column, as stored (read-only)."""
        rowid, dtype, n = self.where[name]
        hi = n if hi is None else min(hi, n)
        lo = min(lo, hi)
        if lo == 0 and hi == n:
            blob = self.conn.execute("SELECT data FROM KIT_COLUMNS WHERE rowid = ?", (rowid,)).fetchone()[0]
        else:
            blob = blob_slice(self.conn, rowid, lo * dtype.itemsize, (hi - lo) * dtype.itemsize, self._open)
        return np.frombuffer(blob, dtype=dtype)

    def take(self, name: str, rows: np.ndarray) -> np.ndarray:
        """A column at these rows (any order, repeats allowed), as stored. Rows lying close together
        are read as one range (RUN_GAP); many rows, or rows spread over the whole table, read the
        column whole."""
        rows = np.asarray(rows, dtype=np.int64)
        dtype = self.where[name][1]
        if len(rows) * 4 >= len(self):
            return self.read(name)[rows]
        out = np.empty(len(rows), dtype=dtype)
        if not len(rows):
            return out
        order = None if ascending(rows) else np.argsort(rows, kind="stable")
        ordered = rows if order is None else rows[order]
        cuts = np.flatnonzero(np.diff(ordered) > RUN_GAP) + 1
        for a, b in zip(np.r_[0, cuts].tolist(), np.r_[cuts, len(rows)].tolist()):
            lo = int(ordered[a])
            values = self.read(name, lo, int(ordered[b - 1]) + 1)[ordered[a:b] - lo]
            if order is None:
                out[a:b] = values
            else:
                out[order[a:b]] = values
        return out

    def on(self, conn: sqlite3.Connection) -> "StoredColumns":
        """The same table over another connection (a forked child's)."""
        other = StoredColumns.__new__(StoredColumns)
        other.conn, other.table, other.where, other._open = conn, self.table, self.where, {}
        return other

    def labels(self, name: str) -> Optional[np.ndarray]:
        """The distinct texts of a text column (None for a numeric one)."""
        row = self.conn.execute("SELECT labels FROM KIT_COLUMNS WHERE rowid = ?", (self.where[name][0],)).fetchone()
        return np.array(json.loads(row[0]), dtype=object) if row[0] is not None else None


def iter_columns(conn: sqlite3.Connection, table: str) -> Iterator[Tuple[str, np.ndarray, Optional[np.ndarray]]]:
    """(name, values, labels) of each stored column of a column-wise table, one at a time (nothing
    when the store has no KIT_COLUMNS): values are the array as stored (a text column's int32
    codes), labels the distinct texts of a text column, else None."""
    if not conn.execute("SELECT 1 FROM sqlite_master WHERE name='KIT_COLUMNS'").fetchone():
        return
    for name, dtype, blob, labels in conn.execute(
            "SELECT name, dtype, data, labels FROM KIT_COLUMNS WHERE tableName = ? ORDER BY rowid", (table,)):
        values = np.frombuffer(blob, dtype=np.dtype(dtype))
        yield name, values, (np.array(json.loads(labels), dtype=object) if labels is not None else None)


def read_columns(conn: sqlite3.Connection, table: str) -> pd.DataFrame:
    """A columnar table back as a DataFrame (empty when absent), texts decoded."""
    return pd.DataFrame({name: labels[values] if labels is not None else values
                         for name, values, labels in iter_columns(conn, table)})


def blob_slice(conn: sqlite3.Connection, rowid: int, start: int, length: int,
               handles: Optional[Dict[int, BlobHandle]] = None) -> bytes:
    """`length` bytes from `start` of a KIT_COLUMNS BLOB: read in place where sqlite3 can (Python
    3.11+), else through substr (which loads the whole BLOB).

    A BLOB larger than a page is a chain of overflow pages that sqlite walks from the start to
    reach an offset, except on a handle that has walked it before. `handles` keeps the handles
    open by rowid, so that reading a column range after range costs its bytes, not the pages
    before each range again (at 10M tasks, reading CANN_API's columns 500k rows at a time
    otherwise re-read tens of GB from the page cache)."""
    if hasattr(conn, "blobopen"):
        blob = handles.get(rowid) if handles is not None else None
        if blob is None:
            blob = conn.blobopen("KIT_COLUMNS", "data", rowid, readonly=True)
            if handles is not None:
                handles[rowid] = blob
        try:
            blob.seek(start)
            return blob.read(length)
        finally:
            if handles is None:
                blob.close()
    row = conn.execute("SELECT substr(data, ?, ?) FROM KIT_COLUMNS WHERE rowid = ?", (start + 1, length, rowid))
    return bytes(row.fetchone()[0])


