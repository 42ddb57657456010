"""Interruptions, full disks and damaged stores (issue 21, items 10 to 14).

- Forked workers close the pipe ends they inherit and die with their parent; what a killed
  import leaves (`.msprof_kit.db.tmp-PID`, `.scratch-PID-*`) goes at the next import.
- A full disk: whatever the command began is removed, one line names the output and the cause,
  exit code 10 (on a real small tmpfs when this runs as root, and with simulated write errors).
- The store carries a format version; a damaged, foreign or other-version store is imported again
  from the raw data (one warning), or is one line asking for a re-import.
- The warnings of an import are repeated, summarised, by the commands that read its store.
- An interrupted export leaves none of the files it began.

Tests that start processes bound every wait and kill what they started.
"""
from __future__ import annotations

import errno
import glob
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from typing import Dict, Iterable, List

import pytest

import synth
from conftest import copy_input, needs_shared, run, tree_hashes

from msprof_kit import importer, store
from msprof_kit.forked import Forked, can_fork
from msprof_kit.store import writer

needs_fork = pytest.mark.skipif(not can_fork() or not sys.platform.startswith("linux"),
                                reason="forked workers and /proc: Linux only")
WAIT = 15.0  # seconds any process is given to end


# --- processes --------------------------------------------------------------------------------

