"""Large numeric tables written as sqlite b-tree pages, beside sqlite.

sqlite inserts a few million rows a second; the stores and `msprof_{ts}.db` hold tens of millions
(TASK_PMU_INFO has about 28 rows a task). For a table whose columns are all numbers, msprof-kit
packs the rows into table b-tree leaf pages itself (`native_impl.table_leaves`, in C) and puts
them into the database file after sqlite has written everything else:

1. sqlite creates the table as usual (so its schema row is sqlite's own) with an empty root page;
2. the leaf pages go to a spool file beside the database while the import or export runs;
3. once sqlite has committed and closed the file, `Spool.splice` appends the leaves and the
   interior pages above them to the file, writes the top page of each table over its empty root
   page, and sets the header's page count.

The result is an ordinary database (tests run `PRAGMA integrity_check` over it). The file format is
sqlite's "Database File Format" (sqlite.org/fileformat2.html): big-endian, 1-based page numbers, the
100-byte header on page 1, table interior pages (type 5) of (child, key) cells and a right-most
child, where a key is the largest rowid below its child.
"""
from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass, field
from typing import BinaryIO, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import pandas as pd

from . import native_impl
from .errors import StoreError

PAGE_SIZE = 65536
HEADER_PAGE_COUNT = 28       # the header's database size in pages (4 bytes)
INTERIOR_HEADER = 12
INTERIOR_CELL_MAX = 4 + 9 + 2  # child page number, a varint key, its cell pointer
CHUNK_ROWS = 1 << 20          # rows packed per call


def enabled() -> bool:
    """Whether tables are written as pages: with the C packer (the Python twin is for tests; sqlite's
    INSERT is faster than it)."""
    return native_impl.current() == "c"


def column_kinds(types: Sequence[str], arrays: Sequence[np.ndarray]) -> Optional[bytes]:
    """The packer's kind of each column (declared type, values), or None when a column is not a
    plain number array (texts, objects, nullable integers): such tables go through sqlite."""
    kinds = bytearray()
    for decl, arr in zip(types, arrays):
        decl = decl.upper()
        if "PRIMARY KEY" in decl:
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


def _as_packed(kind: int, arr: np.ndarray) -> Optional[np.ndarray]:
    if kind == ord("k"):
        return None
    if kind == ord("i"):
        return np.ascontiguousarray(arr, dtype=np.int64)
    return np.ascontiguousarray(arr, dtype=np.float64)


@dataclass
class _Run:
    """One table's leaves in the spool."""
    root: int                 # the page sqlite gave the table
    first: int                # index of its first leaf in the spool
    keys: List[np.ndarray] = field(default_factory=list)
    last_rowid: Optional[int] = None

    @property
    def leaves(self) -> int:
        return sum(len(k) for k in self.keys)


