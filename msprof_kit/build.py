"""From one collection's raw data to the store's tables (host tree, tasks, device logs, PMU).

Each step is a function over column arrays / DataFrames; no per-record Python loop on a path
whose length grows with the number of tasks (loops run over threads, streams or distinct
strings). The rules follow the reference's C++ path (host_formats.md §2.7, device_formats.md
§3, §4 and §7, outputs.md §8), with deliberate improvements documented in docs/store.md:
a bad record costs that record, and device tasks pair with host tasks by time as well as ids.
"""
from __future__ import annotations

import functools
import tempfile
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np
import pandas as pd

from .parsers import device as D
from .parsers import host as H
from .parsers import records as R
from .pairing import Pairing
from .parsers.stream import RecordStream, decode_stream, locate, read_stream
from . import forked, memory, metrics
from .api_windows import ApiWindows
from .spill import Runs
from .arrays import SortedKeys, ascending, first_seen, isin, key_codes, numbered_by_first_row
from .forked import Forked, can_fork
from .errors import Diagnostics, MissingControlFile, NoData
from .layout import NPU_NAMES, Chip, Collection, ResultDir, data_files
from .timebase import Clock, device_clock, host_clock, wall_offset_ns

INVALID_CTX = 4294967295
NO_MODEL = 4294967295
LEVEL_ACL, LEVEL_MODEL, LEVEL_NODE, LEVEL_HCCL, LEVEL_RUNTIME = 20000, 15000, 10000, 5500, 5000
TREE_LEVELS = (LEVEL_HCCL, LEVEL_NODE, LEVEL_MODEL, LEVEL_ACL)  # deepest first
GE_TASK_TYPES = {0: "AI_CORE", 1: "AI_CPU", 2: "AI_VECTOR_CORE", 3: "WRITE_BACK", 4: "MIX_AIC", 5: "MIX_AIV",
                 6: "FFTS_PLUS", 7: "DSA_SQE", 8: "DVPP", 9: "COMMUNICATION", 10: "FUSION", 11: "INVALID",
                 256: "HCCL_AI_CPU"}
KERNEL_FALLBACK = {"KERNEL_AICORE": "AI_CORE", "KERNEL_AIVEC": "AI_VECTOR_CORE", "KERNEL_AICPU": "AI_CPU",
                   "KERNEL_MIX_AIC": "MIX_AIC", "KERNEL_MIX_AIV": "MIX_AIV", "KERNEL_SIMT": "AI_VECTOR_CORE"}
MIX_TYPES = ("KERNEL_MIX_AIC", "KERNEL_MIX_AIV")
# ACL API categories: the high 16 bits of an ACL API's type (the reference's `struct_type` of ACL APIs)
ACL_API_TAGS = {1: "ACL_OP", 2: "ACL_MODEL", 3: "ACL_RTS", 4: "ACL_OTHERS", 5: "ACL_NN", 6: "ACL_ASCENDC",
                7: "HOST_HCCL", 9: "ACL_DVPP", 10: "ACL_GRAPH", 11: "ACL_ATB"}
STEP_INFO_API = "step_info"  # a node-level API whose item id is a model id, not a hash
COMPUTE_HOST_TYPES = ("KERNEL_AICORE", "KERNEL_AIVEC", "FFTS_PLUS", "KERNEL_MIX_AIC", "KERNEL_MIX_AIV",
                      "PROFILING_ENABLE", "PROFILING_DISABLE")


# receives each finished store table: (name, rows); columnar tables may come as dicts of arrays; a
# table may come in parts (`last=False` but for its last part), TableWriter.put
Sink = Callable[..., None]


# ------------------------------------------------------------------------------------------------
# Clocks

def _start_info(rd: ResultDir, coll: Collection) -> Dict[str, object]:
    if rd.start_info.get("collectionTimeBegin") not in (None, ""):
        return rd.start_info
    for other in coll.result_dirs():
        if other.start_info.get("collectionTimeBegin") not in (None, ""):
            return other.start_info
    raise MissingControlFile("no start_info with collectionTimeBegin and clockMonotonicRaw; expected "
                             "start_info (host) or start_info.N (device) to place times on the wall clock",
                             path=rd.path)


def wall_offset(rd: ResultDir, coll: Collection) -> int:
    info = _start_info(rd, coll)
    try:
        return wall_offset_ns(int(str(info["collectionTimeBegin"])), int(str(info.get("clockMonotonicRaw", 0))))
    except (KeyError, ValueError) as exc:
        raise MissingControlFile(f"start_info lacks a numeric collectionTimeBegin / clockMonotonicRaw ({exc})",
                                 path=rd.files.get("start_info", rd.path)) from exc


def control_times(rds: Sequence[ResultDir]) -> Tuple[int, int]:
    """(start, end) in local ns: the first collectionTimeBegin of their start_info and the first
    collectionTimeEnd of their end_info (µs there); 0 where none has one."""
    start = end = 0
    for rd in rds:
        b = str(rd.start_info.get("collectionTimeBegin", "") or "")
        e = str(rd.end_info.get("collectionTimeEnd", "") or "")
        if b.isdigit() and not start:
            start = int(b) * 1000
        if e.isdigit() and not end:
            end = int(e) * 1000
    return start, end


def session_ns(coll: Collection) -> Tuple[int, int]:
    """(start, end) of the collection in local ns, from start_info / end_info."""
    start, end = control_times(coll.result_dirs())
    if start and not end:
        end = start + 30 * 60 * 10 ** 9  # the reference's default when end_info is absent
    return start, end


def host_clock_of(rd: ResultDir, coll: Collection, diag: Diagnostics) -> Clock:
    offset = wall_offset(rd, coll)
    freq = rd.host_freq_mhz()
    if freq is None:
        return host_clock(None, 0, 0, 0, offset)
    hs = rd.host_start
    if "clock_monotonic_raw" not in hs or "cntvct" not in hs:
        raise MissingControlFile("host_start.log lacks clock_monotonic_raw / cntvct; expected both to convert "
                                 "host counter ticks", path=rd.files.get("host_start.log", rd.path))
    return host_clock(freq, hs["clock_monotonic_raw"], hs["cntvct"], hs.get("cntvct_diff", 0), offset)


def device_clock_of(rd: ResultDir, coll: Collection) -> Clock:
    offset = wall_offset(rd, coll)
    mhz = rd.hwts_mhz()
    if mhz <= 0:
        text = str(rd.device_info().get("hwts_frequency", "")).strip()
        raise MissingControlFile(f"DeviceInfo[0].hwts_frequency is {text!r}; expected the system counter "
                                 f"frequency in MHz", path=rd.files.get("info.json", rd.path))
    if "cntvct" not in rd.dev_start:
        raise MissingControlFile("no dev_start.log.N with cntvct; expected the device counter at the sync point",
                                 path=rd.files.get("dev_start.log", rd.path))
    if "clock_monotonic_raw" not in rd.host_start:
        raise MissingControlFile("no host_start.log.N with clock_monotonic_raw; expected the host time at the "
                                 "sync point", path=rd.files.get("host_start.log", rd.path))
    freq = rd.host_freq_mhz()
    host_mono = rd.host_start["clock_monotonic_raw"]
    if freq is not None and rd.host_start.get("cntvct_diff"):
        host_mono += round(Fraction(rd.host_start["cntvct_diff"] * 1000) / freq)
    return device_clock(mhz, rd.dev_start["cntvct"], host_mono, offset)


# ------------------------------------------------------------------------------------------------
# Host side

@dataclass
class HostData:
    tracks: pd.DataFrame         # one row per task_track, associated
    compute: pd.DataFrame        # one row per host compute task (COMPUTE_TASK_INFO source)
    models: pd.DataFrame         # model id -> name
    pid: int
    tensor_table: np.ndarray = field(default_factory=lambda: _texts((1, 6), "N/A"))  # compute["tensors"] rows


@dataclass
class CodedTexts:
    """A column of texts as codes into a table of texts (row i reads texts[codes[i]]; the table
    may hold a text more than once): millions of API rows share a few hundred names."""
    codes: np.ndarray
    texts: np.ndarray

    def first_seen(self) -> Tuple[np.ndarray, np.ndarray]:
        """(codes, labels) as pd.factorize gives them of the texts themselves: the distinct texts
        in the order of their first row, each row's position among them."""
        rows, used = pd.factorize(self.codes, use_na_sentinel=False)
        canon, labels = pd.factorize(np.asarray(self.texts, dtype=object)[used], use_na_sentinel=False)
        return canon[rows], labels


def text_codes(values: Union[np.ndarray, CodedTexts]) -> Tuple[np.ndarray, np.ndarray]:
    """(codes, labels) of a column of texts, given as texts or as CodedTexts: the distinct texts in
    the order of their first row, each row's position among them."""
    if isinstance(values, CodedTexts):
        return values.first_seen()
    return pd.factorize(np.asarray(values, dtype=object), use_na_sentinel=False)


def _group_paths(files: Dict[Tuple[str, str], List[str]], kind: str) -> Iterator[Tuple[str, List[str]]]:
    """(group, slice files) of each file class of a host record kind, unaging first."""
    for group in ("unaging", "aging"):
        paths = files.get((kind, group), [])
        if paths:
            yield group, paths


def _dictionary(files: Dict[Tuple[str, str], List[str]], kind: str, typed: bool,
                diag: Diagnostics) -> Dict[str, str]:
    table: Dict[str, str] = {}
    for group in ("unaging", "aging"):
        for path in files.get((kind, group), []):
            with open(path, "rb") as f:
                text = f.read().decode("utf-8", errors="replace")
            part, issues = H.parse_dictionary(text, path, typed)
            diag.extend(issues)
            table.update(part)
    return table


Columns = H.Columns


def _contain(p_thread: np.ndarray, p_time: np.ndarray, a_thread: np.ndarray, a_begin: np.ndarray,
             a_end: np.ndarray) -> np.ndarray:
    """Index of the API (same thread, begin < t <= end, latest begin; of equal begins the last)
    containing each point, or -1. One search a thread: each thread's points are in time order, so
    its search walks the sorted begins forwards (one search of all threads' packed keys jumps
    between threads and took longer at 10M tasks, with two threads or thirty)."""
    out = np.full(len(p_time), -1, dtype=np.int64)
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


