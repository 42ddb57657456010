"""Communication at scale (issue 25, "Speed"): the pieces that replaced whole per-task frames and
per-task strings keep the results. The store's block readers (store.int_blocks, real_values,
texts_of), the join of host and device tasks by row (hccl_ops.Joined) against pandas' merge, the op
names made once per distinct value, and the golden communication exports (both twins, conftest)."""
from __future__ import annotations

import os
import sqlite3
import subprocess
import sys

import numpy as np
import pandas as pd

from conftest import COMPARE, GOLDEN, copy_input, needs_shared

from msprof_kit import cli, store
from msprof_kit.ingest.hccl_ops import Joined, NameCodes


def _table(tmp_path) -> sqlite3.Connection:
    conn = sqlite3.connect(str(tmp_path / "t.db"))
    conn.execute("CREATE TABLE T (a INTEGER, b INTEGER, r REAL)")
    conn.executemany("INSERT INTO T VALUES (?, ?, ?)", [(1, 10, 0.5), (2, None, 1.5), (3, 30, None), (4, 40, 2.0),
                                                      (5, 50, 2.5)])
    conn.execute("DELETE FROM T WHERE a = 4")  # a gap in the rowids
    conn.execute("CREATE TABLE STRING_IDS (id INTEGER, value TEXT)")
    conn.executemany("INSERT INTO STRING_IDS VALUES (?, ?)", [(0, "Memcpy"), (1, "Notify_Wait")])
    return conn


def test_int_blocks_read_by_rowid_a_block_at_a_time(tmp_path):
    conn = _table(tmp_path)
    blocks = list(store.int_blocks(conn, "T", ["a", "COALESCE(b, -1)"], size=2))
    assert [b["a"].tolist() for b in blocks] == [[1, 2], [3, 5]]
    assert [b["rowid"].tolist() for b in blocks] == [[1, 2], [3, 5]]
    whole = store.int_columns(conn, "T", ["a", "COALESCE(b, -1)"])
    assert whole["COALESCE(b, -1)"].tolist() == [10, -1, 30, 50]
    assert whole["a"].dtype == np.int64


def test_real_values_and_texts(tmp_path):
    conn = _table(tmp_path)
    values = store.real_values(conn, "T", "r", size=3)
    assert values[[0, 1, 3]].tolist() == [0.5, 1.5, 2.5] and np.isnan(values[2])
    assert store.real_values(conn, "T", "r", "a >= 3").tolist()[1] == 2.5
    texts = store.texts_of(conn, np.array([1, 0, 1, 7]))
    assert texts[:3].tolist() == ["Notify_Wait", "Memcpy", "Notify_Wait"] and pd.isna(texts[3])


def test_joined_rows_come_in_the_order_of_pandas_merge():
    """Duplicate keys on both sides, keys on one side only: the row order of the inner merge."""
    tasks = pd.DataFrame({"api": [5, 3, 5, 9, 1], "x": [10, 11, 12, 13, 14]})
    device = pd.DataFrame({"api": [1, 5, 3, 5, 7], "y": [20, 21, 22, 23, 24]})
    merged = tasks.merge(device, on="api", how="inner")
    joined = Joined.of(tasks, device)
    assert len(joined) == len(merged) == 6
    for column in ("api", "x", "y"):
        assert joined[column].tolist() == merged[column].tolist(), column
    keep = joined["y"].to_numpy() != 21
    assert joined.where(keep).at("x", np.arange(int(keep.sum()))).tolist() == merged[keep]["x"].tolist()


def test_op_names_made_per_distinct_value():
    """`<raw>_<last 3 characters of the group>_<k>_<iteration>`, as the golden case's first op
    (hcom_allReduce__483_0_1: group 7415574198778220483, k 0, iteration 1); a task without a group
    says N/A, whose last 3 characters are N/A."""
    raw_text = np.array(["hcom_allReduce_", "hcom_send_"], dtype=object)
    group_text = np.array(["7415574198778220483", "N/A"], dtype=object)
    codes = NameCodes(raw=np.array([0, 0, 1, 0]), raw_text=raw_text, aicpu=np.zeros(2, bool),
                      group=np.array([0, 0, 1, 0]), group_text=group_text, group_name=group_text)
    code, texts = codes.names(np.array([0, 0, -1, 1]), np.array([1, 1, 2, 1]))
    assert texts[code].tolist() == ["hcom_allReduce__483_0_1", "hcom_allReduce__483_0_1", "hcom_send__N/A_-1_2",
                                    "hcom_allReduce__483_1_1"]
    assert code.tolist() == [0, 0, 1, 2]


@needs_shared
def test_910b_hccl_communication_kinds_and_store(tmp_path, capsys):
    prof = copy_input("910b_hccl", str(tmp_path))
    for argv in (["export", "db"], ["analyze"]):
        assert cli.main([*argv, "-dir", prof]) == 0, argv
    capsys.readouterr()
    res = subprocess.run([sys.executable, COMPARE, prof, os.path.join(GOLDEN, "910b_hccl"), "--kinds",
                          "db,communication,communication_matrix"], capture_output=True, text=True)
    assert res.stdout.strip().splitlines()[-1].startswith("verdict: equal"), res.stdout
    conn = sqlite3.connect(os.path.join(prof, "sqlite", "msprof_kit.db"))
    first = conn.execute("SELECT opName, groupHash, groupIndex, cppOrder FROM KIT_HCCL_OP ORDER BY opId LIMIT 1").fetchone()
    assert first == ("hcom_allReduce__483_0_1", "7415574198778220483", 0, 12)
    assert conn.execute("SELECT COUNT(*), COUNT(DISTINCT opId) FROM KIT_HCCL_TASK").fetchone() == (134, 13)
