"""Tables written as sqlite pages (msprof_kit.store.pages, the C packer `table_leaves` and its twin):
the two packers give the same bytes, and what they write is an ordinary database that sqlite
checks clean and reads back exactly as if sqlite had inserted the rows itself."""
from __future__ import annotations

import os
import sqlite3

import numpy as np
import pandas as pd
import pytest

from conftest import copy_input, needs_shared, run, run_once_with_c

from msprof_kit import native_impl
from msprof_kit import schema, store
from msprof_kit.errors import StoreError
from msprof_kit.store import pages, writer

INT64_MIN, INT64_MAX = -(2 ** 63), 2 ** 63 - 1


@pytest.fixture(autouse=True)
def c_only(native_implementation):
    """Pages are written with the C packer only; these tests choose implementations themselves."""
    run_once_with_c(native_implementation, "writes pages with the C packer")


def _ints(n: int, seed: int = 1) -> np.ndarray:
    """Integers of every serial width sqlite has, with their edges."""
    rng = np.random.default_rng(seed)
    edges = [0, 1, -1, 2, 127, 128, -128, -129, 32767, 32768, -32769, 8388607, 8388608, 2147483647,
             2147483648, -2147483649, 2 ** 47 - 1, 2 ** 47, -(2 ** 47) - 1, INT64_MIN, INT64_MAX]
    widths = rng.integers(0, 63, n)
    values = rng.integers(0, 2 ** 62, n, dtype=np.int64) >> widths
    values[rng.random(n) < 0.5] *= -1
    values[:len(edges)] = edges[:n]
    return values


def _floats(n: int, seed: int = 2) -> np.ndarray:
    rng = np.random.default_rng(seed)
    values = rng.normal(0, 1e6, n)
    values[::3] = np.round(values[::3])          # whole numbers: NUMERIC stores them as integers
    specials = [0.0, -0.0, np.nan, 1.0, 0.5, 1e300, -1e-300, 9.2233720368547758e18, -9.2233720368547758e18,
                2.0 ** 62, np.inf, -np.inf, 5e-324]
    values[:len(specials)] = specials[:n]
    return values


@pytest.mark.parametrize("page_size", [512, 4096, 65536])
def test_c_and_twin_pack_the_same_bytes(page_size):
    n = 3000
    ints, floats = _ints(n), _floats(n)
    kinds, cols = b"inrk", [ints, floats, floats, None]
    for rowids in (1, 7 + np.cumsum(np.random.default_rng(3).integers(1, 1000, n))):
        c = native_impl._native.table_leaves(kinds, cols, n, page_size, rowids)
        py = native_impl.py_table_leaves(kinds, cols, n, page_size, rowids)
        assert c == py
        assert len(c[0]) % page_size == 0 and len(c[0]) // page_size == len(c[1]) // 8 > 1


def _texts(n: int, seed: int = 4) -> list:
    """Texts sqlite stores as they are: empty, NUL, controls, non-ASCII, and long ones (serial types
    of one to three bytes)."""
    rng = np.random.default_rng(seed)
    alphabet = list("ab,\"\x00\n é中😀")
    texts = ["".join(rng.choice(alphabet, int(rng.integers(0, 40)))) for _ in range(n)]
    texts[:4] = ["", "\x00", "x" * 60, "y" * 1500][:n]
    return texts


def _text_column(texts: list, lead: bytes = b"") -> tuple:
    """(blob, offsets) of the texts, after `lead` bytes no text uses."""
    table = native_impl.text_table(texts)
    return lead + table.blob, table.offsets + len(lead)