def _alive(pid: int) -> bool:
    """Whether a process runs (a zombie does not count)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _children(pid: int) -> List[int]:
    """The process's children and their descendants."""
    out: List[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                out += [int(p) for p in f.read().split()]
    except (FileNotFoundError, ProcessLookupError):
        return out
    return out + [d for c in list(out) for d in _children(c)]


def _gone_within(pids: Iterable[int], seconds: float) -> List[int]:
    """The processes still alive after waiting up to `seconds`."""
    pids = list(pids)
    end = time.monotonic() + seconds
    while time.monotonic() < end and any(_alive(p) for p in pids):
        time.sleep(0.05)
    return [p for p in pids if _alive(p)]


def _kill(pids: Iterable[int]) -> None:
    """Kill, by id, processes this test started (directly or through its child) that still run."""
    for pid in pids:
        if _alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _python(code: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


# A parent whose worker sends back more than a pipe holds (4 MB of bytes go through the pipe,
# not the shared file), after the parent has been stopped.
BIG_RESULT = """
import time
from msprof_kit.forked import Forked
def work():
    time.sleep({sleep})
    return b"x" * (4 << 20)
job = Forked(work, "big")
print(job._proc.pid, flush=True)
try:
    job.result()
except KeyboardInterrupt:
    raise SystemExit(130)
"""


@needs_fork
def test_a_worker_closes_the_pipe_ends_it_inherits():
    """A worker holds no read end of another worker's result pipe (else that worker could block
    for ever writing its result once the parent is gone)."""
    sleeper = Forked(lambda: threading.Event().wait(30), "sleeper")
    try:
        fd = sleeper.handle.fileno()
        inode = os.fstat(fd).st_ino

        def probe() -> bool:
            try:
                return os.fstat(fd).st_ino == inode
            except OSError:
                return False

        assert Forked(probe, "probe").result() is False
    finally:
        sleeper.cancel()


@needs_fork
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_a_worker_ends_when_its_parent_is_killed(sig):
    parent = _python(BIG_RESULT.format(sleep=1.0))
    worker = None
    try:
        worker = int(parent.stdout.readline())
        parent.send_signal(sig)
        parent.wait(WAIT)
        assert not _gone_within([worker], WAIT), "the worker outlived its parent"
    finally:
        _kill([parent.pid] + ([worker] if worker else []))
        parent.communicate(timeout=WAIT)


@needs_fork
def test_ctrl_c_of_the_parent_alone_stops_it_and_its_worker():
    """kill -INT of the parent only (not its process group): it ends at once, and so does its worker."""
    parent = _python(BIG_RESULT.format(sleep=30))
    worker = None
    try:
        worker = int(parent.stdout.readline())
        time.sleep(0.2)
        parent.send_signal(signal.SIGINT)
        assert parent.wait(WAIT) == 130
        assert not _gone_within([worker], WAIT), "the worker outlived its parent"
    finally:
        _kill([parent.pid] + ([worker] if worker else []))
        parent.communicate(timeout=WAIT)


def _leftovers(prof: str) -> List[str]:
    folder = os.path.join(prof, "sqlite")
    names = os.listdir(folder) if os.path.isdir(folder) else []
    return sorted(n for n in names if n.startswith((".msprof_kit.db.tmp-", ".scratch-")))


@needs_fork
def test_an_import_killed_midway_leaves_no_worker_and_the_next_import_cleans_up(tmp_path, capsys):
    prof = synth.write_collection(str(tmp_path), n_tasks=60_000, devices=2, seed=11)
    proc = subprocess.Popen([sys.executable, "-m", "msprof_kit", "import", "-dir", prof, "-j", "2"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    workers: List[int] = []
    try:
        end = time.monotonic() + 60
        while time.monotonic() < end and proc.poll() is None and not (workers and _leftovers(prof)):
            workers = _children(proc.pid)
            time.sleep(0.005)
        if proc.poll() is not None:
            pytest.skip("the import ended before a worker could be seen")
        workers = sorted(set(workers + _children(proc.pid)))
        proc.kill()
        proc.wait(WAIT)
        assert not _gone_within(workers, WAIT), "workers outlived the killed import"
    finally:
        _kill([proc.pid] + workers + _children(proc.pid))
        proc.wait(WAIT)
    assert _leftovers(prof), "the killed import left nothing to clean (it was killed too late)"
    before = tree_hashes(os.path.join(prof, "host"))
    code, _, err = run(["import", "-dir", prof, "-j", "1"], capsys)
    assert code == 0, err
    assert _leftovers(prof) == []
    assert tree_hashes(os.path.join(prof, "host")) == before


def test_leftovers_of_a_live_process_are_kept(tmp_path, capsys):
    prof = synth.write_collection(str(tmp_path), n_tasks=30, seed=3)
    folder = os.path.join(prof, "sqlite")
    os.makedirs(folder)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait(WAIT)
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        made = []
        for pid in (dead.pid, live.pid):
            made.append(os.path.join(folder, f".msprof_kit.db.tmp-{pid}"))
            with open(made[-1], "wb") as f:
                f.write(b"partial")
            os.makedirs(os.path.join(folder, f".msprof_kit.db.tmp-{pid}.parts"))
            os.makedirs(os.path.join(folder, f".scratch-{pid}-abc123"))
            with open(os.path.join(folder, f".scratch-{pid}-abc123", "host.apis.begin"), "wb") as f:
                f.write(b"\0" * 64)
        with open(os.path.join(prof, f".msprof_20240101000000.db.tmp-{dead.pid}"), "wb") as f:
            f.write(b"partial")
        code, _, err = run(["import", "-dir", prof, "-j", "1"], capsys)
        assert code == 0, err
        assert _leftovers(prof) == sorted([f".msprof_kit.db.tmp-{live.pid}", f".msprof_kit.db.tmp-{live.pid}.parts",
                                           f".scratch-{live.pid}-abc123"])
        assert not os.path.exists(os.path.join(prof, f".msprof_20240101000000.db.tmp-{dead.pid}"))
    finally:
        live.kill()
        live.wait(WAIT)


# --- full disks --------------------------------------------------------------------------------

def _error_line(err: str) -> str:
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.startswith("Error:")]
    assert len(lines) == 1, err
    return lines[0]


def _export_files(prof: str) -> List[str]:
    """What an export of the collection wrote (or began): files and hidden part files."""
    out = os.path.join(prof, "mindstudio_profiler_output")
    names = [os.path.join("mindstudio_profiler_output", n) for n in os.listdir(out)] if os.path.isdir(out) else []
    names += [n for n in os.listdir(prof) if n.startswith(("msprof_", ".msprof_"))]
    return sorted(names)


@pytest.fixture()
def small_disk(tmp_path):
    """A 48 MiB tmpfs (root only): the place to fill up for real."""
    where = tmp_path / "disk"
    where.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", str(where)],
                          capture_output=True, timeout=WAIT)
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs: {done.stderr.decode(errors='replace').strip()}")
    try:
        yield str(where)
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True, timeout=WAIT)


def _fill(folder: str, leave: int) -> str:
    """Fill the file system of `folder` until `leave` bytes are free; returns the filler's path."""
    filler = os.path.join(folder, "filler")
    st = os.statvfs(folder)
    size = max(0, st.f_bavail * st.f_frsize - leave)
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        os.posix_fallocate(fd, 0, max(1, size))
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)
    return filler