class Spool:
    """Leaf pages waiting for their database file to be closed by sqlite."""

    def __init__(self, db_path: str) -> None:
        self.db_path = db_path
        self.path = db_path + ".pages"
        self.file: Optional[BinaryIO] = None
        self.pages = 0
        self.runs: Dict[str, _Run] = {}

    def start(self, table: str, root: int) -> None:
        if table in self.runs:
            raise StoreError(f"internal: table {table} spooled twice", path=self.db_path)
        self.runs[table] = _Run(root=root, first=self.pages)

    def add(self, table: str, kinds: bytes, arrays: Sequence[Optional[np.ndarray]], n: int,
            rowids: Union[int, np.ndarray, None] = None) -> None:
        """Append n rows to a started table, CHUNK_ROWS at a time. rowids: the rowid-alias column
        (strictly increasing across every call for the table), or None for consecutive rowids."""
        run = self.runs[table]
        if self.file is None:
            self.file = open(self.path, "wb")
        for lo in range(0, n, CHUNK_ROWS):
            hi = min(n, lo + CHUNK_ROWS)
            if rowids is None:
                ids: Union[int, np.ndarray] = (run.last_rowid or 0) + 1
                last = (run.last_rowid or 0) + (hi - lo)
            else:
                ids = np.ascontiguousarray(np.asarray(rowids)[lo:hi], dtype=np.int64)
                if run.last_rowid is not None and len(ids) and ids[0] <= run.last_rowid:
                    raise StoreError(f"internal: table {table}: rowid {ids[0]} after {run.last_rowid}",
                                     path=self.db_path)
                last = int(ids[-1])
            cols = [None if a is None else a[lo:hi] for a in arrays]
            try:
                leaves, keys = native_impl.table_leaves(kinds, cols, hi - lo, PAGE_SIZE, ids)
            except ValueError as exc:  # rowids out of order: an INTEGER PRIMARY KEY repeated
                raise StoreError(f"cannot write table {table}: {exc}", path=self.db_path) from exc
            self.file.write(leaves)
            got = np.frombuffer(keys, dtype=np.int64)
            run.keys.append(got)
            self.pages += len(got)
            run.last_rowid = last

    def add_frame(self, table: str, types: Sequence[str], frame: Union[pd.DataFrame, Dict[str, np.ndarray]],
                  names: Sequence[str], kinds: bytes) -> None:
        arrays = [np.asarray(frame[name]) for name in names]
        key = [a for a, k in zip(arrays, kinds) if k == ord("k")]
        n = len(arrays[0]) if arrays else 0
        self.add(table, kinds, [_as_packed(k, a) for k, a in zip(kinds, arrays)], n,
                 np.asarray(key[0], dtype=np.int64) if key else None)

    def discard(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None
        if os.path.exists(self.path):
            os.remove(self.path)

    def splice(self) -> None:
        """Put the spooled tables into the closed database file, then remove the spool."""
        if self.file is not None:
            self.file.close()
            self.file = None
        if not self.runs:
            self.discard()
            return
        with open(self.db_path, "r+b") as db:
            header = db.read(100)
            size = int.from_bytes(header[16:18], "big")
            size = 65536 if size == 1 else size
            if size != PAGE_SIZE:
                raise StoreError(f"internal: page size {size}, expected {PAGE_SIZE}", path=self.db_path)
            db.seek(0, os.SEEK_END)
            end = db.tell()
            if end % PAGE_SIZE:
                raise StoreError("internal: the database file is not a whole number of pages", path=self.db_path)
            count = end // PAGE_SIZE
            with open(self.path, "rb") as spool:
                for table, run in self.runs.items():
                    count = self._place(db, spool, run, count)
            db.seek(HEADER_PAGE_COUNT)
            db.write(count.to_bytes(4, "big"))
        self.discard()

    def _place(self, db: BinaryIO, spool: BinaryIO, run: _Run, count: int) -> int:
        """Write one table's pages; returns the file's page count after them."""
        keys = np.concatenate(run.keys) if run.keys else np.zeros(0, np.int64)
        leaves = len(keys)
        if leaves == 0:
            return count
        if leaves == 1:
            spool.seek(run.first * PAGE_SIZE)
            _write_page(db, run.root, spool.read(PAGE_SIZE))
            return count
        _copy(spool, run.first * PAGE_SIZE, db, count * PAGE_SIZE, leaves * PAGE_SIZE)
        children = np.arange(count + 1, count + 1 + leaves, dtype=np.int64)
        count += leaves
        while True:
            pages, children, keys = _interior_level(children, keys)
            if len(pages) == 1:
                _write_page(db, run.root, pages[0])
                return count
            db.seek(count * PAGE_SIZE)
            db.write(b"".join(pages))
            children = np.arange(count + 1, count + 1 + len(pages), dtype=np.int64)
            count += len(pages)


def _write_page(db: BinaryIO, number: int, page: bytes) -> None:
    db.seek((number - 1) * PAGE_SIZE)
    db.write(page)


def _copy(src: BinaryIO, src_at: int, dst: BinaryIO, dst_at: int, length: int) -> None:
    """length bytes between files, inside the kernel where it can."""
    dst.flush()
    done = 0
    if hasattr(os, "copy_file_range"):
        try:
            while done < length:
                got = os.copy_file_range(src.fileno(), dst.fileno(), length - done, src_at + done, dst_at + done)
                if got == 0:
                    break
                done += got
        except OSError:
            pass  # a filesystem pair the call does not serve: the rest is copied below
    step = 1 << 24
    while done < length:
        src.seek(src_at + done)
        block = src.read(min(step, length - done))
        if not block:
            raise StoreError("internal: the page spool ended early", path=getattr(src, "name", None))
        dst.seek(dst_at + done)
        dst.write(block)
        done += len(block)


def _varint(v: int) -> bytes:
    return native_impl._varint(v)


def _interior_level(children: np.ndarray, keys: np.ndarray) -> Tuple[List[bytes], np.ndarray, np.ndarray]:
    """Interior pages over these children (page numbers, each with its largest rowid): the pages,
    and for the level above, placeholders for their numbers and their keys."""
    per_page = (PAGE_SIZE - INTERIOR_HEADER) // INTERIOR_CELL_MAX + 1  # + 1: the right-most child
    n = len(children)
    groups = -(-n // per_page)
    bounds = [min(n, g * per_page) for g in range(groups + 1)]
    if groups > 1 and bounds[-1] - bounds[-2] < 2:  # no page with one child: share with the one before
        bounds[-2] = (bounds[-3] + bounds[-1]) // 2
    pages: List[bytes] = []
    for lo, hi in zip(bounds, bounds[1:]):
        cells = [int(c).to_bytes(4, "big") + _varint(int(k)) for c, k in zip(children[lo:hi - 1], keys[lo:hi - 1])]
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
    return pages, np.zeros(len(pages), np.int64), upper_keys


def root_page(conn: sqlite3.Connection, table: str) -> int:
    row = conn.execute("SELECT rootpage FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone()
    if row is None:
        raise StoreError(f"internal: table {table} was not created")
    return int(row[0])
