"""Input that is not what a collection's files should be (issue 21, items 7-9): files that are not
regular files (FIFOs, /dev/zero, directories), very many small slices, over-long names and lines.

Whatever might hang or eat memory runs the CLI in a subprocess, with a timeout and an address-space
limit, so that a regression fails the test instead of stopping the suite or the machine.
"""
from __future__ import annotations

import csv
import glob
import hashlib
import os
import resource
import sqlite3
import stat
import subprocess
import sys
from typing import Dict, List, Tuple

import pytest

import synth_job
from conftest import copy_input, needs_shared, run

from msprof_kit import files, layout, store
from msprof_kit.errors import Diagnostics
from msprof_kit.layout import ResultDir, data_files
from msprof_kit.ingest import streams
from msprof_kit.parsers import stream

TIMEOUT = 60  # s, for one CLI run (each takes a few seconds)
MEMORY_LIMIT = 3 << 30  # bytes of address space for a CLI run (reading /dev/zero must not get far)


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def cli(*args: str) -> subprocess.CompletedProcess:
    """The CLI as users run it, bounded in time and memory."""
    return subprocess.run([sys.executable, "-m", "msprof_kit", *args], capture_output=True, text=True,
                          timeout=TIMEOUT, preexec_fn=_limit)


def warnings_of(err: str) -> List[str]:
    return [line for line in err.splitlines() if line.startswith("Warning: ")]


def replace(path: str, kind: str) -> None:
    """Put a FIFO, a symlink to /dev/zero or a directory where the file `path` was."""
    if os.path.lexists(path):
        os.remove(path)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "zero":
        os.symlink("/dev/zero", path)
    else:
        os.mkdir(path)


def regular_hashes(root: str) -> Dict[str, str]:
    """sha256 of every regular file below root (conftest.tree_hashes would block on a FIFO)."""
    out = {}
    for base, _, files in os.walk(root):
        for name in files:
            p = os.path.join(base, name)
            if stat.S_ISREG(os.lstat(p).st_mode):
                with open(p, "rb") as f:
                    out[os.path.relpath(p, root)] = hashlib.sha256(f.read()).hexdigest()
    return out


WHAT = {"fifo": "a FIFO", "zero": "a character device", "dir": "a directory"}


@pytest.fixture()
def prof(tmp_path):
    return copy_input("min_910b", str(tmp_path / "in"))


@pytest.fixture()
def job(tmp_path):
    return synth_job.write_job(str(tmp_path / "in"), n_tasks=30, iterations=2, seed=5)


# --- 7. not regular files -----------------------------------------------------------------------

@needs_shared
@pytest.mark.parametrize("kind", ["fifo", "zero", "dir"])
@pytest.mark.parametrize("control", ["host/info.json", "device_0/info.json.0", "device_0/sample.json",
                                     "host/start_info", "device_0/dev_start.log.0"])
def test_a_control_file_that_is_not_regular_is_one_error(prof, control, kind):
    path = os.path.join(prof, control)
    replace(path, kind)
    res = cli("import", "-dir", prof)
    assert "Traceback" not in res.stderr
    assert res.returncode == 3, res.stderr
    assert res.stderr == f"Error: {path}: offset 0: {WHAT[kind]}, not a regular file; expected a regular file\n"


@needs_shared
@pytest.mark.parametrize("kind", ["fifo", "zero", "dir"])
@pytest.mark.parametrize("data", ["host/data/unaging.additional.hash_dic.slice_0",
                                  "host/data/unaging.additional.type_info_dic.slice_0",
                                  "host/data/unaging.compact.node_basic_info.slice_0",
                                  "device_0/data/stars_soc.data.0.slice_0",
                                  "device_0/data/ffts_profile.data.0.slice_1"])
def test_a_slice_that_is_not_regular_is_skipped_with_a_warning(prof, data, kind):
    path = os.path.join(prof, data)
    replace(path, kind)
    before = regular_hashes(prof)
    res = cli("import", "-dir", prof)
    assert "Traceback" not in res.stderr
    assert res.returncode == 0, res.stderr
    assert f"Warning: {path}: {WHAT[kind]}, not a regular file; this slice is skipped" in warnings_of(res.stderr)
    assert {k: v for k, v in regular_hashes(prof).items() if k in before} == before


