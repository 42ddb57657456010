"""Large numeric tables written as sqlite b-tree pages, beside sqlite.

sqlite inserts a few million rows a second; the stores and `msprof_{ts}.db` hold tens of millions
(TASK_PMU_INFO has about 28 rows a task). For a table whose columns are all numbers, msprof-kit
packs the rows into table b-tree leaf pages itself (`native_impl.table_leaves`, in C) and puts
them into the database file after sqlite has written everything else:

1. sqlite creates the table as usual (so its schema row is sqlite's own) with an empty root page,
   commits and closes the file;
2. `Appender` appends the leaf pages to the file as they are packed, then the interior pages
   above them, writes the top page over the empty root page and sets the header's page count;
3. sqlite opens the file again and goes on with the next table, appending after those pages.

The result is an ordinary database (tests run `PRAGMA integrity_check` over it). The file format is
sqlite's "Database File Format" (sqlite.org/fileformat2.html): big-endian, 1-based page numbers, the
100-byte header on page 1, table interior pages (type 5) of (child, key) cells and a right-most
child, where a key is the largest rowid below its child.
"""
from __future__ import annotations

import os
import sqlite3
from typing import Any, BinaryIO, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import pandas as pd

from .. import native_impl
from ..errors import StoreError

PAGE_SIZE = 65536
HEADER_PAGE_COUNT = 28       # the header's database size in pages (4 bytes)
INTERIOR_HEADER = 12
INTERIOR_CELL_MAX = 4 + 9 + 2  # child page number, a varint key, its cell pointer
CHUNK_ROWS = 1 << 20          # rows packed per call
LOCK_BYTE = 1 << 30           # sqlite's lock-byte offset: the page holding it is never a b-tree page


def enabled() -> bool:
    """Whether tables are written as pages: with the C packer (the Python twin is for tests; sqlite's
    INSERT is faster than it)."""
    return native_impl.current() == "c"


def _text_affinity(decl: str) -> bool:
    """Whether sqlite gives a column so declared TEXT affinity (its rules: INT first, then CHAR,
    CLOB or TEXT), under which a str is stored as it is."""
    return "INT" not in decl and any(word in decl for word in ("CHAR", "CLOB", "TEXT"))


def column_kinds(types: Sequence[str], arrays: Sequence[np.ndarray], texts: bool = False) -> Optional[bytes]:
    """The packer's kind of each column (declared type, values), or None when a column is not a
    plain number array (objects, nullable integers) nor, with `texts`, an object array in a column of
    TEXT affinity ('t': `text_columns` packs those or says no): such tables go through sqlite."""
    kinds = bytearray()
    for decl, arr in zip(types, arrays):
        decl = decl.upper()
        if texts and arr.dtype == object and _text_affinity(decl):
            kinds += b"t"
        elif "PRIMARY KEY" in decl:
            if arr.dtype.kind not in "iu":
                return None
            kinds += b"k"
        elif arr.dtype.kind in "iub":
            if arr.dtype.kind == "u" and arr.dtype.itemsize == 8:
                return None
            kinds += b"r" if decl == "REAL" else b"i"
        elif arr.dtype.kind == "f":
            # INTEGER and NUMERIC affinity store whole reals as integers; REAL keeps them real
            kinds += b"r" if decl == "REAL" else b"n"
        else:
            return None
    return bytes(kinds)


def text_column(values: np.ndarray, longest: int) -> Optional[native_impl.TextColumn]:
    """Texts as the packer takes them, (UTF-8 blob, n + 1 int64 offsets); None when a value is not a
    str or not encodable (sqlite then says what it says of it), or longer than `longest` bytes."""
    if not len(values):
        return None
    try:
        table = native_impl.utf8_table(values.tolist())
    except (TypeError, UnicodeEncodeError):  # (utf8_table's refusal of a non-str and of a lone surrogate)
        return None
    if np.diff(table.offsets).max() > longest:
        return None
    return table.blob, table.offsets