def _take(idx: np.ndarray, found: np.ndarray) -> np.ndarray:
    """idx[found] where found >= 0, else -1 (idx may be empty)."""
    if len(idx) == 0:
        return np.full(len(found), -1, dtype=np.int64)
    return np.where(found >= 0, idx[np.clip(found, 0, None)], -1)


class LatestEnds:
    """For each (thread, level) of the APIs checked by _tree_mask so far, the latest end: what an
    API of a later window of begins is compared with."""

    def __init__(self) -> None:
        self.keys = np.zeros(0, dtype=np.int64)  # sorted (thread << 32 | level)
        self.ends = np.zeros(0, dtype=np.int64)

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
        last = np.ones(len(all_keys), dtype=bool)
        last[:-1] = all_keys[1:] != all_keys[:-1]
        self.keys, self.ends = all_keys[last], all_ends[last]


def _tree_mask(apis: Columns, latest: Optional[LatestEnds] = None) -> np.ndarray:
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
        new_group = np.ones(len(check), dtype=bool)
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
        before = np.empty(len(check), dtype=np.int64)
        before[1:] = latest_end[:-1]
        if latest is not None:
            before[first] = carried
            last = np.flatnonzero(np.r_[new_group[1:], True])
            latest.update(key[last], latest_end[last])
        redundant = has_before & (apis["begin"][check] <= before)
        mask[check[redundant]] = False
    return mask


def _tensor_job(rd: ResultDir, files) -> Tuple[pd.DataFrame, np.ndarray, List[str]]:
    local = Diagnostics()
    tensors, table = _tensor_texts(rd, files, local)
    return tensors, table, local.warnings


def load_host(rd: ResultDir, coll: Collection, diag: Diagnostics, strings: "StringPool", put: Sink,
              jobs: int = 1, scratch: str = "") -> Optional[HostData]:
    """The host's tracks and compute tasks, associated with its APIs; the APIs themselves go to
    `put` (CANN_API, KIT_API) as soon as they are numbered. With jobs > 1 the tensor texts are
    rendered in a forked worker meanwhile."""
    files = data_files(rd)
    if not files:
        diag.warn(f"{rd.data_dir}: no host data files; expected *.api_event.data.slice_N and friends")
        return None
    worker = Forked(functools.partial(_tensor_job, rd, files), "tensor texts") \
        if jobs > 1 and can_fork() else None

    def tensor_texts() -> Tuple[pd.DataFrame, np.ndarray]:
        if worker is None:
            return _tensor_texts(rd, files, diag)
        tensors, table, warnings = worker.result()
        diag.extend(warnings)
        return tensors, table

    try:
        return _load_host(rd, coll, diag, files, tensor_texts, strings, put, scratch)
    finally:
        if worker is not None:
            worker.cancel()


def _load_host(rd: ResultDir, coll: Collection, diag: Diagnostics, files,
               tensor_texts: Callable[[], Tuple[pd.DataFrame, np.ndarray]], strings: "StringPool",
               put: Sink, scratch: str) -> HostData:
    clock = host_clock_of(rd, coll, diag)
    hashes = _dictionary(files, "hash_dic", False, diag)
    types = _dictionary(files, "type_info_dic", True, diag)
    pid_text = str(rd.info.get("pid", "0"))
    pid = int(pid_text) if pid_text.isdigit() else 0

    paths = files.get(("api_event", "unaging"), []) + files.get(("api_event", "aging"), [])
    apis = ApiWindows(paths, scratch, diag, rd.data_dir)
    records = _HostRecords(scratch)
    try:
        _spill_records(files, types, records, diag)
        tensors, tensor_table = tensor_texts()
        for lo in range(0, len(tensors), SPILL_ROWS):
            part = tensors.iloc[lo:lo + SPILL_ROWS]
            records.add("tensor", {k: part[k].to_numpy() for k in ("thread_id", "timestamp", "text")})
        del tensors
        models = _model_names(rd, files, hashes, diag)
        assoc = _Association(clock, types, hashes) if records.runs["track"].rows else None
        edges = apis.edges()
        records.cut(edges)
        latest = LatestEnds()
        for w, window in enumerate(apis.windows(edges)):
            tree = _api_window(window, clock, types, hashes, pid, strings, put, latest) \
                if len(window["begin"]) else None
            del window
            if assoc is not None:
                assoc.step(tree, records.window(w), int(edges[w]) if w < len(edges) else None)
        put("CANN_API", None, last=True)
        put("KIT_API", None, last=True)
    finally:
        apis.close()
        records.close()
    if assoc is None:
        empty = pd.DataFrame()
        return HostData(tracks=empty, compute=empty, models=models, pid=pid, tensor_table=tensor_table)
    tracks, compute = assoc.finish()
    return HostData(tracks=tracks, compute=compute, models=models, pid=pid, tensor_table=tensor_table)


TREE_COLUMNS = ("thread", "level", "begin", "end", "item", "reserve", "conn")
TRACK_FIELDS = ("thread_id", "timestamp", "device_id", "stream_id", "task_id", "task_type", "kernel_name",
                "data_len", "num_blocks", "ratio")
NBI_FIELDS = ("thread_id", "timestamp", "op_name", "op_type", "task_type", "block_dim", "op_flag")
OP_KINDS = ("nbi", "tensor", "ctx")  # op records, each under the node launch API containing it
SPILL_ROWS = 1 << 20  # rows of an in-memory frame spilled at a time
TRACK_ONLY = ("parent_level", "data_len", "num_blocks", "ratio")  # what only the compute tasks read of a track


def _api_window(window: Columns, clock: Clock, types: Dict[str, str], hashes: Dict[str, str], pid: int,
                strings: "StringPool", put: Sink, latest: "LatestEnds") -> Columns:
    """A window of the host's APIs (events merged, in connection-id order: APIs by begin, level
    descending, ties by thread then stream order; an API's connection id is its position + 1)
    into CANN_API and KIT_API parts. Returns its tree APIs (TREE_COLUMNS; begin and end in host
    ticks); `latest` carries the call tree's latest ends from a window to the next."""
    names = _name_apis(window, types, hashes)
    texts = _api_texts(window, names, hashes)
    window["start_ns"] = clock.to_ns(window["begin"])
    window["end_ns"] = clock.to_ns(window["end"])
    _write_apis(window, texts, pid, strings, put)
    keep = _tree_mask(window, latest)
    return {k: window[k][keep] for k in TREE_COLUMNS}


class _HostRecords:
    """The host's task tracks (maintenance ones left out) and op records, spilled sorted by time
    (host ticks) and read back a window of times at a time. `pos` numbers each kind's records in
    stream order, unaging files first: the order the call tree's rules take the first of."""

    def __init__(self, folder: str) -> None:
        self.runs = {kind: Runs(folder, kind, "timestamp") for kind in ("track",) + OP_KINDS}

    def add(self, kind: str, cols: Columns) -> None:
        runs = self.runs[kind]
        n = len(cols["timestamp"])
        cols["timestamp"] = cols["timestamp"].astype(np.int64)
        cols["pos"] = np.arange(runs.rows, runs.rows + n, dtype=np.int64)
        runs.add(cols)

    def cut(self, edges: np.ndarray) -> None:
        for runs in self.runs.values():
            runs.cut(edges)

    def window(self, w: int) -> Dict[str, Optional[Columns]]:
        return {kind: runs.window(w) for kind, runs in self.runs.items()}

    def close(self) -> None:
        for runs in self.runs.values():
            runs.close()


def _chunks(files, kind: str, diag: Diagnostics) -> Iterator[Tuple[str, Columns]]:
    """(group, columns) of each chunk of a compact or additional record kind, unaging first; each
    stream's issues are reported once it is read."""
    for group, paths in _group_paths(files, kind):
        stream = H.compact_stream(kind, paths)
        for arr, offsets in stream.chunks():
            yield group, H.compact_columns(kind, arr, offsets)
        diag.extend(stream.issues)


def _spill_records(files, types: Dict[str, str], records: _HostRecords, diag: Diagnostics) -> None:
    """The task tracks, node_basic_info and context_id_info records into `records`, a chunk at a
    time."""
    for _, c in _chunks(files, "task_track", diag):
        kept = _where_text(_map_names(c["task_type"], types), lambda t: t != "MAINTENANCE")
        records.add("track", {k: c[k][kept] for k in TRACK_FIELDS})
    for group, c in _chunks(files, "node_basic_info", diag):
        records.add("nbi", {**{k: c[k] for k in NBI_FIELDS},
                            "aging": np.full(len(c["timestamp"]), group == "aging")})
    for _, c in _chunks(files, "context_id_info", diag):
        first = np.where(c["ctx_num"] > 0, c["ctx_ids"][:, 0] if len(c["ctx_num"]) else 0, INVALID_CTX)
        records.add("ctx", {"thread_id": c["thread_id"], "timestamp": c["timestamp"],
                            "ctx": first.astype(np.int64)})


