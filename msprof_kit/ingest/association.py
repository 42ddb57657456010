"""The host's call tree and what hangs under it: which APIs enter the tree, the tree API holding
each task track and op record (same thread, by time), and the host compute tasks those make.
Windowed: the association goes a window of API begins at a time, carrying what a later window
needs (Association)."""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Protocol, Tuple

import numpy as np
import pandas as pd

from ..arrays import isin
from ..timebase import Clock
from .columns import (INVALID_CTX, KERNEL_FALLBACK, LEVEL_MODEL, LEVEL_NODE, MIX_TYPES, NO_MODEL, TREE_LEVELS,
                      Columns, frame_of, text_array)
from .names import HashTable, ge_names, map_names


class WindowHook(Protocol):
    """What else an association step hands its window to (hccl.py's HcclHost)."""

    def step(self, cand: Columns, tracks: pd.DataFrame, track_cols: Optional[Columns], op_info: Optional[Columns],
             info: Optional[Columns], nbi: pd.DataFrame) -> None:
        """One window: the tree APIs that can contain its records, its tracks (associated, and
        raw), its hccl_op_info and hccl_info records and its node_basic_info rows ready."""

TREE_COLUMNS = ("thread", "level", "begin", "end", "item", "reserve", "conn")
OP_KINDS = ("nbi", "tensor", "ctx")  # op records, each under the node launch API containing it


def contain(p_thread: np.ndarray, p_time: np.ndarray, a_thread: np.ndarray, a_begin: np.ndarray,
            a_end: np.ndarray) -> np.ndarray:
    """Index of the API (same thread, begin < t <= end, latest begin; of equal begins the last)
    containing each point, or -1. One search a thread: each thread's points are in time order, so
    its search walks the sorted begins forwards (one search of all threads' packed keys jumps
    between threads and took longer at 10M tasks, with two threads or thirty)."""
    out: np.ndarray = np.full(len(p_time), -1, dtype=np.int64)
    if len(a_begin) == 0 or len(p_time) == 0:
        return out
    for thread in np.unique(p_thread):
        pm = np.flatnonzero(p_thread == thread)
        am = np.flatnonzero(a_thread == thread)
        if len(am) == 0:
            continue
        order = am[np.argsort(a_begin[am], kind="stable")]
        idx = np.searchsorted(a_begin[order], p_time[pm]) - 1
        cand = order[np.maximum(idx, 0)]
        ok = (idx >= 0) & (p_time[pm] <= a_end[cand])
        out[pm[ok]] = cand[ok]
    return out


def _last_of_each(keys: np.ndarray) -> np.ndarray:
    """Whether each key is the last of its kind (as arrays.last_seen says), for keys of few
    distinct values (a thread and level each): hashed in one pass rather than sorted."""
    codes, _ = pd.factorize(keys[::-1], use_na_sentinel=False)
    first = np.flatnonzero(np.diff(np.maximum.accumulate(codes), prepend=-1) > 0)  # each code's first row
    out: np.ndarray = np.zeros(len(keys), dtype=bool)
    out[len(keys) - 1 - first] = True
    return out


def _take(idx: np.ndarray, found: np.ndarray) -> np.ndarray:
    """idx[found] where found >= 0, else -1 (idx may be empty)."""
    if len(idx) == 0:
        return np.full(len(found), -1, dtype=np.int64)
    return np.where(found >= 0, idx[np.clip(found, 0, None)], -1)