@pytest.mark.parametrize("page_size", [4096, 65536])
def test_c_and_twin_pack_the_same_bytes_with_texts(page_size):
    """TEXT columns ('t'): the same bytes from both packers, with 50 text columns too (a record
    header longer than 127 bytes takes a two-byte size)."""
    n = 2000
    texts = _texts(n)
    kinds, cols = b"ktit", [None, _text_column(texts, b"lead"), _ints(n), _text_column(texts[::-1])]
    for rowids in (1, 7 + np.cumsum(np.random.default_rng(3).integers(1, 1000, n))):
        c = native_impl._native.table_leaves(kinds, cols, n, page_size, rowids)
        assert c == native_impl.py_table_leaves(kinds, cols, n, page_size, rowids)
        assert len(c[0]) // page_size == len(c[1]) // 8 > 1
    wide = _text_column(["é" * 30] * 10)
    c = native_impl._native.table_leaves(b"t" * 50, [wide] * 50, 10, page_size, 1)
    assert c == native_impl.py_table_leaves(b"t" * 50, [wide] * 50, 10, page_size, 1)


def test_both_packers_refuse_bad_text_columns():
    blob, offsets = _text_column(["ab", "c"])
    for fn in (native_impl._native.table_leaves, native_impl.py_table_leaves):
        with pytest.raises(ValueError, match="must be a pair"):
            fn(b"t", [blob], 2, 4096, 1)
        with pytest.raises(ValueError, match="must hold 3 int64 offsets"):
            fn(b"t", [(blob, offsets[:2])], 2, 4096, 1)
        with pytest.raises(ValueError, match="text 1 is not inside the blob"):
            fn(b"t", [(blob, np.array([0, 2, 9], np.int64))], 2, 4096, 1)
        with pytest.raises(ValueError, match="text 0 is not inside the blob"):
            fn(b"t", [(blob, np.array([2, 1, 3], np.int64))], 2, 4096, 1)
        with pytest.raises(ValueError, match="too long for the page size"):
            fn(b"t", [_text_column(["x" * 4050])], 1, 4096, 1)


def test_both_packers_refuse_rowids_out_of_order_and_bad_columns():
    ints = _ints(10)
    for fn in (native_impl._native.table_leaves, native_impl.py_table_leaves):
        with pytest.raises(ValueError, match="does not follow"):
            fn(b"i", [ints], 10, 4096, np.array([1, 2, 3, 3, 5, 6, 7, 8, 9, 10], dtype=np.int64))
        with pytest.raises(ValueError, match="must hold 10 int64"):
            fn(b"i", [ints[:9]], 10, 4096, 1)
        with pytest.raises(ValueError, match="kind"):
            fn(b"x", [ints], 10, 4096, 1)
        with pytest.raises(ValueError, match="page_size"):
            fn(b"i", [ints], 10, 1000, 1)
    assert native_impl._native.table_leaves(b"i", [ints[:0]], 0, 4096, 1) == (b"", b"")


COLS = [("id", "INTEGER PRIMARY KEY"), ("a", "INTEGER"), ("b", "NUMERIC"), ("c", "REAL"), ("d", "INTEGER")]


def _frame(n: int) -> pd.DataFrame:
    rng = np.random.default_rng(5)
    floats = _floats(n)
    floats[np.isinf(floats)] = 3.5   # sqlite keeps infinities; both sides agree, but keep the check simple
    return pd.DataFrame({"id": np.cumsum(rng.integers(1, 50, n)), "a": _ints(n), "b": floats,
                         "c": np.roll(floats, 1), "d": rng.integers(-5, 5, n).astype(np.float64)})


def _write(path: str, frame: pd.DataFrame, impl: str) -> None:
    previous = native_impl.use(impl)
    try:
        with store.TableWriter(path) as out:
            out.create("T", COLS)
            if impl == "c":
                kinds = pages.column_kinds([t for _, t in COLS], [frame[c].to_numpy() for c, _ in COLS])
                assert kinds == b"kinrn"  # d: reals in an INTEGER column
                with out.pages_of("T") as appender:
                    appender.add_frame(frame, [c for c, _ in COLS], kinds)
            else:
                writer.insert_frame(out.conn, "T", COLS, frame)
            out.put("TASK", pd.DataFrame({c: np.arange(len(frame), dtype=np.int64) % 97
                                          for c, _ in schema.UNIFIED["TASK"]}))
    finally:
        native_impl.use(previous)


def _rows(path: str, sql: str) -> list:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