class _Association:
    """Task tracks and op records with the tree APIs containing them, a window of times at a time
    (the windows of the API begins), and the host compute tasks they make.

    Carried from a window to the next: the last tree API of each (thread, level), the only one
    of the earlier windows that can contain a later record; and the tracks and op records under
    a node API still open at the next window's start, whose op info is chosen once all the
    API's records are in."""

    def __init__(self, clock: Clock, types: Dict[str, str], hashes: Dict[str, str]) -> None:
        self.clock, self.types, self.hashes = clock, types, hashes
        self.last: Optional[Columns] = None
        self.waiting: Dict[str, Optional[pd.DataFrame]] = dict.fromkeys(("track",) + OP_KINDS)
        self.tracks: List[Columns] = []   # tracks done, a part a window (`pos` their position)
        self.compute: List[Columns] = []  # their compute tasks

    def step(self, tree: Optional[Columns], recs: Dict[str, Optional[Columns]], next_edge: Optional[int]) -> None:
        """One window: its tree APIs (None: none) and records; `next_edge` the next window's first
        begin (None after the last window)."""
        parts = [c for c in (self.last, tree) if c is not None]
        cand = {k: np.concatenate([c[k] for c in parts]) if parts else np.zeros(0, np.int64) for k in TREE_COLUMNS}
        key = (cand["thread"].astype(np.int64) << 32) | cand["level"].astype(np.int64)
        last = first_seen(key[::-1])[::-1]  # each (thread, level)'s last API
        self.last = {k: v[last] for k, v in cand.items()}
        still_open = np.zeros(0, np.int64) if next_edge is None else \
            self.last["conn"][(self.last["level"] == LEVEL_NODE) & (self.last["end"] >= next_edge)]
        node = np.flatnonzero(cand["level"] == LEVEL_NODE)
        ops = {}
        for kind in OP_KINDS:
            cols = recs[kind]
            if cols is not None:
                found = _contain(cols["thread_id"].astype(np.int64), cols["timestamp"], cand["thread"][node],
                                 cand["begin"][node], cand["end"][node])
                parent = _take(cand["conn"][node], found)
                hit = parent >= 0
                cols = {k: v[hit] for k, v in cols.items()}
                cols["conn"] = parent[hit]
            ops[kind] = self._ready(kind, None if cols is None else _frame(cols).set_index("pos"), still_open)
        tracks = self._ready("track", self._tracks(recs["track"], cand), still_open)
        if len(tracks):
            compute = _compute_tasks(tracks, ops["nbi"], ops["tensor"], ops["ctx"], self.hashes)
            self.compute.append(_own_columns(compute))
            self.tracks.append({"pos": tracks.index.to_numpy(), **_own_columns(tracks.drop(columns=list(TRACK_ONLY)))})

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
        t_thread = cols["thread_id"].astype(np.int64)
        t_time = cols["timestamp"]
        parent = np.full(len(t_time), -1, dtype=np.int64)
        for lv in TREE_LEVELS:
            idx = np.flatnonzero(level == lv)
            todo = np.flatnonzero(parent < 0)
            if len(idx) == 0 or len(todo) == 0:
                continue
            found = _contain(t_thread[todo], t_time[todo], a_thread[idx], a_begin[idx], a_end[idx])
            hit = found >= 0
            parent[todo[hit]] = idx[found[hit]]
        midx = np.flatnonzero(level == LEVEL_MODEL)
        model_api = _take(midx, _contain(t_thread, t_time, a_thread[midx], a_begin[midx], a_end[midx]))
        del t_thread
        has_parent, at_parent = parent >= 0, np.clip(parent, 0, None)
        has_model, at_model = model_api >= 0, np.clip(model_api, 0, None)
        task_id = cols["task_id"]
        out = _frame({
            "device_id": cols["device_id"], "stream_id": cols["stream_id"].astype(np.int64),
            "task_low": (task_id & 0xFFFF).astype(np.int64), "batch": (task_id >> 16).astype(np.int64),
            "ts_ns": self.clock.to_ns(t_time), "thread_id": cols["thread_id"],
            "type_name": _map_names(cols["task_type"], self.types),
            "parent_level": np.where(has_parent, level[at_parent], -1),
            "model_id": np.where(has_model, cand["item"].astype(np.int64)[at_model], NO_MODEL),
            "request_id": np.where(has_model, cand["reserve"].astype(np.int64)[at_model], -1),
            "conn": np.where(has_parent, cand["conn"][at_parent], -1),
            "kernel": _hash_names(cols["kernel_name"], self.hashes),
            "data_len": cols["data_len"], "num_blocks": cols["num_blocks"], "ratio": cols["ratio"]})
        out.index = pd.Index(cols["pos"])
        return out

    def finish(self) -> Tuple[pd.DataFrame, pd.DataFrame]:
        """All tracks (row = position) and compute tasks, in track order."""
        assert all(f is None for f in self.waiting.values()), "records left waiting after the last window"
        return _joined(self.tracks, "pos").drop(columns="pos"), _joined(self.compute, "track")


def _own_columns(frame: pd.DataFrame) -> Columns:
    """A frame's columns as arrays of their own (pandas may keep several columns in one block, which
    a column then keeps alive whole)."""
    out = {}
    for name in frame.columns:
        column = frame[name].to_numpy()
        base = column.base
        out[name] = column if base is None or base.size == column.size else column.copy()
    return out


def _joined(parts: List[Columns], key: str) -> pd.DataFrame:
    """Parts with the same columns end to end, rows in the order of column `key` (stably); joined
    a column at a time, each part's column dropped once joined: what is held at once is the parts
    and one joined column more, not the parts and the whole join."""
    if not parts:
        return pd.DataFrame()
    keys = np.concatenate([p[key] for p in parts])
    order = None if ascending(keys) else np.argsort(keys, kind="stable")
    del keys
    out = {}
    for name in list(parts[0]):
        column = np.concatenate([p.pop(name) for p in parts])
        out[name] = column if order is None else column[order]
        del column
    parts.clear()
    return _frame(out)


def _write_apis(apis: Columns, texts: Dict[str, np.ndarray], pid: int, strings: "StringPool", put: Sink) -> None:
    """CANN_API and KIT_API parts of a window of APIs in connection-id order (`conn`)."""
    n = len(apis["begin"])
    if not n:
        return
    conn = apis["conn"]
    put("CANN_API", _frame({
        "startNs": apis["start_ns"], "endNs": apis["end_ns"], "type": apis["level"],
        "globalTid": (np.int64(pid) << 32) | apis["thread"].astype(np.int64), "connectionId": conn,
        "name": strings.ids_of(CodedTexts(apis["name"], texts["name"]))}), last=False)
    put("KIT_API", {"connectionId": conn, "mode": CodedTexts(apis["mode"], texts["mode"]),
                    "itemId": CodedTexts(apis["item_text"], texts["item_text"])}, last=False)


def _distinct(values: np.ndarray, fn: Callable[[Any], Any]) -> Tuple[np.ndarray, List[Any]]:
    """(code of each value, `fn` of each distinct value): `fn` evaluated once per distinct value."""
    codes, uniq = pd.factorize(np.asarray(values), use_na_sentinel=False)
    return codes, [fn(u) for u in uniq]


def _per_distinct(values: np.ndarray, fn: Callable[[object], object], dtype: type = object) -> np.ndarray:
    """`fn` of each value, evaluated once per distinct value (ids, type codes and texts repeat a lot)."""
    if len(values) == 0:
        return np.zeros(0, dtype=dtype)
    codes, mapped = _distinct(values, fn)
    return np.array(mapped, dtype=dtype)[codes]


def _map_names(values: np.ndarray, types: Dict[str, str]) -> np.ndarray:
    """Runtime task type names (type_info_dic level 5000), the decimal code when unknown."""
    return _per_distinct(values, lambda u: types.get(f"5000_{int(u)}", str(int(u))))


def _hash_text(hashes: Dict[str, str], missing: str = "") -> Callable[[object], str]:
    """The text of a hash id (hash_dic); `missing` for an unknown id, "" for id 0."""
    return lambda u: hashes.get(str(int(u)), missing if int(u) else "")


def _code_text(table: Dict[int, str]) -> Callable[[object], str]:
    """The name of an integer code, the decimal code when the table lacks it."""
    return lambda u: table.get(int(u), str(int(u)))


def _hash_names(values: np.ndarray, hashes: Dict[str, str], missing: str = "") -> np.ndarray:
    """Texts of hash ids (hash_dic); `missing` for an unknown id, "" for id 0."""
    return _per_distinct(values, _hash_text(hashes, missing))


def _lookup(values: np.ndarray, table: Dict[int, str]) -> np.ndarray:
    """Names of integer codes, the decimal code when the table lacks it."""
    return _per_distinct(values, _code_text(table))


def _ge_names(values: np.ndarray) -> np.ndarray:
    return _lookup(values, GE_TASK_TYPES)


def _map_text(values: np.ndarray, fn: Callable[[str], str]) -> np.ndarray:
    """`fn` applied to each text of an object array, evaluated once per distinct text."""
    return _per_distinct(values, lambda u: fn(str(u)))


def _where_text(values: np.ndarray, test: Callable[[str], bool]) -> np.ndarray:
    """`test` applied to each text of an object array, evaluated once per distinct text."""
    return _per_distinct(values, lambda u: bool(test(str(u))), bool)


def _name_apis(apis: Columns, types: Dict[str, str], hashes: Dict[str, str]) -> np.ndarray:
    """API names: type_info_dic '<level>_<type>' (decimal type if unknown); HCCL APIs by item hash.
    Adds `name`, codes into the returned table of names."""
    level = apis["level"]
    codes, texts = _distinct((level.astype(np.int64) << 32) | apis["type"].astype(np.int64),
                             lambda k: types.get(f"{int(k) >> 32}_{int(k) & 0xFFFFFFFF}", str(int(k) & 0xFFFFFFFF)))
    hccl = level == LEVEL_HCCL
    if hccl.any():
        by_item, more = _distinct(apis["item"][hccl], _hash_text(hashes))
        codes[hccl] = len(texts) + by_item
        texts += more
    apis["name"] = codes.astype(np.int32)
    return np.array(texts, dtype=object)


def _api_texts(apis: Columns, names: np.ndarray, hashes: Dict[str, str]) -> Dict[str, np.ndarray]:
    """The texts the timeline shows of each API besides its name (KIT_API): `mode`, the reference's
    struct type (the ACL category for ACL APIs, else the API's type name), and `item_text`, its item
    id (a model id as a number for model-level and node-level step_info APIs, else the hash
    dictionary's text, "0" for no item, the decimal hash when the dictionary lacks it).

    `name` is codes into `names`; adds `mode` and `item_text` as codes too, and returns the three
    tables of texts by column."""
    level = apis["level"]
    name = apis["name"]
    mode = name.copy()
    modes = list(names.tolist())
    acl = level == LEVEL_ACL
    if acl.any():
        tag_codes, tags = _distinct(apis["type"][acl] >> 16, _code_text(ACL_API_TAGS))
        mode[acl] = len(modes) + tag_codes
        modes += tags
    step_info = np.array([t == STEP_INFO_API for t in names.tolist()], dtype=bool)
    by_number = (level == LEVEL_MODEL) | ((level == LEVEL_NODE) & step_info[name])
    item_codes, values = _distinct(apis["item"], int)
    # the table: each distinct item as a number, then as its hash text
    item_texts = [str(u) for u in values] + [hashes.get(str(u), str(u)) if u else "0" for u in values]
    apis["mode"] = mode
    apis["item_text"] = np.where(by_number, item_codes, len(values) + item_codes).astype(np.int32)
    return {"name": names, "mode": np.array(modes, dtype=object), "item_text": np.array(item_texts, dtype=object)}