def test_a_job_control_file_that_is_a_fifo_is_one_error(job):
    path = os.path.join(job, "info.json.0")
    replace(path, "fifo")
    res = cli("import", "-dir", job)
    assert res.returncode == 3, res.stderr
    assert res.stderr == f"Error: {path}: offset 0: a FIFO, not a regular file; expected a regular file\n"


@pytest.mark.parametrize("kind", ["fifo", "zero", "dir"])
@pytest.mark.parametrize("data", ["Framework.hash_dic.0.slice_0",
                                  "hwts.log.data.45.dev.profiler_default_tag.0.slice_1",
                                  "AclModule.acl_model.0.slice_0"])
def test_a_job_slice_that_is_not_regular_is_skipped_with_a_warning(job, data, kind):
    path = os.path.join(job, "data", data)
    replace(path, kind)
    before = regular_hashes(job)
    res = cli("import", "-dir", job)
    assert "Traceback" not in res.stderr
    assert res.returncode in (0, 4), res.stderr
    assert {k: v for k, v in regular_hashes(job).items() if k in before} == before
    assert f"Warning: {path}: {WHAT[kind]}, not a regular file; this slice is skipped" in warnings_of(res.stderr)


def test_a_text_job_framework_file_that_is_a_fifo_is_skipped(tmp_path):
    job = synth_job.write_job(str(tmp_path), n_tasks=20, iterations=1, framework="text", seed=3)
    path = os.path.join(job, "data", "Framework.host.vm.graph_desc_info.0.slice_0")
    replace(path, "fifo")
    res = cli("import", "-dir", job)
    assert res.returncode == 0, res.stderr
    assert f"Warning: {path}: a FIFO, not a regular file; this slice is skipped" in warnings_of(res.stderr)


def test_open_regular_refuses_without_blocking(tmp_path):
    fifo = str(tmp_path / "fifo")
    os.mkfifo(fifo)
    for path, what in ((fifo, "a FIFO"), ("/dev/zero", "a character device"), (str(tmp_path), "a directory")):
        with pytest.raises(files.NotRegularFile) as info:
            files.open_regular(path)
        assert info.value.what == what and info.value.filename == path
    regular = tmp_path / "f"
    regular.write_bytes(b"abc")
    with files.open_regular(str(regular)) as f:
        assert f.read() == b"abc"


# --- 8. many small slices -----------------------------------------------------------------------

class CountedName(str):
    """A file name that counts the comparisons made with it (a test of the listing's algorithm:
    a set costs about one comparison a name, a list scan one a name per name)."""

    compared = 0

    def __eq__(self, other: object) -> bool:
        CountedName.compared += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__


def _slices(folder: str, n: int, marked: int) -> None:
    os.makedirs(folder)
    for i in range(n):
        open(os.path.join(folder, f"stars_soc.data.0.slice_{i}"), "wb").close()
    for i in range(marked):  # the first `marked` slices are marked `.complete` (skipped, as the reference does)
        open(os.path.join(folder, f"stars_soc.data.0.slice_{i}.complete"), "wb").close()