@pytest.mark.parametrize("page_size", [512, 65536])
def test_pages_read_back_as_sqlite_inserted_rows(tmp_path, monkeypatch, page_size):
    """At 512-byte pages 60,000 rows need three levels of interior pages."""
    monkeypatch.setattr(pages, "PAGE_SIZE", page_size)
    frame = _frame(60_000)
    ours, theirs = str(tmp_path / "pages.db"), str(tmp_path / "sqlite.db")
    _write(ours, frame, "c")
    _write(theirs, frame, "python")
    assert sorted(os.listdir(tmp_path)) == ["pages.db", "sqlite.db"]
    assert _rows(ours, "PRAGMA integrity_check") == [("ok",)]
    typed = "SELECT id, a, typeof(b), b, typeof(c), c, typeof(d), d FROM T"
    assert _rows(ours, typed) == _rows(theirs, typed)
    assert _rows(ours, "SELECT count(*), min(id), max(id) FROM T WHERE id > 1000") == \
        _rows(theirs, "SELECT count(*), min(id), max(id) FROM T WHERE id > 1000")
    # the TASK index was built over pages, and sqlite can go on writing the file
    assert _rows(ours, "SELECT count(*) FROM TASK INDEXED BY TaskIndex WHERE startNs > 50") == \
        _rows(theirs, "SELECT count(*) FROM TASK WHERE startNs > 50")
    conn = sqlite3.connect(ours)
    conn.execute("INSERT INTO T (a, b, c, d) VALUES (1, 2, 3, 4)")
    conn.execute("DELETE FROM T WHERE id % 3 = 0")
    conn.commit()
    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    conn.close()


def test_a_repeated_primary_key_is_a_store_error(tmp_path):
    frame = _frame(100)
    frame.loc[50, "id"] = frame.loc[49, "id"]
    with pytest.raises(StoreError, match="does not follow"):
        with store.TableWriter(str(tmp_path / "x.db")) as out:
            out.put("CANN_API", pd.DataFrame({"startNs": frame.a, "endNs": frame.a, "type": 1, "globalTid": 2,
                                              "connectionId": frame.id, "name": 3}))
    assert os.listdir(tmp_path) == []


TEXT_COLS = [("id", "INTEGER PRIMARY KEY"), ("value", "TEXT"), ("n", "INTEGER")]


def _write_texts(path: str, frame: pd.DataFrame, impl: str) -> list:
    """Write table T (TEXT_COLS) as a whole table with `impl`; the kinds of the pages written."""
    added: list = []
    previous = native_impl.use(impl)
    try:
        with store.TableWriter(path) as out:
            appender_add = pages.Appender.add

            def add(self, kinds, arrays, n):
                added.append(kinds)
                return appender_add(self, kinds, arrays, n)
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(pages.Appender, "add", add)
                mp.setitem(schema.ALL_TABLES, "T", TEXT_COLS)
                out.put("T", frame)
    finally:
        native_impl.use(previous)
    return added


@pytest.mark.parametrize("odd", [None, "too long", "not a str", "lone surrogate"])
def test_a_text_table_as_pages_reads_back_as_sqlite_inserted_rows(tmp_path, odd):
    """A whole table with a TEXT column goes as pages (STRING_IDS: 666k texts of a 1M-task
    collection), equal to sqlite's rows value by value and type by type; a text a page cannot hold,
    a value that is not a str or one UTF-8 cannot encode sends the table through sqlite instead."""
    texts = _texts(30_000)
    values = np.empty(len(texts), dtype=object)
    values[:] = texts
    if odd == "too long":
        values[7] = "z" * 70_000
    elif odd == "not a str":
        values[7] = 12
    elif odd == "lone surrogate":
        values[7] = "a\ud800"
    frame = pd.DataFrame({"id": np.arange(len(texts)) * 3, "value": pd.Series(values, dtype=object),
                          "n": np.arange(len(texts)) % 7})
    ours, theirs = str(tmp_path / "pages.db"), str(tmp_path / "sqlite.db")
    if odd == "lone surrogate":  # sqlite's own refusal, either way
        for path, impl in ((ours, "c"), (theirs, "python")):
            with pytest.raises(UnicodeEncodeError):
                _write_texts(path, frame, impl)
        assert os.listdir(tmp_path) == []
        return
    assert _write_texts(ours, frame, "c") == ([] if odd else [b"kti"])
    assert _write_texts(theirs, frame, "python") == []
    assert _rows(ours, "PRAGMA integrity_check") == [("ok",)]
    typed = "SELECT id, typeof(value), value, n FROM T ORDER BY id"
    assert _rows(ours, typed) == _rows(theirs, typed)
    # found by rowid through the interior pages, texts compared and measured by sqlite
    query = "SELECT count(*), sum(length(value)), max(value), min(value) FROM T WHERE id > 3000"
    assert _rows(ours, query) == _rows(theirs, query) and _rows(ours, query)[0][0] == 30_000 - 1001


