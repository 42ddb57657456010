"""Vectorized steps of the import checked against plain loops that state their rule directly."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from msprof_kit.ingest import api_windows, association, columns
from msprof_kit.ingest.names import HashTable
from msprof_kit.timebase import Clock


def _records(rng: np.random.Generator, n: int) -> dict:
    """Api and Event records with few distinct keys, so that groups have many events."""
    return {
        "level": rng.choice([5000, 10000, 20000], n).astype(np.uint16),
        "type": rng.integers(0, 3, n).astype(np.uint32),
        "thread_id": rng.integers(1, 4, n).astype(np.uint32),
        "reserve": rng.integers(0, 2, n).astype(np.uint32),
        "begin": rng.integers(1, 10 ** 9, n).astype(np.uint64),
        "end": rng.integers(1, 10 ** 9, n).astype(np.uint64),
        "item_id": rng.integers(0, 3, n).astype(np.uint64) * (2 ** 63 + 7),  # values above int64's range too
        "is_event": rng.random(n) < 0.7,
    }


def _pairs_by_loop(cols: dict):
    """(api rows, [(first, second)] in the order of the firsts, unpaired count): each event's
    begin is the next unpaired event of its key, in stream order."""
    open_by_key: dict = {}
    pairs = []
    for i in range(len(cols["level"])):
        if not cols["is_event"][i]:
            continue
        key = tuple(int(cols[c][i]) for c in ("level", "type", "thread_id", "reserve", "item_id"))
        if key in open_by_key:
            pairs.append((open_by_key.pop(key), i))
        else:
            open_by_key[key] = i
    pairs.sort()
    apis = [i for i in range(len(cols["level"])) if not cols["is_event"][i]]
    return apis, pairs, len(open_by_key)


@pytest.mark.parametrize("n, seed", [(0, 0), (1, 1), (2, 2), (7, 3), (500, 4), (5000, 5)])
def test_events_pair_across_chunks_as_a_loop_pairs_them(n, seed):
    """The api_event stream's Event records given to the pairing a chunk at a time (chunks of 0 to
    40 records): each pair is one API with its first record's fields, its second's begin as end
    and its second's position as order, completed in the chunk of its second record."""
    rng = np.random.default_rng(seed)
    cols = _records(rng, n)
    apis, pairs, unpaired = _pairs_by_loop(cols)
    events = np.flatnonzero(cols["is_event"])
    named = {"level": cols["level"], "type": cols["type"], "thread": cols["thread_id"], "reserve": cols["reserve"],
             "begin": cols["begin"].view(np.int64), "end": cols["end"].view(np.int64), "item": cols["item_id"],
             "order": np.arange(n, dtype=np.int64)}
    pairing = api_windows._Pairing()
    got, at = [], 0
    while at < n:
        size = int(rng.integers(0, 41))
        rows = events[(events >= at) & (events < at + size)]
        done = pairing.pair({k: v[rows] for k, v in named.items()})
        assert (done["order"] < at + size).all()
        got.append(done)
        at += size
    got = {k: np.concatenate([g[k] for g in got]) if got else np.zeros(0) for k in named}
    by_second = np.argsort(got["order"])
    pairs.sort(key=lambda p: p[1])
    assert got["order"][by_second].tolist() == [s for _, s in pairs]
    assert got["begin"][by_second].tolist() == [int(named["begin"][f]) for f, _ in pairs]
    assert got["end"][by_second].tolist() == [int(named["begin"][s]) for _, s in pairs]
    for key in ("level", "type", "thread", "reserve", "item"):
        assert got[key][by_second].tolist() == [named[key][f] for f, _ in pairs]
    assert pairing.unpaired() == unpaired
    assert n < 500 or (len(pairs) > 100 and unpaired > 10)


def _contain_by_loop(p_thread, p_time, a_thread, a_begin, a_end):
    """For each point, the API of its thread with the latest begin before it (of equal begins the
    last), if that API has not ended before the point."""
    out = []
    for thread, t in zip(p_thread.tolist(), p_time.tolist()):
        best = -1
        for i, (at, b) in enumerate(zip(a_thread.tolist(), a_begin.tolist())):
            if at == thread and b < t and (best < 0 or b >= a_begin[best]):
                best = i
        out.append(best if best >= 0 and t <= a_end[best] else -1)
    return out


