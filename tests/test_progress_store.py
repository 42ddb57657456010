"""Progress on stderr (issue 22 item 3) and collections the user cannot write (item 4).

Progress: the CLI runs with its stderr on a pseudo-terminal (os.openpty, given a window size as a
terminal has) and its stdout on a pipe; the master side is read with a bounded wait. The one timed
check is the acceptance's: the first progress output comes within 2 s of the start.

Read-only collections: the CLI runs as a throwaway user (useradd, userdel afterwards) when that user
can start this interpreter, else as root without CAP_DAC_OVERRIDE / CAP_DAC_READ_SEARCH (out of the
bounding set before the exec: root then meets a mode-0555 folder as its owner does), as
tests/test_mutation.py's `run_as` does. The collection is a copy made read-only with chmod.
"""
from __future__ import annotations

import fcntl
import os
import select
import shutil
import struct
import subprocess
import sys
import termios
import time
from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Tuple

import pytest

import synth
from conftest import tree_hashes
from users import RunAs, bound_by_permissions

from msprof_kit import progress, store

TIMEOUT = 120.0  # seconds a command may take before the test gives up on it (not a timing check)
FIRST_OUTPUT = 2.0  # the acceptance: progress within 2 s of starting


def _env(**extra: str) -> Dict[str, str]:
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    env.pop(store.STORE_ENV, None)
    env.update(extra)
    return env


@dataclass
class PtyRun:
    code: Optional[int]
    stdout: str
    terminal: str          # what reached the pseudo-terminal (stderr)
    first: Optional[float]  # seconds from the start to the first byte on the terminal


def run_on_terminal(args: List[str], env: Optional[Dict[str, str]] = None, cwd: Optional[str] = None) -> PtyRun:
    """`python -m msprof_kit ARGS` with stderr on a pseudo-terminal of 24 x 100 and stdout on a pipe."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    out_r, out_w = os.pipe()
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "msprof_kit", *args], stdin=subprocess.DEVNULL, stdout=out_w,
                            stderr=slave, env=env or _env(), cwd=cwd, start_new_session=True)
    os.close(slave)
    os.close(out_w)
    terminal, stdout = b"", b""
    first = None
    open_fds = {master, out_r}
    deadline = start + TIMEOUT
    try:
        while open_fds and time.monotonic() < deadline:
            ready, _, _ = select.select(list(open_fds), [], [], 0.5)
            for fd in ready:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:  # EIO: the terminal's last writer is gone
                    chunk = b""
                if not chunk:
                    open_fds.discard(fd)
                elif fd == master:
                    if first is None:
                        first = time.monotonic() - start
                    terminal += chunk
                else:
                    stdout += chunk
        code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.wait()
        code = None
    finally:
        os.close(master)
        os.close(out_r)
    return PtyRun(code, stdout.decode("utf-8", "replace"), terminal.decode("utf-8", "replace"), first)


def run_piped(args: List[str], env: Optional[Dict[str, str]] = None,
              who: Optional[RunAs] = None, cwd: Optional[str] = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "msprof_kit", *args], capture_output=True, text=True,
                          timeout=TIMEOUT, env=env or _env(), cwd=cwd,
                          preexec_fn=who.apply if who is not None else None)


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A synthetic 910B collection of 20,000 ops on two devices (made once; commands copy it)."""
    return synth.write_collection(str(tmp_path_factory.mktemp("synth")), n_tasks=20_000, devices=2,
                                  model_fraction=0.2, seed=22)


def _copy(src: str, dest: str) -> str:
    path = os.path.join(dest, os.path.basename(src))
    shutil.copytree(src, path)
    return path


# --- progress ------------------------------------------------------------------------------------

def test_import_on_a_terminal_shows_progress_at_once(small, tmp_path):
    prof = _copy(small, str(tmp_path))
    got = run_on_terminal(["import", "-dir", prof, "-j", "2"])
    assert got.code == 0, got.terminal
    assert got.first is not None and got.first <= FIRST_OUTPUT, f"first progress after {got.first} s"
    for phase in ("host APIs", "device data", "matching device tasks", "indexing and writing the store"):
        assert phase in got.terminal
    assert "\r" in got.terminal  # a live bar, redrawn in place
    # stdout carries the result only: no bar, no phase
    assert got.stdout == f"Imported {prof} -> {store.own_store_path(prof)}\n"


def test_exports_on_a_terminal_show_progress(small, tmp_path):
    prof = _copy(small, str(tmp_path))
    assert run_piped(["import", "-dir", prof]).returncode == 0
    got = run_on_terminal(["export", "summary", "-dir", prof, "-j", "1"])
    assert got.code == 0, got.terminal
    assert "summary files" in got.terminal and "the unified DB" in got.terminal
    assert "\r" not in got.stdout and "summary files" not in got.stdout
    got = run_on_terminal(["export", "timeline", "-dir", prof, "-j", "2"])
    assert got.code == 0, got.terminal
    assert "timeline CANN APIs" in got.terminal and "timeline device layers" in got.terminal