def _tensor_texts(rd: ResultDir, files, diag: Diagnostics) -> Tuple[pd.DataFrame, np.ndarray]:
    """(one row per op: thread_id, timestamp, text = row of the table; the (m, 6) text table).

    Empty shapes and descriptions read `N/A`, as the reference prints them."""
    frames = []
    tables = [_texts((1, 6), "N/A")]  # row 0: an op without tensor_info
    base = 1
    for _, paths in _group_paths(files, "tensor_info"):
        done = H.read_tensors(paths)
        if done is None:  # two payloads share a hash: decode the stream whole to tell them apart
            buf, pieces = read_stream(paths)
            arr, _, issues = decode_stream(R.TENSOR_INFO, buf, pieces, H._host_valid, H._EXPECT)
            del buf
            keys = {"thread_id": arr["thread_id"], "timestamp": arr["timestamp"]}
            group_idx, text_row, table = H.render_tensors(arr)
            del arr
        else:
            keys, group_idx, text_row, table, issues = done
        diag.extend(issues)
        first = np.unique(group_idx, return_index=True)[1]
        frames.append(_frame({
            "thread_id": keys["thread_id"][first].astype(np.int64),
            "timestamp": keys["timestamp"][first].astype(np.int64),
            "text": base + text_row[group_idx[first]],
        }))
        tables.append(table)
        base += len(table)
        del keys, group_idx
    table = np.concatenate(tables)
    for col in (0, 3):
        table[table[:, col] == '""', col] = "N/A"
    for col in (1, 2, 4, 5):
        table[table[:, col] == "", col] = "N/A"
    return (pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()), table


def _model_names(rd: ResultDir, files, hashes: Dict[str, str], diag: Diagnostics) -> pd.DataFrame:
    frames = []
    for _, c in _chunks(files, "graph_id_map", diag):
        frames.append(_frame({"model_id": c["model_id"].astype(np.int64),
                              "name": _hash_names(c["model_name"], hashes)}))
    if not frames:
        return _frame({"model_id": np.zeros(0, np.int64), "name": np.zeros(0, dtype=object)})
    return pd.concat(frames, ignore_index=True).drop_duplicates("model_id", keep="last")


def _compute_tasks(tracks: pd.DataFrame, nbi: pd.DataFrame, tensors: pd.DataFrame, ctx: pd.DataFrame,
                   hashes: Dict[str, str]) -> pd.DataFrame:
    """Host compute tasks: task tracks under a node launch with a KERNEL* type (op info from the
    launch's first node_basic_info / tensor_info / context_id_info), or kernel tracks without a
    launch (named by their kernel). The op records carry their launch API (`conn`), in stream
    order; `tensors`' texts are rows of the tensor table."""
    names = tracks["type_name"].to_numpy()
    kernel_like = _where_text(names, lambda t: t.startswith(("KERNEL", "STARS_COMMON")) or t == "FFTS_PLUS")
    under_node = tracks["parent_level"].to_numpy() == LEVEL_NODE
    fallback = ~under_node & _where_text(names, lambda t: t in KERNEL_FALLBACK)
    chosen = (under_node & kernel_like) | fallback
    sel = tracks.loc[chosen, ["device_id", "stream_id", "task_low", "batch", "kernel", "type_name",
                              "data_len", "num_blocks", "ratio", "model_id", "request_id", "conn"]]
    parents = sel["conn"].to_numpy()
    sel_fallback = fallback[chosen]
    n = len(sel)
    # op info by the launch API the track hangs under
    op_name = _texts(n, "")
    op_type = _texts(n, "")
    ge_type = _texts(n, "")
    block = np.zeros(n, dtype=np.int64)
    mix = np.zeros(n, dtype=np.int64)
    flag = _texts(n, "N/A")
    state = _texts(n, "N/A")
    has_info = np.zeros(n, dtype=bool)
    if not nbi.empty:
        src = _first_under(nbi["conn"].to_numpy(), parents)
        found = (src >= 0) & ~sel_fallback
        src = src[found]
        op_name[found] = _hash_names(nbi["op_name"].to_numpy()[src], hashes)
        op_type[found] = _hash_names(nbi["op_type"].to_numpy()[src], hashes)
        ge_type[found] = _ge_names(nbi["task_type"].to_numpy()[src])
        bd = nbi["block_dim"].to_numpy()[src].astype(np.int64)
        block[found] = bd & 0xFFFF
        mix[found] = (bd & 0xFFFF) * (bd >> 16)
        flag[found] = np.where(nbi["op_flag"].to_numpy()[src] != 0, "YES", "NO")
        state[found] = np.where(nbi["aging"].to_numpy()[src], "dynamic", "static")
        has_info = found
    kernel = sel["kernel"].to_numpy()
    type_name = sel["type_name"].to_numpy()
    no_info = ~has_info
    op_name[no_info] = kernel[no_info]
    op_type[no_info] = kernel[no_info]
    ge_type[no_info] = _map_text(type_name[no_info], lambda t: KERNEL_FALLBACK.get(t, "N/A"))
    ext = sel["data_len"].to_numpy() == 40
    block = np.where(ext, sel["num_blocks"].to_numpy().astype(np.int64), block)
    mix = np.where(ext, sel["num_blocks"].to_numpy().astype(np.int64) * sel["ratio"].to_numpy().astype(np.int64), mix)
    text_row = np.zeros(n, dtype=np.int64)
    if not tensors.empty:
        src = _first_under(tensors["conn"].to_numpy(), parents)
        found = (src >= 0) & has_info
        text_row[found] = tensors["text"].to_numpy()[src[found]]
    ctx_id = np.where(_where_text(type_name, lambda t: t in MIX_TYPES), 0, INVALID_CTX).astype(np.int64)
    if not ctx.empty:
        src = _first_under(ctx["conn"].to_numpy(), parents)
        found = (src >= 0) & has_info
        ctx_id[found] = ctx["ctx"].to_numpy()[src[found]]
    out = _frame({
        "track": sel.index.to_numpy(), "device_id": sel["device_id"].to_numpy().astype(np.int64),
        "stream_id": sel["stream_id"].to_numpy(), "task_id": sel["task_low"].to_numpy(),
        "batch": sel["batch"].to_numpy(), "ctx": ctx_id, "op_name": op_name, "op_type": op_type,
        "ge_type": ge_type, "block": block, "mix": mix, "hf32": flag, "state": state, "tensors": text_row,
        "model_id": sel["model_id"].to_numpy(), "request_id": sel["request_id"].to_numpy(),
        "conn": sel["conn"].to_numpy(),
    })
    return out


def _first_under(api: np.ndarray, parents: np.ndarray) -> np.ndarray:
    """For each parent API, the first record attached to it (its position in `api`), or -1."""
    rec = np.flatnonzero(api >= 0)
    if len(rec) == 0:
        return np.full(len(parents), -1, dtype=np.int64)
    keys, first = np.unique(api[rec], return_index=True)
    pos = np.clip(np.searchsorted(keys, parents), 0, len(keys) - 1)
    return np.where(keys[pos] == parents, rec[first[pos]], -1)


def _frame(cols: Dict[str, Any]) -> pd.DataFrame:
    """A frame over the arrays themselves: pandas would otherwise copy them into one 2-D block
    per dtype (a second copy of every column, for the time of the copy at least)."""
    return pd.DataFrame(cols, copy=False)


def _texts(shape, value: str) -> np.ndarray:
    """An object array filled with one shared str (np.full would make a new str per cell)."""
    out = np.empty(shape, dtype=object)
    out.fill(value)
    return out


# ------------------------------------------------------------------------------------------------
# Device side

@dataclass
class DeviceData:
    device_id: int
    tasks: Runs              # TASK_COLUMNS, spilled by start (syscnt)
    clock: Clock
    flips: D.Columns = field(default_factory=dict)  # ts_track task-id wrap records
    ctx_pmu: Optional[Runs] = None   # FFTS context PMU records (STARS chips), spilled by end_syscnt
    blk_pmu: Optional[Runs] = None   # FFTS block PMU records (STARS chips, MIX ops), spilled by end_syscnt
    aic_pmu: Optional[D.Columns] = None   # AI Core PMU records (HWTS chips)
    step: Optional[D.Columns] = None      # ts_track step-trace records

    def close(self) -> None:
        for runs in (self.tasks, self.ctx_pmu, self.blk_pmu):
            if runs is not None:
                runs.close()


# a device task: its start and end (syscnt), dev_type (a code: 256 * DEV_TYPE_TABLES index + value)
# and tie, which orders the tasks of one start, stream and task id (ACSQ tasks, then FFTS+ subtasks
# by subtask and thread id)
TASK_COLUMNS = ("stream_id", "task_id", "ctx", "start", "end", "dev_type", "tie")
DEV_TYPE_TABLES = (D.SQE_TYPES, D.SUBTASK_TYPES, D.HWTS_TASK_TYPES)
TIE_FFTS = 1 << 32
SAMPLE_EVERY = 64  # one key in this many kept in memory to place windows' edges


def _dev_type_names(codes: np.ndarray) -> np.ndarray:
    """The device task type names of dev_type codes."""
    tables = [_code_text(t) for t in DEV_TYPE_TABLES]
    return _per_distinct(codes, lambda c: tables[int(c) >> 8](int(c) & 0xFF))


def _spill_stream(stream: RecordStream, convert: Callable[[np.ndarray, np.ndarray], Any],
                  runs: Sequence[Optional[Runs]]) -> None:
    """convert(records, offsets) of each chunk of `stream` (a dict of columns, or a tuple of
    them: each into the runs at its place, None dropping it)."""
    for arr, offsets in stream.chunks():
        got = convert(arr, offsets)
        for r, cols in zip(runs, got if isinstance(got, tuple) else (got,)):
            if r is not None:
                r.add(cols)
        del got, arr


