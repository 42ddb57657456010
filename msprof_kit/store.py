"""Writing and opening the store: one sqlite database per collection.

The store lives at `PROF_xxx/sqlite/msprof_kit.db` (a folder the reference analysis skips), or,
when the collection cannot be written or MSPROF_KIT_STORE (`--store`) names a folder, in a folder
standing for the collection elsewhere (`stand_in`); it is written in one transaction with indexes created after loading, and replaces the old store
atomically (temp file, synced, then rename). `export_db` copies its unified tables to
`msprof_{ts}.db`. A store carries its format version; one that is damaged, foreign or of another
version is not read (`store_problem`).
"""
from __future__ import annotations

import contextlib
import errno
import glob
import hashlib
import json
import os
import queue
import re
import shutil
import sqlite3
import threading
import time
import urllib.parse
import zlib
from dataclasses import dataclass
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Set, Tuple, Union

import numpy as np
import pandas as pd

from . import before_start, pages, schema
from .arrays import ascending, first_seen
from .codec import CodedTexts, text_codes
from .errors import Diagnostics, OutputError, StoreError
from .spill import scratch_error

STORE_DIR = "sqlite"
STORE_NAME = "msprof_kit.db"
STORE_ENV = "MSPROF_KIT_STORE"  # a folder for the stores (one sub-folder per collection); --store sets it
CACHE_NAME = "msprof-kit"  # the per-user cache folder's name, in $XDG_CACHE_HOME or ~/.cache
STORE_VERSION = 2  # PRAGMA user_version of the stores this msprof-kit writes and reads (2: per-group PMU
# columns, KIT_TASK_PMU_PY, KIT_TASK.infoNs, names by task id in legacy JOBs; a store of another version is
# imported again)
APPLICATION_ID = 0x4D534B54  # PRAGMA application_id of a store ("MSKT")
NO_STORE = "there is no store"
# A unified DB msprof-kit exported says which store it was made from, in its header (no table or
# row of the reference's schema changes): application_id DB_APPLICATION_ID, and user_version the
# store's identity (`store_identity`). `current_db` reads them back, so that a second `export db`
# does not write an identical second file (docs/store.md, "Exporting the unified DB once").
DB_APPLICATION_ID = 0x4D534B44  # "MSKD"
UNIFIED_DB_GLOB = "msprof_" + "[0-9]" * 14 + ".db"
SQLITE_MAGIC = b"SQLite format 3\x00"
# errors that say a file cannot be written, whatever file it is (others, such as EIO, count when the
# file is the output's or beside it)
WRITE_ERRNOS = frozenset(getattr(errno, n) for n in ("ENOSPC", "EDQUOT", "EFBIG", "EROFS") if hasattr(errno, n))
# sqlite's messages for a database it cannot write
SQLITE_WRITE_ERRORS = ("disk is full", "disk I/O error", "unable to open database", "readonly database")
# what a process leaves while it writes: `.<db>.tmp-PID` (and its `.parts` folder), `.scratch-PID-*`
LEFTOVER = re.compile(r"\.(?:msprof_kit|msprof_\d{14})\.db\.tmp-(\d+)(?:\.parts)?|\.scratch-(\d+)-.+")
BATCH_ROWS = 50_000
ROWS_PER_INSERT = 200
# at most this many bound values in one multi-row INSERT statement, below sqlite's default
# SQLITE_MAX_VARIABLE_NUMBER (32766 since sqlite 3.32)
MAX_BOUND_VALUES = 30000
PMU_CHUNK = 100_000
API_ROWS = 1 << 22  # CANN_API rows judged at a time (before_start) when the DB leaves some out
TEMP_CACHE_KIB = 64 * 1024  # page cache of the temporary wide PMU table
RUN_GAP = 1 << 16  # rows between two wanted rows of a column beyond which they are read apart
Table = Union[pd.DataFrame, Dict[str, Union[np.ndarray, CodedTexts]]]


def _uri(path: str) -> str:
    """A `file:` URI for a path, whatever characters it holds (bytes that are not UTF-8 included:
    they are percent-encoded as the bytes the file system has)."""
    return "file:" + urllib.parse.quote(os.fsencode(os.path.abspath(path)))


def _text(value: object) -> object:
    """A str as sqlite can store it: a file name's bytes that are not UTF-8 (lone surrogates from
    os.listdir) shown as \\xNN escapes; anything else as it is."""
    if isinstance(value, str):
        return value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return value


