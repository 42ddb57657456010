"""spill.Runs: runs in scratch files read back over ranges that cross runs, cut into windows, and
pickled (a forked worker's runs handed to its parent)."""
from __future__ import annotations

import os
import pickle

import numpy as np
import pytest

from msprof_kit import errors, spill


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


def test_background_runs_read_the_same(tmp_path):
    """Runs written by a background thread read back the same rows, windows and pickled copy as
    runs written in place; the sample is taken alike."""
    rng = np.random.default_rng(3)
    chunks = [{"key": rng.integers(0, 50, n), "val": rng.integers(-9, 9, (n, 3)).astype(np.int16)}
              for n in (5, 0, 17, 1, 40, 9)]
    both = [spill.Runs(str(tmp_path), f"t{b}", "key", sample_every=3, background=b) for b in (False, True)]
    for cols in chunks:
        for runs in both:
            runs.add(cols)
    plain, background = both
    assert background.bounds == plain.bounds
    assert all(np.array_equal(a, b) for a, b in zip(background.sample, plain.sample))
    for k in ("key", "val"):
        assert np.array_equal(background.read(k, 0, background.rows), plain.read(k, 0, plain.rows))
    copy = pickle.loads(pickle.dumps(background))
    assert np.array_equal(copy.read("val", 2, 30), plain.read("val", 2, 30))
    edges = plain.edges(10)
    for runs in both:
        runs.cut(edges)
    for w in range(len(edges) + 1):
        a, b = plain.window(w), background.window(w)
        assert (a is None) == (b is None)
        if a is not None and b is not None:
            assert all(np.array_equal(a[k], b[k]) for k in a)
    copy.close()
    for runs in both:
        runs.close()
    assert os.listdir(tmp_path) == []


class _FullDisk:
    """A scratch file whose writes fail as on a full disk."""

    def write(self, data: object) -> int:
        raise OSError(28, "No space left on device")

    def close(self) -> None:
        pass


def test_background_write_failure_is_raised(tmp_path):
    """A run the background thread fails to write is raised as a scratch OutputError by the next
    add or read, and close still removes the files."""
    for then in ("add", "read"):
        runs = spill.Runs(str(tmp_path), then, "key", background=True)
        runs.add({"key": np.arange(4)})
        runs.read("key", 0, 1)  # (the first run written)
        real = runs.files["key"]
        runs.files["key"] = _FullDisk()  # type: ignore[assignment]  # (a stand-in file)
        runs.add({"key": np.arange(3)})
        with pytest.raises(errors.OutputError, match="scratch file"):
            if then == "add":
                runs.add({"key": np.arange(2)})
            else:
                runs.read("key", 0, 2)
        runs.close()
        real.close()
    assert os.listdir(tmp_path) == []


def test_flat_reads_back_ranges_in_the_order_written(tmp_path):
    """spill.Flat: parts appended as given (cast to its type), read back by row range across
    parts, between and after additions; closing removes the file."""
    flat = spill.Flat(str(tmp_path), "f", np.dtype(np.int64))
    whole = np.zeros(0, np.int64)
    for part in (np.array([5, -3, 9], np.int32), np.zeros(0, np.int64), np.arange(40)[::-1]):
        flat.add(part)
        whole = np.concatenate([whole, part])
        assert (flat.read(1, flat.rows) == whole[1:]).all()
    assert flat.rows == 43 and flat.read(2, 2).shape == (0,)
    assert (flat.read(0, 4) == [5, -3, 9, 39]).all()
    flat.close()
    assert not os.path.exists(os.path.join(str(tmp_path), "f"))