def text_columns(kinds: bytes, arrays: Sequence[np.ndarray]) -> Optional[List[Any]]:
    """`arrays` with each 't' column as a `text_column`, or None when one of them cannot be one (the
    table then goes through sqlite). A row's texts share what a cell may hold in a page without
    overflow pages."""
    wanted = [j for j, kind in enumerate(kinds) if kind == ord("t")]
    longest = (PAGE_SIZE - 35 - 8 - 22 - 10 * len(kinds)) // max(len(wanted), 1) - 2
    out: List[Any] = list(arrays)
    for j in wanted:
        column = text_column(np.asarray(arrays[j]), longest)
        if column is None:
            return None
        out[j] = column
    return out


def _as_packed(kind: int, column: Any, lo: int, hi: int) -> Any:
    """Rows lo:hi of a column, as the packer takes them."""
    if kind == ord("k"):
        return None
    if kind == ord("t"):
        blob, offsets = column
        return blob, offsets[lo:hi + 1]
    if kind == ord("i"):
        return np.ascontiguousarray(column[lo:hi], dtype=np.int64)
    return np.ascontiguousarray(column[lo:hi], dtype=np.float64)


class Appender:
    """Pages of one table appended to a database file that sqlite has closed: `add` the rows (in
    rowid order), then `finish` puts the interior pages above them and the top page over the root
    page sqlite gave the table, and sets the header's page count."""

    def __init__(self, db_path: str, table: str, root: int) -> None:
        self.db_path, self.table, self.root = db_path, table, root
        self.file: BinaryIO = open(db_path, "r+b")
        try:
            header = self.file.read(100)
            size = int.from_bytes(header[16:18], "big")
            if (65536 if size == 1 else size) != PAGE_SIZE:
                raise StoreError(f"internal: page size {size}, expected {PAGE_SIZE}", path=db_path)
            end = self.file.seek(0, os.SEEK_END)
            if end % PAGE_SIZE:
                raise StoreError("internal: the database file is not a whole number of pages", path=db_path)
        except BaseException:
            self.file.close()
            raise
        self.count = end // PAGE_SIZE       # pages in the file
        self.leaves: List[np.ndarray] = []  # page numbers of the leaves
        self.keys: List[np.ndarray] = []
        self.last_rowid: Optional[int] = None

    def _append(self, block: bytes) -> np.ndarray:
        """Write whole pages after the last one; their page numbers. The lock-byte page (the one
        holding file offset 2**30) is left zero and skipped: sqlite never reads it as a b-tree page
        and reports a file that uses it as malformed."""
        n = len(block) // PAGE_SIZE
        numbers = np.arange(self.count + 1, self.count + 1 + n, dtype=np.int64)
        lock = lock_page()
        self.file.seek(self.count * PAGE_SIZE)
        if self.count < lock <= self.count + n:
            cut = (lock - self.count - 1) * PAGE_SIZE
            self.file.write(block[:cut])
            self.file.write(bytes(PAGE_SIZE))
            self.file.write(block[cut:])
            numbers[numbers >= lock] += 1
            self.count += 1
        else:
            self.file.write(block)
        self.count += n
        return numbers

    def add(self, kinds: bytes, arrays: Sequence[Any], n: int) -> None:
        """Append n rows, CHUNK_ROWS at a time: one array a column (a `text_column` for 't'), in the
        order of `kinds`. The values of the 'k' column (INTEGER PRIMARY KEY) are the rowids, strictly
        increasing across calls; a table without one numbers its rows on from the last call."""
        key = next((np.asarray(a, dtype=np.int64) for k, a in zip(kinds, arrays) if k == ord("k")), None)
        for lo in range(0, n, CHUNK_ROWS):
            hi = min(n, lo + CHUNK_ROWS)
            ids: Union[int, np.ndarray]  # the first rowid, or every row's
            if key is None:
                ids = (self.last_rowid or 0) + 1
                last = (self.last_rowid or 0) + (hi - lo)
            else:
                rowids = np.ascontiguousarray(key[lo:hi])
                if self.last_rowid is not None and len(rowids) and rowids[0] <= self.last_rowid:
                    raise StoreError(f"cannot write table {self.table}: rowid {rowids[0]} does not follow "
                                     f"{self.last_rowid}", path=self.db_path)
                ids, last = rowids, int(rowids[-1])
            cols = [_as_packed(k, a, lo, hi) for k, a in zip(kinds, arrays)]  # a chunk converted at a time
            try:
                leaves, keys = native_impl.table_leaves(kinds, cols, hi - lo, PAGE_SIZE, ids)
            except ValueError as exc:  # rowids out of order: an INTEGER PRIMARY KEY repeated
                raise StoreError(f"cannot write table {self.table}: {exc}", path=self.db_path) from exc
            self.leaves.append(self._append(leaves))
            self.keys.append(np.frombuffer(keys, dtype=np.int64))
            self.last_rowid = last

    def add_frame(self, frame: Union[pd.DataFrame, Dict[str, np.ndarray]], names: Sequence[str],
                  kinds: bytes) -> None:
        """`add` the columns `names` of `frame` (all its rows), of the packer kinds `kinds`."""
        arrays = [np.asarray(frame[name]) for name in names]
        self.add(kinds, arrays, len(arrays[0]) if arrays else 0)

    def finish(self) -> None:
        """Write the interior pages above the leaves added, the top page over the table's root
        page, and the header's page count."""
        keys = np.concatenate(self.keys) if self.keys else np.zeros(0, np.int64)
        children = np.concatenate(self.leaves) if self.leaves else np.zeros(0, np.int64)
        if len(children) == 1:  # the leaf is the root: moved there, the file shortened again
            leaf = int(children[0])
            self.file.seek((leaf - 1) * PAGE_SIZE)
            page = self.file.read(PAGE_SIZE)
            _write_page(self.file, self.root, page)
            self.count = leaf - 1 if leaf - 1 != lock_page() else leaf - 2  # never end on the lock page
            self.file.truncate(self.count * PAGE_SIZE)
        elif len(children) > 1:
            while True:
                level, keys = _interior_level(children, keys)
                if len(level) == 1:
                    _write_page(self.file, self.root, level[0])
                    break
                children = self._append(b"".join(level))
        self.file.seek(HEADER_PAGE_COUNT)
        self.file.write(self.count.to_bytes(4, "big"))

    def close(self) -> None:
        """Close the database file."""
        self.file.close()