def test_listing_slices_is_linear(tmp_path, monkeypatch):
    n = 2000
    _slices(str(tmp_path / "device_0" / "data"), n, marked=n // 2)
    real_listdir, real_scandir = os.listdir, os.scandir

    class Entry:
        def __init__(self, entry: os.DirEntry) -> None:
            self.entry, self.name, self.path = entry, CountedName(entry.name), entry.path

        def __getattr__(self, attr: str):
            return getattr(self.entry, attr)

    class Listing:
        def __init__(self, path: str) -> None:
            self.it = real_scandir(path)

        def __enter__(self):
            return self

        def __exit__(self, *exc: object) -> None:
            self.it.close()

        def __iter__(self):
            return (Entry(e) for e in self.it)

        def close(self) -> None:
            self.it.close()

    calls: List[str] = []
    monkeypatch.setattr(layout.os, "listdir", lambda p: calls.append(p) or [CountedName(x) for x in real_listdir(p)])
    monkeypatch.setattr(layout.os, "scandir", lambda p: calls.append(p) or Listing(p))
    CountedName.compared = 0
    rd = ResultDir(path=str(tmp_path / "device_0"), device_id=0, info={})
    files = data_files(rd, Diagnostics())
    assert files == {("stars_soc.data", ""): [os.path.join(rd.data_dir, f"stars_soc.data.0.slice_{i}")
                                              for i in range(n // 2, n)]}
    assert len(calls) == 1  # one listing of the folder
    assert CountedName.compared <= 4 * n  # a list scan per name would make about n * n / 2


def test_32k_slices_are_listed_whole(tmp_path):
    n = 32000
    _slices(str(tmp_path / "device_0" / "data"), n, marked=10)
    rd = ResultDir(path=str(tmp_path / "device_0"), device_id=0, info={})
    files = data_files(rd, Diagnostics())
    paths = files[("stars_soc.data", "")]
    assert len(paths) == n - 10
    assert paths[0].endswith(".slice_10") and paths[-1].endswith(f".slice_{n - 1}")


# --- 9. over-long names and lines ---------------------------------------------------------------

def test_read_lines_bounds_each_line(tmp_path):
    a, b = tmp_path / "x.slice_0", tmp_path / "x.slice_1"
    a.write_bytes(b"one\ntw")                   # a line straddles the two slices
    b.write_bytes(b"o\n" + b"L" * 50 + b"\n\nlast")
    text = streams.read_lines([str(a), str(b)], cap=8)
    assert text.lines == [(0, b"one"), (4, b"two"), (8, b"L" * 8), (59, b""), (60, b"last")]
    assert text.cut == {8: 50}
    assert [(p.path, p.start, p.size) for p in text.pieces] == [(str(a), 0, 6), (str(b), 6, 58)]
    assert streams.read_lines([str(a)], sep=b"\0").lines == [(0, b"one\ntw")]
    assert stream.split_lines(b"one\ntwo\n", [stream.Piece("m", 0, 8)]).lines == [(0, b"one"), (4, b"two")]
    whole = (a.read_bytes() + b.read_bytes())
    again = stream.split_lines(whole, text.pieces, cap=8)
    assert (again.lines, again.cut) == (text.lines, text.cut)


def _cut_warnings(err: str, path: str) -> List[str]:
    return [w for w in warnings_of(err) if w.startswith(f"Warning: {path}: ") and "name cap" in w]


@needs_shared
def test_a_huge_op_name_is_cut_to_the_name_cap(prof):
    hash_dic = os.path.join(prof, "host", "data", "unaging.additional.hash_dic.slice_0")
    with open(hash_dic, encoding="utf-8") as f:
        lines = f.read().splitlines()
    assert lines[0].startswith("10000000000000000001:aclnnAdd_0_Add")
    huge = "N" * 2_000_000
    lines[0] = f"10000000000000000001:{huge}"
    with open(hash_dic, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    res = cli("import", "-dir", prof)
    assert res.returncode == 0, res.stderr
    cut = _cut_warnings(res.stderr, hash_dic)
    assert len(cut) == 1 and "1 name longer" in cut[0], res.stderr
    res = cli("export", "summary", "-dir", prof)
    assert res.returncode == 0, res.stderr
    (summary,) = glob.glob(os.path.join(prof, "mindstudio_profiler_output", "op_summary_*.csv"))
    assert os.path.getsize(summary) < 1 << 20
    with open(summary, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    assert "N" * stream.NAME_CAP in {r["Op Name"] for r in rows}
    assert max(len(v) for r in rows for v in r.values()) <= stream.NAME_CAP


def _peak_rss_kib(*args: str) -> Tuple[subprocess.CompletedProcess, int]:
    """Run the CLI under a small Python parent that reports the peak RSS of its children (KiB)."""
    probe = ("import resource, subprocess, sys\n"
             "r = subprocess.run([sys.executable, '-m', 'msprof_kit'] + sys.argv[1:])\n"
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)\n"
             "sys.exit(r.returncode)\n")
    res = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True, timeout=TIMEOUT,
                         preexec_fn=_limit)
    lines = res.stderr.splitlines()
    return subprocess.CompletedProcess(res.args, res.returncode, res.stdout, "\n".join(lines[:-1])), int(lines[-1])


@pytest.mark.parametrize("name", ["Framework.host.vm.graph_desc_info.0.slice_0",
                                  "Framework.host.vm.task_desc_info.0.slice_0"])
def test_a_huge_text_line_costs_no_memory(tmp_path, name):
    clean = synth_job.write_job(str(tmp_path / "a"), n_tasks=20, iterations=1, framework="text", seed=3)
    damaged = synth_job.write_job(str(tmp_path / "b"), n_tasks=20, iterations=1, framework="text", seed=3)
    path = os.path.join(damaged, "data", name)
    huge = 48 << 20
    with open(path, "ab") as f:
        f.write(b"op_name:" + b"x" * huge + b"\n")
    res, base = _peak_rss_kib("import", "-dir", clean)
    assert res.returncode == 0, res.stderr
    res, peak = _peak_rss_kib("import", "-dir", damaged)
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr
    long = [w for w in warnings_of(res.stderr) if w.startswith(f"Warning: {path}: offset ")
            and f"longer than the {stream.LINE_CAP}-byte line cap" in w]
    assert len(long) == 1, res.stderr
    assert (peak - base) * 1024 < huge // 2, (peak, base)  # before the line cap: about 8 x huge


def test_job_text_names_are_cut_to_the_name_cap(tmp_path):
    job = synth_job.write_job(str(tmp_path), n_tasks=20, iterations=1, framework="text", seed=3)
    path = os.path.join(job, "data", "Framework.host.vm.task_desc_info.0.slice_0")
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    name = lines[0].split()[0]
    lines[0] = lines[0].replace(name, name + "Z" * 100_000, 1)
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    res = cli("import", "-dir", job)
    assert res.returncode == 0, res.stderr
    cut = _cut_warnings(res.stderr, path)
    assert len(cut) == 1 and "1 op name longer" in cut[0], res.stderr
    with sqlite3.connect(store.store_path(job)) as conn:
        longest = conn.execute("SELECT MAX(LENGTH(value)) FROM STRING_IDS").fetchone()[0]
    assert longest == stream.NAME_CAP


@needs_shared
def test_a_file_name_that_is_not_utf8_is_named_in_a_warning(tmp_path, capsys):
    """A slice renamed with a byte that is not UTF-8 no longer matches any raw data name: what it
    held is lost, and a warning says so (it was skipped in silence)."""
    prof = copy_input("910b_mixed", str(tmp_path))
    data = os.path.join(prof, "host", "data")
    name = next(n for n in sorted(os.listdir(data)) if "type_info_dic" in n and not n.endswith(".done"))
    os.rename(os.path.join(data, name), os.path.join(data, os.fsdecode(b"unag\xff" + name[4:].encode())))
    code, _, err = run(["import", "-dir", prof], capsys)
    assert code == 0
    assert "file name(s) not UTF-8 (the first: b'unag\\xff" in err and "whatever they hold is lost" in err


@needs_shared
def test_a_collection_whose_path_is_not_utf8_imports_and_exports(tmp_path):
    """The store's URI and the texts kept in it (the path in KIT_INFO, warnings) take a folder name
    holding bytes that are not UTF-8 (it was a UnicodeEncodeError traceback)."""
    prof = copy_input("min_910b", str(tmp_path))
    odd = os.fsdecode(os.fsencode(prof) + b"_\xff\xfe")
    os.rename(prof, odd)
    printed = b""
    for argv in (["import"], ["export", "summary"], ["export", "timeline"], ["query"]):
        res = subprocess.run([sys.executable, "-m", "msprof_kit", *argv, "-dir", odd], capture_output=True,
                             cwd=tmp_path, timeout=120)
        assert res.returncode == 0 and b"Traceback" not in res.stderr, res.stderr
        printed += res.stdout
    assert b"Wrote " + os.fsencode(odd) in printed  # paths printed as the file system's bytes
    assert glob.glob(os.path.join(glob.escape(odd), "mindstudio_profiler_output", "op_summary_*.csv"))