def can_write(folder: str) -> bool:
    """Whether this process may create files in `folder`, or, when it does not exist yet, in the
    nearest folder above it that does (permissions, read-only mounts)."""
    folder = os.path.abspath(folder)
    while not os.path.isdir(folder):
        parent = os.path.dirname(folder)
        if parent == folder:
            return False
        folder = parent
    if os.access in os.supports_effective_ids:
        return os.access(folder, os.W_OK | os.X_OK, effective_ids=True)
    return os.access(folder, os.W_OK | os.X_OK)


def cache_root() -> str:
    """The per-user cache folder of msprof-kit: $XDG_CACHE_HOME/msprof-kit, else ~/.cache/msprof-kit."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):  # unset, empty or relative: the XDG default
        base = os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, CACHE_NAME)


def stand_in(collection_path: str) -> str:
    """The folder standing for a collection outside it: `<root>/<name>-<hash>`, where root is
    MSPROF_KIT_STORE (--store) or the per-user cache folder, name the collection folder's name
    (characters other than letters, digits, '.', '_' and '-' as '_') and hash the first 12 hex
    digits of the SHA-256 of its real path (two collections of one name stay apart). It is laid
    out as the collection: `sqlite/msprof_kit.db`, `mindstudio_profiler_output/`, `msprof_{ts}.db`."""
    real = os.path.realpath(collection_path)
    digest = hashlib.sha256(os.fsencode(real)).hexdigest()[:12]
    name = re.sub(r"[^A-Za-z0-9._-]", "_", os.path.basename(real))[:80] or "root"
    root = os.environ.get(STORE_ENV) or cache_root()
    return os.path.join(os.path.abspath(os.path.expanduser(root)), f"{name}-{digest}")


def own_store_path(collection_path: str) -> str:
    """Where the store goes inside the collection: PROF_xxx/sqlite/msprof_kit.db."""
    return os.path.join(collection_path, STORE_DIR, STORE_NAME)


def store_path(collection_path: str, writing: bool = False) -> str:
    """Where the store of a collection is, or goes when `writing`: with MSPROF_KIT_STORE (--store)
    in its stand-in folder; else in the collection (sqlite/msprof_kit.db) when that can be written;
    else in its stand-in folder in the cache, except that a reader is given a usable store the
    collection already holds (imported by someone who could write it) when the cache has none."""
    kept = os.path.join(stand_in(collection_path), STORE_DIR, STORE_NAME)
    if os.environ.get(STORE_ENV):
        return kept
    own = own_store_path(collection_path)
    if can_write(os.path.dirname(own)):
        return own
    if not writing and _problem_at(kept) is not None and _problem_at(own) is None:
        return own
    return kept


def output_root(collection_path: str) -> str:
    """Where the exports of a collection go: the collection itself, or, when it cannot be written,
    its stand-in folder (mindstudio_profiler_output/ and msprof_{ts}.db there)."""
    return collection_path if can_write(collection_path) else stand_in(collection_path)


def elsewhere_note(collection_path: str, exports: bool = False) -> Optional[str]:
    """The one-line note for a collection that cannot be written: where its store is kept (unless
    --store chose it) and, with `exports`, where its exports go; None when it can be written."""
    if can_write(collection_path) and can_write(os.path.dirname(own_store_path(collection_path))):
        return None
    said = []
    where = store_path(collection_path)
    if not os.environ.get(STORE_ENV) and where != own_store_path(collection_path):
        said.append(f"its store is kept in {os.path.dirname(where)}")
    if exports and not can_write(collection_path):
        said.append(f"its exports go to {output_root(collection_path)}")
    return f"{collection_path} cannot be written; {' and '.join(said)}" if said else None


def write_failure(exc: BaseException, path: str) -> Optional[OutputError]:
    """The output error `exc` stands for when it says that `path` (or a file beside it) cannot be
    written: a full disk, a read-only file system, an I/O error, a folder on its way that cannot be
    made or written (no permission); None for any other error."""
    if isinstance(exc, OutputError):
        return exc
    if isinstance(exc, OSError):
        where = os.path.abspath(exc.filename) if isinstance(exc.filename, str) else ""
        folder = os.path.dirname(os.path.abspath(path)) + os.sep
        ours = bool(where) and (where.startswith(folder) or folder.startswith(where.rstrip(os.sep) + os.sep))
        if exc.errno not in WRITE_ERRNOS and not ours:
            return None
        cause = exc.strerror or str(exc)
    elif isinstance(exc, sqlite3.OperationalError) and any(m in str(exc) for m in SQLITE_WRITE_ERRORS):
        cause = str(exc)
    else:
        return None
    return OutputError(f"cannot write the database ({cause}); nothing of it is kept", path=path, cause=cause)


def store_problem(collection_path: str) -> Optional[str]:
    """Why the store of a collection cannot be read (NO_STORE when there is none), or None when it
    can: not a file, empty, not an sqlite database, truncated, not msprof-kit's, another format
    version, or a table missing from its table list (KIT_TABLES). Reads the 100-byte header and
    the table names, nothing more."""
    return _problem_at(store_path(collection_path))


def _problem_at(path: str) -> Optional[str]:
    if not os.path.lexists(path):
        return NO_STORE
    if not os.path.isfile(path):
        return "is not a file"
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(100)
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if size == 0:
        return "is empty"
    if len(head) < 100 or not head.startswith(SQLITE_MAGIC):
        return "is not an sqlite database"
    page = int.from_bytes(head[16:18], "big")
    pages_ = int.from_bytes(head[28:32], "big")
    whole = (65536 if page == 1 else page) * pages_
    if head[24:28] == head[92:96] and size < whole:  # a valid page count (sqlite file format 1.3)
        return f"is truncated ({size} of {whole} bytes)"
    if int.from_bytes(head[68:72], "big") != APPLICATION_ID:
        return "carries no msprof-kit store format (another program's database, or an older msprof-kit's store)"
    version = int.from_bytes(head[60:64], "big")
    if version != STORE_VERSION:
        return f"has store format version {version}, this msprof-kit reads version {STORE_VERSION}"
    try:
        conn = sqlite3.connect(_uri(path) + "?mode=ro", uri=True)
        try:
            present = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            listed = [r[0] for r in conn.execute("SELECT name FROM KIT_TABLES")] if "KIT_TABLES" in present else None
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        return f"cannot be read ({exc})"
    if listed is None:
        return "lacks its table list (KIT_TABLES)"
    missing = [t for t in listed if t not in present]
    if missing:
        return f"lacks table {', '.join(missing)}"
    return None


def _running(pid: int) -> bool:
    """Whether process `pid` runs on this machine (a zombie does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):  # no /proc
        return True