@pytest.mark.parametrize("what", ["summary", "timeline"])
@pytest.mark.parametrize("leave", [0, 16 << 10, 1 << 20])
def test_a_full_disk_during_export_leaves_nothing_and_exits_10(small_disk, capsys, what, leave):
    prof = synth.write_collection(small_disk, n_tasks=40, seed=3)
    assert run(["import", "-dir", prof], capsys)[0] == 0
    filler = _fill(small_disk, leave)
    code, _, err = run(["export", what, "-dir", prof, "-j", "2"], capsys)
    line = _error_line(err)
    assert code == 10, err
    assert re.search(r"No space left on device|disk is full", line), line
    assert "mindstudio_profiler_output" in line or "msprof_" in line, line
    assert _export_files(prof) == []
    os.remove(filler)  # with room again, the same store exports
    code, _, err = run(["export", what, "-dir", prof, "-j", "2"], capsys)
    assert code == 0, err


@pytest.mark.parametrize("leave", [0, 64 << 10, 1 << 20])
def test_a_full_disk_during_import_leaves_nothing_and_exits_10(small_disk, capsys, leave):
    prof = synth.write_collection(small_disk, n_tasks=2000, seed=3)
    raw = tree_hashes(prof)
    filler = _fill(small_disk, leave)
    code, _, err = run(["import", "-dir", prof, "-j", "2"], capsys)
    line = _error_line(err)
    assert code == 10, err
    assert re.search(r"No space left on device|disk is full", line) and "sqlite" in line, line
    assert _leftovers(prof) == [] and not os.path.exists(store.store_path(prof))
    assert tree_hashes(prof) == raw
    os.remove(filler)
    assert run(["import", "-dir", prof, "-j", "2"], capsys)[0] == 0


def test_a_failing_commit_of_the_store_is_one_line_and_leaves_no_temporary_file(tmp_path, capsys, monkeypatch):
    prof = synth.write_collection(str(tmp_path), n_tasks=30, seed=3)

    def full(self, table):
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(store.TableWriter, "index", full)
    code, _, err = run(["import", "-dir", prof, "-j", "1"], capsys)
    line = _error_line(err)
    assert code == 10 and "disk is full" in line and store.store_path(prof) in line, err
    assert _leftovers(prof) == [] and not os.path.exists(store.store_path(prof))


def test_an_error_of_the_early_flush_fails_the_import_even_if_the_last_sync_passes(tmp_path, capsys, monkeypatch):
    """The store's pages are flushed by a thread while it is written (TableWriter._flush_soon); an
    I/O error there may never reach a later fsync on another descriptor, so it fails the import."""
    prof = synth.write_collection(str(tmp_path), n_tasks=30, seed=3)
    flushed: List[int] = []

    def failing(fd):
        flushed.append(fd)
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(writer.os, "fdatasync", failing)
    code, _, err = run(["import", "-dir", prof, "-j", "1"], capsys)
    if not store.pages.enabled():
        pytest.skip("no table goes as pages with the Python twin, so nothing is flushed early")
    line = _error_line(err)
    assert flushed and code == 10 and "Input/output error" in line and store.store_path(prof) in line, err
    assert _leftovers(prof) == [] and not os.path.exists(store.store_path(prof))


