"""The store writer: multi-row inserts keep every value and type; a failed build leaves no file."""
from __future__ import annotations

import os
import sqlite3

import numpy as np
import pandas as pd
import pytest

from msprof_kit import schema, store
from msprof_kit.errors import StoreError
from msprof_kit.store import columns


def write_tables(path, tables):
    """Write `tables` (name -> frame) into a new database at `path`, atomically."""
    with store.TableWriter(path) as out:
        for table, frame in tables.items():
            out.put(table, frame)


@pytest.mark.parametrize("n", [0, 1, 199, 200, 201, 50_001])
def test_inserts_keep_every_row_and_type(tmp_path, n):
    rng = np.random.default_rng(n)
    frames = {
        "TASK": pd.DataFrame({
            "startNs": rng.integers(1 << 60, 1 << 61, n), "endNs": rng.integers(1 << 60, 1 << 61, n),
            "deviceId": rng.integers(0, 8, n).astype(np.uint16), "connectionId": rng.integers(-1, 99, n),
            "globalTaskId": np.arange(n), "globalPid": 7, "taskType": rng.integers(0, 9, n),
            "contextId": np.full(n, 4294967295, dtype=np.uint32), "streamId": rng.integers(0, 9, n),
            "taskId": rng.integers(0, 65535, n), "modelId": np.full(n, 4294967295)}),
        "TASK_PMU_INFO": pd.DataFrame({"globalTaskId": np.arange(n), "name": rng.integers(0, 5, n),
                                       "value": rng.random(n)}),
        "STRING_IDS": pd.DataFrame({"id": np.arange(n), "value": [f"s{i}" for i in range(n)]}),
    }
    path = str(tmp_path / "x.db")
    write_tables(path, frames)
    conn = sqlite3.connect(path)
    present = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    for name, frame in frames.items():
        if n == 0:
            assert name not in present  # the reference creates only tables with rows
            continue
        back = pd.read_sql_query(f"SELECT * FROM {name} ORDER BY rowid", conn)
        assert len(back) == n
        for col in frame.columns:
            want = frame[col].to_numpy()
            got = back[col].to_numpy()
            if want.dtype.kind == "f":
                assert np.array_equal(got.astype(float), want)
            elif want.dtype == object:
                assert list(got) == list(want)
            else:
                assert np.array_equal(got.astype(np.int64), want.astype(np.int64)), (name, col)
    if n:
        kinds = {r[0] for r in conn.execute("SELECT typeof(value) FROM TASK_PMU_INFO")}
        assert kinds == {"real"}
        assert conn.execute("SELECT typeof(startNs) FROM TASK LIMIT 1").fetchone() == ("integer",)


def test_a_failed_write_leaves_nothing_behind(tmp_path):
    path = str(tmp_path / "x.db")
    with pytest.raises(StoreError):
        write_tables(path, {"TASK": pd.DataFrame({"startNs": [1]})})  # lacks columns
    assert os.listdir(tmp_path) == []


def test_blob_slices_read_the_same_with_and_without_blobopen(tmp_path):
    """Python < 3.11 has no Connection.blobopen; the substr path must give the same bytes."""
    import sqlite3

    import numpy as np

    path = str(tmp_path / "s.db")
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE KIT_COLUMNS (tableName, name, dtype, data BLOB, labels)")
    values = np.arange(1000, dtype="<i8")
    conn.execute("INSERT INTO KIT_COLUMNS VALUES ('T', 'c', '<i8', ?, NULL)", (values.tobytes(),))
    conn.commit()

    class NoBlobOpen:  # the sqlite3 connection of an older Python
        def execute(self, *args):
            return conn.execute(*args)

    for reader in (conn, NoBlobOpen()):
        got = np.frombuffer(columns.blob_slice(reader, 1, 8 * 10, 8 * 5), dtype="<i8")
        assert got.tolist() == [10, 11, 12, 13, 14]
    # a handle kept open serves later ranges, forward and back
    handles = {}
    for lo, n in ((900, 3), (20, 4), (995, 5), (0, 1)):
        got = np.frombuffer(columns.blob_slice(conn, 1, 8 * lo, 8 * n, handles), dtype="<i8")
        assert got.tolist() == list(range(lo, lo + n))
    assert list(handles) == [1]
    conn.close()