def test_no_progress_off_a_terminal_unless_asked(small, tmp_path):
    prof = _copy(small, str(tmp_path))
    quiet = run_piped(["import", "-dir", prof])
    assert quiet.returncode == 0 and quiet.stderr == ""
    asked = run_piped(["import", "-dir", prof, "--progress"])
    assert asked.returncode == 0
    lines = asked.stderr.splitlines()
    assert lines and all(line.startswith("msprof-kit: ") for line in lines), asked.stderr
    assert any(line.endswith("host APIs: started") for line in lines)
    assert any("matching device tasks: done, " in line and "tasks" in line for line in lines)
    assert "\r" not in asked.stderr and "msprof-kit:" not in asked.stdout
    # --progress before the command works as well
    assert run_piped(["--progress", "export", "summary", "-dir", prof]).stderr.count("summary files: done") == 1


def test_quiet_prints_nothing_but_errors(small, tmp_path):
    prof = _copy(small, str(tmp_path))
    # a collection with a warning (its last API record cut short)
    api = sorted(n for n in os.listdir(os.path.join(prof, "host", "data")) if "api_event" in n)[-1]
    synth.truncate(os.path.join(prof, "host", "data", api), 7)
    loud = run_piped(["import", "-dir", prof])
    assert loud.returncode == 0 and "Warning:" in loud.stderr
    got = run_on_terminal(["import", "-dir", prof, "--quiet"])
    assert got.code == 0 and got.terminal == "" and got.stdout == ""
    got = run_on_terminal(["-q", "export", "timeline", "-dir", prof])
    assert got.code == 0 and got.terminal == "" and got.stdout == ""
    shown = run_on_terminal(["show", "-dir", prof, "--quiet", "--top", "3"])
    assert shown.code == 0 and shown.terminal == "" and "Op summary" in shown.stdout
    failed = run_on_terminal(["import", "-dir", os.path.join(str(tmp_path), "nowhere"), "--quiet"])
    assert failed.code == 2 and failed.terminal.startswith("Error: ") and failed.terminal.count("\n") == 1


def test_a_forked_worker_reports_nothing(tmp_path):
    """A reporter inherited through fork is silent in the child: only its maker draws."""
    path = tmp_path / "err.txt"
    with open(path, "w") as stream:
        reporter = progress.LineProgress(stream, every=0.0)
        pid = os.fork()
        if pid == 0:  # the child: everything it opens or advances stays unsaid
            with reporter.phase("child", total=3) as phase:
                phase.advance(3)
            os._exit(0)
        os.waitpid(pid, 0)
        with reporter.phase("parent", total=2) as phase:
            phase.advance(2)
    text = path.read_text()
    assert "child" not in text and "msprof-kit: parent: started" in text and "parent: done, 2/2" in text


def test_reporter_choice():
    class Stream:
        def __init__(self, tty: bool) -> None:
            self.tty = tty

        def isatty(self) -> bool:
            return self.tty

        def write(self, text: str) -> int:
            return len(text)

        def flush(self) -> None:
            pass

    assert type(progress.reporter(Stream(True), False, False)) is progress.BarProgress
    assert type(progress.reporter(Stream(True), True, True)) is progress.Progress
    assert type(progress.reporter(Stream(False), False, False)) is progress.Progress
    assert type(progress.reporter(Stream(False), True, False)) is progress.LineProgress


# --- read-only collections -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def reader() -> Iterator[Optional[RunAs]]:
    """Who meets a mode-0555 collection as read-only: one whom permissions bind (tests/users.py)."""
    def runs(who: RunAs) -> Tuple[bool, str]:
        probe = run_piped(["--help"], who=who, cwd="/")
        return probe.returncode == 0, probe.stderr

    with bound_by_permissions("mskp", runs) as who:
        yield who


def _shared_folder(tmp_path, who: Optional[RunAs]) -> str:
    """A folder the reader may enter and write (its cache and --store folders go there)."""
    path = tmp_path / "home"
    path.mkdir()
    os.chmod(path, 0o777)
    if who is not None and who.uid is not None:  # another user: let it through pytest's folders
        for folder in [tmp_path, *[p for p in tmp_path.parents if str(p).startswith(("/tmp/", "/var/tmp/"))]]:
            os.chmod(folder, os.stat(folder).st_mode | 0o055)
    return str(path)


def _read_only(prof: str) -> None:
    for base, dirs, files in os.walk(prof):
        for name in files:
            os.chmod(os.path.join(base, name), 0o444)
        os.chmod(base, 0o555)


