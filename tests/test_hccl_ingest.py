"""Issue 25, the HCCL ingest: COMMUNICATION_OP, COMMUNICATION_TASK_INFO, OVERLAP_ANALYSIS's
communication rows and RANK_DEVICE_MAP of the unified DB equal the reference's C++ export on
910b_hccl and both ranks of 910b_hccl_2ranks; damaged copies warn by name with counts."""
from __future__ import annotations

import glob
import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
from typing import List

import numpy as np
import pytest

from conftest import COMPARE, GOLDEN, copy_input, needs_shared, run

from msprof_kit.parsers import records

pytestmark = needs_shared


def _copy_cluster(dest: str) -> List[str]:
    """A writable copy of 910b_hccl_2ranks' input; its PROF directories, rank 0 first."""
    src = os.path.join(GOLDEN, "910b_hccl_2ranks", "input")
    shutil.copytree(src, dest, dirs_exist_ok=True)
    for root, dirs, files in os.walk(dest):
        for name in dirs + files:
            path = os.path.join(root, name)
            os.chmod(path, os.stat(path).st_mode | stat.S_IWUSR)
    # rank 0 = ..._DQQMHRQA, rank 1 = ..._LICONMHC (MANIFEST.txt)
    return sorted(glob.glob(os.path.join(dest, "CLUSTER_*", "PROF_*")), key=lambda p: not p.endswith("DQQMHRQA"))


def _export_db(prof: str, capsys: pytest.CaptureFixture) -> str:
    code, _, err = run(["export", "db", "-dir", prof], capsys)
    assert code == 0, err
    return err


def _compare(prof: str, golden: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, COMPARE, prof, golden, "--kinds", "db"], capture_output=True, text=True)


def _db(prof: str) -> sqlite3.Connection:
    return sqlite3.connect(glob.glob(os.path.join(prof, "msprof_*.db"))[0])


def test_single_rank_db_equals_the_reference(tmp_path, capsys):
    prof = copy_input("910b_hccl", str(tmp_path))
    err = _export_db(prof, capsys)
    assert "communication" not in err.lower()
    res = _compare(prof, os.path.join(GOLDEN, "910b_hccl"))
    assert res.returncode == 0 and res.stdout.strip().splitlines()[-1].startswith("verdict: equal"), res.stdout
    db = _db(prof)
    # hand-checked: the first all-reduce (hccl_world_group, hash ...483) spans its master tasks;
    # its first Memcpy moves 1048576 bytes in 18360 ns: 57.1 GB/s
    name, start, end, group = db.execute(
        "SELECT (SELECT value FROM STRING_IDS WHERE id = opName), startNs, endNs, "
        "(SELECT value FROM STRING_IDS WHERE id = groupName) FROM COMMUNICATION_OP ORDER BY startNs LIMIT 1").fetchone()
    assert (name, start, end, group) == ("hcom_allReduce__483_0_1", 1700902984100509740, 1700902984100688780,
                                         "hccl_world_group")
    bandwidth = db.execute("SELECT c.bandwidth FROM COMMUNICATION_TASK_INFO c JOIN TASK t USING (globalTaskId) "
                           "WHERE c.size = 1048576 ORDER BY t.startNs LIMIT 1").fetchone()[0]
    assert bandwidth == pytest.approx(1048576 / 18360 * 1e9)
    kinds = dict(db.execute("SELECT type, COUNT(*) FROM OVERLAP_ANALYSIS GROUP BY type").fetchall())
    gold = sqlite3.connect(os.path.join(GOLDEN, "910b_hccl", "cpp", "msprof.db"))
    assert kinds == dict(gold.execute("SELECT type, COUNT(*) FROM OVERLAP_ANALYSIS GROUP BY type").fetchall())
    # an HCCL task's TASK row carries its op's connection id, as the reference's
    assert db.execute("SELECT COUNT(*) FROM COMMUNICATION_TASK_INFO c JOIN TASK t USING (globalTaskId) "
                      "JOIN COMMUNICATION_OP o USING (opId) WHERE t.connectionId != o.connectionId").fetchone()[0] == 0


def test_two_ranks_db_equals_the_reference(tmp_path, capsys):
    for rank, prof in enumerate(_copy_cluster(str(tmp_path))):
        _export_db(prof, capsys)
        res = _compare(prof, os.path.join(GOLDEN, "910b_hccl_2ranks", f"cpp_rank{rank}"))
        assert res.returncode == 0 and res.stdout.strip().splitlines()[-1].startswith("verdict: equal"), res.stdout
        # the real rank id (the reference's C++ path writes -1 whatever info.json says)
        assert _db(prof).execute("SELECT rankId FROM RANK_DEVICE_MAP").fetchall() == [(rank,)]
        store = sqlite3.connect(os.path.join(prof, "sqlite", "msprof_kit.db"))
        keys = store.execute("SELECT DISTINCT groupHash FROM KIT_HCCL_TASK ORDER BY 1").fetchall()
        assert ("7415574198778220483",) in keys