class LatestEnds:
    """For each (thread, level) of the APIs checked by tree_mask so far, the latest end: what an
    API of a later window of begins is compared with."""

    def __init__(self) -> None:
        self.keys: np.ndarray = np.zeros(0, dtype=np.int64)  # sorted (thread << 32 | level)
        self.ends: np.ndarray = np.zeros(0, dtype=np.int64)

    def of(self, keys: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """(whether a key has an end, the end) of each key."""
        if not len(self.keys):
            return np.zeros(len(keys), dtype=bool), np.zeros(len(keys), dtype=np.int64)
        pos = np.minimum(np.searchsorted(self.keys, keys), len(self.keys) - 1)
        found = self.keys[pos] == keys
        return found, np.where(found, self.ends[pos], 0)

    def update(self, keys: np.ndarray, ends: np.ndarray) -> None:
        """Take the latest end of each key (distinct keys) into account."""
        all_keys = np.concatenate([self.keys, keys])
        all_ends = np.concatenate([self.ends, ends])
        order = np.lexsort((all_ends, all_keys))
        all_keys, all_ends = all_keys[order], all_ends[order]
        last: np.ndarray = np.ones(len(all_keys), dtype=bool)
        last[:-1] = all_keys[1:] != all_keys[:-1]
        self.keys, self.ends = all_keys[last], all_ends[last]


def tree_mask(apis: Columns, latest: Optional[LatestEnds] = None) -> np.ndarray:
    """APIs that enter the call tree: acl/model/node/hccl levels, non-empty, acl/model/hccl
    without overlap with an earlier one of the same level on the thread. `latest` carries the
    latest ends from earlier windows of begins (and takes this window's)."""
    level = apis["level"]
    mask = np.isin(level, TREE_LEVELS) & (apis["begin"] != apis["end"])
    check = np.flatnonzero(mask & (level != LEVEL_NODE))
    if len(check):
        # by (thread, level, begin), stably: each API against the latest end before it in its group
        thread, lv = apis["thread"][check], level[check]
        order = np.lexsort((apis["begin"][check], lv, thread))
        check = check[order]
        key = (thread[order].astype(np.int64) << 32) | lv[order].astype(np.int64)
        del thread, lv, order
        new_group: np.ndarray = np.ones(len(check), dtype=bool)
        new_group[1:] = key[1:] != key[:-1]
        ends = apis["end"][check]
        has_before = ~new_group
        if latest is not None:  # a group's first API is compared with the carried end
            first = np.flatnonzero(new_group)
            found, carried = latest.of(key[first])
            has_before[first] = found
            ends[first[found]] = np.maximum(ends[first[found]], carried[found])
        latest_end = pd.Series(ends).groupby(np.cumsum(new_group)).cummax().to_numpy()
        del ends
        before: np.ndarray = np.empty(len(check), dtype=np.int64)
        before[1:] = latest_end[:-1]
        if latest is not None:
            before[first] = carried
            last = np.flatnonzero(np.r_[new_group[1:], True])
            latest.update(key[last], latest_end[last])
        redundant = has_before & (apis["begin"][check] <= before)
        mask[check[redundant]] = False
    return mask


class Association:
    """Task tracks and op records with the tree APIs containing them, a window of times at a time
    (the windows of the API begins), and the host compute tasks they make.

    Carried from a window to the next: the last tree API of each (thread, level), the only one
    of the earlier windows that can contain a later record; and the tracks and op records under
    a node API still open at the next window's start, whose op info is chosen once all the
    API's records are in."""

    def __init__(self, clock: Clock, types: Dict[str, str], hashes: HashTable,
                 emit: Callable[[pd.DataFrame, pd.DataFrame], None], hccl: Optional[WindowHook] = None) -> None:
        self.clock, self.types, self.hashes = clock, types, hashes
        self.emit = emit  # takes the tracks done (indexed by position, in position order) and their compute tasks
        self.hccl = hccl  # collects the communication records (hccl.py), when given
        self.last: Optional[Columns] = None
        self.waiting: Dict[str, Optional[pd.DataFrame]] = dict.fromkeys(("track",) + OP_KINDS)

    def step(self, tree: Optional[Columns], recs: Dict[str, Optional[Columns]], next_edge: Optional[int]) -> None:
        """One window: its tree APIs (None: none) and records; `next_edge` the next window's first
        begin (None after the last window)."""
        parts = [c for c in (self.last, tree) if c is not None]
        cand = {k: np.concatenate([c[k] for c in parts]) if parts else np.zeros(0, np.int64) for k in TREE_COLUMNS}
        key = (cand["thread"].astype(np.int64) << 32) | cand["level"].astype(np.int64)
        last = _last_of_each(key)  # each (thread, level)'s last API
        self.last = {k: v[last] for k, v in cand.items()} if parts else None  # (no stand-in arrays of another type)
        still_open = np.zeros(0, np.int64) if next_edge is None or self.last is None else \
            self.last["conn"][(self.last["level"] == LEVEL_NODE) & (self.last["end"] >= next_edge)]
        node = np.flatnonzero(cand["level"] == LEVEL_NODE)
        ops = {}
        for kind in OP_KINDS:
            cols = recs[kind]
            if cols is not None:
                found = contain(cols["thread_id"].astype(np.int64), cols["timestamp"], cand["thread"][node],
                                cand["begin"][node], cand["end"][node])
                parent = _take(cand["conn"][node], found)
                hit = parent >= 0
                cols = {k: v[hit] for k, v in cols.items()}
                cols["conn"] = parent[hit]
            ops[kind] = self._ready(kind, None if cols is None else frame_of(cols).set_index("pos"), still_open)
        tracks = self._ready("track", self._tracks(recs["track"], cand), still_open)
        if self.hccl is not None:
            self.hccl.step(cand, tracks, recs["track"], recs.get("hop"), recs.get("hinfo"), ops["nbi"])
        if len(tracks):
            self.emit(tracks, _compute_tasks(tracks, ops["nbi"], ops["tensor"], ops["ctx"], self.hashes))

    def _ready(self, kind: str, new: Optional[pd.DataFrame], still_open: np.ndarray) -> pd.DataFrame:
        """The rows of a kind (indexed by pos) that can be used now, in pos order; those under a
        node API still open wait for the next window."""
        frames = [f for f in (self.waiting[kind], new) if f is not None and len(f)]
        if not frames:
            self.waiting[kind] = None
            return pd.DataFrame()
        rows = pd.concat(frames) if len(frames) > 1 else frames[0]
        if not rows.index.is_monotonic_increasing:
            rows = rows.sort_index(kind="stable")
        wait = isin(rows["conn"].to_numpy(), still_open)
        if kind == "track":
            wait &= rows["parent_level"].to_numpy() == LEVEL_NODE
        if not wait.any():
            self.waiting[kind] = None
            return rows
        self.waiting[kind] = rows[wait]
        return rows[~wait]

    def _tracks(self, cols: Optional[Columns], cand: Columns) -> Optional[pd.DataFrame]:
        """The window's tracks, each under the deepest tree API containing it (and the model
        execution API containing it), indexed by pos."""
        if cols is None:
            return None
        level, a_thread, a_begin, a_end = cand["level"], cand["thread"], cand["begin"], cand["end"]
        t_thread: np.ndarray = cols["thread_id"].astype(np.int64)
        t_time = cols["timestamp"]
        parent: np.ndarray = np.full(len(t_time), -1, dtype=np.int64)
        for lv in TREE_LEVELS:
            idx = np.flatnonzero(level == lv)
            todo = np.flatnonzero(parent < 0)
            if len(idx) == 0 or len(todo) == 0:
                continue
            found = contain(t_thread[todo], t_time[todo], a_thread[idx], a_begin[idx], a_end[idx])
            hit = found >= 0
            parent[todo[hit]] = idx[found[hit]]
        midx = np.flatnonzero(level == LEVEL_MODEL)
        model_api = _take(midx, contain(t_thread, t_time, a_thread[midx], a_begin[midx], a_end[midx]))
        del t_thread
        has_parent, at_parent = parent >= 0, np.clip(parent, 0, None)
        has_model, at_model = model_api >= 0, np.clip(model_api, 0, None)
        if not len(level):  # no tree API at all (no api_event records): stand-ins that np.where never takes
            cand = {k: np.zeros(1, np.int64) for k in TREE_COLUMNS}
            level = cand["level"]
        task_id = cols["task_id"]
        out = frame_of({
            "device_id": cols["device_id"], "stream_id": cols["stream_id"].astype(np.int64),
            "task_low": (task_id & 0xFFFF).astype(np.int64), "batch": (task_id >> 16).astype(np.int64),
            "ts_ns": self.clock.to_ns(t_time), "thread_id": cols["thread_id"],
            "type_name": map_names(cols["task_type"], self.types),
            "parent_level": np.where(has_parent, level[at_parent].astype(np.int64), -1),
            "model_id": np.where(has_model, cand["item"].astype(np.int64)[at_model], NO_MODEL),
            "request_id": np.where(has_model, cand["reserve"].astype(np.int64)[at_model], -1),
            "conn": np.where(has_parent, cand["conn"][at_parent].astype(np.int64), -1),
            "kernel": self.hashes.positions(cols["kernel_name"]),  # hash_dic positions (HashTable.at)
            "type_raw": cols["task_type"], "kernel_raw": cols["kernel_name"],
            "data_len": cols["data_len"], "num_blocks": cols["num_blocks"], "ratio": cols["ratio"]})
        out.index = pd.Index(cols["pos"])
        return out

    def finish(self) -> None:
        assert all(f is None for f in self.waiting.values()), "records left waiting after the last window"


def _compute_tasks(tracks: pd.DataFrame, nbi: pd.DataFrame, tensors: pd.DataFrame, ctx: pd.DataFrame,
                   hashes: HashTable) -> pd.DataFrame:
    """Host compute tasks: task tracks under a node launch with a KERNEL* type (op info from the
    launch's first node_basic_info / tensor_info / context_id_info), or kernel tracks without a
    launch (named by their kernel). The op records carry their launch API (`conn`), in stream
    order; `tensors`' texts are rows of the tensor table. `info_ts`: the time stamp (host ticks)
    of the node_basic_info the op info comes from, -1 without one. Op names and types, as the
    tracks' kernels, are hash_dic positions (HashTable.positions; -1 reads "")."""
    names, raw = tracks["type_name"].to_numpy(), tracks["type_raw"].to_numpy()
    kernel_like = _per_type(raw, names, lambda t: t.startswith(("KERNEL", "STARS_COMMON")) or t == "FFTS_PLUS")
    under_node = tracks["parent_level"].to_numpy() == LEVEL_NODE
    fallback = ~under_node & _per_type(raw, names, lambda t: t in KERNEL_FALLBACK)
    chosen = (under_node & kernel_like) | fallback
    sel = tracks.loc[chosen, ["device_id", "stream_id", "task_low", "batch", "kernel", "type_name", "type_raw",
                              "data_len", "num_blocks", "ratio", "model_id", "request_id", "conn"]]
    parents = sel["conn"].to_numpy()
    sel_fallback = fallback[chosen]
    n = len(sel)
    # op info by the launch API the track hangs under
    kernel = sel["kernel"].to_numpy()
    op_name = kernel.copy()  # (rows without op info: their kernel)
    op_type = kernel.copy()
    ge_type = text_array(n, "")
    block: np.ndarray = np.zeros(n, dtype=np.int64)
    mix: np.ndarray = np.zeros(n, dtype=np.int64)
    flag = text_array(n, "N/A")
    state = text_array(n, "N/A")
    has_info: np.ndarray = np.zeros(n, dtype=bool)
    info_ts: np.ndarray = np.full(n, -1, dtype=np.int64)
    if not nbi.empty:
        src = _first_under(nbi["conn"].to_numpy(), parents)
        found = (src >= 0) & ~sel_fallback
        src = src[found]
        info_ts[found] = nbi["timestamp"].to_numpy()[src].astype(np.int64)
        op_name[found] = hashes.positions(nbi["op_name"].to_numpy()[src])
        op_type[found] = hashes.positions(nbi["op_type"].to_numpy()[src])
        ge_type[found] = ge_names(nbi["task_type"].to_numpy()[src])
        bd = nbi["block_dim"].to_numpy()[src].astype(np.int64)
        block[found] = bd & 0xFFFF
        mix[found] = (bd & 0xFFFF) * (bd >> 16)
        # (one str object per text, not one per row: the pools hash each object once)
        flag[found] = np.array(["NO", "YES"], dtype=object)[(nbi["op_flag"].to_numpy()[src] != 0).astype(np.intp)]
        state[found] = np.array(["static", "dynamic"], dtype=object)[nbi["aging"].to_numpy()[src].astype(np.intp)]
        has_info = found
    type_name, type_raw = sel["type_name"].to_numpy(), sel["type_raw"].to_numpy()
    no_info = ~has_info
    ge_type[no_info] = _per_type(type_raw[no_info], type_name[no_info], lambda t: KERNEL_FALLBACK.get(t, "N/A"),
                                 object)
    ext = sel["data_len"].to_numpy() == 40
    block = np.where(ext, sel["num_blocks"].to_numpy().astype(np.int64), block)
    mix = np.where(ext, sel["num_blocks"].to_numpy().astype(np.int64) * sel["ratio"].to_numpy().astype(np.int64), mix)
    text_row: np.ndarray = np.zeros(n, dtype=np.int64)
    if not tensors.empty:
        src = _first_under(tensors["conn"].to_numpy(), parents)
        found = (src >= 0) & has_info
        text_row[found] = tensors["text"].to_numpy()[src[found]]
    ctx_id = np.where(_per_type(type_raw, type_name, lambda t: t in MIX_TYPES), 0, INVALID_CTX).astype(np.int64)
    if not ctx.empty:
        src = _first_under(ctx["conn"].to_numpy(), parents)
        found = (src >= 0) & has_info
        ctx_id[found] = ctx["ctx"].to_numpy()[src[found]]
    out = frame_of({
        "track": sel.index.to_numpy(), "device_id": sel["device_id"].to_numpy().astype(np.int64),
        "stream_id": sel["stream_id"].to_numpy(), "task_id": sel["task_low"].to_numpy(),
        "batch": sel["batch"].to_numpy(), "ctx": ctx_id, "op_name": op_name, "op_type": op_type,
        "ge_type": ge_type, "block": block, "mix": mix, "hf32": flag, "state": state, "tensors": text_row,
        "model_id": sel["model_id"].to_numpy(), "request_id": sel["request_id"].to_numpy(),
        "conn": sel["conn"].to_numpy(), "info_ts": info_ts,
    })
    return out


def _per_type(raw: np.ndarray, names: np.ndarray, fn: Callable[[str], Any], dtype: type = bool) -> np.ndarray:
    """`fn` of each track's type name (`names`, a function of its raw type code `raw`), called once
    per distinct code: what where_text / map_text give, without hashing a million texts."""
    if not len(raw):
        return np.zeros(0, dtype=dtype)
    codes, _ = pd.factorize(raw, use_na_sentinel=False)
    first = np.flatnonzero(np.diff(np.maximum.accumulate(codes), prepend=-1) > 0)  # each code's first row
    return np.array([fn(str(names[i])) for i in first.tolist()], dtype=dtype)[codes]


def _first_under(api: np.ndarray, parents: np.ndarray) -> np.ndarray:
    """For each parent API, the first record attached to it (its position in `api`), or -1."""
    rec = np.flatnonzero(api >= 0)
    if len(rec) == 0:
        return np.full(len(parents), -1, dtype=np.int64)
    keys, first = np.unique(api[rec], return_index=True)
    pos = np.clip(np.searchsorted(keys, parents), 0, len(keys) - 1)
    return np.where(keys[pos] == parents, rec[first[pos]], -1)
