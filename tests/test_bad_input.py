"""Damaged and bad input: one clear line naming file and offset, the rest still used, raw files untouched."""
from __future__ import annotations

import errno
import glob
import json
import os
import shutil
import sqlite3

import pytest

import synth
from conftest import DEGRADED_CASES, copy_input, needs_shared, run, tree_hashes

from msprof_kit.parsers import records


def _count(prof: str, table: str) -> int:
    with sqlite3.connect(os.path.join(prof, "sqlite", "msprof_kit.db")) as c:
        if not c.execute("SELECT 1 FROM sqlite_master WHERE name=?", (table,)).fetchone():
            return 0
        return c.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]


@pytest.fixture()
def prof(tmp_path):
    return synth.write_collection(str(tmp_path), n_tasks=30, seed=3)


# --- the golden damaged inputs -------------------------------------------------------------------

# What each keeps (TASK rows, CANN_API rows, COMPUTE_TASK_INFO rows) and the warning that names the damage.
DEGRADED = {
    # the reference keeps no device task at all on a and b; one bad record must cost one task here
    "degraded_a": (40, 121, 40, "stars_soc.data.0.slice_1: offset 2560: truncated stars_log record: 40 of 64 bytes"),
    "degraded_b": (40, 121, 40, "stars_soc.data.0.slice_0: offset 1280: stars_log record without magic 0x6BD3"),
    "degraded_c": (41, 0, 0, "no host/ directory"),
    "degraded_d": (0, 121, 40, "no device_N/ directory"),
    "degraded_e": (41, 120, 40, "aging.api_event.data.slice_0: offset 1080: api_event record without magic 0x5A5A"),
}


@needs_shared
@pytest.mark.parametrize("case", DEGRADED_CASES)
def test_degraded_inputs_import_with_a_located_warning(case, tmp_path, capsys):
    prof = copy_input(case, str(tmp_path))
    before = tree_hashes(prof)
    code, out, err = run(["import", "-dir", prof], capsys)
    assert code == 0, err
    tasks, apis, compute, warning = DEGRADED[case]
    assert warning in err
    assert "Traceback" not in err
    assert (_count(prof, "TASK"), _count(prof, "CANN_API"), _count(prof, "COMPUTE_TASK_INFO")) == (tasks, apis, compute)
    after = tree_hashes(prof)
    assert {k: v for k, v in after.items() if k in before} == before  # raw files byte-for-byte unchanged


@needs_shared
def test_degraded_b_names_the_task_that_lost_its_end(tmp_path, capsys):
    prof = copy_input("degraded_b", str(tmp_path))
    _, _, err = run(["import", "-dir", prof], capsys)
    assert "start record has no end record; task dropped (stream 3, task 5)" in err


# --- synthetic damage ----------------------------------------------------------------------------

def test_truncated_last_record(prof, capsys):
    path = glob.glob(os.path.join(prof, "device_0", "data", "stars_soc.data.0.slice_*"))[-1]
    size = synth.truncate(path, 24)
    code, _, err = run(["import", "-dir", prof], capsys)
    assert code == 0
    assert f"{path}: offset {size - 40}: truncated stars_log record: 40 of 64 bytes; dropped" in err
    assert _count(prof, "TASK") == 29


def test_bad_magic_in_the_middle(prof, capsys):
    path = os.path.join(prof, "device_0", "data", "stars_soc.data.0.slice_0")
    synth.corrupt_magic(path, record_index=10, record_size=records.STARS_LOG.size)
    code, _, err = run(["import", "-dir", prof], capsys)
    assert code == 0
    assert f"{path}: offset 640: stars_log record without magic 0x6BD3; dropped" in err
    assert _count(prof, "TASK") == 29


def test_missing_dev_start_log_skips_that_device(prof, capsys):
    os.remove(os.path.join(prof, "device_0", "dev_start.log.0"))
    code, _, err = run(["import", "-dir", prof], capsys)
    assert code == 0
    assert "dev_start.log" in err and "device 0 is skipped" in err
    assert _count(prof, "TASK") == 0 and _count(prof, "CANN_API") > 0


def test_missing_start_info_everywhere_is_an_error(prof, capsys):
    for p in glob.glob(os.path.join(prof, "*", "start_info*")):
        os.remove(p)
    code, out, err = run(["import", "-dir", prof], capsys)
    assert code == 3
    assert err.startswith("Error: ") and "start_info" in err and err.count("\n") == 1


