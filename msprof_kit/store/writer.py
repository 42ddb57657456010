"""Writing a database table by table, then putting it in place atomically.

`TableWriter` writes a store (or a unified DB) in one transaction, with indexes created after
loading; numeric tables go in as b-tree pages where the C packer serves (`pages`), a table may come
in parts (its KIT_COLUMNS columns spilled to scratch files meanwhile), and the finished file is
synced and renamed over the old one. Row inserts go in batches bounded by named limits
(BATCH_ROWS, ROWS_PER_INSERT, MAX_BOUND_VALUES)."""
from __future__ import annotations

import contextlib
import errno
import os
import queue
import shutil
import sqlite3
import threading
from types import TracebackType
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Set, Tuple, Type

import numpy as np
import pandas as pd

from .. import schema
from ..errors import Diagnostics, OutputError, StoreError
from . import pages
from .columns import CodedTexts, ColumnValues, Table, check_columnar, encode_columns, encode_ints
from .spilled import SpilledColumn
from .paths import APPLICATION_ID, STORE_NAME, STORE_VERSION, file_uri, partial_path

# errors that say a file cannot be written, whatever file it is (others, such as EIO, count when the
# file is the output's or beside it)
WRITE_ERRNOS = frozenset(getattr(errno, n) for n in ("ENOSPC", "EDQUOT", "EFBIG", "EROFS") if hasattr(errno, n))
# sqlite's messages for a database it cannot write
SQLITE_WRITE_ERRORS = ("disk is full", "disk I/O error", "unable to open database", "readonly database")

BATCH_ROWS = 50_000  # rows turned into Python values at a time for sqlite's INSERT
ROWS_PER_INSERT = 200  # rows per multi-row INSERT statement (sqlite's per-statement cost dominates)
# at most this many bound values in one multi-row INSERT statement, below sqlite's default
# SQLITE_MAX_VARIABLE_NUMBER (32766 since sqlite 3.32)
MAX_BOUND_VALUES = 30000


def _text(value: object) -> object:
    """A str as sqlite can store it: a file name's bytes that are not UTF-8 (lone surrogates from
    os.listdir) shown as \\xNN escapes; anything else as it is."""
    if isinstance(value, str):
        return value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return value


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


def _matrix(arrays: Sequence[np.ndarray], lo: int, hi: int) -> np.ndarray:
    """Rows lo:hi of the columns as one 2-D array: int64 when every column is integral, else object
    (whose tolist() gives the plain Python values sqlite can bind)."""
    part = [a[lo:hi] for a in arrays]
    if all(p.dtype.kind in "bi" or (p.dtype.kind == "u" and p.dtype.itemsize < 8) for p in part):
        return np.column_stack(part).astype(np.int64, copy=False) if part else np.zeros((hi - lo, 0), np.int64)
    out: np.ndarray = np.empty((hi - lo, len(part)), dtype=object)
    for j, p in enumerate(part):
        out[:, j] = p
    return out


def insert_frame(conn: sqlite3.Connection, table: str, cols: Sequence[schema.Column], frame: pd.DataFrame) -> None:
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


def _rows(values: ColumnValues) -> int:
    return len(values.codes) if isinstance(values, CodedTexts) else len(values)


def _is_empty(frame: Optional[Table]) -> bool:
    if frame is None:
        return True
    if isinstance(frame, dict):
        return not frame or _rows(next(iter(frame.values()))) == 0
    return frame.empty