@pytest.mark.parametrize("gap", [1, 3, 1 << 16])
def test_stored_columns_take_rows_in_any_order(tmp_path, monkeypatch, gap):
    """`take` reads the runs of wanted rows apart (RUN_GAP): rows in order, shuffled, repeated,
    none, and the many-rows path that reads the column whole all give values[rows]."""
    monkeypatch.setattr(columns, "RUN_GAP", gap)
    conn = sqlite3.connect(str(tmp_path / "t.db"))
    conn.execute("CREATE TABLE KIT_COLUMNS (tableName, name, dtype, data BLOB, labels)")
    values = (np.arange(1000, dtype="<i4") * 7 - 3000)
    conn.execute("INSERT INTO KIT_COLUMNS VALUES ('T', 'c', '<i4', ?, NULL)", (values.tobytes(),))
    cols = store.StoredColumns(conn, "T")
    rng = np.random.default_rng(gap)
    for rows in (np.array([], dtype=np.int64), np.array([999]), np.arange(10, 40), np.array([5, 6, 500, 501, 990]),
                 rng.permutation(1000)[:200], np.array([40, 3, 3, 700, 41, 3]), rng.integers(0, 1000, 600)):
        got = cols.take("c", rows)
        assert got.dtype == values.dtype and got.tolist() == values[rows].tolist(), rows
    conn.close()


def test_a_failure_in_the_background_writer_reaches_the_caller(tmp_path):
    """The import's writer hands tables to a thread; a table that cannot be written (a repeated
    INTEGER PRIMARY KEY) fails the whole store, with the store error, and leaves no file."""
    import numpy as np
    import pandas as pd
    from msprof_kit import store
    from msprof_kit.errors import StoreError
    ids = np.array([1, 2, 2, 3], dtype=np.int64)
    api = pd.DataFrame({"startNs": ids, "endNs": ids, "type": 1, "globalTid": 2, "connectionId": ids, "name": 3})
    with pytest.raises(StoreError):
        with store.TableWriter(str(tmp_path / "s.db"), background=True) as out:
            out.put("CANN_API", api)
            out.put("TASK", pd.DataFrame({c: ids for c, _ in schema.UNIFIED["TASK"]}))
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("values, dtype", [
    ([0, 127, -128], "|i1"), ([0, 128], "<i2"), ([-129], "<i2"), ([32767, -32768], "<i2"), ([32768], "<i4"),
    ([2 ** 31 - 1, -2 ** 31], "<i4"), ([2 ** 31], "<i8"), ([4294967295, 1], "<i8"), ([-2 ** 63, 2 ** 63 - 1], "<i8"),
    ([], "<i8")])
def test_mirror_columns_take_the_narrowest_type_that_holds_them(values, dtype):
    arr = np.array(values, dtype=np.int64)
    got = columns.narrowest(arr)
    assert got.dtype.str == dtype
    assert got.astype(np.int64).tolist() == arr.tolist()


def test_mirrors_read_back_as_the_sqlite_tables_hold_them(tmp_path):
    """Narrowed mirror columns widen to exactly the table's values, through ExportContext.ints."""
    from msprof_kit import schema
    from msprof_kit.exporters.context import open_context
    prof = tmp_path / "PROF_1"
    (prof / "sqlite").mkdir(parents=True)
    rng = np.random.default_rng(3)
    cols = schema.UNIFIED["OVERLAP_ANALYSIS"]
    n = 1000
    frame = pd.DataFrame({"id": np.arange(n), "deviceId": rng.integers(0, 8, n),
                          "startNs": rng.integers(0, 2 ** 62, n), "endNs": rng.integers(0, 2 ** 62, n),
                          "type": rng.integers(0, 4, n)})[[c[0] for c in cols]]
    with store.TableWriter(store.store_path(str(prof))) as out:
        out.put("OVERLAP_ANALYSIS", frame)
    conn = sqlite3.connect(store.store_path(str(prof)))
    dtypes = dict(conn.execute("SELECT name, dtype FROM KIT_COLUMNS WHERE tableName = 'OVERLAP_ANALYSIS'"))
    assert dtypes == {"id": "<i2", "deviceId": "|i1", "startNs": "<i8", "endNs": "<i8", "type": "|i1"}
    table = conn.execute("SELECT * FROM OVERLAP_ANALYSIS ORDER BY rowid").fetchall()
    conn.close()
    ctx = open_context(str(prof))
    try:
        got = ctx.ints("OVERLAP_ANALYSIS", [c[0] for c in cols])
    finally:
        ctx.conn.close()
    assert all(a.dtype == np.int64 for a in got.values())
    assert list(zip(*(got[c[0]].tolist() for c in cols))) == table



@pytest.mark.parametrize("rows, missing, expect", [
    ([(1, "b"), (0, "a"), (2, "")], "N/A", ["a", "b", ""]),            # ids 0..n-1: read in id order
    ([(3, "d"), (0, "a")], "N/A", ["a", "N/A", "N/A", "d"]),             # gaps: `missing`
    ([(-1, "x"), (1, "b")], "", ["", "b"]),                              # no text has a negative id
    ([], "N/A", []),
])
def test_string_table_indexes_the_values_by_id(rows, missing, expect):
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE STRING_IDS (id INTEGER PRIMARY KEY, value TEXT)")
    conn.executemany("INSERT INTO STRING_IDS VALUES (?, ?)", rows)
    got = store.string_table(conn, missing)
    assert got.dtype == object and got.tolist() == expect