def test_empty_data_dir(prof, capsys):
    data = os.path.join(prof, "device_0", "data")
    shutil.rmtree(data)
    os.mkdir(data)
    code, _, err = run(["import", "-dir", prof], capsys)
    assert code == 0
    assert f"{data}: no raw data files" in err
    assert _count(prof, "TASK") == 0


def test_unknown_platform_version(prof, capsys):
    for p in glob.glob(os.path.join(prof, "*", "info.json*")):
        info = json.load(open(p))
        info["platform_version"] = "42"
        json.dump(info, open(p, "w"))
    code, _, err = run(["import", "-dir", prof], capsys)
    assert code == 3
    assert "unknown platform_version 42; expected one of" in err and "info.json" in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_not_a_collection(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("hello")
    code, _, err = run(["import", "-dir", str(tmp_path)], capsys)
    assert code == 4  # a folder without data is "no data" under every command (README)
    assert err == f"Error: {tmp_path}: not a profiling collection: expected host/ or device_N/ directories " \
                  f"holding info.json and data/, or folders (PROF_xxx) that hold them\n"


def test_path_does_not_exist(tmp_path, capsys):
    code, _, err = run(["import", "-dir", str(tmp_path / "nope")], capsys)
    assert code == 2 and err == f"Error: {tmp_path / 'nope'}: no such file or directory\n"


def test_unreadable_file(prof, capsys, monkeypatch):
    # a slice whose open is refused (tests run as root, so permission bits would not stop a read; a
    # directory where a slice should be is skipped with a warning: tests/test_not_regular.py)
    path = os.path.join(prof, "device_0", "data", "stars_soc.data.0.slice_0")
    real_open = os.open

    def refuse(p, flags, *args, **kwargs):
        if os.fspath(p) == path:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), p)
        return real_open(p, flags, *args, **kwargs)
    monkeypatch.setattr(os, "open", refuse)
    code, _, err = run(["import", "-dir", prof], capsys)
    assert code == 2
    assert err.startswith("Error: ") and "stars_soc.data.0.slice_0" in err and "cannot read" in err


def test_traceback_flag_shows_the_stack(tmp_path, capsys):
    with pytest.raises(Exception):
        run(["--traceback", "import", "-dir", str(tmp_path / "nope")], capsys)


def test_bad_json_control_file(prof, capsys):
    p = os.path.join(prof, "host", "info.json")
    with open(p, "w") as f:
        f.write('{"platform_version": "5", oops}')
    code, _, err = run(["import", "-dir", prof], capsys)
    assert code == 3 and f"Error: {p}: offset " in err and "expected one JSON object" in err


def test_raw_files_unchanged_by_import_and_export(prof, capsys):
    before = tree_hashes(prof)
    assert run(["import", "-dir", prof], capsys)[0] == 0
    assert run(["export", "db", "-dir", prof], capsys)[0] == 0
    after = tree_hashes(prof)
    assert {k: v for k, v in after.items() if k in before} == before
    created = sorted(set(after) - set(before))
    assert created[0].startswith("msprof_") and created[1] == os.path.join("sqlite", "msprof_kit.db")


@pytest.mark.parametrize("what, writer", [("summary", "write_csv"), ("timeline", "write_overlap")])
def test_a_full_disk_leaves_no_half_written_export(prof, capsys, monkeypatch, what, writer):
    """An export that cannot be written (here: the disk fills up midway) is one line naming the
    output folder and the cause, exit code 10, and none of that export's files is left behind."""
    from msprof_kit.exporters.summary import export as summary_export
    from msprof_kit.exporters.timeline import export as timeline_export
    code, _, err = run(["import", "-dir", prof], capsys)
    assert code == 0, err
    module = summary_export if what == "summary" else timeline_export
    real = getattr(module, writer)

    def fills_the_disk(*args, **kwargs):
        real(*args, **kwargs)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(module, writer, fills_the_disk)
    code, _, err = run(["export", what, "-dir", prof, "-j", "1"], capsys)
    assert code == 10
    assert "Traceback" not in err
    line = [l for l in err.splitlines() if l.startswith("Error:")]
    assert len(line) == 1 and "mindstudio_profiler_output" in line[0] and "No space left on device" in line[0], err
    out = os.path.join(prof, "mindstudio_profiler_output")
    left = [f for f in os.listdir(out)] if os.path.isdir(out) else []
    assert not [f for f in left if f.startswith(("op_", "task_time", "api_statistic", "msprof_", "."))], left
