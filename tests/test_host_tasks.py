"""matching.HostTasks: each key's first entry (Match's fallback) is the first in match order
among every entry spilled, however the windows bring them (keys repeating across windows,
tracks of a later window earlier in time, the waiting parts merged now and then)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from msprof_kit.ingest import limits, matching
from msprof_kit.ingest.columns import INVALID_CTX
from msprof_kit.ingest.names import HashTable


def _window(rng: np.random.Generator, pos: np.ndarray) -> tuple:
    """Tracks (by position) and the compute tasks of some of them, few streams and task ids so
    that keys repeat; times drawn at random, so a window may hold earlier times than the last."""
    n = len(pos)
    tracks = pd.DataFrame({
        "type_raw": rng.choice(np.array([0, 4, 10], dtype=np.uint16), n), "kernel": rng.integers(-1, 2, n),
        "stream_id": rng.integers(0, 3, n).astype(np.int64), "task_low": rng.integers(0, 6, n).astype(np.int64),
        "device_id": rng.integers(0, 2, n).astype(np.int64), "conn": rng.integers(1, 99, n).astype(np.int64),
        "model_id": rng.integers(0, 3, n).astype(np.int64), "request_id": rng.integers(-1, 3, n).astype(np.int64),
        "batch": rng.integers(0, 2, n).astype(np.int64), "thread_id": rng.integers(1, 3, n).astype(np.uint32),
        "ts_ns": rng.integers(0, 40, n).astype(np.int64)}, index=pd.Index(pos))
    at = np.sort(rng.choice(n, n // 2, replace=False))
    m = len(at)
    compute = pd.DataFrame({
        "track": pos[at], "device_id": tracks["device_id"].to_numpy()[at],
        "stream_id": tracks["stream_id"].to_numpy()[at], "task_id": tracks["task_low"].to_numpy()[at],
        "batch": tracks["batch"].to_numpy()[at], "ctx": rng.choice(np.array([0, 1, 2, INVALID_CTX]), m),
        "block": rng.integers(0, 9, m), "mix": rng.integers(0, 9, m), "info_ts": rng.integers(-1, 40, m),
        "tensors": np.zeros(m, dtype=np.int64), "op_name": rng.integers(-1, 2, m), "op_type": rng.integers(-1, 2, m),
        "ge_type": np.array(["AI_CORE"] * m, dtype=object), "state": np.array(["static"] * m, dtype=object),
        "hf32": np.array(["N/A"] * m, dtype=object)})
    return tracks, compute


@pytest.mark.parametrize("seed", range(6))
def test_first_entries_are_the_first_in_match_order(tmp_path, monkeypatch, seed):
    monkeypatch.setattr(limits, "TASK_ROWS", 8)  # merges of the waiting parts along the way
    rng = np.random.default_rng(seed)
    hashes = HashTable.of({1: "a", 2: "b"})
    tasks = matching.HostTasks(str(tmp_path), {"5000_10": "KERNEL_MIX_AIC"}, hashes)
    done = 0
    for size in rng.integers(1, 30, 7):
        tasks.add(*_window(rng, np.arange(done, done + size, dtype=np.int64)))
        done += size
    first = tasks.first
    assert sorted(first) == sorted(tasks.entries)
    for d, runs in tasks.entries.items():
        every = {k: runs.read(k, 0, runs.rows) for k in runs.dtypes}
        order = np.lexsort((every["pos"], every["seg"], every["ts_ns"]))
        every = {k: v[order] for k, v in every.items()}
        _, at = np.unique(every["key"], return_index=True)  # each key's first in match order, by key
        got = first[d]
        assert np.array_equal(got["key"], every["key"][at])
        for k in every:
            assert got[k].dtype == every[k].dtype and np.array_equal(got[k], every[k][at]), k
        match = matching.Match(got)
        assert match.first is not None and np.array_equal(match.first["key"], got["key"])
    assert tasks.first is first
    tasks.close()


def _entries(rng: np.random.Generator, n: int, lo: int, hi: int, start_pos: int) -> dict:
    """Match entries of a window (times in [lo, hi)), few keys so that they repeat, ties in time."""
    cols = {"key": rng.integers(0, 7, n).astype(np.int64), "seg": rng.integers(0, 3, n).astype(np.int8),
            "pos": np.arange(start_pos, start_pos + n, dtype=np.int64),
            "ts_ns": rng.integers(lo, hi, n).astype(np.int64)}
    for k in matching.ENTRY_PAYLOAD:
        if k != "ts_ns":
            cols[k] = rng.integers(0, 1 << 20, n).astype(np.uint32 if k == "thread_id" else np.int64)
    cols["conn"] = cols["pos"] * 10 + 7  # names the entry a task takes
    rng.shuffle(order := np.arange(n))
    return {k: v[order] for k, v in cols.items()}


@pytest.mark.parametrize("seed", range(8))
def test_match_takes_the_latest_entry_at_or_before_the_start(seed):
    """Match, a window at a time with its carry, against every task looked up in all entries at
    once: the latest entry of its key at or before its start in match order (time, segment,
    position), else its key's first in match order, else none."""
    rng = np.random.default_rng(seed)
    edges = np.sort(rng.choice(np.arange(1, 200), rng.integers(1, 6), replace=False))
    bounds = np.concatenate([[0], edges, [200]])
    windows, pos = [], 0
    for lo, hi in zip(bounds, bounds[1:]):
        n = int(rng.integers(0, 30))
        windows.append(_entries(rng, n, int(lo), int(hi), pos) if n else None)
        pos += n
    every = pd.DataFrame({k: np.concatenate([w[k] for w in windows if w is not None]) for k in ("key", "seg", "pos",
                                                                                             "ts_ns", "conn")})
    every = every.sort_values(["ts_ns", "seg", "pos"], kind="stable")
    first = every.drop_duplicates("key")
    all_cols = {k: np.concatenate([w[k] for w in windows if w is not None]) for k in next(w for w in windows if w is not None)}
    order = np.lexsort((all_cols["pos"], all_cols["seg"], all_cols["ts_ns"]))
    keys = all_cols["key"][order]
    _, at = np.unique(keys, return_index=True)
    match = matching.Match({k: v[order][at] for k, v in all_cols.items()} if seed % 2 else None)
    for w, (lo, hi) in enumerate(zip(bounds, bounds[1:])):
        n = int(rng.integers(0, 25))
        start = np.sort(rng.integers(lo, hi, n)).astype(np.int64)
        key = rng.integers(0, 8, n).astype(np.int64)
        hit, out = match.window(key, start, windows[w])
        for i in range(n):
            mine = every[(every["key"] == key[i]) & (every["ts_ns"] <= start[i])]
            if len(mine):
                want = int(mine["conn"].iloc[-1])
            elif seed % 2 and (first["key"] == key[i]).any():
                want = int(first.loc[first["key"] == key[i], "conn"].iloc[0])
            else:
                want = 0
            assert bool(hit[i]) == (want != 0), (w, i)
            assert int(out["conn"][i]) == want, (w, i, key[i], start[i])


def test_hash_ends_with_reads_bytes_as_decoded_texts() -> None:
    """HashTable.ends_with (bytes) agrees with str.endswith on the decoded texts: invalid UTF-8,
    short and empty texts, non-ASCII before the suffix, position -1."""
    from msprof_kit.parsers.hashdic import HashDictionary
    raw = [b"AivKernel", b"xAicpuKernel", b"\xffAivKernel", b"\xe4\xb8AivKernel", b"ivKernel", b"",
           "\u00e9AicpuKernel".encode(), b"AivKernelx", b"Kernel", b"AicpuKerne\xff", b"\xc3AicpuKernel"]
    ends = np.cumsum([len(r) for r in raw]).astype(np.int64)
    table = HashTable(HashDictionary(np.arange(len(raw), dtype=np.uint64), ends - [len(r) for r in raw], ends,
                                     b"".join(raw)))
    pos = np.array(list(range(len(raw))) + [-1, 3, 0], dtype=np.int64)
    suffixes = ("AicpuKernel", "AivKernel")
    want = [str(t).endswith(suffixes) for t in table.at(pos).tolist()]
    assert table.ends_with(pos, suffixes).tolist() == want