@pytest.fixture
def read_only(small, tmp_path, reader) -> Iterator[Tuple[str, str, Optional[RunAs]]]:
    """(a read-only copy of the small collection, a writable home for the reader, the reader)."""
    home = _shared_folder(tmp_path, reader)
    prof = _copy(small, str(tmp_path))
    os.chmod(os.path.dirname(prof), 0o755)
    _read_only(prof)
    yield prof, home, reader
    for base, dirs, _ in os.walk(prof):
        os.chmod(base, 0o755)


def _reader_env(home: str, **extra: str) -> Dict[str, str]:
    return _env(HOME=home, XDG_CACHE_HOME=os.path.join(home, "cache"), **extra)


def test_read_only_collection_keeps_its_store_in_the_cache(read_only):
    prof, home, who = read_only
    before = tree_hashes(prof)
    env = _reader_env(home)
    got = run_piped(["import", "-dir", prof], env=env, who=who, cwd=home)
    assert got.returncode == 0, got.stderr
    kept = os.path.join(home, "cache", "msprof-kit")
    [folder] = os.listdir(kept)
    assert folder.startswith(os.path.basename(prof) + "-") and len(folder) == len(os.path.basename(prof)) + 13
    where = os.path.join(kept, folder, "sqlite", "msprof_kit.db")
    assert got.stdout == f"Imported {prof} -> {where}\n"
    assert got.stderr == f"Note: {prof} cannot be written; its store is kept in {os.path.dirname(where)}\n"
    shown = run_piped(["show", "-dir", prof, "--top", "3"], env=env, who=who, cwd=home)
    assert shown.returncode == 0 and where in shown.stdout, shown.stderr
    assert shown.stderr.startswith("Note: ") and "Error" not in shown.stderr
    assert tree_hashes(prof) == before and not os.path.exists(os.path.join(prof, "sqlite"))


def test_read_only_collection_exports_go_to_its_stand_in_folder(read_only):
    prof, home, who = read_only
    env = _reader_env(home)
    got = run_piped(["export", "summary", "-dir", prof], env=env, who=who, cwd=home)
    assert got.returncode == 0, got.stderr
    folder = os.path.join(home, "cache", "msprof-kit", os.listdir(os.path.join(home, "cache", "msprof-kit"))[0])
    assert got.stderr == (f"Note: {prof} cannot be written; its store is kept in {folder}/sqlite and its exports "
                          f"go to {folder}\n")
    written = got.stdout.splitlines()
    assert written and all(line.startswith(f"Wrote {folder}/") for line in written)
    assert any("mindstudio_profiler_output/op_summary_" in line for line in written)
    assert not os.path.exists(os.path.join(prof, "mindstudio_profiler_output"))
    plotted = run_piped(["plot", "-dir", prof, "--out", os.path.join(home, "plots")], env=env, who=who, cwd=home)
    assert plotted.returncode == 0, plotted.stderr


def test_store_option_and_environment(small, tmp_path):
    prof = _copy(small, str(tmp_path))
    elsewhere = tmp_path / "stores"
    got = run_piped(["import", "-dir", prof, "--store", str(elsewhere)])
    assert got.returncode == 0 and got.stderr == "", got.stderr
    [folder] = os.listdir(elsewhere)
    assert got.stdout == f"Imported {prof} -> {elsewhere / folder / 'sqlite' / 'msprof_kit.db'}\n"
    assert not os.path.exists(os.path.join(prof, "sqlite"))
    # the environment variable finds it again; exports still go into the (writable) collection
    env = _env(**{store.STORE_ENV: str(elsewhere)})
    shown = run_piped(["export", "summary", "-dir", prof], env=env)
    assert shown.returncode == 0 and "Note" not in shown.stderr and "Warning" not in shown.stderr
    assert all(line.startswith(f"Wrote {prof}/") for line in shown.stdout.splitlines())
    assert not os.path.exists(os.path.join(prof, "sqlite"))
    # --clear removes that store and its folder, nothing else
    cleared = run_piped(["export", "timeline", "-dir", prof, "--clear"], env=env)
    assert cleared.returncode == 0 and os.listdir(elsewhere) == []


def test_a_store_folder_that_cannot_be_written_says_so(read_only):
    prof, home, who = read_only
    locked = os.path.join(home, "locked")
    os.mkdir(locked, 0o555)
    got = run_piped(["import", "-dir", prof, "--store", locked], env=_reader_env(home), who=who, cwd=home)
    assert got.returncode == 10, got.stderr
    [line] = got.stderr.splitlines()
    assert line.startswith(f"Error: {locked}/") and "cannot write" in line and "(Permission denied)" in line
    assert "cannot read" not in line


def test_cache_folder_names():
    a = store.stand_in("/data/one/PROF_000001_X")
    b = store.stand_in("/data/two/PROF_000001_X")
    assert os.path.basename(a).startswith("PROF_000001_X-") and a != b
    assert os.path.basename(store.stand_in("/data/odd name:é")).startswith("odd_name__-")