def _pair_into(runs: Runs, keys: Sequence[str], what: str, stream: RecordStream, tasks: Runs,
               make: Callable[[Columns, np.ndarray, np.ndarray], Columns], diag: Diagnostics) -> None:
    """Pair the start and end records of `runs` a window at a time (pairing.Pairing), each
    window's tasks (`make(records, starts, ends)`) into `tasks`; warn of the records left
    unpaired."""
    pairing = Pairing(runs, keys)
    for cols, s, e in pairing.windows():
        tasks.add(make(cols, s, e))
    for text in pairing.warnings(what, lambda off: locate(stream.pieces, off)):
        diag.warn(text)


def load_device(rd: ResultDir, coll: Collection, chip: Chip, diag: Diagnostics, scratch: str) -> Optional[DeviceData]:
    """A device's tasks (start and end records paired, spilled to `scratch` by start), its PMU
    records (on STARS chips spilled by end) and ts_track records."""
    files = data_files(rd)
    if not files:
        diag.warn(f"{rd.data_dir}: no raw data files; expected e.g. stars_soc.data.{rd.device_id}.slice_0 "
                  f"or hwts.data.{rd.device_id}.slice_0")
    try:
        clock = device_clock_of(rd, coll)
    except MissingControlFile as exc:
        diag.warn(f"{exc}; device {rd.device_id} is skipped")
        return None
    name = f"device{rd.device_id}"
    dev = DeviceData(device_id=rd.device_id, clock=clock, tasks=Runs(scratch, f"{name}.task", "start", SAMPLE_EVERY))
    logs: List[Runs] = []
    try:
        if ("ts_track.data", "") in files:
            buf, pieces = read_stream(files[("ts_track.data", "")])
            ts, issues = D.decode_ts_track(buf, pieces)
            diag.extend(issues)
            dev.flips, dev.step = ts["flip"], ts["step"]
        if chip.family == "stars":
            if ("stars_soc.data", "") in files:
                stream = RecordStream(R.STARS_LOG, files[("stars_soc.data", "")], *D.STARS_VALID)
                logs = [Runs(scratch, f"{name}.{kind}", "syscnt", SAMPLE_EVERY) for kind in ("acsq", "ffts")]
                _spill_stream(stream, D.stars_columns, logs)
                diag.extend(stream.issues)
                _pair_into(logs[0], ("stream_id", "task_id"), "ACSQ task", stream, dev.tasks, lambda c, s, e: {
                    "stream_id": c["stream_id"][s], "task_id": c["task_id"][s],
                    "ctx": np.full(len(s), INVALID_CTX, dtype=np.int64), "start": c["syscnt"][s],
                    "end": c["syscnt"][e], "dev_type": c["sqe_type"][s].astype(np.int16),
                    "tie": np.zeros(len(s), dtype=np.int64)}, diag)
                _pair_into(logs[1], ("stream_id", "task_id", "subtask_id", "thread_id"), "FFTS+ subtask", stream,
                           dev.tasks, lambda c, s, e: {
                               "stream_id": c["stream_id"][s], "task_id": c["task_id"][s],
                               "ctx": np.where(c["ffts_type"][s] == D.FFTS_PLUS, c["subtask_id"][s], INVALID_CTX),
                               "start": c["syscnt"][s], "end": c["syscnt"][e],
                               "dev_type": 256 + c["subtask_type"][s].astype(np.int16),
                               "tie": TIE_FFTS | (c["subtask_id"][s] << 16) | c["thread_id"][s].astype(np.int64)},
                           diag)
            if ("ffts_profile.data", "") in files:
                stream = RecordStream(R.FFTS_PMU, files[("ffts_profile.data", "")], *D.FFTS_VALID)
                dev.ctx_pmu = Runs(scratch, f"{name}.ctx_pmu", "end_syscnt")
                dev.blk_pmu = Runs(scratch, f"{name}.blk_pmu", "end_syscnt")
                dropped = [0]

                def convert(arr: np.ndarray, offsets: np.ndarray) -> Tuple[Columns, Columns]:
                    ctx, blk, over = D.ffts_columns(arr, offsets)
                    dropped[0] += int(over["overflow"].sum())
                    return ctx, blk
                _spill_stream(stream, convert, (dev.ctx_pmu, dev.blk_pmu))
                diag.extend(D.overflow_issues(stream.issues, dropped[0], stream.pieces))
        else:
            if ("hwts.data", "") in files:
                stream = RecordStream(R.HWTS_LOG, files[("hwts.data", "")], *D.HWTS_VALID)
                logs = [Runs(scratch, f"{name}.hwts", "syscnt", SAMPLE_EVERY)]
                _spill_stream(stream, D.hwts_columns, logs)
                diag.extend(stream.issues)
                _pair_into(logs[0], ("stream_id", "task_id"), "HWTS task", stream, dev.tasks, lambda c, s, e: {
                    "stream_id": c["stream_id"][s], "task_id": c["task_id"][s],
                    "ctx": np.full(len(s), INVALID_CTX, dtype=np.int64), "start": c["syscnt"][s],
                    "end": c["syscnt"][e], "dev_type": 512 + c["task_type"][e].astype(np.int16),
                    "tie": np.zeros(len(s), dtype=np.int64)}, diag)
            if ("aicore.data", "") in files:
                dev.aic_pmu, issues = D.read_aic_pmu(files[("aicore.data", "")])
                diag.extend(issues)
    except BaseException:
        dev.close()
        raise
    finally:
        for runs in logs:
            runs.close()
    return dev


def _flip_batches(stream: np.ndarray, start: np.ndarray, flips: D.Columns) -> np.ndarray:
    """Batch id of each device task: flips (task-id wrap records) on its stream at or before its start."""
    batch = np.zeros(len(start), dtype=np.int64)
    if not len(flips.get("syscnt", ())):
        return batch
    for s in np.unique(flips["stream_id"]):
        f = np.sort(flips["syscnt"][flips["stream_id"] == s])
        m = np.flatnonzero(stream == s)
        batch[m] = np.searchsorted(f, start[m], side="right")
    return batch


def device_tasks(dev: DeviceData, cols: Optional[Columns]) -> pd.DataFrame:
    """A frame of device tasks read from `dev.tasks` (a window, or all of them), in task order
    (start, stream, task, tie), with their batch, type name and times in ns."""
    if cols is None:
        cols = {k: np.zeros(0, dtype=np.int64) for k in TASK_COLUMNS}
    order = np.lexsort((cols["tie"], cols["task_id"], cols["stream_id"], cols["start"]))
    t = {k: cols[k][order].astype(np.int64) for k in ("stream_id", "task_id", "ctx", "start", "end")}
    dev_type = _dev_type_names(cols["dev_type"][order])
    del cols, order
    return _frame({**t, "dev_type": dev_type, "batch": _flip_batches(t["stream_id"], t["start"], dev.flips),
                   "start_ns": dev.clock.to_ns(t["start"]), "end_ns": dev.clock.to_ns(t["end"])})


def _pmu_records(runs: Optional[Runs]) -> Optional[Columns]:
    """The PMU records of `runs`, in stream order."""
    cols = runs.whole() if runs is not None else None
    if cols is None:
        return None
    order = np.argsort(cols["offset"], kind="stable")
    return {k: v[order] for k, v in cols.items()}


# ------------------------------------------------------------------------------------------------
# Host task <-> device task

def match_tasks(host: Optional[HostData], dev: DeviceData, dev_tasks: pd.DataFrame) -> pd.DataFrame:
    """Each device task with the host task it ran for: same stream, task id and context, and the
    latest host record issued before it (static-graph tasks recorded once at load pair with
    every execution; reused task ids pair with their own launch). Adds host columns; device-only
    tasks keep `track` = -1."""
    tasks = dev_tasks
    tasks["track"] = -1
    if host is None or host.tracks.empty or tasks.empty:
        return tasks
    tracks = host.tracks  # its index is the track's position
    on_dev = np.flatnonzero(tracks["device_id"].to_numpy() == dev.device_id)
    if not len(on_dev):
        return tasks
    # context keys: the default, the op's context id (MIX ops run as FFTS+ context 0)
    ctx_of = np.full(len(on_dev), INVALID_CTX, dtype=np.int64)
    if not host.compute.empty:
        ctx_all = np.full(len(tracks), INVALID_CTX, dtype=np.int64)
        ctx_all[host.compute["track"].to_numpy()] = host.compute["ctx"].to_numpy()
        ctx_of = ctx_all[on_dev]
        del ctx_all
    mix = _where_text(tracks["type_name"].to_numpy()[on_dev], lambda t: t in MIX_TYPES)
    has_ctx = ctx_of != INVALID_CTX
    also_zero = mix & (ctx_of != 0)
    key_track = np.concatenate([on_dev, on_dev[has_ctx], on_dev[also_zero]])
    key_ctx = np.concatenate([np.full(len(on_dev), INVALID_CTX, dtype=np.int64), ctx_of[has_ctx],
                              np.zeros(int(also_zero.sum()), dtype=np.int64)])
    del ctx_of, mix, has_ctx, also_zero, on_dev
    code = key_codes([
        np.concatenate([tracks["stream_id"].to_numpy(np.int64)[key_track], tasks["stream_id"].to_numpy(np.int64)]),
        np.concatenate([tracks["task_low"].to_numpy(np.int64)[key_track], tasks["task_id"].to_numpy(np.int64)]),
        np.concatenate([key_ctx, tasks["ctx"].to_numpy(np.int64)])])
    del key_ctx
    n_keys = len(key_track)
    # the tasks by start (stably), the keys by the time of their track (stably)
    start = tasks["start_ns"].to_numpy()
    rows = np.arange(len(tasks)) if ascending(start) else np.argsort(start, kind="stable")
    left = _frame({"start_ns": start[rows], "k": code[n_keys:][rows]})
    ts = tracks["ts_ns"].to_numpy()[key_track]
    by_ts = np.argsort(ts, kind="stable")
    right = _frame({"k": code[:n_keys][by_ts], "ts": ts[by_ts], "htrack": key_track[by_ts]})
    del code, ts, by_ts, key_track
    found = pd.merge_asof(left, right, left_on="start_ns", right_on="ts", by="k",
                          direction="backward")["htrack"].to_numpy()
    missing = np.isnan(found)
    if missing.any():
        found[missing] = pd.merge_asof(left[missing], right, left_on="start_ns", right_on="ts", by="k",
                                       direction="forward")["htrack"].to_numpy()
    track = np.full(len(tasks), -1, dtype=np.int64)
    hit = ~np.isnan(found)
    track[rows[hit]] = found[hit].astype(np.int64)
    tasks["track"] = track
    return tasks


