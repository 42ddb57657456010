"""Issue 25, part 3 (docs/benchmarks.md): write_hccl's leaner per-task steps give what the
earlier ones gave. The iteration count by a stable sort against the 4-key groupby it replaced, `k`
grouped on one combined key against the (aicpu, group) pair, and the texts' ids looked up once per
distinct code against StringPool.ids_of over the whole column (the STRING_IDS order); then the
communication kinds of 910b_hccl against the golden export."""
from __future__ import annotations

import os

import numpy as np
import pandas as pd

from conftest import GOLDEN, copy_input, needs_shared
from test_hccl_golden import assert_equal

from msprof_kit import cli
from msprof_kit.ingest.hccl_ops import Joined, _group_count, _ids_by_first_row, _iteration
from msprof_kit.ingest.tasks import StringPool
from msprof_kit.store import CodedTexts


def _joined(stream, task, batch, ctx) -> Joined:
    n = len(stream)
    tasks = pd.DataFrame({"stream_id": np.asarray(stream, dtype=np.int16), "task_id": np.asarray(task, dtype=np.int32),
                          "batch": np.asarray(batch, dtype=np.int8)})
    device = pd.DataFrame({"ctx": np.asarray(ctx, dtype=np.int64)})
    rows = np.arange(n, dtype=np.int64)
    return Joined(tasks, device, rows, rows[::-1].copy())


def _iteration_by_groupby(joined: Joined, first_ns, host_ns, start) -> np.ndarray:
    """The definition _iteration replaced (write_hccl before part 3)."""
    keys = pd.DataFrame({c: joined[c].to_numpy().astype(np.int64) for c in ("stream_id", "task_id", "batch", "ctx")})
    by_op = np.lexsort((start, host_ns, first_ns))
    out = np.empty(len(joined), dtype=np.int64)
    out[by_op] = keys.iloc[by_op].groupby(list(keys.columns), sort=False).cumcount().to_numpy() + 1
    return out


def test_iteration_by_hand():
    # keys A, B, A, A (ctx reversed by the join: device rows 3..0); op order: row 2 (launch 5),
    # row 0 (10, track 1), row 1 (10, track 2), row 3 (20): A's rows 2, 0, 3 count 1, 2, 3
    joined = _joined([1, 2, 1, 1], [7, 7, 7, 7], [0, 0, 0, 0], [0, 0, 0, 0])
    got = _iteration(joined, np.array([10, 10, 5, 20]), np.array([1, 2, 9, 9]), np.array([0, 0, 0, 0]))
    assert got.tolist() == [2, 1, 1, 3]


def test_iteration_as_groupby():
    rng = np.random.default_rng(25)
    n = 5000
    joined = _joined(rng.integers(-1, 3, n), rng.integers(0, 4, n), rng.integers(0, 2, n), rng.integers(-1, 2, n))
    first, host, start = rng.integers(0, 50, n), rng.integers(0, 50, n), rng.integers(0, 50, n)
    assert np.array_equal(_iteration(joined, first, host, start), _iteration_by_groupby(joined, first, host, start))
    empty = _joined([], [], [], [])
    assert len(_iteration(empty, np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64))) == 0


def test_group_count_one_key_as_two():
    rng = np.random.default_rng(3)
    n = 4000
    aicpu, group = rng.integers(0, 2, n).astype(bool), rng.integers(0, 5, n)
    first, start = rng.integers(0, 10 ** 18, n) // 7 * 7, rng.integers(0, 100, n)
    frame = pd.DataFrame({"aicpu": aicpu, "group": group, "first_ns": first, "start_ns": start})
    keys = [frame["aicpu"], frame["group"]]
    eligible = start > 30
    seen = pd.Series(np.where(eligible, first, np.iinfo(np.int64).min))
    best = seen.groupby(keys, sort=False).cummax()
    before = best.groupby(keys, sort=False).shift(1).fillna(np.iinfo(np.int64).min).to_numpy()
    new = eligible & (first > np.maximum(before, 0))
    expected = pd.Series(new.astype(np.int64)).groupby(keys, sort=False).cumsum().to_numpy() - 1
    assert np.array_equal(_group_count(group * 2 + aicpu, first, start, 30), expected)


def test_ids_by_first_row_as_whole_column():
    rng = np.random.default_rng(7)
    texts = np.array(["x", "b", "a", "b", "N/A", "z"], dtype=object)  # "b" twice in the table
    codes = rng.integers(0, 5, 300)  # "z" never used
    order = rng.permutation(300)[:250]
    whole, lean = StringPool(), StringPool()
    for pool in (whole, lean):
        pool.id("a")  # a text known before
    expected = whole.ids_of(CodedTexts(codes[order], texts))
    id_of = _ids_by_first_row(lean, codes, order, texts)
    assert np.array_equal(id_of[codes[order]], expected)
    assert lean.frame().equals(whole.frame())
    assert id_of[5] == -1


@needs_shared
def test_910b_hccl_db_and_communication(tmp_path, capsys):
    prof = copy_input("910b_hccl", str(tmp_path))
    for argv in (["export", "db"], ["analyze"]):
        assert cli.main([*argv, "-dir", prof]) == 0, argv
    capsys.readouterr()
    assert_equal(prof, os.path.join(GOLDEN, "910b_hccl"), "db,communication,communication_matrix")
