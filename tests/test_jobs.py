"""`--jobs N`: collections, and a collection's devices, shared among forked processes. The results
are those of one process: the same stores, exports, warnings, and the same first error."""
from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import time

import pytest

from conftest import COMPARE, copy_input, needs_shared, run

from msprof_kit import forked, store

pytestmark = pytest.mark.skipif(not forked.can_fork(), reason="no fork here: --jobs runs one process")


def _store_rows(prof: str) -> dict:
    conn = sqlite3.connect(store.store_path(prof))
    try:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        rows = {n: conn.execute(f'SELECT * FROM "{n}"').fetchall() for n in names}
        rows["KIT_INFO"] = [r for r in rows["KIT_INFO"] if r[1] != "collection"]  # where it was imported
        return rows
    finally:
        conn.close()


def _stamp(i: int) -> str:
    return f"2026010100000{i}"


# ---------------------------------------------------------------------------------------------
# the pool


def _value(i: int) -> int:
    return i * i


def _fail(i: int) -> int:
    raise ValueError(f"job {i} failed")


def _slow_fail(i: int) -> int:
    time.sleep(0.3)
    raise ValueError(f"job {i} failed")


def _sleep_then(path: str) -> int:
    time.sleep(5)
    open(path, "w").close()
    return 0


def test_each_keeps_the_order_of_the_results():
    import functools
    fns = [functools.partial(_value, i) for i in range(7)]
    assert forked.each(fns, 3, "test") == [i * i for i in range(7)]
    assert forked.each(fns, 1, "test") == [i * i for i in range(7)]


def test_each_raises_the_first_failure_in_order_and_stops_the_later_jobs(tmp_path):
    """Job 1 fails late, job 2 at once: job 1's error is the one raised, as one after another; job
    3, after the failure, never finishes its file."""
    import functools
    late = tmp_path / "late"
    fns = [functools.partial(_value, 0), functools.partial(_slow_fail, 1), functools.partial(_fail, 2),
           functools.partial(_sleep_then, str(late))]
    started = time.monotonic()
    with pytest.raises(ValueError, match="job 1 failed"):
        forked.each(fns, 4, "test")
    assert time.monotonic() - started < 4
    time.sleep(0.2)
    assert not late.exists()


def test_jobs_must_be_a_positive_number(capsys):
    for bad in ("0", "-2", "two"):
        with pytest.raises(SystemExit) as exc:
            run(["import", "-dir", ".", "--jobs", bad], capsys)
        assert exc.value.code == 2
        assert "--jobs" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------
# devices and collections


@needs_shared
def test_devices_decoded_in_workers_give_the_same_store(tmp_path, capsys):
    one, two = copy_input("910b_two_devices", str(tmp_path / "one")), copy_input("910b_two_devices", str(tmp_path / "two"))
    r1 = run(["import", "-dir", one, "--jobs", "1"], capsys)
    r2 = run(["import", "-dir", two, "--jobs", "3"], capsys)
    assert r1[0] == r2[0] == 0
    assert r1[2] == r2[2]  # the same warnings, in the same order
    assert _store_rows(one) == _store_rows(two)


@pytest.mark.skipif(not forked.can_fork(), reason="devices are decoded in forked workers")
def test_device_workers_run_nicer_than_the_import(tmp_path, capsys, monkeypatch):
    """The devices' workers yield to the host's reading (limits.DEVICE_NICE); the import itself
    keeps its priority."""
    import synth
    from msprof_kit.ingest import assemble, limits
    prof = synth.write_collection(str(tmp_path), n_tasks=30, seed=3)

    def niceness(rd, coll, chip, diag, scratch):
        diag.warn(f"device worker niceness {os.nice(0)}")
        return None

    monkeypatch.setattr(assemble, "load_device", niceness)
    here = os.nice(0)
    code, _, err = run(["import", "-dir", prof, "--jobs", "2"], capsys)
    assert code == 0 and f"device worker niceness {min(19, here + limits.DEVICE_NICE)}" in err, err
    assert os.nice(0) == here