def test_columns_that_are_not_plain_numbers_go_through_sqlite():
    assert pages.column_kinds(["TEXT"], [np.array(["a"], dtype=object)]) is None
    assert pages.column_kinds(["INTEGER"], [np.array([1, None], dtype=object)]) is None
    assert pages.column_kinds(["INTEGER"], [np.array([1], dtype=np.uint64)]) is None
    assert pages.column_kinds(["REAL", "NUMERIC", "INTEGER"], [np.zeros(1, np.int32), np.zeros(1), np.zeros(1)]) == b"rnn"
    # texts may go as pages in a column of TEXT affinity only (a NUMERIC or INTEGER one converts them)
    texts = np.array(["1", "a"], dtype=object)
    assert pages.column_kinds(["TEXT", "VARCHAR(10)", "INTEGER"], [texts, texts, np.zeros(2)], texts=True) == b"ttn"
    assert pages.column_kinds(["NUMERIC"], [texts], texts=True) is None
    assert pages.column_kinds(["INT TEXT"], [texts], texts=True) is None


@needs_shared
@pytest.mark.parametrize("case", ["910b_mixed", "910b_two_devices"])
def test_golden_store_and_unified_db_pass_sqlites_check(case, tmp_path, capsys):
    prof = copy_input(case, str(tmp_path))
    assert run(["import", "-dir", prof], capsys)[0] == 0
    assert run(["export", "db", "-dir", prof], capsys)[0] == 0
    dbs = [store.store_path(prof)] + [os.path.join(prof, f) for f in os.listdir(prof) if f.startswith("msprof_")]
    assert len(dbs) == 2
    for path in dbs:
        assert _rows(path, "PRAGMA integrity_check") == [("ok",)], path
    assert _rows(dbs[1], "SELECT count(*) FROM TASK_PMU_INFO")[0][0] > 0


@pytest.mark.parametrize("rows", [20_000, 1])
def test_pages_skip_sqlites_lock_byte_page(tmp_path, rows):
    """A table whose pages reach the file's first GiB must leave the page holding byte 2**30 alone:
    sqlite reports a b-tree that uses it as malformed. A 10M-task store crossed it in CANN_API.
    A zeroblob fills the file to a few pages below the mark, then the table's leaves and interior
    pages run across it (one leaf alone: moved to the root, and the file never ends on that page)."""
    path = str(tmp_path / "big.db")
    lock = pages.lock_page()
    with store.TableWriter(path) as out:
        out.conn.execute("CREATE TABLE pad (b BLOB)")
        half = (lock - 4) * pages.PAGE_SIZE // 2  # a blob holds at most 10**9 bytes
        out.conn.executemany("INSERT INTO pad VALUES (zeroblob(?))", [(half,), (half,)])
        out.create("T", COLS)
        frame = _frame(rows)
        with out.pages_of("T") as appender:
            appender.add_frame(frame, [c for c, _ in COLS], b"kinrn")
            if rows > 1:
                assert appender.count > lock
        out.put("TASK", pd.DataFrame({c: np.arange(5, dtype=np.int64) for c, _ in schema.UNIFIED["TASK"]}))
    assert os.path.getsize(path) > pages.LOCK_BYTE
    assert _rows(path, "PRAGMA integrity_check") == [("ok",)]
    assert _rows(path, "SELECT id, a FROM T") == list(zip(frame["id"].tolist(), frame["a"].tolist()))
