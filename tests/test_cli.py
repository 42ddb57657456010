"""The command line as users run it: help texts, the synthetic round trip, query."""
from __future__ import annotations

import os
import sqlite3
import subprocess
import sys

import pytest

import synth
from conftest import run

from msprof_kit.store import read_columns

COMMANDS = [["import"], ["export"], ["export", "db"], ["query"]]


@pytest.mark.parametrize("cmd", COMMANDS)
def test_every_command_has_help(cmd, tmp_path):
    res = subprocess.run([sys.executable, "-m", "msprof_kit", *cmd, "--help"], capture_output=True, text=True,
                         cwd=tmp_path)  # the installed package, not the source tree of the cwd
    assert res.returncode == 0 and "usage: msprof-kit" in res.stdout and len(res.stdout) > 120


def test_no_command_prints_help(capsys):
    code, out, _ = run([], capsys)
    assert code == 1 and "import" in out and "export" in out


@pytest.mark.parametrize("chip", ["910B", "310P"])
def test_synthetic_collection_round_trip(tmp_path, capsys, chip):
    prof = synth.write_collection(str(tmp_path), chip=chip, n_tasks=120, model_fraction=0.25, slices=3, seed=5)
    code, out, err = run(["import", "-dir", prof], capsys)
    assert code == 0 and err == "", err
    with sqlite3.connect(os.path.join(prof, "sqlite", "msprof_kit.db")) as c:
        assert c.execute("SELECT COUNT(*) FROM TASK").fetchone()[0] == 120
        assert c.execute("SELECT COUNT(*) FROM COMPUTE_TASK_INFO").fetchone()[0] == 120
        pmu = read_columns(c, "KIT_TASK_PMU")
        assert len(pmu) == 120 and (pmu["taskRow"].to_numpy() < 120).all()
        kit = read_columns(c, "KIT_TASK")
        assert len(kit) == 120 and set(kit["deviceTaskType"]) <= {"AI_CORE", "AIV_SQE"}
        models = dict(c.execute("SELECT modelId, COUNT(*) FROM TASK GROUP BY modelId").fetchall())
        assert models[4294967295] == 90 and sum(models.values()) == 120
        # every task started after its launch on the host and ran for a positive time
        bad = c.execute("""SELECT COUNT(*) FROM TASK t JOIN CANN_API a ON a.connectionId = t.connectionId
                           WHERE t.startNs < a.startNs OR t.endNs <= t.startNs""").fetchone()[0]
        assert bad == 0


def test_two_devices_and_a_parent_folder(tmp_path, capsys):
    synth.write_collection(str(tmp_path), n_tasks=20, devices=2, seed=1, name="PROF_000001_A")
    synth.write_collection(str(tmp_path), n_tasks=10, seed=2, name="PROF_000002_B")
    code, out, _ = run(["import", "-dir", str(tmp_path)], capsys)
    assert code == 0 and out.count("Imported") == 2
    with sqlite3.connect(str(tmp_path / "PROF_000001_A" / "sqlite" / "msprof_kit.db")) as c:
        assert dict(c.execute("SELECT deviceId, COUNT(*) FROM TASK GROUP BY deviceId").fetchall()) == {0: 20, 1: 20}


def test_query_table(tmp_path, capsys):
    prof = synth.write_collection(str(tmp_path), n_tasks=40, model_fraction=0.5, seed=4)
    code, out, _ = run(["query", "-dir", prof], capsys)
    assert code == 0
    lines = out.split("\n")
    assert lines[0].startswith("Job Info\tDevice ID") or lines[0].startswith("Job Info")
    assert lines[1] == "" and lines[0].endswith("\t")
    cells = [c.strip() for c in lines[2].split("\t")]
    assert cells[1:3] == ["0", "device_0"] and cells[7] == "-1"


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads in /proc")
def test_the_command_starts_no_blas_threads():
    """numpy's OpenBLAS would start a spinning thread per core at import; the command has no use for them."""
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    code = "import os\nfrom msprof_kit import cli, importer\nprint(len(os.listdir('/proc/self/task')))"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "1", out


@pytest.mark.parametrize("command", [["import"], ["export", "summary"]])
def test_only_the_import_puts_every_thread_on_one_heap(command, tmp_path, capsys, monkeypatch):
    """memory.tune_allocator(one_heap=True) for the import alone (its threads free table-sized
    blocks; the exports' threads format chunks their own arenas serve)."""
    from msprof_kit import memory
    prof = synth.write_collection(str(tmp_path / "c"), n_tasks=40, devices=1, seed=3)
    if command != ["import"]:
        assert run(["import", "-dir", prof], capsys)[0] == 0
    asked = []
    monkeypatch.setattr(memory, "tune_allocator", lambda one_heap=False: asked.append(one_heap))
    assert run(command + ["-dir", prof], capsys)[0] == 0
    assert asked == [command == ["import"]]


QUICK_EXIT = """
import atexit, sys, threading, time
from msprof_kit import cli
sys.argv = ["msprof-kit"]  # prints the help and returns 1
atexit.register(lambda: print("hook ran", flush=True))
if {late!r}:
    def late():
        time.sleep(0.3)
        print("thread done", flush=True)
    threading.Thread(target=late).start()
cli.entry()
"""


@pytest.mark.parametrize("thread", [False, True])
def test_the_script_leaves_quickly_only_when_nothing_else_runs(thread):
    """cli.entry skips the interpreter's teardown with os._exit: the exit hooks still run, the
    streams are flushed, and a thread still at work keeps the ordinary exit (which waits for it)."""
    code = QUICK_EXIT.format(late=thread)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("usage: msprof-kit") and "hook ran" in lines
    assert ("thread done" in lines) is thread
    assert ("thread done" in lines) is thread
