"""Golden cases: import + export db equals the reference's own msprof.db (C++ path)."""
from __future__ import annotations

import glob
import os
import sqlite3
import subprocess
import sys

import pytest

from conftest import COMPARE, GOLDEN, INTACT_CASES, copy_input, needs_shared, run

pytestmark = needs_shared


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """Each intact case imported and exported once: case -> (PROF dir, our msprof_*.db)."""
    out = {}
    for case in INTACT_CASES:
        prof = copy_input(case, str(tmp_path_factory.mktemp(case)))
        from msprof_kit import cli
        assert cli.main(["import", "-dir", prof]) == 0
        assert cli.main(["export", "db", "-dir", prof]) == 0
        dbs = glob.glob(os.path.join(prof, "msprof_*.db"))
        assert len(dbs) == 1
        out[case] = (prof, dbs[0])
    return out


@pytest.mark.parametrize("case", INTACT_CASES)
def test_compare_exports_says_equal(case, exported):
    prof, _ = exported[case]
    res = subprocess.run([sys.executable, COMPARE, prof, os.path.join(GOLDEN, case, "cpp"), "--kinds", "db"],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stdout
    assert res.stdout.strip().splitlines()[-1].startswith("verdict: equal")


def _task_rows(db):
    with sqlite3.connect(db) as c:
        return sorted(c.execute(
            """SELECT t.startNs, t.endNs, t.deviceId, t.streamId, t.taskId, t.contextId, t.modelId, s.value,
                      COALESCE(n.value, ''), COALESCE(o.value, '')
               FROM TASK t JOIN STRING_IDS s ON s.id = t.taskType
               LEFT JOIN COMPUTE_TASK_INFO c ON c.globalTaskId = t.globalTaskId
               LEFT JOIN STRING_IDS n ON n.id = c.name LEFT JOIN STRING_IDS o ON o.id = c.opType""").fetchall())


def _api_rows(db):
    with sqlite3.connect(db) as c:
        return sorted(c.execute("SELECT startNs, endNs, type, globalTid, s.value FROM CANN_API a "
                                "JOIN STRING_IDS s ON s.id = a.name").fetchall())


def _pmu_rows(db):
    with sqlite3.connect(db) as c:
        if not c.execute("SELECT 1 FROM sqlite_master WHERE name='TASK_PMU_INFO'").fetchone():
            return []
        return sorted(c.execute(
            "SELECT t.startNs, t.deviceId, s.value, ROUND(p.value, 6) FROM TASK_PMU_INFO p "
            "JOIN STRING_IDS s ON s.id = p.name JOIN TASK t ON t.globalTaskId = p.globalTaskId").fetchall())


def _cti_rows(db):
    with sqlite3.connect(db) as c:
        cols = ["name", "taskType", "opType", "inputFormats", "inputDataTypes", "inputShapes", "outputFormats",
                "outputDataTypes", "outputShapes", "attrInfo", "opState", "hf32Eligible", "gridDim", "blockDim"]
        joins = " ".join(f"JOIN STRING_IDS s{i} ON s{i}.id = c.{col}" for i, col in enumerate(cols))
        sel = ", ".join(f"s{i}.value" for i in range(len(cols)))
        return sorted(c.execute(f"SELECT {sel}, c.blockNum, c.mixBlockNum FROM COMPUTE_TASK_INFO c {joins}"))


@pytest.mark.parametrize("case", INTACT_CASES)
@pytest.mark.parametrize("rows", [_task_rows, _api_rows, _pmu_rows, _cti_rows])
def test_rows_equal_the_reference(case, rows, exported):
    _, ours = exported[case]
    golden = os.path.join(GOLDEN, case, "cpp", "msprof.db")
    assert rows(ours) == rows(golden)


@pytest.mark.parametrize("case", INTACT_CASES)
def test_the_unified_db_has_the_task_index_the_store_goes_without(case, exported):
    """TaskIndex is the reference DB's (schema.INDEXES); the store leaves it out (STORE_INDEXES)."""
    prof, ours = exported[case]
    query = "SELECT name FROM sqlite_master WHERE type = 'index' AND name NOT LIKE 'sqlite_%' ORDER BY name"
    with sqlite3.connect(os.path.join(GOLDEN, case, "cpp", "msprof.db")) as c:
        golden = [n for (n,) in c.execute(query)]
    with sqlite3.connect(ours) as c:
        assert [n for (n,) in c.execute(query)] == golden
        has_task = c.execute("SELECT 1 FROM sqlite_master WHERE name = 'TASK'").fetchone() is not None
    assert ("TaskIndex" in golden) == has_task
    with sqlite3.connect(os.path.join(prof, "sqlite", "msprof_kit.db")) as c:
        assert "TaskIndex" not in [n for (n,) in c.execute(query)]


def test_reimport_replaces_the_store(exported, capsys):
    prof, _ = exported["min_910b"]
    store = os.path.join(prof, "sqlite", "msprof_kit.db")
    before = os.stat(store).st_ino
    code, out, _ = run(["import", "-dir", prof], capsys)
    assert code == 0 and "Imported" in out
    assert os.stat(store).st_ino != before  # a new file, renamed into place
    assert not [n for n in os.listdir(os.path.dirname(store)) if n.startswith(".")]


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_large_summary_export_writes_the_same_unified_db_after_its_files(tmp_path, monkeypatch, jobs):
    """Above DB_AFTER_SUMMARY_TASKS device tasks `export summary` writes msprof_{ts}.db after its
    files, in its own process (the two together would pass the memory bound at 10M tasks): the
    same tables, row for row, as the DB written beside a smaller export."""
    from msprof_kit import cli, store
    from msprof_kit.exporters import run as export_run
    case = INTACT_CASES[0]
    beside, after = copy_input(case, str(tmp_path / "beside")), copy_input(case, str(tmp_path / "after"))
    for prof in (beside, after):
        assert cli.main(["import", "-dir", prof]) == 0
    assert cli.main(["export", "summary", "-dir", beside, "-j", jobs]) == 0
    seen = []
    real = store.export_db

    def export_db(path, stamp=None):
        seen.append((os.getpid(), sorted(glob.glob(os.path.join(path, "mindstudio_profiler_output", "op_summary*")))))
        return real(path, stamp)

    monkeypatch.setattr(export_run, "DB_AFTER_SUMMARY_TASKS", 0)
    monkeypatch.setattr(store, "export_db", export_db)
    assert cli.main(["export", "summary", "-dir", after, "-j", jobs]) == 0
    assert len(seen) == 1 and seen[0][0] == os.getpid() and seen[0][1], seen  # here, after op_summary
    dbs = [glob.glob(os.path.join(p, "msprof_*.db")) for p in (beside, after)]
    assert all(len(d) == 1 for d in dbs)
    with sqlite3.connect(dbs[0][0]) as a, sqlite3.connect(dbs[1][0]) as b:
        tables = [r[0] for r in a.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")]
        assert tables == [r[0] for r in b.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")]
        for t in tables:
            assert a.execute(f"SELECT * FROM {t}").fetchall() == b.execute(f"SELECT * FROM {t}").fetchall(), t