def remove_leftovers(collection_path: str) -> List[str]:
    """Remove what writers that are no longer running left (killed): temporary stores and unified
    DBs (`.msprof_kit.db.tmp-PID`, `.msprof_{ts}.db.tmp-PID`, with their `.parts` folders) and
    scratch folders (`.scratch-PID-*`). Leftovers of running processes are kept. Returns what went."""
    gone = []
    for folder in (os.path.dirname(store_path(collection_path, writing=True)), output_root(collection_path)):
        if not can_write(folder):  # nothing of ours can be there (someone else's collection)
            continue
        try:
            names = os.listdir(folder)
        except (FileNotFoundError, NotADirectoryError):
            continue
        for name in names:
            m = LEFTOVER.fullmatch(name)
            if not m or _running(int(m.group(1) or m.group(2))):
                continue
            path = os.path.join(folder, name)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.remove(path)
            gone.append(path)
    return gone


def _check_columnar(table: str, frame: Table) -> None:
    missing = [c for c in schema.COLUMNAR[table] if c not in frame]
    if missing:
        raise StoreError(f"internal: table {table} lacks columns {missing}")


def column_array(values: Union[np.ndarray, CodedTexts]) -> Tuple[np.ndarray, Optional[np.ndarray]]:
    """A columnar table's column as stored: (little-endian values, None), or for texts (int32
    codes, the distinct texts in the order of their first row)."""
    if isinstance(values, CodedTexts) or np.asarray(values).dtype == object:
        codes, labels = text_codes(values)
        return codes.astype("<i4"), labels
    values = np.asarray(values)
    return np.ascontiguousarray(values.astype(values.dtype.newbyteorder("<"), copy=False)), None


def encode_columns(table: str, frame: Table) -> Iterator[Tuple[object, ...]]:
    """KIT_COLUMNS rows of a columnar table: (table, column, dtype, bytes, labels)."""
    _check_columnar(table, frame)
    for name in list(frame.keys()):
        arr, labels = column_array(frame[name])
        yield (table, name, arr.dtype.str, memoryview(arr),
               None if labels is None else json.dumps([str(x) for x in labels], ensure_ascii=False))


NARROW = tuple(np.dtype(t) for t in ("<i1", "<i2", "<i4"))


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
        yield (table, name, arr.dtype.str, memoryview(arr), None)