@needs_shared
def test_collections_in_parallel_equal_the_reference(tmp_path, capsys):
    cases = ["910b_mixed", "910b_steps", "min_910b"]
    root = tmp_path / "many"
    profs = {}
    for case in cases:
        prof = copy_input(case, str(tmp_path / case))
        dest = root / os.path.basename(prof)
        if dest.exists():  # two cases share a PROF name: keep them apart
            dest = root / (os.path.basename(prof) + "_" + case)
        shutil.move(prof, dest)
        profs[case] = str(dest)
    assert run(["export", "timeline", "-dir", str(root), "--jobs", "2"], capsys)[0] == 0
    code, out, _ = run(["export", "summary", "-dir", str(root), "--jobs", "3"], capsys)
    assert code == 0
    # written in the order of the collections, as one process would list them
    listed = [line.split()[1] for line in out.splitlines() if line.startswith("Wrote ") and line.endswith("README.txt")]
    assert listed == sorted(listed, key=lambda p: sorted(profs.values()).index(os.path.dirname(os.path.dirname(p))))
    for case, prof in profs.items():
        got = subprocess.run([sys.executable, COMPARE, prof, os.path.join(os.path.dirname(COMPARE), "..", "golden", case)],
                             capture_output=True, text=True)
        assert got.returncode == 0 and "verdict: equal" in got.stdout, got.stdout + got.stderr


@needs_shared
def test_a_bad_collection_gives_the_error_one_process_gives(tmp_path, capsys):
    """Two collections without raw data (exit 4) after a good one: the error names the first bad
    one, whatever the number of processes."""
    root = tmp_path / "many"
    good = copy_input("min_910b", str(tmp_path / "good"))
    bad = copy_input("910b_mixed", str(tmp_path / "bad"))
    for name in os.listdir(os.path.join(bad, "host", "data")):  # no host data, no device clock: nothing
        os.remove(os.path.join(bad, "host", "data", name))
    for name in os.listdir(os.path.join(bad, "device_0")):
        if "start.log" in name:
            os.remove(os.path.join(bad, "device_0", name))
    results = []
    for jobs in ("1", "3"):
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir()
        for src, name in ((good, "PROF_000001_A"), (bad, "PROF_000002_B"), (bad, "PROF_000003_C")):
            shutil.copytree(src, root / name)
        results.append(run(["import", "-dir", str(root), "--jobs", jobs], capsys))
    assert results[0] == results[1]
    code, _, err = results[0]
    assert code == 4 and "PROF_000002_B" in err and "PROF_000003_C" not in err


def _outputs(prof: str) -> dict:
    """Export files by name without their time stamp -> bytes."""
    out = os.path.join(prof, "mindstudio_profiler_output")
    found = {}
    for name in os.listdir(out):
        stem, ext = os.path.splitext(name)
        found[stem.rsplit("_", 1)[0] + ext] = open(os.path.join(out, name), "rb").read()
    return found


@needs_shared
@pytest.mark.parametrize("case", ["910b_two_devices", "310p_hwts"])
def test_exports_with_workers_equal_those_of_one_process(case, tmp_path, capsys):
    """-j 1 runs no worker at all (unified DB, timeline device layers, op_summary all here);
    -j 3 forks them. The files are the same, byte for byte, and listed in the same order."""
    one, many = copy_input(case, str(tmp_path / "one")), copy_input(case, str(tmp_path / "many"))
    listed = []
    for prof, jobs in ((one, "1"), (many, "3")):
        names = []
        for what in ("summary", "timeline"):
            code, out, err = run(["export", what, "-dir", prof, "--jobs", jobs], capsys)
            assert code == 0, err
            names += [os.path.basename(line.split()[1]).split("_2")[0] for line in out.splitlines()]
        listed.append(names)
    assert listed[0] == listed[1]
    assert _outputs(one) == _outputs(many)
    dbs = [[f for f in os.listdir(p) if f.startswith("msprof_") and f.endswith(".db")] for p in (one, many)]
    assert [len(d) for d in dbs] == ([1, 1] if case.startswith("910b") else [0, 0])