class _Parts:
    """A table being written in parts: its rows (sqlite, or the pages of an `Appender` kept open
    until the last part) and its KIT_COLUMNS columns (spilled)."""

    def __init__(self, table: str) -> None:
        self.table = table
        self.pages: Optional[pages.Appender] = None
        self.kinds: Optional[bytes] = None
        self.columns: Dict[str, SpilledColumn] = {}


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
        self._queue: Optional["queue.Queue[Optional[Tuple[str, Optional[Table], bool]]]"] = queue.Queue(maxsize=1) \
            if background else None
        self._thread: Optional[threading.Thread] = None
        self._error: Optional[BaseException] = None
        self._flusher: Optional[threading.Thread] = None  # an early sync of what is written (stores)
        self._flush_failed: List[OSError] = []  # what it raised
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
        self.paged = pages.enabled()  # numeric tables written as pages (msprof_kit.store.pages)

    def _remove_folder_in_the_way(self) -> None:
        """An empty folder where the database goes is removed; one holding files is left alone."""
        try:
            os.rmdir(self.path)
        except OSError as exc:
            raise OutputError("is a folder, not a database; move it away and write again", path=self.path,
                              cause="a directory is in the way") from exc

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(file_uri(self.tmp), uri=True, check_same_thread=False)  # one user at a time
        conn.execute(f"PRAGMA page_size={pages.PAGE_SIZE}")
        conn.execute("PRAGMA journal_mode=OFF")
        conn.execute("PRAGMA synchronous=OFF")
        if self.attached:
            conn.execute("ATTACH DATABASE ? AS src", (file_uri(self.attached) + "?mode=ro",))
        conn.execute("BEGIN")
        return conn

    def __enter__(self) -> "TableWriter":
        return self

    def __exit__(self, kind: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        if exc is None:
            self._finish()
            return
        self._stop()
        self._abandon(exc)

    def _abandon(self, exc: BaseException) -> None:
        """Give up the write after `exc`: drop the spilled parts, close, remove the temporary file,
        and raise the error the user should see in place of `exc` (an OutputError for a full disk
        or a refused path, a StoreError for another sqlite error); return when `exc` stands as it is."""
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
        frame, cols, kinds = self._rows_of(table, frame, texts=True)
        arrays = pages.text_columns(kinds, [np.asarray(frame[c[0]]) for c in cols]) if kinds else None
        self.create(table, cols)
        if kinds and arrays is not None:
            with self.pages_of(table) as out:
                out.add(kinds, arrays, len(frame))
        else:
            insert_frame(self.conn, table, cols, frame)
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
            check_columnar(table, frame)
        names = list(frame.keys()) if names is None else names
        if parts.columns and list(parts.columns) != list(names):
            raise StoreError(f"internal: the parts of table {table} have other columns", path=self.path)
        folder = self.tmp + ".parts"
        os.makedirs(folder, exist_ok=True)
        for name in names:
            col = parts.columns.get(name)
            if col is None:
                col = parts.columns[name] = SpilledColumn(os.path.join(folder, f"{table}.{name}"), mirror)
            values = frame[name]
            col.add(values.to_numpy() if isinstance(values, pd.Series) else values)

    def _rows_of(self, table: str, frame: Table,
                 texts: bool = False) -> Tuple[pd.DataFrame, Sequence[schema.Column], Optional[bytes]]:
        """(the rows as a frame, the table's columns, the packer's column kinds or None when the
        rows go through sqlite). `texts`: TEXT columns may be packed too (a whole table only: the
        parts of a table must all take the kinds of its first)."""
        if isinstance(frame, dict):
            frame = pd.DataFrame(frame)
        cols = schema.ALL_TABLES[table]
        missing = [c[0] for c in cols if c[0] not in frame.columns]
        if missing:
            raise StoreError(f"internal: table {table} lacks columns {missing}", path=self.path)
        kinds = pages.column_kinds([c[1] for c in cols], [np.asarray(frame[c[0]]) for c in cols], texts) \
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
            insert_frame(self.conn, table, cols, frame)
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
        self.conn.execute("ATTACH DATABASE ? AS src", (file_uri(path) + "?mode=ro",))
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
        self._flush_soon()

    def _flush_soon(self) -> None:
        """A store's pages written so far go to the disk in the background (the system writes
        them meanwhile, so the sync before the rename has little left to wait for)."""
        if self.is_store and (self._flusher is None or not self._flusher.is_alive()):
            self._flusher = threading.Thread(target=_flush_early, args=(self.tmp, self._flush_failed), name="store flush", daemon=True)
            self._flusher.start()

    def index(self, table: str) -> None:
        """Create the indexes of a table whose rows are all written (schema.INDEXES; a store's
        schema.STORE_INDEXES)."""
        if table not in self.indexed:
            self.indexed.add(table)
            for sql in (schema.STORE_INDEXES if self.is_store else schema.INDEXES).get(table, ()):
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
                if self._flusher is not None:
                    self._flusher.join()
                if self._flush_failed:
                    raise self._flush_failed[0]
                _sync_file(self.tmp)
            os.replace(self.tmp, self.path)
        except BaseException as exc:
            self._abandon(exc)
            raise
        if self.is_store:
            _sync_folder(os.path.dirname(self.path) or ".")


def _flush_early(path: str, failed: List[OSError]) -> None:
    """fdatasync a file being written, from a thread; a failure goes to `failed`, which the sync
    before the rename raises (a later fsync on another descriptor may no longer see it). A file
    already removed (a write that failed otherwise) is no failure."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    except OSError as exc:
        failed.append(OSError(exc.errno, exc.strerror, path))
        return
    try:
        os.fdatasync(fd)
    except OSError as exc:
        failed.append(OSError(exc.errno, exc.strerror, path))
    finally:
        os.close(fd)


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


def put_info(out: TableWriter, info: List[Tuple[int, str, str]], diag: Diagnostics) -> None:
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


