"""spill.Runs: runs in scratch files read back over ranges that cross runs, cut into windows, and
pickled (a forked worker's runs handed to its parent)."""
from __future__ import annotations

import os
import pickle

import numpy as np

from msprof_kit import spill


def _runs_of(folder: str, seed: int) -> tuple:
    """Runs of random sizes (an empty one among them), a 2-D column and a narrow one, and the
    rows they hold sorted as the windows give them."""
    rng = np.random.default_rng(seed)
    runs = spill.Runs(folder, "t", "key", sample_every=3)
    chunks = []
    for n in (5, 0, 17, 1, 40, 9):
        cols = {"key": rng.integers(0, 50, n), "val": rng.integers(-9, 9, (n, 3)).astype(np.int16),
                "pos": np.arange(n, dtype=np.int64) + 1000 * len(chunks)}
        runs.add(cols)
        chunks.append(cols)
    return runs, chunks


def test_runs_read_cut_and_window(tmp_path):
    """`read` over ranges that cross runs, `cut` and `window` give the rows of the runs sorted by
    key; `close` removes the files."""
    runs, chunks = _runs_of(str(tmp_path), 5)
    assert os.listdir(tmp_path)
    sorted_runs = []
    for c in chunks:
        if len(c["key"]):
            o = np.argsort(c["key"], kind="stable")
            sorted_runs.append({k: v[o] for k, v in c.items()})
    whole = {k: np.concatenate([r[k] for r in sorted_runs]) for k in ("key", "val", "pos")}
    for lo, hi in ((0, runs.rows), (3, 30), (22, 23), (10, 10), (60, 72)):
        for k in whole:
            got = runs.read(k, lo, hi)
            assert got.dtype == whole[k].dtype and np.array_equal(got, whole[k][lo:hi])
    edges = runs.edges(10)
    runs.cut(edges)
    bounds = np.concatenate([[-1], edges, [1 << 60]])
    for w in range(len(edges) + 1):
        got = runs.window(w)
        want = [{k: v[(r["key"] >= bounds[w]) & (r["key"] < bounds[w + 1])] for k, v in r.items()}
                for r in sorted_runs]
        want_cols = {k: np.concatenate([r[k] for r in want]) for k in whole}
        if not len(want_cols["key"]):
            assert got is None
            continue
        assert got is not None
        for k in whole:
            assert np.array_equal(got[k], want_cols[k])
    runs.close()
    assert os.listdir(tmp_path) == []


def test_pickled_runs_read_the_same(tmp_path):
    """A pickled copy (as a forked worker hands its runs over) reads the same rows as the runs."""
    runs, _ = _runs_of(str(tmp_path), 8)
    want = {k: runs.read(k, 0, runs.rows) for k in ("key", "val", "pos")}
    copy = pickle.loads(pickle.dumps(runs))
    for k, v in want.items():
        assert np.array_equal(copy.read(k, 0, copy.rows), v) and np.array_equal(runs.read(k, 0, runs.rows), v)
    copy.close()