# ------------------------------------------------------------------------------------------------
# PMU

def _group_of(rd: ResultDir, core: str) -> Tuple[str, List[int]]:
    if core == "aic":
        return str(rd.sample.get("ai_core_metrics", "")), metrics.parse_events(rd.sample.get("ai_core_profiling_events"))
    return str(rd.sample.get("aiv_metrics", "")), metrics.parse_events(rd.sample.get("aiv_profiling_events"))


PMU_ROWS = 1 << 20  # task rows whose metrics are computed (and written) at a time


@dataclass
class PmuRows:
    """The task rows (of one device, ascending) that PMU records attach to, the metric columns,
    and `metrics(lo, hi)`: the metric values of rows[lo:hi]."""
    rows: np.ndarray
    columns: List[str]
    metrics: Callable[[int, int], Dict[str, np.ndarray]]


def pmu_columns(rd: ResultDir, prefixed: bool) -> List[str]:
    """The metric columns of a device's PMU: aic_ and aiv_ prefixed (STARS chips), or the AI
    Core's unprefixed (HWTS chips)."""
    def names(core: str) -> List[str]:
        group, events = _group_of(rd, core)
        return metrics.metric_columns(events, group)
    if not prefixed:
        return names("aic")
    return [f"{core}_{name}" for core in ("aic", "aiv") for name in names(core)]


def pmu_stars(rd: ResultDir, dev: DeviceData, tasks: pd.DataFrame, block: np.ndarray, mix: np.ndarray,
              task_kind: np.ndarray, diag: Diagnostics) -> Optional[PmuRows]:
    """aic_*/aiv_* metrics per task row (910B family): the context PMU record whose end lies in
    the task, plus for MIX ops the other core's block PMU records, summed."""
    if not _has_pmu(dev, True) or tasks.empty:
        return None
    ctx = _pmu_records(dev.ctx_pmu)
    assert ctx is not None
    info = rd.device_info()
    freq = float(info.get("aic_frequency", 0) or 0) * 1e6
    cores = {"aic": int(info.get("ai_core_num", 0) or 0), "aiv": int(info.get("aiv_num", 0) or 0)}
    pmu_ctx = np.where(ctx["ffts_type"] == D.FFTS_PLUS, ctx["subtask_id"], INVALID_CTX)
    hit = _attach_by_time(tasks, ctx["stream_id"], ctx["task_id"], pmu_ctx, ctx["end_syscnt"])
    if (hit < 0).any():
        diag.warn(f"{rd.data_dir}/ffts_profile.data.{rd.device_id}.*: {int((hit < 0).sum())} context PMU records "
                  f"match no device task; dropped")
    keep = hit >= 0
    rows = hit[keep]
    # first record per task wins
    rows, first = np.unique(rows, return_index=True)
    src = np.flatnonzero(keep)[first]
    del hit, keep, first, pmu_ctx
    is_aic = (ctx["ffts_type"][src] == 0) | ((ctx["ffts_type"][src] == D.FFTS_PLUS) &
                                              np.isin(ctx["subtask_type"][src], (0, 6))) | (ctx["ffts_type"][src] == 5)
    kind = task_kind[rows]
    is_mix = _where_text(kind, lambda t: t in MIX_TYPES)
    # the other core's block records of MIX ops, summed per op (a row among the MIX rows)
    mix_rows = np.flatnonzero(is_mix)
    blk_sum_cyc = np.zeros(len(mix_rows), np.int64)
    blk_sum = np.zeros((len(mix_rows), 8), np.int64)
    blk = _pmu_records(dev.blk_pmu)
    if blk is not None and len(blk["end_syscnt"]) and len(mix_rows):
        bctx = np.where(blk["ffts_type"] == D.FFTS_PLUS, blk["subtask_id"], INVALID_CTX)
        bhit = _attach_by_time(tasks, blk["stream_id"], blk["task_id"], bctx, blk["end_syscnt"])
        mixed = rows[mix_rows]
        pos = np.searchsorted(mixed, bhit)
        ok = (bhit >= 0) & (pos < len(mixed))
        ok[ok] &= mixed[pos[ok]] == bhit[ok]
        # only the other core's blocks count: AIV blocks for MIX_AIC, AIC blocks for MIX_AIV
        main_aic = _where_text(kind[mix_rows], lambda t: t == "KERNEL_MIX_AIC")[np.clip(pos, 0, len(mixed) - 1)]
        ok &= np.where(main_aic, blk["core_type"] == 1, blk["core_type"] == 0)
        np.add.at(blk_sum_cyc, pos[ok], blk["total_cycle"][ok])
        np.add.at(blk_sum, pos[ok], blk["pmu"][ok])
    del kind
    cycles, counters = ctx["total_cycle"][src], ctx["pmu"][src]
    groups = {core: _group_of(rd, core) for core in ("aic", "aiv")}

    def values(lo: int, hi: int) -> Dict[str, np.ndarray]:
        out: Dict[str, np.ndarray] = {}
        m = hi - lo
        mixed = np.flatnonzero(is_mix[lo:hi])
        at_mix = np.searchsorted(mix_rows, lo + mixed)  # their places among the MIX rows
        freq_arr = np.full(m, freq)
        for core in ("aic", "aiv"):
            group, events = groups[core]
            main = is_aic[lo:hi] if core == "aic" else ~is_aic[lo:hi]
            # main core: its context record; MIX secondary core: block sums; otherwise zeros
            cyc = np.zeros(m, np.int64)
            cnt = np.zeros((m, 8), np.int64)
            b = np.zeros(m, np.int64)
            cyc[main] = cycles[lo:hi][main]
            cnt[main] = counters[lo:hi][main]
            b[main] = block[rows[lo:hi][main]]
            second = ~main[mixed]
            cyc[mixed[second]] = blk_sum_cyc[at_mix[second]]
            cnt[mixed[second]] = blk_sum[at_mix[second]]
            b[mixed[second]] = mix[rows[lo + mixed[second]]]
            got = metrics.compute(events, group, cyc, cnt, b, cores[core], freq_arr)
            for name in metrics.metric_columns(events, group):
                out[f"{core}_{name}"] = got[name]
        return out
    return PmuRows(rows, pmu_columns(rd, True), values)


def _attach_by_time(tasks: pd.DataFrame, stream: np.ndarray, task: np.ndarray, ctx: np.ndarray,
                    t: np.ndarray) -> np.ndarray:
    """Row of the task with the same (stream, task, context) whose [start, end] holds time t, or -1."""
    n = len(t)
    if n == 0:
        return np.zeros(0, np.int64)
    code = key_codes([np.concatenate([tasks[c].to_numpy(np.int64), probe.astype(np.int64)])
                      for c, probe in (("stream_id", stream), ("task_id", task), ("ctx", ctx))])
    right = _frame({"k": code[: len(tasks)], "start": tasks["start"].to_numpy(),
                    "end": tasks["end"].to_numpy(), "row": np.arange(len(tasks))}).sort_values("start")
    left = _frame({"t": t.astype(np.int64), "i": np.arange(n), "k": code[len(tasks):]}).sort_values("t")
    m = pd.merge_asof(left, right, left_on="t", right_on="start", by="k", direction="backward")
    ok = m["row"].notna().to_numpy() & (m["t"].to_numpy() <= m["end"].fillna(-1).to_numpy())
    out = np.full(n, -1, dtype=np.int64)
    out[m["i"].to_numpy()[ok]] = m["row"].to_numpy()[ok].astype(np.int64)
    return out


def pmu_hwts(rd: ResultDir, dev: DeviceData, tasks: pd.DataFrame, block: np.ndarray,
             diag: Diagnostics) -> Optional[PmuRows]:
    """Unprefixed metrics per task row (HWTS chips): the n-th PMU record of a (stream, task) goes to
    the n-th execution of that task in start order."""
    pm = dev.aic_pmu
    if not _has_pmu(dev, False) or tasks.empty:
        return None
    info = rd.device_info()
    freq = float(info.get("aic_frequency", 0) or 0) * 1e6
    cores = int(info.get("ai_core_num", 0) or 0)
    t = tasks[["stream_id", "task_id"]].assign(row=np.arange(len(tasks)), start=tasks["start"].to_numpy())
    t = t.sort_values("start", kind="stable")
    t["n"] = t.groupby(["stream_id", "task_id"]).cumcount()
    p = _frame({"stream_id": pm["stream_id"], "task_id": pm["task_id"], "i": np.arange(len(pm["task_id"]))})
    p["n"] = p.groupby(["stream_id", "task_id"]).cumcount()
    m = p.merge(t, on=["stream_id", "task_id", "n"], how="left")
    lost = m["row"].isna()
    if lost.any():
        diag.warn(f"{rd.data_dir}/aicore.data.{rd.device_id}.*: {int(lost.sum())} PMU records match no task; dropped")
    m = m[~lost].sort_values("row", kind="stable")
    rows = m["row"].to_numpy().astype(np.int64)
    src = m["i"].to_numpy()
    del t, p, m
    cycles, counters = pm["total_cycle"], pm["pmu"]
    group, events = _group_of(rd, "aic")

    def values(lo: int, hi: int) -> Dict[str, np.ndarray]:
        got = metrics.compute(events, group, cycles[src[lo:hi]], counters[src[lo:hi]], block[rows[lo:hi]], cores,
                              np.full(hi - lo, freq))
        return {name: got[name] for name in metrics.metric_columns(events, group)}
    return PmuRows(rows, pmu_columns(rd, False), values)


# ------------------------------------------------------------------------------------------------
# Tables