def _damage(prof: str, what: str) -> None:
    data = os.path.join(prof, "host", "data")
    if what == "orphan_info":  # an hccl_info record moved to a thread without communication APIs
        path = os.path.join(data, "aging.additional.hccl_info.slice_0")
        arr = np.fromfile(path, dtype=records.HCCL_INFO.dtype)
        arr["thread_id"][0] = 4242
        arr.tofile(path)
    elif what == "no_track":  # the task_track of one communication task moved away likewise
        path = os.path.join(data, "aging.compact.task_track.slice_0")
        arr = np.fromfile(path, dtype=records.TASK_TRACK.dtype)
        arr["thread_id"][int(np.flatnonzero(np.isin(arr["stream_id"], (5, 6)))[0])] = 4242
        arr.tofile(path)
    else:  # the device's info.json names another rank than the host's
        path = glob.glob(os.path.join(prof, "device_*", "info.json.*"))[0]
        with open(path, encoding="utf-8") as f:
            info = json.load(f)
        info["rank_id"] = 5
        with open(path, "w", encoding="utf-8") as f:
            json.dump(info, f)


@pytest.mark.parametrize("what, warning, tasks, rank", [
    ("orphan_info", "1 hccl_info records lie under no communication API (level 5500) of their thread", 134, 0),
    ("no_track", "1 communication tasks (level-5500 APIs with an hccl_info record) have no task_track record", 133, 0),
    ("rank", "its info.json says rank_id 5, the host's info.json says 0", 134, 5),
])
def test_damaged_copies_warn_and_keep_the_rest(tmp_path, capsys, what, warning, tasks, rank):
    prof = copy_input("910b_hccl", str(tmp_path))
    _damage(prof, what)
    err = _export_db(prof, capsys)
    assert warning in err
    assert "Traceback" not in err
    db = _db(prof)
    assert db.execute("SELECT COUNT(*) FROM COMMUNICATION_TASK_INFO").fetchone()[0] == tasks
    assert db.execute("SELECT COUNT(*) FROM COMMUNICATION_OP").fetchone()[0] == 13
    assert db.execute("SELECT rankId FROM RANK_DEVICE_MAP").fetchall() == [(rank,)]
    if what == "orphan_info":
        assert "1 communication tasks have no hccl_info record" in err


ANALYZE_KINDS = "communication,communication_matrix"


def test_analyze_command_equals_the_reference(tmp_path, capsys):
    prof = copy_input("910b_hccl", str(tmp_path / "one"))
    code, out, err = run(["analyze", "--rule", ANALYZE_KINDS, "-dir", prof], capsys)
    assert code == 0, err
    assert out.count("Wrote ") == 2
    res = subprocess.run([sys.executable, COMPARE, prof, os.path.join(GOLDEN, "910b_hccl"), "--kinds", ANALYZE_KINDS],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stdout
    for rank, prof in enumerate(_copy_cluster(str(tmp_path / "two"))):
        code, _, err = run(["analyze", "-dir", prof], capsys)
        assert code == 0, err
        res = subprocess.run([sys.executable, COMPARE, prof, os.path.join(GOLDEN, "910b_hccl_2ranks", f"cpp_rank{rank}"),
                              "--kinds", ANALYZE_KINDS], capture_output=True, text=True)
        assert res.returncode == 0, res.stdout
    # hand-checked: the key of an op joins its name and the raw group hash
    with open(os.path.join(prof, "analyze", "communication.json"), encoding="utf-8") as f:
        assert any(k.endswith("@7415574198778220483") for k in json.load(f))


def test_analyze_errors_without_traceback(tmp_path, capsys):
    prof = copy_input("910b_hccl", str(tmp_path / "one"))
    code, _, err = run(["analyze", "--rule", "communication,bogus", "-dir", prof], capsys)
    assert code != 0 and "unknown: ['bogus']" in err and "Traceback" not in err
    assert not os.path.exists(os.path.join(prof, "sqlite"))  # the rules are checked before any import
    plain = copy_input("min_910b", str(tmp_path / "plain"))
    code, _, err = run(["analyze", "-dir", plain], capsys)
    assert code == 4 and "no communication (HCCL) tasks" in err