def test_too_little_space_to_start_an_import_is_not_a_read_error(tmp_path, capsys, monkeypatch):
    prof = synth.write_collection(str(tmp_path), n_tasks=30, seed=3)

    def no_room(*args, dir=None, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", os.path.join(dir, ".scratch-x"))

    monkeypatch.setattr(importer.tempfile, "TemporaryDirectory", no_room)
    code, _, err = run(["import", "-dir", prof, "-j", "1"], capsys)
    line = _error_line(err)
    assert code == 10 and "No space left on device" in line and "cannot read" not in line, err
    assert _leftovers(prof) == [] and not os.path.exists(store.store_path(prof))


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_failing_unified_db_writer_removes_the_exports_too(tmp_path, capsys, monkeypatch, jobs):
    """On the 910B the export writes msprof_{ts}.db alongside; its failure is the export's failure."""
    prof = synth.write_collection(str(tmp_path), n_tasks=30, seed=3)
    assert run(["import", "-dir", prof], capsys)[0] == 0
    real = store.export_db

    def fills_up(collection_path, stamp=None):
        path = real(collection_path, stamp)
        raise OSError(errno.ENOSPC, "No space left on device", path)

    monkeypatch.setattr(store, "export_db", fills_up)
    code, _, err = run(["export", "summary", "-dir", prof, "-j", jobs], capsys)
    line = _error_line(err)
    assert code == 10 and "No space left on device" in line and "msprof_" in line, err
    assert _export_files(prof) == []


# --- damaged stores --------------------------------------------------------------------------------

def _damage(path: str, kind: str) -> None:
    if kind == "truncated":
        with open(path, "r+b") as f:
            f.truncate(os.path.getsize(path) // 2)
    elif kind == "garbage":
        with open(path, "wb") as f:
            f.write(os.urandom(200_000))
    elif kind == "empty":
        open(path, "wb").close()
    elif kind == "directory":
        os.remove(path)
        os.mkdir(path)
    elif kind == "foreign":
        os.remove(path)
        with sqlite3.connect(path) as c:
            c.execute("CREATE TABLE notes (x TEXT)")
        c.close()
    else:
        with sqlite3.connect(path) as c:
            if kind == "other version":
                c.execute("PRAGMA user_version = 999")
            else:  # "no KIT_INFO", "no TASK"
                c.execute(f"DROP TABLE {kind.split()[1]}")
        c.close()


DAMAGE = ["truncated", "garbage", "empty", "directory", "foreign", "other version", "no KIT_INFO", "no TASK"]


def _exported(prof: str) -> Dict[str, bytes]:
    """The summary exports by name without their time stamp."""
    out = os.path.join(prof, "mindstudio_profiler_output")
    found = {}
    for name in sorted(os.listdir(out)):
        with open(os.path.join(out, name), "rb") as f:
            found[re.sub(r"_\d{14}", "", name)] = f.read()
    shutil.rmtree(out)
    for db in glob.glob(os.path.join(prof, "msprof_*.db")):
        os.remove(db)
    return found


def test_the_store_carries_its_format_version_and_is_synced_before_the_rename(tmp_path, capsys, monkeypatch):
    prof = synth.write_collection(str(tmp_path), n_tasks=30, seed=3)
    events: List[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        events.append("fsync " + os.readlink(f"/proc/self/fd/{fd}") if os.path.exists("/proc/self/fd") else "fsync")
        real_fsync(fd)

    def replace(src, dst):
        events.append(f"replace {dst}")
        real_replace(src, dst)

    monkeypatch.setattr(writer.os, "fsync", fsync)
    monkeypatch.setattr(writer.os, "replace", replace)
    assert run(["import", "-dir", prof, "-j", "1"], capsys)[0] == 0
    path = store.store_path(prof)
    assert events.index(f"replace {path}") > 0 and events[events.index(f"replace {path}") - 1].startswith("fsync")
    with sqlite3.connect(path) as c:
        assert c.execute("PRAGMA user_version").fetchone()[0] == store.STORE_VERSION
        assert c.execute("PRAGMA application_id").fetchone()[0] == store.APPLICATION_ID
    c.close()
    assert store.store_problem(prof) is None


@pytest.mark.parametrize("kind", DAMAGE)
def test_a_damaged_store_is_imported_again_from_the_raw_data(tmp_path, capsys, kind):
    prof = synth.write_collection(str(tmp_path), n_tasks=40, seed=3)
    assert run(["import", "-dir", prof], capsys)[0] == 0
    assert run(["export", "summary", "-dir", prof], capsys)[0] == 0
    expected = _exported(prof)
    _damage(store.store_path(prof), kind)
    raw = tree_hashes(os.path.join(prof, "host"))
    code, _, err = run(["export", "summary", "-dir", prof], capsys)
    assert code == 0 and "Traceback" not in err, err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Warning: {store.store_path(prof)}: ") \
        and "importing it again from the raw data" in lines[0], err
    assert _exported(prof) == expected
    assert store.store_problem(prof) is None
    assert tree_hashes(os.path.join(prof, "host")) == raw


@pytest.mark.parametrize("kind", [k for k in DAMAGE if k != "directory"])
def test_a_damaged_store_without_raw_data_asks_for_a_re_import(tmp_path, capsys, kind):
    prof = synth.write_collection(str(tmp_path / "raw"), n_tasks=40, seed=3)
    assert run(["import", "-dir", prof], capsys)[0] == 0
    alone = tmp_path / "alone"
    os.makedirs(alone / "sqlite")
    shutil.copy(store.store_path(prof), alone / "sqlite" / "msprof_kit.db")
    _damage(str(alone / "sqlite" / "msprof_kit.db"), kind)
    code, out, err = run(["show", "-dir", str(alone)], capsys)
    line = _error_line(err)
    assert code == 5 and line.startswith(f"Error: {alone / 'sqlite' / 'msprof_kit.db'}: ") \
        and "msprof-kit import" in line, err


def test_a_directory_in_place_of_the_store_that_holds_files_is_left_alone(tmp_path, capsys):
    prof = synth.write_collection(str(tmp_path), n_tasks=30, seed=3)
    os.makedirs(os.path.join(store.store_path(prof), "mine"))
    code, _, err = run(["import", "-dir", prof], capsys)
    line = _error_line(err)
    assert code == 10 and store.store_path(prof) in line and "directory" in line, err
    assert os.path.isdir(os.path.join(store.store_path(prof), "mine"))


# --- the import's warnings, repeated ---------------------------------------------------------------

@needs_shared
def test_export_and_show_repeat_the_warnings_of_the_import(tmp_path, capsys):
    prof = copy_input("degraded_a", str(tmp_path))
    code, _, err = run(["import", "-dir", prof], capsys)
    warnings = [line[len("Warning: "):] for line in err.splitlines() if line.startswith("Warning: ")]
    assert code == 0 and warnings, err
    n = len(warnings)
    for argv in (["export", "summary", "-dir", prof], ["show", "-dir", prof], ["export", "timeline", "-dir", prof]):
        code, _, err = run(argv, capsys)
        assert code == 0, err
        lines = err.splitlines()
        assert len(lines) == 1, err
        assert lines[0].startswith(f"Warning: the import of {prof} reported {n} warning")
        assert warnings[0] in lines[0]
        if n > 1:
            assert f"(msprof-kit import -dir {prof} shows them all)" in lines[0]


def test_a_clean_import_repeats_nothing(tmp_path, capsys):
    prof = synth.write_collection(str(tmp_path), n_tasks=30, seed=3)
    assert run(["import", "-dir", prof], capsys)[0] == 0
    code, _, err = run(["export", "summary", "-dir", prof], capsys)
    assert code == 0 and err == "", err


def test_warnings_of_an_import_made_by_the_export_itself_are_said_once(tmp_path, capsys):
    prof = synth.write_collection(str(tmp_path), n_tasks=30, seed=3)
    slice_ = glob.glob(os.path.join(prof, "device_0", "data", "stars_soc*slice_0"))[0]
    with open(slice_, "r+b") as f:  # a truncated last record: warnings
        f.truncate(os.path.getsize(slice_) - 10)
    code, _, err = run(["export", "summary", "-dir", prof], capsys)
    lines = err.splitlines()
    assert code == 0 and "truncated" in err and "reported" not in err, err
    assert len(lines) == len(set(lines)) and all(line.startswith("Warning: ") for line in lines), err


# --- an interrupted export ------------------------------------------------------------------------

@needs_fork
def test_ctrl_c_during_export_summary_leaves_no_file_it_began(tmp_path, capsys, monkeypatch):
    """Ctrl-C reaches the whole process group: here the op_summary worker, after its header."""
    from msprof_kit.exporters.summary import files
    prof = synth.write_collection(str(tmp_path), n_tasks=40, seed=3)
    assert run(["import", "-dir", prof], capsys)[0] == 0
    parent = os.getpid()
    real = files.format_rows

    def interrupted(*args, **kwargs):
        if os.getpid() != parent:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(files, "format_rows", interrupted)
    code, _, err = run(["export", "summary", "-dir", prof, "-j", "2"], capsys)
    assert code == 130 and "Traceback" not in err, err
    assert _export_files(prof) == []


def test_a_store_damaged_inside_past_its_header_check_is_one_line(tmp_path, capsys):
    """Pages overwritten in the middle of a store whose header and table list are intact: sqlite
    finds it when it reads them, and that is one line asking for a re-import (exit 5), no traceback."""
    prof = synth.write_collection(str(tmp_path), n_tasks=400, seed=3)
    assert run(["import", "-dir", prof], capsys)[0] == 0
    path = store.store_path(prof)
    size = os.path.getsize(path)
    with open(path, "r+b") as f:  # the header page (table list included) stays; the data pages go
        f.seek(size // 4)
        f.write(b"\xa5" * (size // 2))
    if store.store_problem(prof) is not None:
        pytest.skip("the header check already sees this damage")
    code, _, err = run(["export", "summary", "-dir", prof], capsys)
    line = _error_line(err)
    assert code == 5 and "Traceback" not in err, err
    assert line.startswith(f"Error: {path}: the store is damaged (") and f"msprof-kit import -dir {prof}" in line