@pytest.mark.parametrize("seed, span", [(1, 60), (2, 60), (3, 2 ** 62)])  # 2**62: too wide to pack, one search a thread
def test_points_find_the_api_containing_them_as_a_loop_finds_it(seed, span):
    rng = np.random.default_rng(seed)
    n_api, n_pt = 150, 200
    a_thread = rng.integers(1, 30, n_api).astype(np.uint32)
    a_begin = rng.integers(0, span, n_api).astype(np.int64)
    a_end = a_begin + rng.integers(0, span // 6, n_api)
    p_thread = rng.integers(0, 32, n_pt).astype(np.int64)  # threads without APIs too
    p_time = np.concatenate([rng.integers(0, span, n_pt - 20), a_begin[:10], a_end[:10]]).astype(np.int64)
    got = association.contain(p_thread, p_time, a_thread, a_begin, a_end)
    expect = _contain_by_loop(p_thread, p_time, a_thread, a_begin, a_end)
    assert got.tolist() == expect
    assert sum(e >= 0 for e in expect) > 20


def test_tree_mask_drops_what_a_loop_calls_overlapping():
    """An acl, model or hccl API leaves the call tree when an API of its thread and level that
    comes before it (by begin, then by position) has not ended when it begins; node APIs and
    empty APIs by their own rules."""
    rng = np.random.default_rng(8)
    n = 400
    level = rng.choice(list(columns.TREE_LEVELS) + [5000], n).astype(np.uint16)
    begin = rng.integers(1, 300, n).astype(np.int64)
    end = begin + rng.integers(0, 40, n)
    apis = {"level": level, "thread": rng.integers(1, 4, n).astype(np.uint32), "begin": begin, "end": end}
    expect = []
    for i in range(n):
        keep = level[i] in columns.TREE_LEVELS and begin[i] != end[i]
        if keep and level[i] != columns.LEVEL_NODE:
            earlier = [j for j in range(n) if (begin[j], j) < (begin[i], i) and level[j] == level[i]
                       and apis["thread"][j] == apis["thread"][i] and begin[j] != end[j]]
            keep = not any(end[j] >= begin[i] for j in earlier)
        expect.append(keep)
    got = association.tree_mask(apis).tolist()
    assert got == expect
    # a window of begins at a time, in (begin, position) order, the latest ends carried over
    order = np.lexsort((np.arange(n), begin))
    latest = association.LatestEnds()
    windowed = np.zeros(n, dtype=bool)
    for lo, hi in ((0, 90), (90, 91), (91, 300)):
        rows = order[(begin[order] >= lo) & (begin[order] < hi)]
        windowed[rows] = association.tree_mask({k: v[rows] for k, v in apis.items()}, latest)
    assert windowed.tolist() == expect
    assert 0 < sum(expect) < n and sum(e is False and level[i] != 5000 and begin[i] != end[i]
                                       for i, e in enumerate(expect)) > 10


def _track(t: int, pos: int) -> dict:
    one = lambda v, dt=np.int64: np.array([v], dtype=dt)  # noqa: E731
    return {"thread_id": one(1, np.uint32), "timestamp": one(t), "device_id": one(0), "stream_id": one(2),
            "task_id": one(5), "task_type": one(0), "kernel_name": one(0), "data_len": one(0),
            "num_blocks": one(0), "ratio": one(0), "pos": one(pos)}


def _nbi(t: int, pos: int, op_hash: int) -> dict:
    one = lambda v, dt=np.int64: np.array([v], dtype=dt)  # noqa: E731
    return {"thread_id": one(1, np.uint32), "timestamp": one(t), "op_name": one(op_hash), "op_type": one(21),
            "task_type": one(0), "block_dim": one(3), "op_flag": one(0), "aging": one(False, bool), "pos": one(pos)}


def _join(*parts: dict) -> dict:
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


ASSOC_HASHES = {11: "OpLate", 12: "OpEarly", 21: "T"}


def _assoc_run(windows, edges):
    """(tracks, compute tasks) the association emits over the windows, joined."""
    clock = Clock(0, 0, None)
    emitted = []
    hashes = HashTable.of(ASSOC_HASHES)
    assoc = association.Association(clock, {"5000_0": "KERNEL_AICORE"}, hashes,
                                    lambda tracks, compute: emitted.append((tracks, compute)))
    for w, (tree, recs) in enumerate(windows):
        full = {k: recs.get(k) for k in ("track",) + association.OP_KINDS}
        assoc.step(tree, full, edges[w] if w < len(edges) else None)
    assoc.finish()
    return (pd.concat([t for t, _ in emitted]).sort_index(kind="stable"),
            pd.concat([c for _, c in emitted], ignore_index=True))


def test_op_info_of_a_launch_open_across_windows_is_its_first_record_in_stream_order():
    """A node launch API [100, 500] begun in the first window of times (< 200), its task track in
    that window and two node_basic_info records: one in that window, one later in the stream but
    timed in the next window. The track waits for its launch API to end; its op is the record
    first in stream order (position 0), as when everything is one window."""
    node = {"thread": np.array([1], np.uint32), "level": np.array([columns.LEVEL_NODE], np.uint16),
            "begin": np.array([100]), "end": np.array([500]), "item": np.array([0], np.uint64),
            "reserve": np.array([0], np.uint32), "conn": np.array([1])}
    early, late = _nbi(120, 1, 12), _nbi(300, 0, 11)
    windowed = _assoc_run([(node, {"track": _track(150, 0), "nbi": early}), (None, {"nbi": late})], [200])
    whole = _assoc_run([(node, {"track": _track(150, 0), "nbi": _join(late, early)})], [])
    for (tracks, compute), label in ((windowed, "two windows"), (whole, "one window")):
        assert list(HashTable.of(ASSOC_HASHES).at(compute["op_name"])) == ["OpLate"], label  # (hash_dic positions)
        assert list(compute["block"]) == [3] and list(tracks["conn"]) == [1], label
    pd.testing.assert_frame_equal(windowed[0], whole[0])
    pd.testing.assert_frame_equal(windowed[1], whole[1])
