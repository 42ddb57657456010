"""Device start and end records paired a window of times at a time (msprof_kit.ingest.pairing) pair what
pairing them all at once does (parsers.device.pair_start_end)."""
from __future__ import annotations

import numpy as np
import pytest

from msprof_kit.ingest import pairing
from msprof_kit.parsers import device
from msprof_kit.spill import Runs


def _records(rng: np.random.Generator, n: int) -> dict:
    """Records of a few keys, times with many ties, mostly start/end alternating per key but with
    starts and ends lost at random."""
    stream = rng.integers(0, 3, n)
    task = rng.integers(0, 4, n)
    time = np.sort(rng.integers(0, n // 3 + 1, n))  # stream order is roughly time order, ties common
    is_start = rng.random(n) < 0.5
    return {"stream_id": stream, "task_id": task, "syscnt": time.astype(np.int64), "is_start": is_start,
            "offset": np.arange(n, dtype=np.int64) * 64}


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("window", [1, 2, 5, 1000])
def test_windows_pair_what_one_pass_pairs(seed, window, tmp_path, monkeypatch):
    rng = np.random.default_rng(seed)
    cols = _records(rng, 400)
    # shuffle a little so that runs are not in time order
    swap = rng.permutation(len(cols["syscnt"]))[:40]
    cols["syscnt"][swap] = cols["syscnt"][swap[::-1]]
    keys = ("stream_id", "task_id")
    starts, ends, lost_end, lost_start = device.pair_start_end([cols[k] for k in keys], cols["syscnt"],
                                                               cols["is_start"])
    want = sorted(zip(cols["offset"][starts].tolist(), cols["offset"][ends].tolist()))

    monkeypatch.setattr(pairing, "WINDOW_ROWS", window)
    runs = Runs(str(tmp_path), "log", "syscnt", 1)
    for lo in range(0, 400, 37):  # runs of 37 records
        runs.add({k: v[lo:lo + 37] for k, v in cols.items()})
    p = pairing.Pairing(runs, keys)
    got = []
    windows = 0
    for c, s, e in p.windows():
        got += zip(c["offset"][s].tolist(), c["offset"][e].tolist())
        windows += 1
    runs.close()
    assert sorted(got) == want
    assert (p.lost_end.count, p.lost_start.count) == (lost_end, lost_start)
    if window < 10:
        assert windows > 10
    for lost, want_start in ((p.lost_end, True), (p.lost_start, False)):
        used = np.zeros(len(cols["syscnt"]), dtype=bool)
        used[starts] = used[ends] = True
        orphan = np.flatnonzero(~used & (cols["is_start"] == want_start))
        if len(orphan):
            assert lost.offset == cols["offset"][orphan[0]]
            assert (lost.stream_id, lost.task_id) == (cols["stream_id"][orphan[0]], cols["task_id"][orphan[0]])