def lock_page() -> int:
    """The page number of sqlite's lock-byte page at this page size."""
    return LOCK_BYTE // PAGE_SIZE + 1


def _write_page(db: BinaryIO, number: int, page: bytes) -> None:
    db.seek((number - 1) * PAGE_SIZE)
    db.write(page)


def _interior_level(children: np.ndarray, keys: np.ndarray) -> Tuple[List[bytes], np.ndarray]:
    """Interior pages over these children (page numbers, each with its largest rowid): the pages,
    and their keys for the level above."""
    per_page = (PAGE_SIZE - INTERIOR_HEADER) // INTERIOR_CELL_MAX + 1  # + 1: the right-most child
    n = len(children)
    groups = -(-n // per_page)
    bounds = [min(n, g * per_page) for g in range(groups + 1)]
    if groups > 1 and bounds[-1] - bounds[-2] < 2:  # no page with one child: share with the one before
        bounds[-2] = (bounds[-3] + bounds[-1]) // 2
    pages: List[bytes] = []
    for lo, hi in zip(bounds, bounds[1:]):
        cells = [int(c).to_bytes(4, "big") + native_impl.varint(int(k)) for c, k in zip(children[lo:hi - 1], keys[lo:hi - 1])]
        page = bytearray(PAGE_SIZE)
        top = PAGE_SIZE
        for i, cell in enumerate(cells):
            top -= len(cell)
            page[top:top + len(cell)] = cell
            page[INTERIOR_HEADER + 2 * i:INTERIOR_HEADER + 2 * i + 2] = top.to_bytes(2, "big")
        page[0] = 5
        page[3:5] = len(cells).to_bytes(2, "big")
        page[5:7] = (top % 65536).to_bytes(2, "big")
        page[8:12] = int(children[hi - 1]).to_bytes(4, "big")
        pages.append(bytes(page))
    upper_keys = np.array([keys[hi - 1] for hi in bounds[1:]], dtype=np.int64)
    return pages, upper_keys


def root_page(conn: sqlite3.Connection, table: str) -> int:
    """The root page number sqlite gave `table`; a StoreError when there is no such table."""
    row = conn.execute("SELECT rootpage FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone()
    if row is None:
        raise StoreError(f"internal: table {table} was not created")
    return int(row[0])