class StringPool:
    """Strings to integer ids, first seen first numbered (the unified DB's STRING_IDS)."""

    def __init__(self, initial: Sequence[str] = ()) -> None:
        self.ids: Dict[str, int] = {}
        for s in initial:
            self.id(s)

    def id(self, s: str) -> int:
        got = self.ids.get(s)
        if got is None:
            got = self.ids[s] = len(self.ids)
        return got

    def ids_of(self, values: Union[np.ndarray, "CodedTexts"]) -> np.ndarray:
        """Ids of an array of strings, or of coded texts (vectorized over distinct values); new
        strings are numbered in the order of their first row."""
        codes, uniq = text_codes(values)
        return np.array([self.id(str(u)) for u in uniq], dtype=np.int64)[codes]

    def frame(self) -> pd.DataFrame:
        return _frame({"id": list(self.ids.values()), "value": list(self.ids.keys())})


def union_intervals(start: np.ndarray, end: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Merge intervals (touching ones merge): sorted disjoint (start, end)."""
    if len(start) == 0:
        return start, end
    order = np.lexsort((end, start))
    s, e = start[order], end[order]
    run_end = np.maximum.accumulate(e)
    new = np.ones(len(s), dtype=bool)
    new[1:] = s[1:] > run_end[:-1]
    group = np.cumsum(new) - 1
    out_s = s[new]
    out_e = np.zeros(len(out_s), dtype=e.dtype)
    np.maximum.at(out_e, group, e)
    return out_s, out_e


def interval_gaps(lo: int, hi: int, start: np.ndarray, end: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """[lo, hi] minus the union of the (sorted, disjoint) intervals."""
    bounds_s = np.concatenate([[lo], end])
    bounds_e = np.concatenate([start, [hi]])
    bounds_s = np.maximum(bounds_s, lo)
    bounds_e = np.minimum(bounds_e, hi)
    keep = bounds_e > bounds_s
    return bounds_s[keep], bounds_e[keep]


def overlap_rows(task: pd.DataFrame, comp_ok: np.ndarray) -> pd.DataFrame:
    """OVERLAP_ANALYSIS: per device, merged compute intervals (type 0) and the free gaps (type 3)
    inside the device's window (non-kernel tasks and compute intervals)."""
    rows: List[pd.DataFrame] = []
    for dev_id in np.sort(task["deviceId"].unique()):
        t = task[task["deviceId"] == dev_id]
        is_comp = isin(t["globalTaskId"].to_numpy(), comp_ok)
        cs, ce = union_intervals(t["startNs"].to_numpy()[is_comp], t["endNs"].to_numpy()[is_comp])
        other = ~_where_text(t["taskTypeName"].to_numpy(), lambda n: n in COMPUTE_HOST_TYPES)
        starts = np.concatenate([t["startNs"].to_numpy()[other], cs])
        ends = np.concatenate([t["endNs"].to_numpy()[other], ce])
        valid = ce > cs
        rows.append(_frame({"deviceId": dev_id, "startNs": cs[valid], "endNs": ce[valid], "type": 0}))
        if len(starts):
            lo, hi = int(starts.min()), int(ends.max())
            if hi > lo:
                fs, fe = interval_gaps(lo, hi, cs, ce)
                rows.append(_frame({"deviceId": dev_id, "startNs": fs, "endNs": fe, "type": 3}))
    if not rows:
        return pd.DataFrame()
    out = pd.concat(rows, ignore_index=True)
    out.insert(0, "id", np.arange(len(out), dtype=np.int64))
    return out


GID_KEYS = ["device_id", "stream_id", "task_id", "ctx", "batch"]


def global_ids(first: pd.DataFrame, then: pd.DataFrame) -> Tuple[np.ndarray, np.ndarray]:
    """globalTaskIds of two frames of GID_KEYS columns (either may be empty): rows sharing (device,
    stream, task, context, batch) share an id, and `first`'s keys are numbered first, in row order
    (host compute tasks before their device executions, or a legacy job's ops before its tasks)."""
    frames = [f for f in (first, then) if not f.empty]
    keys = [np.concatenate([f[k].to_numpy(np.int64) for f in frames] or [np.zeros(0, np.int64)]) for k in GID_KEYS]
    gid = numbered_by_first_row(keys)
    n = 0 if first.empty else len(first)
    return gid[:n], gid[n:]


def _write_host_tables(host: HostData, strings: StringPool, put: Sink) -> np.ndarray:
    """Write COMPUTE_TASK_INFO, then keep of the compute tasks only their keys and block counts.
    Returns the globalTaskIds that count as compute in OVERLAP_ANALYSIS (AI CPU and AIV kernels
    do not)."""
    c = host.compute
    if c.empty:
        return np.zeros(0, np.int64)
    gid = numbered_by_first_row([c[k].to_numpy(np.int64) for k in GID_KEYS])  # as global_ids numbers them
    first = first_seen(gid)
    host.compute = c[["track"] + GID_KEYS + ["block", "mix"]]
    c = c[first]
    gid = gid[first]
    n = len(c)
    # tensor texts: ids made per distinct row of the tensor table, in the order the rows first
    # appear (so that STRING_IDS numbers them as it would the texts themselves)
    rows, distinct = pd.factorize(c["tensors"].to_numpy())

    def tensor_ids(column: int) -> np.ndarray:
        return strings.ids_of(host.tensor_table[distinct, column])[rows]

    put("COMPUTE_TASK_INFO", _frame({
        "name": strings.ids_of(c["op_name"].to_numpy()), "globalTaskId": gid, "blockNum": c["block"].to_numpy(),
        "mixBlockNum": c["mix"].to_numpy(), "taskType": strings.ids_of(c["ge_type"].to_numpy()),
        "opType": strings.ids_of(c["op_type"].to_numpy()),
        "inputFormats": tensor_ids(2), "inputDataTypes": tensor_ids(1), "inputShapes": tensor_ids(0),
        "outputFormats": tensor_ids(5), "outputDataTypes": tensor_ids(4), "outputShapes": tensor_ids(3),
        "attrInfo": np.full(n, strings.id("")), "opState": strings.ids_of(c["state"].to_numpy()),
        "hf32Eligible": strings.ids_of(c["hf32"].to_numpy()),
        "gridDim": np.full(n, strings.id("N/A")), "blockDim": np.full(n, strings.id("N/A"))}))
    skip = _where_text(c["op_name"].to_numpy(), lambda t: t.endswith(("AicpuKernel", "AivKernel")))
    return gid[~skip]


def _load_device_job(rd: ResultDir, coll: Collection, chip: Chip, scratch: str
                     ) -> Tuple[Optional[DeviceData], List[str]]:
    local = Diagnostics()
    return load_device(rd, coll, chip, local, scratch), local.warnings


SAMPLE_KEYS = ("ai_core_metrics", "aiv_metrics", "ai_core_profiling_events", "aiv_profiling_events")


def device_info_rows(rd: ResultDir, info: List[Tuple[int, str, str]], sample_keys: Sequence[str] = SAMPLE_KEYS
                     ) -> None:
    """KIT_INFO rows of a result directory: its folder, pid, the sample settings named and the
    device's counts and frequencies."""
    info.append((rd.device_id, "dir", rd.name))
    pid = str(rd.info.get("pid", "")).strip()
    if pid.isdigit():
        info.append((rd.device_id, "pid", pid))
    for key in sample_keys:
        if key in rd.sample:
            info.append((rd.device_id, key, str(rd.sample[key])))
    di = rd.device_info()
    for key in ("aic_frequency", "ai_core_num", "aiv_num", "hwts_frequency"):
        if key in di:
            info.append((rd.device_id, key, str(di[key])))


def build(coll: Collection, diag: Diagnostics, put: Sink, jobs: int = 1, scratch: str = "") -> List[Tuple[int, str, str]]:
    """Parse and associate a whole collection, handing each store table to `put` as soon as it is
    final (and dropping it then; large tables come in parts). Returns the KIT_INFO rows. With
    jobs > 1 the devices' raw data is decoded in forked workers (one a device, at most `jobs`)
    while this process reads the host's. `scratch`: an empty folder for spilled columns (a
    temporary one by default)."""
    if not scratch:
        with tempfile.TemporaryDirectory(prefix="msprof_kit-") as folder:
            return build(coll, diag, put, jobs, folder)
    chip = coll.chip()
    info: List[Tuple[int, str, str]] = []
    loaders: List[Forked] = []
    strings = StringPool(["release", "allocate"])
    pooled = len(coll.devices) > jobs  # one worker running a pool of `jobs`, else a worker a device
    if jobs > 1 and coll.devices and can_fork():
        loads = [functools.partial(_load_device_job, rd, coll, chip, scratch) for rd in coll.devices]
        loaders = [Forked(functools.partial(forked.each, loads, jobs, "device"), "devices", daemon=False)] \
            if pooled else [Forked(fn, f"device {rd.device_id}") for fn, rd in zip(loads, coll.devices)]
    try:
        host = load_host(coll.host, coll, diag, strings, put, jobs, scratch) if coll.host is not None else None
    except BaseException:
        for loader in loaders:
            loader.cancel()
        raise
    if coll.host is None:
        diag.warn(f"{coll.path}: no host/ directory; device tasks are kept without op names")
    # the host-only tables go out before the devices load, leaving only what the tasks need
    overlap_gids = _write_host_tables(host, strings, put) if host is not None else np.zeros(0, np.int64)
    memory.give_back()

    devices: List[Tuple[ResultDir, DeviceData]] = []
    loaded = None
    if loaders:
        try:
            results = [loader.result() for loader in loaders]
        finally:
            for loader in loaders:
                loader.cancel()
        loaded = results[0] if pooled else results
    for i, rd in enumerate(coll.devices):
        if loaded is not None:
            dev, warnings = loaded[i]
            loaded[i] = None
            diag.extend(warnings)
        else:
            dev = load_device(rd, coll, chip, diag, scratch)
        memory.give_back()
        if dev is not None:
            devices.append((rd, dev))
    if not coll.devices:
        diag.warn(f"{coll.path}: no device_N/ directory; only host APIs and op descriptions are kept")
    if host is None and not devices:
        raise NoData("neither host nor device data could be read; expected host/data or device_N/data "
                     "with raw slices", path=coll.path)

    try:
        _tasks_and_tables(coll, chip, host, devices, overlap_gids, strings, put, info, diag)
    finally:
        for _, dev in devices:
            dev.close()
    return info


def _tasks_and_tables(coll: Collection, chip: Chip, host: Optional[HostData], devices: List[Tuple[ResultDir, DeviceData]],
                      overlap_gids: np.ndarray, strings: StringPool, put: Sink, info: List[Tuple[int, str, str]],
                      diag: Diagnostics) -> None:
    """The device tasks matched with the host's, into TASK and the tables that follow it."""
    pid = host.pid if host else 0
    compute = host.compute if host else pd.DataFrame()
    # --- tasks per device, matched with host tracks; the device frames are dropped once matched
    parts = []
    for rd, dev in devices:
        part = match_tasks(host, dev, device_tasks(dev, dev.tasks.whole()))
        part["deviceId"] = dev.device_id
        parts.append(part)
        dev.tasks.close()
    tasks = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    parts.clear()
    tracks = host.tracks if host else pd.DataFrame()
    if not tasks.empty:
        tasks = tasks.sort_values(["deviceId", "start_ns"], kind="stable").reset_index(drop=True)
        matched = tasks["track"].to_numpy() >= 0
        tr_idx = np.clip(tasks["track"].to_numpy(), 0, None)
        tget = (lambda col, default: np.where(matched, tracks[col].to_numpy()[tr_idx], default)) if not tracks.empty \
            else (lambda col, default: np.full(len(tasks), default))
        tasks["host_type"] = np.where(matched, tget("type_name", ""), tasks["dev_type"].to_numpy())
        tasks["conn"] = tget("conn", -1)
        tasks["model_id"] = tget("model_id", NO_MODEL)
        tasks["request_id"] = tget("request_id", -1)
        tasks["hbatch"] = np.where(matched, tget("batch", 0), tasks["batch"].to_numpy())
        tasks["kernel"] = tget("kernel", "")
        tasks["thread"] = tget("thread_id", -1)
        tasks["track_ns"] = tget("ts_ns", -1)
    if host is not None:
        host.tracks = tracks = pd.DataFrame()

    # --- global task ids of the tasks (compute tasks were numbered first, in host order)
    task_keys = tasks[["deviceId", "stream_id", "task_id", "ctx", "hbatch"]].set_axis(GID_KEYS, axis=1) \
        if not tasks.empty else pd.DataFrame(columns=GID_KEYS)
    task_gid = global_ids(compute, task_keys)[1]
    del task_keys

    # --- TASK and its extension
    host_type = tasks["host_type"].to_numpy() if not tasks.empty else np.zeros(0, dtype=object)
    if not tasks.empty:
        put("TASK", _frame({
            "startNs": tasks["start_ns"].to_numpy(), "endNs": tasks["end_ns"].to_numpy(),
            "deviceId": tasks["deviceId"].to_numpy(), "connectionId": tasks["conn"].to_numpy(),
            "globalTaskId": task_gid, "globalPid": pid,
            "taskType": strings.ids_of(host_type), "contextId": tasks["ctx"].to_numpy(),
            "streamId": tasks["stream_id"].to_numpy(), "taskId": tasks["task_id"].to_numpy(),
            "modelId": tasks["model_id"].to_numpy()}))
        put("KIT_TASK", _frame({
            "taskRow": np.arange(len(tasks)), "globalTaskId": task_gid, "batchId": tasks["hbatch"].to_numpy(),
            "requestId": tasks["request_id"].to_numpy(), "deviceTaskType": tasks["dev_type"].to_numpy(),
            "kernelName": tasks["kernel"].to_numpy(), "threadId": tasks["thread"].to_numpy(),
            "matched": (tasks["track"].to_numpy() >= 0).astype(np.int64), "trackNs": tasks["track_ns"].to_numpy()}))
        tasks = tasks[["deviceId", "stream_id", "task_id", "ctx", "start", "end", "start_ns", "end_ns", "track"]]

    # block counts by task row, for the PMU times
    block = mix = np.zeros(len(tasks), np.int64)
    if not tasks.empty and not compute.empty:
        pos = SortedKeys(compute["track"].to_numpy()).find(tasks["track"].to_numpy())
        block = np.where(pos >= 0, compute["block"].to_numpy()[np.clip(pos, 0, None)], 0)
        mix = np.where(pos >= 0, compute["mix"].to_numpy()[np.clip(pos, 0, None)], 0)
        del pos
    if host is not None:
        host.compute = compute = pd.DataFrame()
    # --- PMU per task row, per device in row order (each device's PMU records dropped once used);
    # KIT_TASK_PMU is written PMU_ROWS rows at a time, every part with the columns of every device
    if not tasks.empty:
        _write_pmu(tasks, devices, chip, task_gid, host_type, block, mix, strings, put, info, diag)
    del block, mix

    if not tasks.empty:
        view = _frame({"deviceId": tasks["deviceId"].to_numpy(), "startNs": tasks["start_ns"].to_numpy(),
                       "endNs": tasks["end_ns"].to_numpy(), "globalTaskId": task_gid,
                       "taskTypeName": host_type})
        del tasks
        put("OVERLAP_ANALYSIS", overlap_rows(view, overlap_gids))
        del view
    _small_tables(coll, chip, devices, put, info)
    if host is not None and not host.models.empty:
        put("KIT_MODEL", host.models.rename(columns={"model_id": "modelId"}))
    steps = []
    for rd, dev in devices:
        st = dev.step
        if st is not None and len(st["syscnt"]):
            steps.append(_frame({"deviceId": dev.device_id, "timestampNs": dev.clock.to_ns(st["syscnt"]),
                                 "indexId": st["index_id"], "modelId": st["model_id"],
                                 "streamId": st["stream_id"], "taskId": st["task_id"], "tagId": st["tag_id"]}))
    if steps:
        put("KIT_STEP_TRACE", pd.concat(steps, ignore_index=True))
    put("STRING_IDS", strings.frame())


def _has_pmu(dev: "DeviceData", stars: bool) -> bool:
    """Whether a device has the PMU records its chip's metrics come from."""
    if stars:
        return dev.ctx_pmu is not None and dev.ctx_pmu.rows > 0
    return dev.aic_pmu is not None and len(dev.aic_pmu["task_id"]) > 0


def _write_pmu(tasks: pd.DataFrame, devices: List[Tuple[ResultDir, "DeviceData"]], chip: Chip,
               task_gid: np.ndarray, kinds: np.ndarray, block: np.ndarray, mix: np.ndarray,
               strings: "StringPool", put: Sink, info: List[Tuple[int, str, str]], diag: Diagnostics) -> None:
    """KIT_TASK_PMU (taskRow, globalTaskId, metrics) of the tasks, a device after the other (the
    tasks are by device), PMU_ROWS rows at a time. Columns a device lacks (another metric group)
    are NaN there."""
    stars = chip.family == "stars"
    device_col = tasks["deviceId"].to_numpy()
    with_pmu = [(rd, dev, rows) for rd, dev in devices
                for rows in [np.flatnonzero(device_col == dev.device_id)] if len(rows) and _has_pmu(dev, stars)]
    if not with_pmu:
        return
    columns = list(dict.fromkeys(c for rd, _, _ in with_pmu for c in pmu_columns(rd, stars)))
    if stars:  # only these chips carry TASK_PMU_INFO (and its strings) in the unified DB
        for name in columns:
            strings.id(name)
    for rd, dev, rows in with_pmu:
        sub = tasks.iloc[rows][["stream_id", "task_id", "ctx", "start", "end"]].reset_index(drop=True)
        if stars:
            plan = pmu_stars(rd, dev, sub, block[rows], mix[rows], kinds[rows], diag)
        else:
            plan = pmu_hwts(rd, dev, sub, block[rows], diag)
        dev.close()
        dev.ctx_pmu = dev.blk_pmu = dev.aic_pmu = None
        del sub
        assert plan is not None
        for lo in range(0, max(len(plan.rows), 1), PMU_ROWS):
            hi = min(lo + PMU_ROWS, len(plan.rows))
            got = plan.metrics(lo, hi)
            at = rows[plan.rows[lo:hi]]
            put("KIT_TASK_PMU", {"taskRow": at, "globalTaskId": task_gid[at],
                                 **{c: got[c] if c in got else np.full(hi - lo, np.nan) for c in columns}}, last=False)
            del got
        del plan
    put("KIT_TASK_PMU", None, last=True)
    info.append((-1, "pmu_prefixed", "1" if stars else "0"))


def _small_tables(coll: Collection, chip: Chip, devices: List[Tuple[ResultDir, DeviceData]], put: Sink,
                  info: List[Tuple[int, str, str]]) -> None:
    start, end = session_ns(coll)
    put("SESSION_TIME_INFO", _frame({"startTimeNs": [start], "endTimeNs": [end]}))
    info_dir = coll.host or (coll.devices[0] if coll.devices else None)
    host_name = str(info_dir.info.get("hostname", "")) if info_dir else ""
    host_uid = str(info_dir.info.get("hostUid", "0")) if info_dir else "0"
    put("HOST_INFO", _frame({"hostUid": [host_uid or "0"], "hostName": [host_name]}))
    if coll.devices:
        put("NPU_INFO", _frame({"id": [rd.device_id for rd in coll.devices],
                                "name": [NPU_NAMES.get(chip.platform, "Unknown")] * len(coll.devices)}))
        put("RANK_DEVICE_MAP", _frame({"rankId": [-1] * len(coll.devices),
                                       "deviceId": [rd.device_id for rd in coll.devices]}))
    else:
        put("NPU_INFO", _frame({"id": [-1], "name": ["UNKNOWN"]}))
        put("RANK_DEVICE_MAP", _frame({"rankId": [-1], "deviceId": [-1]}))
    if chip.platform in (5, 7):
        rows = []
        for rd in coll.devices:
            freq = int(str(rd.device_info().get("aic_frequency", "0") or "0").split(".")[0] or 0)
            rows.append((rd.device_id, start, freq, -1))
            if str(rd.end_info.get("collectionTimeEnd", "") or "").isdigit():
                rows.append((rd.device_id, end, freq, -1))
        if rows:
            put("AICORE_FREQ", pd.DataFrame(rows, columns=["deviceId", "timestampNs", "freq", "dieId"]))
    for rd in coll.result_dirs():
        device_info_rows(rd, info, SAMPLE_KEYS + ("ai_core_profiling_mode",))
    info.append((-1, "platform_version", str(chip.platform)))
    info.append((-1, "chip", chip.name))
    info.append((-1, "collection", coll.path))