class StoredColumns:
    """The columns of a column-wise table in KIT_COLUMNS, read whole or by row range without
    loading the rest of the BLOB (docs/store.md). Values come as stored: the narrowest integer
    type of a mirror, int32 codes of a text column (`labels` gives its distinct texts)."""

    def __init__(self, conn: sqlite3.Connection, table: str) -> None:
        self.conn, self.table = conn, table
        self._open: Dict[int, object] = {}  # BLOB handles kept open, by KIT_COLUMNS rowid (blob_slice)
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
    k = max(1, min(ROWS_PER_INSERT, MAX_BOUND_VALUES // width))
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


def partial_path(path: str, pid: int) -> str:
    """Where process `pid` writes the database `path` before putting it in place."""
    return os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.tmp-{pid}")


def db_path(collection_path: str, stamp: str) -> str:
    """The unified DB export `msprof_{stamp}.db` at the collection root."""
    return os.path.join(collection_path, f"msprof_{stamp}.db")


class _SpilledColumn:
    """One KIT_COLUMNS column of a table written in parts: the parts' values appended to a scratch
    file, put into its BLOB when the table ends. A text column keeps its distinct texts in the
    order of their first row over all parts (as `text_codes` gives them of the whole column) and
    spills int32 codes; a mirrored integer column spills int64 and is narrowed at the end."""

    COPY_ROWS = 1 << 20  # values moved from the scratch file into the BLOB at a time

    def __init__(self, path: str, mirror: bool) -> None:
        self.path, self.mirror = path, mirror
        self.file = open(path, "w+b")
        self.dtype: Optional[np.dtype] = None
        self.labels: Optional[Dict[str, int]] = None
        self.n = 0
        self.lo: Optional[int] = None
        self.hi: Optional[int] = None

    def add(self, values: Union[np.ndarray, CodedTexts]) -> None:
        if self.mirror:
            arr = np.asarray(values).astype("<i8")
            if len(arr):
                lo, hi = int(arr.min()), int(arr.max())
                self.lo = lo if self.lo is None else min(self.lo, lo)
                self.hi = hi if self.hi is None else max(self.hi, hi)
        else:
            arr, labels = column_array(values)
            if labels is not None:  # the part's codes renumbered into the labels of all parts
                known = self.labels = {} if self.labels is None else self.labels
                arr = np.array([known.setdefault(str(x), len(known)) for x in labels], dtype="<i4")[arr]
        if self.dtype is None:
            self.dtype = arr.dtype
        elif arr.dtype != self.dtype:
            raise StoreError(f"internal: column {os.path.basename(self.path)} is {arr.dtype} in one part, "
                             f"{self.dtype} in another")
        try:
            self.file.write(memoryview(np.ascontiguousarray(arr)))
        except OSError as exc:  # a full disk
            raise scratch_error(exc, self.path) from exc
        self.n += len(arr)

    def stored_dtype(self) -> np.dtype:
        if self.mirror:  # as `narrowest` of the whole column
            return narrowest_type(self.lo, self.hi) if self.lo is not None and self.hi is not None \
                else np.dtype("<i8")
        return self.dtype if self.dtype is not None else np.dtype("<i4")

    def write(self, conn: sqlite3.Connection, table: str, name: str) -> None:
        """The KIT_COLUMNS row of the column, its BLOB filled from the scratch file a piece at a time."""
        out = self.stored_dtype()
        labels = json.dumps(list(self.labels), ensure_ascii=False) if self.labels is not None else None
        rowid = conn.execute("INSERT INTO KIT_COLUMNS VALUES (?, ?, ?, zeroblob(?), ?)",
                             (table, name, out.str, self.n * out.itemsize, labels)).lastrowid
        if not self.n:
            return
        src = self.dtype
        self.file.seek(0)
        pieces = (np.ascontiguousarray(np.frombuffer(self.file.read(min(self.COPY_ROWS, self.n - lo) * src.itemsize),
                                                     dtype=src).astype(out, copy=False))
                  for lo in range(0, self.n, self.COPY_ROWS))
        if hasattr(conn, "blobopen"):
            with conn.blobopen("KIT_COLUMNS", "data", rowid) as blob:
                for piece in pieces:
                    blob.write(memoryview(piece))
        else:  # Python < 3.11 has no incremental BLOB I/O: the column is written whole
            whole = b"".join(piece.tobytes() for piece in pieces)
            conn.execute("UPDATE KIT_COLUMNS SET data = ? WHERE rowid = ?", (whole, rowid))

    def close(self) -> None:
        self.file.close()
        os.remove(self.path)


class _Parts:
    """A table being written in parts: its rows (sqlite, or the pages of an `Appender` kept open
    until the last part) and its KIT_COLUMNS columns (spilled)."""

    def __init__(self, table: str) -> None:
        self.table = table
        self.pages: Optional[pages.Appender] = None
        self.kinds: Optional[bytes] = None
        self.columns: Dict[str, _SpilledColumn] = {}


class TableWriter:
    """A new database written table by table, then put in place atomically.

    Tables are written as soon as they are final, so the caller can drop them: the import never
    holds the whole store in memory. Empty tables are skipped (the reference creates only tables
    with rows). Use as a context manager; an error removes the temporary file, and one that
    says the file cannot be written (a full disk) is raised as an OutputError.

    A database written as a store (named STORE_NAME) carries APPLICATION_ID, STORE_VERSION and
    its table list (KIT_TABLES), and is synced to disk before it is renamed into place."""

    def __init__(self, path: str, background: bool = False) -> None:
        self.path = path
        self.is_store = os.path.basename(path) == STORE_NAME
        # background: `put` hands the table to a writing thread and returns (sqlite and the page
        # packer let go of the GIL while they write, so the caller computes the next table meanwhile)
        self._queue: Optional["queue.Queue[Optional[Tuple[str, Table]]]"] = queue.Queue(maxsize=1) \
            if background else None
        self._thread: Optional[threading.Thread] = None
        self._error: Optional[BaseException] = None
        folder = os.path.dirname(path) or "."
        self.tmp = partial_path(path, os.getpid())
        try:
            os.makedirs(folder, exist_ok=True)
            if os.path.isdir(path) and not os.path.islink(path):
                self._remove_folder_in_the_way()
            if os.path.exists(self.tmp):
                os.remove(self.tmp)
        except OSError as exc:
            raise write_failure(exc, path) or exc
        self.attached: Optional[str] = None
        self._parts_given: Set[str] = set()  # the caller's view of the tables left open
        self._parts: Dict[str, _Parts] = {}  # tables whose last part has not come yet
        self.conn = self._connect()
        self.tables: List[str] = []
        self.indexed: Set[str] = set()
        self.paged = pages.enabled()  # numeric tables written as pages (msprof_kit.pages)

    def _remove_folder_in_the_way(self) -> None:
        """An empty folder where the database goes is removed; one holding files is left alone."""
        try:
            os.rmdir(self.path)
        except OSError as exc:
            raise OutputError("is a folder, not a database; move it away and write again", path=self.path,
                              cause="a directory is in the way") from exc

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(_uri(self.tmp), uri=True, check_same_thread=False)  # one user at a time
        conn.execute(f"PRAGMA page_size={pages.PAGE_SIZE}")
        conn.execute("PRAGMA journal_mode=OFF")
        conn.execute("PRAGMA synchronous=OFF")
        if self.attached:
            conn.execute("ATTACH DATABASE ? AS src", (_uri(self.attached) + "?mode=ro",))
        conn.execute("BEGIN")
        return conn

    def __enter__(self) -> "TableWriter":
        return self

    def __exit__(self, kind, exc, tb) -> None:
        if kind is None:
            self._finish()
            return
        self._stop()
        self._drop_parts()
        self.conn.close()
        if os.path.exists(self.tmp):
            os.remove(self.tmp)
        failure = write_failure(exc, self.path)
        if failure is not None and failure is not exc:
            raise failure from exc
        if isinstance(exc, sqlite3.Error):
            raise StoreError(f"cannot write the database: {exc}", path=self.path) from exc

    def put(self, table: str, frame: Optional[Table], last: bool = True) -> None:
        """Write one table: a DataFrame, or for a columnar table also a dict of column arrays. A
        table may come in parts (rows in order): every part but the last with `last=False`. While
        a table of pages waits for its next part, only columnar tables may be written besides."""
        if _is_empty(frame) and (last is False or table not in self._parts_given):
            return
        if not last:
            self._parts_given.add(table)
        else:
            self._parts_given.discard(table)
        if self._queue is None:
            self._put(table, frame, last)
            return
        self._raise()
        if self._thread is None:
            self._thread = threading.Thread(target=self._drain, name="store writer", daemon=True)
            self._thread.start()
        self._queue.put((table, frame, last))

    def _drain(self) -> None:
        assert self._queue is not None
        while True:
            item = self._queue.get()
            if item is None:
                return
            if self._error is None:  # after a failure the rest is only taken off the queue
                try:
                    self._put(*item)
                except BaseException as exc:  # raised in the caller's thread, at its next call
                    self._error = exc

    def _raise(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def _stop(self) -> None:
        """Let the writing thread finish what it was given, and end."""
        if self._thread is not None:
            assert self._queue is not None
            self._queue.put(None)
            self._thread.join()
            self._thread = None

    def _sync(self) -> None:
        """Before the caller uses the connection itself: everything handed over is written."""
        self._stop()
        self._raise()

    def _put(self, table: str, frame: Optional[Table], last: bool = True) -> None:
        if not last or table in self._parts:
            self._put_part(table, frame, last)
            return
        assert frame is not None
        self._need_sqlite(table)
        if table in schema.COLUMNAR:
            self._put_columns(table, encode_columns(table, frame))
            return
        frame, cols, kinds = self._rows_of(table, frame)
        self.create(table, cols)
        if kinds:
            with self.pages_of(table) as out:
                out.add_frame(frame, [c[0] for c in cols], kinds)
        else:
            _insert_frame(self.conn, table, cols, frame)
        self.index(table)
        if table in schema.MIRRORED:
            self._put_columns(table, encode_ints(table, cols, frame))

    def _put_columns(self, table: str, rows: Iterable[Tuple[object, ...]]) -> None:
        cols = schema.EXTENSIONS["KIT_COLUMNS"]
        if "KIT_COLUMNS" not in self.tables:
            self.conn.execute(schema.create_sql("KIT_COLUMNS", cols))
            self.tables.append("KIT_COLUMNS")
        self.conn.executemany(schema.insert_sql("KIT_COLUMNS", cols), rows)

    def _need_sqlite(self, table: str) -> None:
        """Writing `table` needs the connection: no other table of pages may be waiting for parts."""
        waiting = [t for t, p in self._parts.items() if p.pages is not None and t != table]
        if waiting:
            raise StoreError(f"internal: table {table} written while {waiting[0]} waits for its next part",
                             path=self.path)

    def _put_part(self, table: str, frame: Optional[Table], last: bool) -> None:
        parts = self._parts.get(table)
        if parts is None:
            parts = self._parts[table] = _Parts(table)
            if table not in schema.COLUMNAR:
                self._need_sqlite(table)
                self.create(table, schema.ALL_TABLES[table])
        if not _is_empty(frame):
            assert frame is not None
            if table in schema.COLUMNAR:
                self._spill(parts, table, frame, mirror=False)
            else:
                self._add_rows(parts, table, frame)
        if last:
            self._end_parts(parts)

    def _spill(self, parts: _Parts, table: str, frame: Table, mirror: bool,
               names: Optional[Sequence[str]] = None) -> None:
        if not mirror:
            _check_columnar(table, frame)
        names = list(frame.keys()) if names is None else names
        if parts.columns and list(parts.columns) != list(names):
            raise StoreError(f"internal: the parts of table {table} have other columns", path=self.path)
        folder = self.tmp + ".parts"
        os.makedirs(folder, exist_ok=True)
        for name in names:
            col = parts.columns.get(name)
            if col is None:
                col = parts.columns[name] = _SpilledColumn(os.path.join(folder, f"{table}.{name}"), mirror)
            values = frame[name]
            col.add(values.to_numpy() if isinstance(values, pd.Series) else values)

    def _rows_of(self, table: str, frame: Table) -> Tuple[pd.DataFrame, Sequence[schema.Column], Optional[bytes]]:
        """(the rows as a frame, the table's columns, the packer's column kinds or None when the
        rows go through sqlite)."""
        if isinstance(frame, dict):
            frame = pd.DataFrame(frame)
        cols = schema.ALL_TABLES[table]
        missing = [c[0] for c in cols if c[0] not in frame.columns]
        if missing:
            raise StoreError(f"internal: table {table} lacks columns {missing}", path=self.path)
        kinds = pages.column_kinds([c[1] for c in cols], [np.asarray(frame[c[0]]) for c in cols]) \
            if self.paged else None
        return frame, cols, kinds

    def _add_rows(self, parts: _Parts, table: str, frame: Table) -> None:
        frame, cols, kinds = self._rows_of(table, frame)
        names = [c[0] for c in cols]
        if parts.kinds is None and parts.pages is None:
            parts.kinds = kinds or b""
            if kinds:  # sqlite lets go of the file until the last part
                root = pages.root_page(self.conn, table)
                self.conn.commit()
                self.conn.close()
                parts.pages = pages.Appender(self.tmp, table, root)
        if (kinds or b"") != parts.kinds:
            raise StoreError(f"internal: the parts of table {table} have other column types", path=self.path)
        if parts.pages is not None:
            parts.pages.add_frame(frame, names, parts.kinds)
        else:
            _insert_frame(self.conn, table, cols, frame)
        if table in schema.MIRRORED:
            self._spill(parts, table, frame, mirror=True, names=names)

    def _end_parts(self, parts: _Parts) -> None:
        """The last part came: the pages get their interior pages, sqlite takes the file again,
        and the spilled columns go into KIT_COLUMNS."""
        del self._parts[parts.table]
        if parts.pages is not None:
            try:
                parts.pages.finish()
            finally:
                parts.pages.close()
                parts.pages = None
                self.conn = self._connect()
        if parts.table not in schema.COLUMNAR:
            self.index(parts.table)
        self._need_sqlite(parts.table)
        if parts.columns:
            self._put_columns(parts.table, ())
            for name, col in parts.columns.items():
                col.write(self.conn, parts.table, name)
                col.close()

    def _drop_parts(self) -> None:
        """After a failure: the scratch files of tables left in parts, and their open files."""
        for parts in self._parts.values():
            if parts.pages is not None:
                parts.pages.close()
            for col in parts.columns.values():
                col.file.close()
        self._parts.clear()
        shutil.rmtree(self.tmp + ".parts", ignore_errors=True)

    def put_rows(self, table: str, cols: Sequence[schema.Column], rows: Iterable[Tuple[object, ...]]) -> None:
        self._sync()
        self.create(table, cols)
        self.conn.executemany(schema.insert_sql(table, cols), rows)

    def attach(self, path: str) -> None:
        """Attach another database, read-only, as `src` (for `copy`)."""
        self._sync()
        self.conn.commit()
        self.attached = path
        self.conn.execute("ATTACH DATABASE ? AS src", (_uri(path) + "?mode=ro",))
        self.conn.execute("BEGIN")

    def copy(self, table: str, cols: Sequence[schema.Column]) -> None:
        """Copy a table with these columns from the attached database, in row order; skipped when
        it has no rows."""
        if self.conn.execute(f'SELECT 1 FROM src."{table}" LIMIT 1').fetchone() is None:
            return
        self.create(table, cols)
        names = ", ".join(c[0] for c in cols)
        self.conn.execute(f'INSERT INTO main.{table} SELECT {names} FROM src."{table}" ORDER BY rowid')
        self.index(table)

    @contextlib.contextmanager
    def pages_of(self, table: str) -> Iterator[pages.Appender]:
        """The rows of a created, empty table as pages: sqlite commits and closes the file, the
        caller adds the rows to the `pages.Appender` given, and sqlite opens the file again."""
        root = pages.root_page(self.conn, table)
        self.conn.commit()
        self.conn.close()
        out = pages.Appender(self.tmp, table, root)
        try:
            yield out
            out.finish()
        finally:
            out.close()
            self.conn = self._connect()

    def index(self, table: str) -> None:
        """Create the indexes of a table whose rows are all written (schema.INDEXES)."""
        if table not in self.indexed:
            self.indexed.add(table)
            for sql in schema.INDEXES.get(table, ()):
                self.conn.execute(sql)

    def create(self, table: str, cols: Sequence[schema.Column]) -> None:
        if table in self.tables:
            raise StoreError(f"internal: table {table} written twice", path=self.path)
        self.conn.execute(schema.create_sql(table, cols))
        self.tables.append(table)

    def _finish(self) -> None:
        try:
            self._sync()
            if self._parts:
                raise StoreError(f"internal: table {next(iter(self._parts))} did not get its last part",
                                 path=self.path)
            for table in self.tables:
                self.index(table)
            if self.is_store:
                self.put_rows("KIT_TABLES", schema.EXTENSIONS["KIT_TABLES"],
                              [(t,) for t in self.tables + ["KIT_TABLES"]])
                self.conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                self.conn.execute(f"PRAGMA user_version = {STORE_VERSION}")
            self.conn.commit()
            self.conn.close()
            self._drop_parts()
            if self.is_store:
                _sync_file(self.tmp)
            os.replace(self.tmp, self.path)
        except BaseException as exc:
            self._drop_parts()
            self.conn.close()
            if os.path.exists(self.tmp):
                os.remove(self.tmp)
            failure = write_failure(exc, self.path)
            if failure is not None and failure is not exc:
                raise failure from exc
            if isinstance(exc, sqlite3.Error):
                raise StoreError(f"cannot write the database: {exc}", path=self.path) from exc
            raise
        if self.is_store:
            _sync_folder(os.path.dirname(self.path) or ".")


def _sync_file(path: str) -> None:
    """Flush a file's data to the disk (before it is renamed over the old one)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sync_folder(path: str) -> None:
    """Flush a folder's entries (a rename in it) to the disk, where folders can be synced."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # a system that cannot open folders (Windows): the rename stands as it is
        return
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.EBADF):  # folders that cannot be synced
            raise
    finally:
        os.close(fd)


def write_tables(path: str, tables: Dict[str, pd.DataFrame]) -> None:
    """Write `tables` into a new database at `path`, atomically."""
    with TableWriter(path) as out:
        for table, frame in tables.items():
            out.put(table, frame)


def put_info(out: "TableWriter", info: List[Tuple[int, str, str]], diag: Diagnostics) -> None:
    """The store's small tables, written last: KIT_INFO (`info`: the ingest's (device, key, value)
    rows), KIT_WARNINGS (the import's warnings so far), META_DATA and the ENUM_ tables."""
    for name, cols, rows in (
            ("KIT_INFO", schema.EXTENSIONS["KIT_INFO"], [tuple(_text(v) for v in row) for row in info]),
            ("KIT_WARNINGS", schema.EXTENSIONS["KIT_WARNINGS"], [(_text(w),) for w in diag.warnings]),
            ("META_DATA", schema.UNIFIED["META_DATA"], list(schema.META_ROWS))):
        if rows:
            out.put_rows(name, cols, rows)
    for enum, values in schema.ENUM_ROWS.items():
        out.put_rows(enum, schema.UNIFIED[enum], list(values))


def open_store(collection_path: str) -> sqlite3.Connection:
    """The store of a collection, read-only; a StoreError when it is missing or cannot be used."""
    path = store_path(collection_path)
    problem = store_problem(collection_path)
    if problem == NO_STORE:
        raise StoreError("no store here; run 'msprof-kit import' first", path=path)
    if problem is not None:
        raise StoreError(f"{problem}; import the collection again (msprof-kit import -dir {collection_path})",
                         path=path)
    return sqlite3.connect(_uri(path) + "?mode=ro", uri=True)


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
    out: List[Tuple[int, int, int, int]] = []
    by_model: dict = {}
    for model, ts, tag in sorted(steps, key=lambda r: (r[0], r[1])):
        state = by_model.setdefault(model, {"index": 1, "start": None})
        if tag == 0 and state["start"] is None:
            state["start"] = ts
        elif tag in (1, 4) and state["start"] is not None:
            out.append((model, state["index"], state["start"], ts))
            state["index"] += 1
            state["start"] = ts if tag == 4 else None
    return out


def store_identity(collection_path: str) -> int:
    """A number that changes whenever the store is written again: a CRC-32 (31 bits, to fit
    sqlite's signed user_version) of the store file's device, inode, size and modification time
    in ns. An import replaces the store by a rename, so every import gives a new identity."""
    st = os.stat(store_path(collection_path))
    return zlib.crc32(f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}".encode()) & 0x7FFFFFFF


def current_db(collection_path: str) -> Optional[str]:
    """The newest `msprof_{ts}.db` at the collection root when msprof-kit made it from the store as
    it is now (its header names the store's identity) and it is newer than the store; else None."""
    found = sorted(glob.glob(os.path.join(glob.escape(output_root(collection_path)), UNIFIED_DB_GLOB)))
    if not found or not os.path.isfile(store_path(collection_path)):
        return None
    newest = found[-1]
    try:
        conn = sqlite3.connect(_uri(newest) + "?mode=ro", uri=True)
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


def blob_slice(conn: sqlite3.Connection, rowid: int, start: int, length: int,
               handles: Optional[Dict[int, object]] = None) -> bytes:
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


def _paged_mirror(dest: "TableWriter", table: str, cols: Sequence[schema.Column], stored: StoredColumns,
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
            part = [stored.read(name, lo, hi).astype(np.int64, copy=False) for name, _ in cols]
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


def _drop_unused_strings(dest: "TableWriter", src: sqlite3.Connection, candidates: np.ndarray, present: Set[str],
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


def _put_long_pmu(dest: "TableWriter", src: sqlite3.Connection) -> None:
    """TASK_PMU_INFO rows (globalTaskId, name id, value), metric by metric, from the first PMU row of
    each task. The wide rows go into a temporary table PMU_CHUNK rows at a time (each column's
    slice read from its BLOB), then each metric is one INSERT..SELECT."""
    stored = StoredColumns(src, "KIT_TASK_PMU")
    if "globalTaskId" not in stored:
        return
    metric_ids = dict(src.execute("SELECT value, id FROM STRING_IDS").fetchall())
    metrics = [m for m in stored.names if m not in ("taskRow", "globalTaskId")]
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
        part = {"globalTaskId": gid[lo:hi][keep]}
        for i, metric in enumerate(metrics):
            part[f"m{i}"] = column(metric, lo, hi)[keep]
        _insert_frame(dest.conn, "temp.wide_pmu", cols, pd.DataFrame(part))
    del gid, first
    dest.create("TASK_PMU_INFO", schema.UNIFIED["TASK_PMU_INFO"])
    for i, metric in enumerate(metrics):
        dest.conn.execute(f"INSERT INTO TASK_PMU_INFO SELECT globalTaskId, ?, m{i} FROM temp.wide_pmu "
                          "ORDER BY rowid", (metric_ids.get(metric),))
    dest.conn.execute("DROP TABLE temp.wide_pmu")


def _paged_long_pmu(dest: "TableWriter", gid: np.ndarray, first: np.ndarray, metrics: Sequence[str],
                    metric_ids: Dict[str, int], column) -> None:
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
