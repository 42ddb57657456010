"""From one collection's raw data to the store's tables (host tree, tasks, device logs, PMU).

Each step is a function over column arrays / DataFrames; no per-record Python loop on a path
whose length grows with the number of tasks (loops run over threads, streams or distinct
strings). The rules follow the reference's C++ path (host_formats.md §2.7, device_formats.md
§3, §4 and §7, outputs.md §8), with deliberate improvements documented in docs/store.md:
a bad record costs that record, and device tasks pair with host tasks by time as well as ids.
"""
from __future__ import annotations

import functools
import json
import os
import tempfile
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Set, Tuple, Union

import numpy as np
import pandas as pd

from .parsers import device as D
from .parsers import host as H
from .parsers import records as R
from .pairing import Pairing
from .parsers.stream import decode_stream, locate
from .ingest.streams import RecordStream, compact_stream, read_aic_pmu, read_lines, read_stream
from . import forked, losses, memory, metrics
from .api_windows import ApiWindows
from .spill import Runs
from .arrays import Numbering, first_seen, isin, last_seen, run_ranks
from .codec import CodedTexts
from .ingest.clocks import NS_LIMIT, control_times
from .ingest.info import SAMPLE_KEYS, device_info_rows
from .ingest.tasks import GID_KEYS, StringPool
from .intervals import union_intervals
from .forked import Forked, can_fork
from .errors import BadControlFile, Diagnostics, MissingControlFile, MsprofKitError, NoData
from .layout import FREQ_TEXT, NPU_NAMES, Chip, Collection, ResultDir, data_files
from .progress import label
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


def _control_int(value: int, name: str, path: str, unit: str = "ns", scale: int = 1, signed: bool = False) -> int:
    """`value` of control-file field `name` checked to be within +-NS_LIMIT ns (`scale` `unit`s
    making one ns; not negative unless `signed`)."""
    high = NS_LIMIT // scale
    low = -high if signed else 0
    if not low <= value < high:
        raise BadControlFile(f"{name} {value} is out of range; expected {unit} from {low} to below {high}", path=path)
    return value


def _in_range(clock: Clock, path: str) -> Clock:
    """`clock`, once its sync point is known to fit int64 ns."""
    if not -(1 << 63) <= clock.base_ns < (1 << 63):
        raise BadControlFile(f"the sync point falls at {clock.base_ns} ns, beyond 64 bits; expected "
                             f"cntvct_diff and clock_monotonic_raw to give a time within 64-bit ns", path=path)
    return clock


def wall_offset(rd: ResultDir, coll: Collection) -> int:
    info = _start_info(rd, coll)
    path = rd.files.get("start_info", rd.path)
    try:
        begin, mono = int(str(info["collectionTimeBegin"])), int(str(info.get("clockMonotonicRaw", 0)))
    except (KeyError, ValueError) as exc:
        raise MissingControlFile(f"start_info lacks a numeric collectionTimeBegin / clockMonotonicRaw ({exc})",
                                 path=path) from exc
    return wall_offset_ns(_control_int(begin, "collectionTimeBegin", path, "microseconds since the Unix epoch", 1000),
                          _control_int(mono, "clockMonotonicRaw", path))


def end_info_problem(rd: ResultDir) -> Optional[str]:
    """What keeps a result directory's end_info from giving the collection's end, or None."""
    if "end_info" not in rd.files:
        return f"{rd.path}: no end_info"
    value = rd.end_info.get("collectionTimeEnd")
    text = str(value if value is not None else "")
    if text.isdigit() and int(text) < NS_LIMIT // 1000:
        return None
    return f"{rd.files['end_info']}: collectionTimeEnd is {json.dumps(value)}, not µs since the Unix epoch"


def session_ns(coll: Collection) -> Tuple[int, int]:
    """(start, end) of the collection in local ns, from start_info / end_info."""
    start, end = control_times(coll.result_dirs())
    if start and not end:
        end = start + 30 * 60 * 10 ** 9  # the reference's default when end_info is absent
    return start, end


def missing_host_start(rd: ResultDir, freq: Fraction) -> str:
    """The warning for a host dir without host_start.log whose info.json gives a counter frequency.

    The reference's Python path (common_func/info_conf_reader.py `_check_monotonic_and_cnt`) then
    sets the host frequency to its default (1e9 Hz): host timestamps are read as ns, with no sync
    point, and only start_info's offset added. Its C++ path refuses the collection instead
    (docs/exports.md, "Deliberate differences")."""
    return (f"{os.path.join(rd.path, 'host_start.log')}: missing; as the reference does, host timestamps are taken "
            f"as CLOCK_MONOTONIC_RAW ns (its default host frequency, 1000 MHz, not CPU[0].Frequency {float(freq):g} "
            f"MHz; no sync point), placed on the wall clock by start_info (collectionTimeBegin - clockMonotonicRaw); "
            f"if they are counter ticks, host API times and durations are scaled by {float(freq) / 1000:g} and not "
            f"aligned with the device's")


def host_clock_of(rd: ResultDir, coll: Collection, diag: Diagnostics) -> Clock:
    offset = wall_offset(rd, coll)
    freq = rd.host_freq_mhz()
    if freq is None:
        problem = rd.host_freq_problem()
        if problem is not None:  # the reference's fallback (host_formats.md §3.1), said aloud
            diag.warn(f"{rd.files.get('info.json', rd.path)}: CPU[0].Frequency is {problem}; expected the host "
                      f"counter frequency in MHz ({FREQ_TEXT}), or \"\" when host timestamps are "
                      f"ns; host timestamps are read as ns, as the reference does, so host API times are wrong if "
                      f"they were counter ticks")
        return host_clock(None, 0, 0, 0, offset)
    if "host_start.log" not in rd.files:
        diag.warn(missing_host_start(rd, freq))
        return host_clock(None, 0, 0, 0, offset)
    hs = rd.host_start
    path = rd.files.get("host_start.log", rd.path)
    if "clock_monotonic_raw" not in hs or "cntvct" not in hs:
        raise MissingControlFile("host_start.log lacks clock_monotonic_raw / cntvct; expected both to convert "
                                 "host counter ticks", path=path)
    return _in_range(host_clock(freq, _control_int(hs["clock_monotonic_raw"], "clock_monotonic_raw", path),
                                _control_int(hs["cntvct"], "cntvct", path, "counter ticks"),
                                _control_int(hs.get("cntvct_diff", 0), "cntvct_diff", path, "counter ticks",
                                             signed=True), offset), path)


def device_clock_of(rd: ResultDir, coll: Collection) -> Clock:
    offset = wall_offset(rd, coll)
    mhz = rd.hwts_mhz()
    if mhz <= 0:
        text = str(rd.device_info().get("hwts_frequency", "")).strip()
        raise MissingControlFile(f"DeviceInfo[0].hwts_frequency is {text!r}; expected the system counter "
                                 f"frequency in MHz ({FREQ_TEXT})",
                                 path=rd.files.get("info.json", rd.path))
    if "cntvct" not in rd.dev_start:
        raise MissingControlFile("no dev_start.log.N with cntvct; expected the device counter at the sync point",
                                 path=rd.files.get("dev_start.log", rd.path))
    hs_path = rd.files.get("host_start.log", rd.path)
    if "clock_monotonic_raw" not in rd.host_start:
        raise MissingControlFile("no host_start.log.N with clock_monotonic_raw; expected the host time at the "
                                 "sync point", path=hs_path)
    freq = rd.host_freq_mhz()
    host_mono = _control_int(rd.host_start["clock_monotonic_raw"], "clock_monotonic_raw", hs_path)
    if freq is not None and rd.host_start.get("cntvct_diff"):
        diff = _control_int(rd.host_start["cntvct_diff"], "cntvct_diff", hs_path, "counter ticks", signed=True)
        host_mono += round(Fraction(diff * 1000) / freq)
    dev_cnt = _control_int(rd.dev_start["cntvct"], "cntvct", rd.files.get("dev_start.log", rd.path), "counter ticks")
    return _in_range(device_clock(mhz, dev_cnt, host_mono, offset), hs_path)


# ------------------------------------------------------------------------------------------------
# Host side

@dataclass
class HostData:
    tasks: Optional["HostTasks"]  # the tracks and compute tasks, spilled (None: no task_track)
    models: pd.DataFrame         # model id -> name
    pid: int
    tensor_table: np.ndarray = field(default_factory=lambda: _texts((1, 6), "N/A"))  # compute tensors' rows


def _group_paths(files: Dict[Tuple[str, str], List[str]], kind: str) -> Iterator[Tuple[str, List[str]]]:
    """(group, slice files) of each file class of a host record kind, unaging first."""
    for group in ("unaging", "aging"):
        paths = files.get((kind, group), [])
        if paths:
            yield group, paths


class _Lookups(Dict[str, str]):
    """A dictionary file's table, and the keys looked up in vain (`misses`), for one warning at the
    end of the host's import naming how many there were and what `LOST` says of them."""

    LOST = ""
    WHEN_EMPTY = True  #: warn of misses also when the table has no entry at all

    def __init__(self) -> None:
        super().__init__()
        self.misses: Set[Any] = set()

    def warn_misses(self, where: str, diag: Diagnostics) -> None:
        if self.misses and (self or self.WHEN_EMPTY):
            diag.warn(f"{where}: {len(self.misses)} {self.LOST.format(min(self.misses))}")


class HashTable(_Lookups):
    """hash_dic: the text of each hash id (decimal); misses are ids."""

    LOST = ("hash ids resolve to no entry (e.g. {}); the op names, op types, kernel names or model names they "
            "stand for are left blank")


class TypeTable(_Lookups):
    """type_info_dic: the name of each '<level>_<type>'; misses are those keys (an empty table
    has its own warning, so it adds none)."""

    LOST = "API or task types have no entry (e.g. {}); they are shown as numbers instead of names"
    WHEN_EMPTY = False

    def name(self, key: str, default: str) -> str:
        got = self.get(key)
        if got is None:
            self.misses.add(key)
            return default
        return got


def _type_name(types: Dict[str, str], key: str, default: str) -> str:
    return types.name(key, default) if isinstance(types, TypeTable) else types.get(key, default)


def _dictionary(files: Dict[Tuple[str, str], List[str]], kind: str, typed: bool,
                diag: Diagnostics) -> Dict[str, str]:
    table: Dict[str, str] = TypeTable() if typed else HashTable()
    for group in ("unaging", "aging"):
        for path in files.get((kind, group), []):
            part, issues = H.parse_dictionary_lines(read_lines([path]), typed)
            diag.extend(issues)
            table.update(part)
    paths = [p for _, group in _group_paths(files, kind) for p in group]
    if paths and not table:
        diag.warn(f"{paths[0]}: no entries; {DICTIONARY_LOSS[kind]}")
    return table


Columns = H.Columns
DICTIONARY_LOSS = {"hash_dic": "the op names, op types, kernel names and model names it resolves are left blank",
                   "type_info_dic": "API and task types are shown as numbers instead of names"}


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


def _tensor_job(rd: ResultDir, files, scratch: str) -> Tuple[Runs, np.ndarray, List[str]]:
    local = Diagnostics()
    tensors, table = _tensor_texts(files, local, scratch)
    return tensors, table, local.warnings


def load_host(rd: ResultDir, coll: Collection, diag: Diagnostics, strings: "StringPool", put: Sink,
              jobs: int = 1, scratch: str = "") -> Optional[HostData]:
    """The host's tracks and compute tasks, associated with its APIs; the APIs themselves go to
    `put` (CANN_API, KIT_API) as soon as they are numbered. With jobs > 1 the tensor texts are
    rendered in a forked worker meanwhile."""
    files = data_files(rd, diag)
    if not files:
        diag.warn(f"{rd.data_dir}: no host data files; expected *.api_event.data.slice_N and friends")
        return None
    losses.check_slices(files, diag)
    worker = Forked(functools.partial(_tensor_job, rd, files, scratch), "tensor texts") \
        if jobs > 1 and can_fork() else None

    def tensor_texts() -> Tuple[Runs, np.ndarray]:
        if worker is None:
            return _tensor_texts(files, diag, scratch)
        tensors, table, warnings = worker.result()
        diag.extend(warnings)
        return tensors, table

    try:
        return _load_host(rd, coll, diag, files, tensor_texts, strings, put, scratch)
    finally:
        if worker is not None:
            worker.cancel()


def _load_host(rd: ResultDir, coll: Collection, diag: Diagnostics, files,
               tensor_texts: Callable[[], Tuple[Runs, np.ndarray]], strings: "StringPool",
               put: Sink, scratch: str) -> HostData:
    clock = host_clock_of(rd, coll, diag)
    hashes = _dictionary(files, "hash_dic", False, diag)
    types = _dictionary(files, "type_info_dic", True, diag)
    pid_text = str(rd.info.get("pid", "0"))
    pid = int(pid_text) if pid_text.isdigit() else 0

    paths = files.get(("api_event", "unaging"), []) + files.get(("api_event", "aging"), [])
    name = label(coll.path)
    reading = diag.progress.phase(f"{name}: reading host records")
    try:
        apis = ApiWindows(paths, scratch, diag, rd.data_dir)
    except BaseException:
        reading.close()
        raise
    records = _HostRecords(scratch)
    host_tasks = None
    try:
        with reading:
            _spill_records(files, types, records, diag)
            records.runs["tensor"], tensor_table = tensor_texts()
            models = _model_names(rd, files, hashes, diag)
        if records.runs["track"].rows:
            host_tasks = HostTasks(scratch, types, hashes)
        assoc = _Association(clock, types, hashes, host_tasks.add) if host_tasks is not None else None
        if not apis.count:
            diag.warn(f"{rd.data_dir}: no api_event records; CANN_API and api_statistic stay empty, and without "
                      f"launch APIs the device tasks are named by their kernels only")
        edges = apis.edges()
        records.cut(edges)
        latest = LatestEnds()
        with diag.progress.phase(f"{name}: host APIs", total=int(apis.count), unit="APIs") as phase:
            for w, window in enumerate(apis.windows(edges)):
                n = len(window["begin"])
                tree = _api_window(window, clock, types, hashes, pid, strings, put, latest) if n else None
                del window
                if assoc is not None:
                    assoc.step(tree, records.window(w), int(edges[w]) if w < len(edges) else None)
                phase.advance(n)
        put("CANN_API", None, last=True)
        put("KIT_API", None, last=True)
        if assoc is not None:
            assoc.finish()
        if isinstance(hashes, HashTable):
            where = next((p for _, group in _group_paths(files, "hash_dic") for p in group),
                         f"{rd.data_dir}/*.hash_dic.slice_N")
            hashes.warn_misses(where, diag)
        if isinstance(types, TypeTable):
            where = next((p for _, group in _group_paths(files, "type_info_dic") for p in group),
                         f"{rd.data_dir}/*.type_info_dic.slice_N")
            types.warn_misses(where, diag)
    except BaseException:
        if host_tasks is not None:
            host_tasks.close()
        raise
    finally:
        apis.close()
        records.close()
    return HostData(tasks=host_tasks, models=models, pid=pid, tensor_table=tensor_table)


TREE_COLUMNS = ("thread", "level", "begin", "end", "item", "reserve", "conn")
TRACK_FIELDS = ("thread_id", "timestamp", "device_id", "stream_id", "task_id", "task_type", "kernel_name",
                "data_len", "num_blocks", "ratio")
NBI_FIELDS = ("thread_id", "timestamp", "op_name", "op_type", "task_type", "block_dim", "op_flag")
OP_KINDS = ("nbi", "tensor", "ctx")  # op records, each under the node launch API containing it
SPILL_ROWS = 1 << 20  # tensor_info records grouped into ops at a time


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
    stream order, unaging files first: the order the call tree's rules take the first of. The
    tensor_info ops come spilled already (`_tensor_texts`), as `runs["tensor"]`."""

    def __init__(self, folder: str) -> None:
        self.runs = {kind: Runs(folder, kind, "timestamp") for kind in ("track",) + OP_KINDS if kind != "tensor"}

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
        stream = compact_stream(kind, paths)
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

    def __init__(self, clock: Clock, types: Dict[str, str], hashes: Dict[str, str],
                 emit: Callable[[pd.DataFrame, pd.DataFrame], None]) -> None:
        self.clock, self.types, self.hashes = clock, types, hashes
        self.emit = emit  # takes the tracks done (indexed by position, in position order) and their compute tasks
        self.last: Optional[Columns] = None
        self.waiting: Dict[str, Optional[pd.DataFrame]] = dict.fromkeys(("track",) + OP_KINDS)

    def step(self, tree: Optional[Columns], recs: Dict[str, Optional[Columns]], next_edge: Optional[int]) -> None:
        """One window: its tree APIs (None: none) and records; `next_edge` the next window's first
        begin (None after the last window)."""
        parts = [c for c in (self.last, tree) if c is not None]
        cand = {k: np.concatenate([c[k] for c in parts]) if parts else np.zeros(0, np.int64) for k in TREE_COLUMNS}
        key = (cand["thread"].astype(np.int64) << 32) | cand["level"].astype(np.int64)
        last = last_seen(key)  # each (thread, level)'s last API
        self.last = {k: v[last] for k, v in cand.items()} if parts else None  # (no stand-in arrays of another type)
        still_open = np.zeros(0, np.int64) if next_edge is None or self.last is None else \
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
        if not len(level):  # no tree API at all (no api_event records): stand-ins that np.where never takes
            cand = {k: np.zeros(1, np.int64) for k in TREE_COLUMNS}
            level = cand["level"]
        task_id = cols["task_id"]
        out = _frame({
            "device_id": cols["device_id"], "stream_id": cols["stream_id"].astype(np.int64),
            "task_low": (task_id & 0xFFFF).astype(np.int64), "batch": (task_id >> 16).astype(np.int64),
            "ts_ns": self.clock.to_ns(t_time), "thread_id": cols["thread_id"],
            "type_name": _map_names(cols["task_type"], self.types),
            "parent_level": np.where(has_parent, level[at_parent].astype(np.int64), -1),
            "model_id": np.where(has_model, cand["item"].astype(np.int64)[at_model], NO_MODEL),
            "request_id": np.where(has_model, cand["reserve"].astype(np.int64)[at_model], -1),
            "conn": np.where(has_parent, cand["conn"][at_parent].astype(np.int64), -1),
            "kernel": _hash_names(cols["kernel_name"], self.hashes),
            "type_raw": cols["task_type"], "kernel_raw": cols["kernel_name"],
            "data_len": cols["data_len"], "num_blocks": cols["num_blocks"], "ratio": cols["ratio"]})
        out.index = pd.Index(cols["pos"])
        return out

    def finish(self) -> None:
        assert all(f is None for f in self.waiting.values()), "records left waiting after the last window"


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
    return _per_distinct(values, lambda u: _type_name(types, f"5000_{int(u)}", str(int(u))))


def _hash_text(hashes: Dict[str, str], missing: str = "") -> Callable[[object], str]:
    """The text of a hash id (hash_dic); `missing` for an unknown id (noted in a HashTable's
    misses), "" for id 0."""
    misses = hashes.misses if isinstance(hashes, HashTable) else set()

    def text(u: Any) -> str:
        key = int(u)
        got = hashes.get(str(key))
        if got is not None:
            return got
        if key:
            misses.add(key)
        return missing if key else ""
    return text


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
                             lambda k: _type_name(types, f"{int(k) >> 32}_{int(k) & 0xFFFFFFFF}",
                                                  str(int(k) & 0xFFFFFFFF)))
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


def _tensor_texts(files, diag: Diagnostics, scratch: str) -> Tuple[Runs, np.ndarray]:
    """(one row per op: thread_id, timestamp, text = row of the table, pos = stream position of
    its first record, spilled by timestamp under the prefix "tensor"; the (m, 6) text table).

    Records with the same (op_name, timestamp, thread_id) are one op's; its tensors may span
    several records. The records are spilled by timestamp, with a hash of their payload, and
    grouped a window of timestamps at a time (an op's records share one). Empty shapes and
    descriptions read `N/A`, as the reference prints them."""
    out = Runs(scratch, "tensor", "timestamp")
    tables = [_texts((1, 6), "N/A")]  # row 0: an op without tensor_info
    base, seen = 1, 0
    try:
        for _, paths in _group_paths(files, "tensor_info"):
            recs = Runs(scratch, "tensor_records", "timestamp", SAMPLE_EVERY)
            try:
                count, table = _tensor_stream(paths, recs, out, base, seen, diag)
            finally:
                recs.close()
            tables.append(table)
            base += len(table)
            seen += count
    except BaseException:
        out.close()
        raise
    table = np.concatenate(tables)
    for col in (0, 3):
        table[table[:, col] == '""', col] = "N/A"
    for col in (1, 2, 4, 5):
        table[table[:, col] == "", col] = "N/A"
    return out, table


def _tensor_stream(paths: List[str], recs: Runs, out: Runs, base: int, seen: int, diag: Diagnostics
                   ) -> Tuple[int, np.ndarray]:
    """One tensor_info stream's ops into `out` (text rows from `base`, positions from `seen`), its
    records spilled to `recs`; returns (its records, its text table)."""
    stream = RecordStream(R.TENSOR_INFO, paths, *H.HOST_VALID)
    payloads = H.TensorPayloads()
    count = 0
    for arr, _ in stream.chunks():
        h = payloads.hashes(arr)
        if h is None:  # two payloads share a hash: decode the stream whole to tell them apart
            buf, pieces = read_stream(paths)
            arr, _, issues = decode_stream(R.TENSOR_INFO, buf, pieces, *H.HOST_VALID)
            del buf
            diag.extend(issues)
            group, text_row, table = H.render_tensors(arr)
            first = np.unique(group, return_index=True)[1]
            out.add({"thread_id": arr["thread_id"][first].astype(np.int64),
                     "timestamp": arr["timestamp"][first].astype(np.int64),
                     "text": base + text_row[group[first]], "pos": seen + first})
            return len(arr), table
        n = len(arr)
        recs.add({"op_name": arr["op_name"].astype(np.int64), "timestamp": arr["timestamp"].astype(np.int64),
                  "thread_id": arr["thread_id"].astype(np.int64), "hash": h,
                  "seq": np.arange(count, count + n, dtype=np.int64)})
        count += n
    diag.extend(stream.issues)
    rendered = payloads.rendered()
    rows = H.tensor_rows(rendered)
    edges = recs.edges(SPILL_ROWS)
    recs.cut(edges)
    for w in range(len(edges) + 1):
        c = recs.window(w)
        if c is None:
            continue
        order = np.argsort(c["seq"], kind="stable")
        c = {k: v[order] for k, v in c.items()}
        group, text = H.group_ops(c["op_name"], c["timestamp"], c["thread_id"],
                                  np.searchsorted(payloads.known, c["hash"]), rendered, rows)
        first = first_seen(group)
        out.add({"thread_id": c["thread_id"][first], "timestamp": c["timestamp"][first], "text": base + text,
                 "pos": seen + c["seq"][first]})
        del c
    table = np.empty((len(rows), 6), dtype=object)
    if rows:  # (a stream without one valid record has none)
        table[:] = rows
    return count, table


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
    order; `tensors`' texts are rows of the tensor table. `info_ts`: the time stamp (host ticks)
    of the node_basic_info the op info comes from, -1 without one."""
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
    info_ts = np.full(n, -1, dtype=np.int64)
    if not nbi.empty:
        src = _first_under(nbi["conn"].to_numpy(), parents)
        found = (src >= 0) & ~sel_fallback
        src = src[found]
        info_ts[found] = nbi["timestamp"].to_numpy()[src].astype(np.int64)
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
        "conn": sel["conn"].to_numpy(), "info_ts": info_ts,
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
# the dev_type codes of each table: 256 * its index in DEV_TYPE_TABLES + the type's value
SQE_CODES, SUBTASK_CODES, HWTS_CODES = (256 * i for i in range(len(DEV_TYPE_TABLES)))
TIE_FFTS = 1 << 32
SAMPLE_EVERY = 64  # one key in this many kept in memory to place windows' edges


def _dev_type_names() -> np.ndarray:
    """The device task type name of each dev_type code."""
    tables = [_code_text(t) for t in DEV_TYPE_TABLES]
    out = np.empty(256 * len(tables), dtype=object)
    out[:] = [tables[c >> 8](c & 0xFF) for c in range(len(out))]
    return out


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


def _pair_into(runs: Runs, keys: Sequence[str], what: str, stream: RecordStream, tasks: Runs, clock: Clock,
               make: Callable[[Columns, np.ndarray, np.ndarray], Columns], diag: Diagnostics) -> None:
    """Pair the start and end records of `runs` a window at a time (pairing.Pairing), each
    window's tasks (`make(records, starts, ends)`, with start_ns) into `tasks`; warn of the
    records left unpaired."""
    pairing = Pairing(runs, keys)
    for cols, s, e in pairing.windows():
        got = make(cols, s, e)
        got["start_ns"] = clock.to_ns(got["start"])
        tasks.add(got)
    for text in pairing.warnings(what, lambda off: locate(stream.pieces, off)):
        diag.warn(text)


def load_device(rd: ResultDir, coll: Collection, chip: Chip, diag: Diagnostics, scratch: str) -> Optional[DeviceData]:
    """A device's tasks (start and end records paired, spilled to `scratch` by start), its PMU
    records (on STARS chips spilled by end) and ts_track records."""
    files = data_files(rd, diag)
    if not files:
        diag.warn(f"{rd.data_dir}: no raw data files; expected e.g. stars_soc.data.{rd.device_id}.slice_0 "
                  f"or hwts.data.{rd.device_id}.slice_0")
    losses.check_slices(files, diag)
    losses.check_task_log(files, rd.data_dir, rd.device_id, chip.family, diag)
    for problem in rd.device_info_problems():
        diag.warn(f"{rd.files.get('info.json', rd.path)}: {problem}; taken as unknown, so the PMU times that "
                  f"need it are 0 on device {rd.device_id}")
    try:
        clock = device_clock_of(rd, coll)
    except (MissingControlFile, BadControlFile) as exc:
        diag.warn(f"{exc}; device {rd.device_id} is skipped")
        return None
    name = f"device{rd.device_id}"
    dev = DeviceData(device_id=rd.device_id, clock=clock, tasks=Runs(scratch, f"{name}.task", "start_ns", SAMPLE_EVERY))
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
                _pair_into(logs[0], ("stream_id", "task_id"), "ACSQ task", stream, dev.tasks, clock, lambda c, s, e: {
                    "stream_id": c["stream_id"][s], "task_id": c["task_id"][s],
                    "ctx": np.full(len(s), INVALID_CTX, dtype=np.int64), "start": c["syscnt"][s],
                    "end": c["syscnt"][e], "dev_type": SQE_CODES + c["sqe_type"][s].astype(np.int16),
                    "tie": np.zeros(len(s), dtype=np.int64)}, diag)
                _pair_into(logs[1], ("stream_id", "task_id", "subtask_id", "thread_id"), "FFTS+ subtask", stream,
                           dev.tasks, clock, lambda c, s, e: {
                               "stream_id": c["stream_id"][s], "task_id": c["task_id"][s],
                               "ctx": np.where(c["ffts_type"][s] == D.FFTS_PLUS, c["subtask_id"][s], INVALID_CTX),
                               "start": c["syscnt"][s], "end": c["syscnt"][e],
                               "dev_type": SUBTASK_CODES + c["subtask_type"][s].astype(np.int16),
                               "tie": TIE_FFTS | (c["subtask_id"][s] << 16) | c["thread_id"][s].astype(np.int64)},
                           diag)
            if ("ffts_profile.data", "") in files:
                stream = RecordStream(R.FFTS_PMU, files[("ffts_profile.data", "")], *D.FFTS_VALID)
                dev.ctx_pmu = Runs(scratch, f"{name}.ctx_pmu", "end_ns")
                dev.blk_pmu = Runs(scratch, f"{name}.blk_pmu", "end_ns")
                dropped = [0]

                def convert(arr: np.ndarray, offsets: np.ndarray) -> Tuple[Columns, Columns]:
                    ctx, blk, over = D.ffts_columns(arr, offsets)
                    dropped[0] += int(over["overflow"].sum())
                    for records in (ctx, blk):
                        records["end_ns"] = clock.to_ns(records["end_syscnt"])
                    return ctx, blk
                _spill_stream(stream, convert, (dev.ctx_pmu, dev.blk_pmu))
                diag.extend(D.overflow_issues(stream.issues, dropped[0], stream.pieces))
        else:
            if ("hwts.data", "") in files:
                stream = RecordStream(R.HWTS_LOG, files[("hwts.data", "")], *D.HWTS_VALID)
                logs = [Runs(scratch, f"{name}.hwts", "syscnt", SAMPLE_EVERY)]
                _spill_stream(stream, D.hwts_columns, logs)
                diag.extend(stream.issues)
                _pair_into(logs[0], ("stream_id", "task_id"), "HWTS task", stream, dev.tasks, clock, lambda c, s, e: {
                    "stream_id": c["stream_id"][s], "task_id": c["task_id"][s],
                    "ctx": np.full(len(s), INVALID_CTX, dtype=np.int64), "start": c["syscnt"][s],
                    "end": c["syscnt"][e], "dev_type": HWTS_CODES + c["task_type"][e].astype(np.int16),
                    "tie": np.zeros(len(s), dtype=np.int64)}, diag)
            if ("aicore.data", "") in files:
                dev.aic_pmu, issues = read_aic_pmu(files[("aicore.data", "")])
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
    (start, stream, task, tie), with their batch and times in ns; dev_type is a code
    (DEV_TYPE_NAMES has their names)."""
    if cols is None:
        cols = {k: np.zeros(0, dtype=np.int64) for k in TASK_COLUMNS + ("start_ns",)}
    order = np.lexsort((cols["tie"], cols["task_id"], cols["stream_id"], cols["start"]))
    t = {k: cols[k][order].astype(np.int64) for k in ("stream_id", "task_id", "ctx", "start", "end", "start_ns",
                                                      "dev_type")}
    del cols, order
    return _frame({**t, "batch": _flip_batches(t["stream_id"], t["start"], dev.flips),
                   "end_ns": dev.clock.to_ns(t["end"])})


# ------------------------------------------------------------------------------------------------
# PMU

def _group_of(rd: ResultDir, core: str) -> Tuple[str, List[int]]:
    if core == "aic":
        return str(rd.sample.get("ai_core_metrics", "")), metrics.parse_events(rd.sample.get("ai_core_profiling_events"))
    return str(rd.sample.get("aiv_metrics", "")), metrics.parse_events(rd.sample.get("aiv_profiling_events"))


def pmu_columns(rd: ResultDir, prefixed: bool, rules: metrics.Rules) -> List[str]:
    """The metric columns of a device's PMU: aic_ and aiv_ prefixed (STARS chips), or the AI
    Core's unprefixed (HWTS chips)."""
    def names(core: str) -> List[str]:
        group, events = _group_of(rd, core)
        return metrics.metric_columns(events, group, rules)
    if not prefixed:
        return names("aic")
    return [f"{core}_{name}" for core in ("aic", "aiv") for name in names(core)]


# ------------------------------------------------------------------------------------------------
# Host tasks, spilled for the match (docs/benchmarks.md, issue 6)

MATCH_CTX_INVALID, MATCH_CTX_OTHER = 0x10000, 0x10001
ENTRY_PAYLOAD = ("type", "conn", "model_id", "request_id", "batch", "kernel", "thread_id", "ts_ns", "block", "mix",
                 "info_ts")
COMPUTE_TEXTS = ("op_name", "ge_type", "op_type", "state", "hf32")
TASK_ROWS = 1 << 18  # device tasks matched and written at a time


def match_keys(stream: np.ndarray, task: np.ndarray, ctx: np.ndarray) -> np.ndarray:
    """One int64 per (stream, task id, context), the key a device task and a host track are
    matched on. Contexts a device task cannot carry (above 0xFFFF, the invalid one aside) share
    one value."""
    c = np.asarray(ctx).astype(np.int64)
    c = np.where(c == INVALID_CTX, MATCH_CTX_INVALID, np.where((c >= 0) & (c <= 0xFFFF), c, MATCH_CTX_OTHER))
    return ((np.asarray(stream).astype(np.int64) & 0xFFFF) << 34) | ((np.asarray(task).astype(np.int64) & 0xFFFF) << 17) | c


def _match_order(cols: Columns) -> Columns:
    """Host entries in the order the match reads them: time, then segment, then track position."""
    order = np.lexsort((cols["pos"], cols["seg"], cols["ts_ns"]))
    return {k: v[order] for k, v in cols.items()}


def _gid_ctx(ctx: np.ndarray) -> np.ndarray:
    """A context as the global task id's key packs it: the invalid one 0, the others one more."""
    c = np.asarray(ctx).astype(np.int64)
    return np.where(c == INVALID_CTX, 0, c + 1)


class HostTasks:
    """What the device tasks need of the host's task tracks, and the host compute tasks, spilled as
    the association makes them a window at a time.

    A track is an entry of the match under up to three keys (match_keys), each a segment: its
    stream and task id with the invalid context; with its op's context when it has one; with
    context 0 when it is a MIX kernel whose context is not 0. Entries are spilled per device, by
    time, with what a matched device task takes of the track (ENTRY_PAYLOAD); `first` keeps each
    key's first entry (for device tasks that begin before any entry of their key). Compute tasks
    are spilled by track position. Texts are coded by `texts`."""

    def __init__(self, folder: str, types: Dict[str, str], hashes: Dict[str, str]) -> None:
        self.folder = folder
        self.type_name = lambda u: types.get(f"5000_{int(u)}", str(int(u)))  # as _map_names names them
        self.kernel_name = _hash_text(hashes)  # as _hash_names names them
        self.texts = StringPool([""])
        self.entries: Dict[int, Runs] = {}
        self.first: Dict[int, Columns] = {}
        self.compute = Runs(folder, "compute", "track", SAMPLE_EVERY)
        self.largest = dict.fromkeys(GID_KEYS, 0)  # of the compute tasks' keys and the tracks' batches

    def add(self, tracks: pd.DataFrame, compute: pd.DataFrame) -> None:
        pos = tracks.index.to_numpy()
        n = len(pos)
        ctx_of = np.full(n, INVALID_CTX, dtype=np.int64)
        block = np.zeros(n, dtype=np.int64)
        mix = np.zeros(n, dtype=np.int64)
        info_ts = np.full(n, -1, dtype=np.int64)
        if len(compute):
            at = np.searchsorted(pos, compute["track"].to_numpy())
            ctx_of[at] = compute["ctx"].to_numpy()
            block[at] = compute["block"].to_numpy()
            mix[at] = compute["mix"].to_numpy()
            info_ts[at] = compute["info_ts"].to_numpy()
        codes, names = _distinct(tracks["type_raw"].to_numpy(), self.type_name)
        type_code = np.array([self.texts.id(t) for t in names], dtype=np.int64)[codes]
        is_mix = np.array([t in MIX_TYPES for t in names], dtype=bool)[codes]
        codes, names = _distinct(tracks["kernel_raw"].to_numpy(), self.kernel_name)
        kernel_code = np.array([self.texts.id(t) for t in names], dtype=np.int64)[codes]
        del codes, names
        has_ctx = np.flatnonzero(ctx_of != INVALID_CTX)
        zero = np.flatnonzero(is_mix & (ctx_of != 0))
        rows = np.concatenate([np.arange(n), has_ctx, zero])
        key_ctx = np.concatenate([np.full(n, INVALID_CTX, dtype=np.int64), ctx_of[has_ctx],
                                  np.zeros(len(zero), dtype=np.int64)])
        payload = {"type": type_code, "conn": tracks["conn"].to_numpy(),
                   "model_id": tracks["model_id"].to_numpy(), "request_id": tracks["request_id"].to_numpy(),
                   "batch": tracks["batch"].to_numpy(), "kernel": kernel_code,
                   "thread_id": tracks["thread_id"].to_numpy(), "ts_ns": tracks["ts_ns"].to_numpy(),
                   "block": block, "mix": mix, "info_ts": info_ts}
        self.largest["batch"] = max(self.largest["batch"], int(payload["batch"].max(initial=0)))
        seg = np.repeat(np.arange(3, dtype=np.int8), [n, len(has_ctx), len(zero)])
        order = np.lexsort((seg, payload["ts_ns"][rows]))  # match order (rows are by position within a segment)
        rows, key_ctx, seg = rows[order], key_ctx[order], seg[order]
        cols = {"key": match_keys(tracks["stream_id"].to_numpy()[rows], tracks["task_low"].to_numpy()[rows], key_ctx),
                "seg": seg, "pos": pos[rows], **{k: v[rows] for k, v in payload.items()}}
        device = tracks["device_id"].to_numpy().astype(np.int64)[rows]
        del payload, rows, key_ctx, seg, order
        for d in np.unique(device):
            d = int(d)
            mine = device == d
            part = {k: v[mine] for k, v in cols.items()}
            if d not in self.entries:
                self.entries[d] = Runs(self.folder, f"entries{d}", "ts_ns")
            self.entries[d].add(part)
            first = first_seen(part["key"])
            part = {k: v[first] for k, v in part.items()}
            known = self.first.get(d)
            if known is not None:
                part = _match_order({k: np.concatenate([known[k], v]) for k, v in part.items()})
                first = first_seen(part["key"])
                part = {k: v[first] for k, v in part.items()}
            self.first[d] = part
        if len(compute):
            c = {k: compute[k].to_numpy() for k in ("track", "device_id", "stream_id", "task_id", "batch", "ctx",
                                                   "block", "mix", "tensors")}
            for k in COMPUTE_TEXTS:
                c[k] = self.texts.ids_of(compute[k].to_numpy())
            for k in GID_KEYS:
                values = _gid_ctx(c[k]) if k == "ctx" else c[k].astype(np.int64)
                self.largest[k] = max(self.largest[k], int(values.max(initial=0)))
            self.compute.add(c)

    def text_table(self) -> np.ndarray:
        """The texts by code."""
        out = np.empty(len(self.texts.ids), dtype=object)
        out[:] = list(self.texts.ids)
        return out

    def close(self) -> None:
        for runs in [self.compute, *self.entries.values()]:
            runs.close()


class GlobalIds:
    """globalTaskIds, given a window of rows at a time: rows sharing (device, stream, task,
    context, batch) share an id, keys numbered in the order of their first rows (host compute
    tasks first, then device tasks in TASK order), as global_ids numbers them in one pass. The key
    columns are packed into one int64 with the widths their largest values need (`largest`); when
    they need more than 62 bits, the leading columns' packed value is numbered first."""

    def __init__(self, largest: Dict[str, int]) -> None:
        self.widths = [max(1, int(largest[k]).bit_length()) for k in GID_KEYS]
        stages, bits = 1, 0
        for w in self.widths:
            if bits and bits + w > 62:
                stages, bits = stages + 1, 31
            bits += w
        self.stages = [Numbering() for _ in range(stages)]

    def ids(self, device: np.ndarray, stream: np.ndarray, task: np.ndarray, ctx: np.ndarray,
            batch: np.ndarray) -> np.ndarray:
        code: Optional[np.ndarray] = None
        bits = stage = 0
        for v, w in zip((device, stream, task, _gid_ctx(ctx), batch), self.widths):
            v = np.asarray(v).astype(np.int64)
            if code is None:
                code, bits = v, w
                continue
            if bits + w > 62:
                code, bits, stage = self.stages[stage].number(code), 31, stage + 1
            code = (code << w) | v
            bits += w
        assert code is not None
        return self.stages[stage].number(code)

    @property
    def count(self) -> int:
        return self.stages[-1].count


def _write_compute_info(host: HostData, gids: GlobalIds, strings: "StringPool", put: Sink) -> np.ndarray:
    """COMPUTE_TASK_INFO (each globalTaskId's first compute task, in track order), written a
    window of tracks at a time after a first pass that numbers the ids and puts the texts into
    STRING_IDS in the order one pass over the whole table would. Returns, by globalTaskId, which
    ids count as compute in OVERLAP_ANALYSIS (AI CPU and AIV kernels do not)."""
    tasks = host.tasks
    runs = tasks.compute if tasks is not None else None
    if runs is None or not runs.rows:
        return np.zeros(0, dtype=bool)
    edges = runs.edges(TASK_ROWS)
    runs.cut(edges)
    texts = tasks.text_table()
    code_seen = {k: np.zeros(len(texts), dtype=bool) for k in COMPUTE_TEXTS}
    code_order: Dict[str, List[np.ndarray]] = {k: [] for k in COMPUTE_TEXTS}
    row_seen = np.zeros(len(host.tensor_table), dtype=bool)
    row_order: List[np.ndarray] = []

    def first_new(values: np.ndarray, seen: np.ndarray, order: List[np.ndarray]) -> None:
        fresh = values[first_seen(values)]
        fresh = fresh[~seen[fresh]]
        seen[fresh] = True
        order.append(fresh)

    kept: Dict[int, Optional[Columns]] = {}  # one window is read once for both passes

    def window(w: int) -> Optional[Columns]:
        if w in kept:
            return kept.pop(w)
        cols = runs.window(w)
        if cols is not None:
            order = np.argsort(cols["track"], kind="stable")
            cols = {k: v[order] for k, v in cols.items()}
        if not len(edges):
            kept[w] = cols
        return cols

    ids: List[Tuple[np.ndarray, np.ndarray]] = []  # each window's (globalTaskIds, whether first)
    for w in range(len(edges) + 1):
        c = window(w)
        if c is None:
            continue
        before = gids.count
        gid = gids.ids(c["device_id"], c["stream_id"], c["task_id"], c["ctx"], c["batch"])
        first = (gid >= before) & first_seen(gid)
        for k in COMPUTE_TEXTS:
            first_new(c[k][first], code_seen[k], code_order[k])
        first_new(c["tensors"][first], row_seen, row_order)
        ids.append((gid.astype(np.int32) if gids.count < 1 << 31 else gid, first))
        del c, gid, first
    # STRING_IDS: the columns' texts in the order of COMPUTE_TASK_INFO's columns
    text_id = np.full(len(texts), -1, dtype=np.int64)

    def register(k: str) -> None:
        for code in np.concatenate(code_order[k]):
            text_id[code] = strings.id(texts[code])
    for k in ("op_name", "ge_type", "op_type"):
        register(k)
    rows = np.concatenate(row_order)
    tensor_id = {}
    for column in (2, 1, 0, 5, 4, 3):
        tensor_id[column] = np.zeros(len(host.tensor_table), dtype=np.int64)
        tensor_id[column][rows] = strings.ids_of(host.tensor_table[rows, column])
    empty = strings.id("")
    for k in ("state", "hf32"):
        register(k)
    na = strings.id("N/A")
    skip = _where_text(texts, lambda t: t.endswith(("AicpuKernel", "AivKernel")))
    compute_ok = np.zeros(gids.count, dtype=bool)
    at = 0
    for w in range(len(edges) + 1):
        c = window(w)
        if c is None:
            continue
        gid, first = ids[at]
        ids[at] = (np.zeros(0, np.int32), np.zeros(0, bool))
        at += 1
        f = np.flatnonzero(first)
        c = {k: v[f] for k, v in c.items()}
        gid = gid[f].astype(np.int64)
        n = len(f)
        t = c["tensors"]
        put("COMPUTE_TASK_INFO", _frame({
            "name": text_id[c["op_name"]], "globalTaskId": gid, "blockNum": c["block"], "mixBlockNum": c["mix"],
            "taskType": text_id[c["ge_type"]], "opType": text_id[c["op_type"]],
            "inputFormats": tensor_id[2][t], "inputDataTypes": tensor_id[1][t], "inputShapes": tensor_id[0][t],
            "outputFormats": tensor_id[5][t], "outputDataTypes": tensor_id[4][t], "outputShapes": tensor_id[3][t],
            "attrInfo": np.full(n, empty), "opState": text_id[c["state"]], "hf32Eligible": text_id[c["hf32"]],
            "gridDim": np.full(n, na), "blockDim": np.full(n, na)}), last=False)
        compute_ok[gid[~skip[c["op_name"]]]] = True
        del c, gid, first
    put("COMPUTE_TASK_INFO", None, last=True)
    return compute_ok


class _Match:
    """The host entry each device task of one device takes, a window of starts at a time: of the
    entries of its key, the latest at or before its start (ties: segment, then track position),
    else the key's first. Carried from a window to the next: each key's latest entry."""

    def __init__(self, first: Optional[Columns]) -> None:
        self.carry: Optional[Columns] = None
        self.first = None
        if first is not None:
            order = np.argsort(first["key"], kind="stable")
            self.first = {k: v[order] for k, v in first.items()}

    def window(self, key: np.ndarray, start_ns: np.ndarray, entries: Optional[Columns]
               ) -> Tuple[np.ndarray, Columns]:
        """(whether each task matched, ENTRY_PAYLOAD of each task, zero where it did not) of tasks
        in start order; `entries` the window's."""
        n = len(key)
        parts = [c for c in (self.carry, entries) if c is not None]
        right = _match_order({k: np.concatenate([p[k] for p in parts]) for k in parts[0]}) if parts else None
        found = np.full(n, -1, dtype=np.int64)
        if right is not None and n:
            got = pd.merge_asof(_frame({"t": start_ns, "k": key}),
                                _frame({"ts": right["ts_ns"], "k": right["key"], "i": np.arange(len(right["key"]))}),
                                left_on="t", right_on="ts", by="k", direction="backward")["i"].to_numpy()
            hit = ~np.isnan(got)
            found[hit] = got[hit].astype(np.int64)
        like = right if right is not None else self.first
        out = {k: np.zeros(n, dtype=like[k].dtype if like is not None else np.int64) for k in ENTRY_PAYLOAD}
        hit = found >= 0
        if right is not None:
            for k in ENTRY_PAYLOAD:
                out[k][hit] = right[k][found[hit]]
        missing = np.flatnonzero(~hit)
        if len(missing) and self.first is not None and len(self.first["key"]):
            fk = self.first["key"]
            at = np.minimum(np.searchsorted(fk, key[missing]), len(fk) - 1)
            ok = fk[at] == key[missing]
            for k in ENTRY_PAYLOAD:
                out[k][missing[ok]] = self.first[k][at[ok]]
            hit[missing[ok]] = True
        if right is not None:
            last = last_seen(right["key"])
            self.carry = {k: v[last] for k, v in right.items()}
        return hit, out


def _attach(carry: Optional[Columns], tasks: Columns, key: np.ndarray, t: np.ndarray) -> np.ndarray:
    """For records of keys `key` at times `t`, the task (its `row`) of the same key whose [start,
    end] holds t: of the tasks (carry, then the window's) the latest begun at or before t; -1 when
    there is none or it ended before t."""
    parts = [c for c in (carry, tasks) if c is not None]
    out = np.full(len(t), -1, dtype=np.int64)
    if not len(t) or not parts:
        return out
    right = {k: np.concatenate([p[k] for p in parts]) for k in ("key", "start", "end", "row")}
    by_start = np.argsort(right["start"], kind="stable")
    left_order = np.argsort(t, kind="stable")
    m = pd.merge_asof(_frame({"t": t[left_order], "k": key[left_order]}),
                      _frame({"start": right["start"][by_start], "k": right["key"][by_start],
                              "end": right["end"][by_start], "row": right["row"][by_start]}),
                      left_on="t", right_on="start", by="k", direction="backward")
    row = m["row"].to_numpy()
    ok = ~np.isnan(row) & (m["t"].to_numpy() <= m["end"].fillna(-1).to_numpy())
    out[left_order[ok]] = row[ok].astype(np.int64)
    return out


def _latest_tasks(carry: Optional[Columns], tasks: Columns) -> Columns:
    """Each key's latest begun task (the last in task order) of the carry and the window's tasks."""
    parts = [c for c in (carry, tasks) if c is not None]
    both = {k: np.concatenate([p[k] for p in parts]) for k in ("key", "start", "end", "row")}
    last = last_seen(both["key"])
    return {k: v[last] for k, v in both.items()}


class _StarsPmu:
    """KIT_TASK_PMU rows of one device's tasks, given a window of tasks at a time (in task order;
    `step` returns the rows that are final, in task order), and `finish` warns of the records
    left unattached.

    aic_*/aiv_* metrics per task (910B family): the context PMU record (by end time) that lies
    in the task, the first in stream order when several do, plus for MIX ops the other core's
    block PMU records, summed. The records come a window of end times at a time, the windows the
    tasks'; a task's metrics are final once the window's end has passed the task's end, and the
    rows are given in task order (a task still open holds back those after it).

    With `py_rules` (the store holds C++-rule metrics, metrics.iteration_rules), each step also
    keeps, for `python_part`, the rows whose metrics under the Python rules are not those: the
    values an iteration export prints."""

    def __init__(self, rd: ResultDir, dev: DeviceData, edges: np.ndarray, rules: metrics.Rules,
                 py_rules: Optional[metrics.Rules] = None) -> None:
        info = rd.device_info()
        self.rd = rd
        self.rules = rules
        self.py_rules = py_rules
        self.freq = float(info.get("aic_frequency", 0) or 0) * 1e6
        self.cores = {"aic": int(info.get("ai_core_num", 0) or 0), "aiv": int(info.get("aiv_num", 0) or 0)}
        self.groups = {core: _group_of(rd, core) for core in ("aic", "aiv")}
        self.columns = pmu_columns(rd, True, rules)
        self.py_columns = metrics.ffts_python_columns(self.groups, py_rules) if py_rules is not None else {}
        self.py_agree = {core: py_rules is not None and metrics.rules_agree(events, group, rules, py_rules)
                         for core, (group, events) in self.groups.items()}
        self.python: Optional[Dict[str, np.ndarray]] = None  # the last step's rows whose Python-rule metrics differ
        self.ctx_runs, self.blk_runs = dev.ctx_pmu, dev.blk_pmu
        for runs in (self.ctx_runs, self.blk_runs):
            if runs is not None:
                runs.cut(edges)
        self.carry: Optional[Columns] = None   # each key's latest task of the earlier windows
        self.open: Optional[Columns] = None    # tasks whose metrics are not final yet
        self.hits: Optional[Columns] = None    # their context records so far (one a task)
        self.sums: Optional[Columns] = None    # their MIX block sums so far
        self.lost = 0

    def step(self, w: int, tasks: Columns, next_edge: Optional[int]) -> Optional[Dict[str, np.ndarray]]:
        """`tasks`: the window's key, start, end, end_ns, row, is_mix, main_aic, block, mix, gid."""
        self.open = tasks if self.open is None else {k: np.concatenate([self.open[k], v]) for k, v in tasks.items()}
        ctx = self.ctx_runs.window(w) if self.ctx_runs is not None else None
        if ctx is not None:
            pmu_ctx = np.where(ctx["ffts_type"] == D.FFTS_PLUS, ctx["subtask_id"], INVALID_CTX)
            row = _attach(self.carry, tasks, match_keys(ctx["stream_id"], ctx["task_id"], pmu_ctx), ctx["end_syscnt"])
            self.lost += int((row < 0).sum())
            keep = row >= 0
            is_aic = (ctx["ffts_type"] == 0) | ((ctx["ffts_type"] == D.FFTS_PLUS) & np.isin(ctx["subtask_type"], (0, 6))) \
                | (ctx["ffts_type"] == 5)
            new = {"row": row[keep], "offset": ctx["offset"][keep], "cycles": ctx["total_cycle"][keep],
                   "pmu": ctx["pmu"][keep], "is_aic": is_aic[keep]}
            both = new if self.hits is None else {k: np.concatenate([self.hits[k], v]) for k, v in new.items()}
            order = np.lexsort((both["offset"], both["row"]))
            first = first_seen(both["row"][order])
            self.hits = {k: v[order[first]] for k, v in both.items()}  # by row, the first in stream order
        blk = self.blk_runs.window(w) if self.blk_runs is not None else None
        if blk is not None:
            bctx = np.where(blk["ffts_type"] == D.FFTS_PLUS, blk["subtask_id"], INVALID_CTX)
            row = _attach(self.carry, tasks, match_keys(blk["stream_id"], blk["task_id"], bctx), blk["end_syscnt"])
            at = np.searchsorted(self.open["row"], row)
            ok = (row >= 0) & (at < len(self.open["row"]))
            ok[ok] &= self.open["row"][at[ok]] == row[ok]
            ok[ok] &= self.open["is_mix"][at[ok]]
            # only the other core's blocks count: AIV blocks for MIX_AIC, AIC blocks for MIX_AIV
            ok[ok] &= np.where(self.open["main_aic"][at[ok]], blk["core_type"][ok] == 1, blk["core_type"][ok] == 0)
            new = {"row": row[ok], "cycles": blk["total_cycle"][ok], "pmu": blk["pmu"][ok]}
            both = new if self.sums is None else {k: np.concatenate([self.sums[k], v]) for k, v in new.items()}
            rows, inverse = np.unique(both["row"], return_inverse=True)
            cycles = np.zeros(len(rows), np.int64)
            pmu = np.zeros((len(rows), 8), np.int64)
            np.add.at(cycles, inverse, both["cycles"])
            np.add.at(pmu, inverse, both["pmu"])
            self.sums = {"row": rows, "cycles": cycles, "pmu": pmu}
        self.carry = _latest_tasks(self.carry, tasks)
        # final: the rows before the first task that may still get records
        still = self.open["end_ns"] >= next_edge if next_edge is not None else np.zeros(len(self.open["row"]), bool)
        frontier = int(self.open["row"][still].min()) if still.any() else None
        return self._final(frontier)

    def _final(self, frontier: Optional[int]) -> Optional[Dict[str, np.ndarray]]:
        def split(cols: Optional[Columns]) -> Tuple[Optional[Columns], Optional[Columns]]:
            if cols is None or frontier is None:
                return cols, None
            done = cols["row"] < frontier
            return {k: v[done] for k, v in cols.items()}, {k: v[~done] for k, v in cols.items()}
        tasks, self.open = split(self.open)
        hits, self.hits = split(self.hits)
        sums, self.sums = split(self.sums)
        if hits is None or not len(hits["row"]):
            return None
        assert tasks is not None
        at = np.searchsorted(tasks["row"], hits["row"])
        m = len(at)
        is_aic, is_mix = hits["is_aic"], tasks["is_mix"][at]
        block, mix = tasks["block"][at], tasks["mix"][at]
        mixed = np.flatnonzero(is_mix)
        sum_cyc = np.zeros(len(mixed), np.int64)
        sum_pmu = np.zeros((len(mixed), 8), np.int64)
        if sums is not None and len(sums["row"]) and len(mixed):
            j = np.minimum(np.searchsorted(sums["row"], hits["row"][mixed]), len(sums["row"]) - 1)
            has = sums["row"][j] == hits["row"][mixed]
            sum_cyc[has] = sums["cycles"][j[has]]
            sum_pmu[has] = sums["pmu"][j[has]]
        out: Dict[str, np.ndarray] = {"taskRow": hits["row"], "globalTaskId": tasks["gid"][at]}
        python: Dict[str, np.ndarray] = {}
        freq = np.full(m, self.freq)
        for core in ("aic", "aiv"):
            group, events = self.groups[core]
            main = is_aic if core == "aic" else ~is_aic
            # main core: its context record; MIX secondary core: block sums; otherwise zeros
            cyc = np.zeros(m, np.int64)
            cnt = np.zeros((m, 8), np.int64)
            b = np.zeros(m, np.int64)
            cyc[main] = hits["cycles"][main]
            cnt[main] = hits["pmu"][main]
            b[main] = block[main]
            second = ~main[mixed]
            cyc[mixed[second]] = sum_cyc[second]
            cnt[mixed[second]] = sum_pmu[second]
            b[mixed[second]] = mix[mixed[second]]
            got = metrics.compute(events, group, cyc, cnt, b, self.cores[core], freq, self.rules)
            for name in metrics.metric_columns(events, group, self.rules):
                out[f"{core}_{name}"] = got[name]
            if self.py_columns.get(core):
                python.update(self._python_values(core, out, cyc, cnt, b, freq))
        if self.py_rules is not None:
            self.python = _differing(out, python)
        return out

    def _python_values(self, core: str, stored: Dict[str, np.ndarray], cyc: np.ndarray, cnt: np.ndarray,
                       b: np.ndarray, freq: np.ndarray) -> Dict[str, np.ndarray]:
        """A core's metrics by the Python rules: computed for every task where the rule sets
        differ for its group, else only for the few tasks where they may part (metrics.branch_rows),
        the other tasks' being the stored ones."""
        assert self.py_rules is not None
        group, events = self.groups[core]
        names = self.py_columns[core]
        if not self.py_agree[core]:
            got = metrics.compute(events, group, cyc, cnt, b, self.cores[core], freq, self.py_rules)
            return {f"{core}_{name}": got[name] for name in names}
        take = np.flatnonzero(metrics.branch_rows(events, cyc, cnt, freq))
        if not len(take):
            return {f"{core}_{name}": stored[f"{core}_{name}"] for name in names}
        got = metrics.compute(events, group, cyc[take], cnt[take], b[take], self.cores[core], freq[take], self.py_rules)
        out = {}
        for name in names:
            values = stored[f"{core}_{name}"].astype(np.float64)
            values[take] = got[name]
            out[f"{core}_{name}"] = values
        return out

    def python_part(self) -> Optional[Dict[str, np.ndarray]]:
        """The rows of the last step whose metrics under the Python rules differ from the stored
        ones in some column (taskRow, globalTaskId and every Python-rule column); None when none."""
        part, self.python = self.python, None
        return part

    def finish(self, diag: Diagnostics) -> None:
        if self.lost:
            diag.warn(f"{self.rd.data_dir}/ffts_profile.data.{self.rd.device_id}.*: {self.lost} context PMU records "
                      f"match no device task; dropped")


def _differing(stored: Dict[str, np.ndarray], python: Dict[str, np.ndarray]) -> Optional[Dict[str, np.ndarray]]:
    """The rows (taskRow, globalTaskId, then `python`'s columns) where a `python` column differs
    from the `stored` column of its name, or `stored` lacks it; None when no row does."""
    differ = np.zeros(len(stored["taskRow"]), dtype=np.bool_)
    for name, values in python.items():
        have = stored.get(name)
        if have is None:
            differ[:] = True
            break
        if values is not have:
            np.logical_or(differ, values != have, out=differ)
    if not differ.any():
        return None
    return {"taskRow": stored["taskRow"][differ], "globalTaskId": stored["globalTaskId"][differ],
            **{name: values[differ] for name, values in python.items()}}


class _HwtsPmu:
    """Unprefixed metrics per task (HWTS chips): the n-th PMU record of a (stream, task) goes to
    the n-th execution of that task in task order. The records are held whole (these chips'
    collections are small); each key's count of executions is carried from a window to the next."""

    def __init__(self, rd: ResultDir, dev: DeviceData, rules: metrics.Rules) -> None:
        pm = dev.aic_pmu
        assert pm is not None
        info = rd.device_info()
        self.rd = rd
        self.rules = rules
        self.freq = float(info.get("aic_frequency", 0) or 0) * 1e6
        self.cores = int(info.get("ai_core_num", 0) or 0)
        self.group, self.events = _group_of(rd, "aic")
        self.columns = pmu_columns(rd, False, rules)
        key = self._key(pm["stream_id"], pm["task_id"])
        code = (key << 36) | self._nth(key, None)
        self.order = np.argsort(code, kind="stable")
        self.codes = code[self.order]
        self.cycles, self.counters = pm["total_cycle"], pm["pmu"]
        self.seen: Optional[Columns] = None  # executions so far of each key
        self.matched = 0

    @staticmethod
    def _key(stream: np.ndarray, task: np.ndarray) -> np.ndarray:
        return ((np.asarray(stream).astype(np.int64) & 0x7FF) << 16) | (np.asarray(task).astype(np.int64) & 0xFFFF)

    @staticmethod
    def _nth(key: np.ndarray, seen: Optional[Columns]) -> np.ndarray:
        """Each row's count of earlier rows of its key (and of `seen` ones)."""
        order = np.argsort(key, kind="stable")
        k = key[order]
        rank = run_ranks(k)
        if seen is not None and len(seen["key"]):
            j = np.minimum(np.searchsorted(seen["key"], k), len(seen["key"]) - 1)
            rank += np.where(seen["key"][j] == k, seen["count"][j], 0)
        out = np.empty(len(k), dtype=np.int64)
        out[order] = rank
        return out

    def step(self, w: int, tasks: Columns, next_edge: Optional[int]) -> Optional[Dict[str, np.ndarray]]:
        key = self._key(tasks["stream_id"], tasks["task_id"])
        nth = self._nth(key, self.seen)
        keys, counts = np.unique(key, return_counts=True)
        if self.seen is not None:
            both = np.concatenate([self.seen["key"], keys])
            total = np.concatenate([self.seen["count"], counts])
            keys, inverse = np.unique(both, return_inverse=True)
            counts = np.zeros(len(keys), np.int64)
            np.add.at(counts, inverse, total)
        self.seen = {"key": keys, "count": counts}
        if not len(self.codes):
            return None
        code = (key << 36) | nth
        at = np.minimum(np.searchsorted(self.codes, code), len(self.codes) - 1)
        hit = np.flatnonzero(self.codes[at] == code)
        if not len(hit):
            return None
        self.matched += len(hit)
        src = self.order[at[hit]]
        got = metrics.compute(self.events, self.group, self.cycles[src], self.counters[src], tasks["block"][hit],
                              self.cores, np.full(len(hit), self.freq), self.rules)
        return {"taskRow": tasks["row"][hit], "globalTaskId": tasks["gid"][hit],
                **{name: got[name] for name in metrics.metric_columns(self.events, self.group, self.rules)}}

    def finish(self, diag: Diagnostics) -> None:
        lost = len(self.codes) - self.matched
        if lost:
            diag.warn(f"{self.rd.data_dir}/aicore.data.{self.rd.device_id}.*: {lost} PMU records match no task; dropped")


class _Overlap:
    """OVERLAP_ANALYSIS of one device, given its tasks a window of starts at a time: the union of
    its compute tasks' intervals (type 0) and the gaps in it (type 3) inside the span of its other
    tasks and the union. The union's intervals are spilled as they close (the last one stays open
    from a window to the next); `write` writes the rows once every window has been given."""

    def __init__(self, folder: str, device_id: int) -> None:
        self.device_id = device_id
        self.runs = Runs(folder, f"overlap{device_id}", "start")
        self.open: Optional[Tuple[int, int]] = None
        self.lo: Optional[int] = None
        self.hi: Optional[int] = None

    def step(self, start: np.ndarray, end: np.ndarray, compute: np.ndarray, other: np.ndarray) -> None:
        cs, ce = start[compute], end[compute]
        if self.open is not None:
            cs, ce = np.concatenate([[self.open[0]], cs]), np.concatenate([[self.open[1]], ce])
        us, ue = union_intervals(cs, ce)
        starts = np.concatenate([start[other], us])
        if len(starts):
            ends = np.concatenate([end[other], ue])
            lo, hi = int(starts.min()), int(ends.max())
            self.lo = lo if self.lo is None else min(self.lo, lo)
            self.hi = hi if self.hi is None else max(self.hi, hi)
        if len(us):
            self.runs.add({"start": us[:-1], "end": ue[:-1]})
            self.open = (int(us[-1]), int(ue[-1]))

    def write(self, first_id: int, put: Sink) -> int:
        """Write the rows (ids from `first_id`); returns the next id."""
        if self.open is not None:
            self.runs.add({"start": np.array([self.open[0]], np.int64), "end": np.array([self.open[1]], np.int64)})
            self.open = None
        n = self.runs.rows
        next_id = first_id

        def part(s: np.ndarray, e: np.ndarray, kind: int) -> None:
            nonlocal next_id
            if len(s):
                put("OVERLAP_ANALYSIS", _frame({"id": np.arange(next_id, next_id + len(s), dtype=np.int64),
                                                "deviceId": self.device_id, "startNs": s, "endNs": e, "type": kind}),
                    last=False)
                next_id += len(s)
        def read(lo: int) -> Tuple[np.ndarray, np.ndarray]:
            if not n:
                return np.zeros(0, np.int64), np.zeros(0, np.int64)
            return self.runs.read("start", lo, min(n, lo + TASK_ROWS)), self.runs.read("end", lo, min(n, lo + TASK_ROWS))
        for lo in range(0, n, TASK_ROWS):
            s, e = read(lo)
            valid = e > s
            part(s[valid], e[valid], 0)
        if self.lo is not None and self.hi is not None and self.hi > self.lo:
            prev = self.lo
            for lo in range(0, max(n, 1), TASK_ROWS):
                s, e = read(lo)
                gs = np.maximum(np.concatenate([[prev], e]), self.lo)
                ge = np.minimum(np.concatenate([s, [self.hi]]), self.hi)
                last_chunk = lo + TASK_ROWS >= n
                if not last_chunk:
                    gs, ge = gs[:-1], ge[:-1]
                    prev = int(e[-1])
                keep = ge > gs
                part(gs[keep], ge[keep], 3)
        self.runs.close()
        return next_id

    def close(self) -> None:
        self.runs.close()



def _load_device_job(rd: ResultDir, coll: Collection, chip: Chip, scratch: str
                     ) -> Tuple[Optional[DeviceData], List[str]]:
    local = Diagnostics()
    return load_device(rd, coll, chip, local, scratch), local.warnings


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
    devices: List[Tuple[ResultDir, DeviceData]] = []
    loaded = None
    with diag.progress.phase(f"{label(coll.path)}: device data", total=len(coll.devices), unit="devices") as phase:
        if loaders:
            try:
                results = []
                for loader in loaders:  # (a pool of workers reports all its devices at once)
                    results.append(loader.result())
                    phase.advance(len(coll.devices) if pooled else 1)
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
                phase.advance()
            memory.give_back()
            if dev is not None:
                devices.append((rd, dev))
    if not coll.devices:
        diag.warn(f"{coll.path}: no device_N/ directory; only host APIs and op descriptions are kept")
    if host is None and not devices:
        raise NoData("neither host nor device data could be read; expected host/data or device_N/data "
                     "with raw slices", path=coll.path)

    try:
        _tasks_and_tables(coll, chip, host, devices, strings, put, info, diag)
    finally:
        for _, dev in devices:
            dev.close()
        if host is not None and host.tasks is not None:
            host.tasks.close()
    return info


def _pmu_host_clock(rd: ResultDir, coll: Collection) -> Optional[Clock]:
    """Host time as the reference's Python PMU pass of a device reads it: host ticks through that
    device folder's host_start.log.N and its info.json's CPU frequency, placed by its start_info.N
    (mscalculate/aic/pmu_calculator.py:118-137 compares the GE task info's stamps with the start in
    those terms; without host/host_start.log that is not how the host's own clock reads them).
    None where that folder cannot convert host ticks (its warnings are the host clock's, and not
    repeated)."""
    try:
        return host_clock_of(rd, coll, Diagnostics())
    except MsprofKitError:
        return None


def _info_ns(clock: Optional[Clock], ticks: np.ndarray) -> np.ndarray:
    """KIT_TASK.infoNs: host ticks of node_basic_info stamps (-1: none) as local ns, -1 kept."""
    if clock is None:
        return np.full(len(ticks), -1, dtype=np.int64)
    return np.where(ticks >= 0, clock.to_ns(np.maximum(ticks, 0)), -1)


def _tasks_and_tables(coll: Collection, chip: Chip, host: Optional[HostData], devices: List[Tuple[ResultDir, DeviceData]],
                      strings: StringPool, put: Sink, info: List[Tuple[int, str, str]], diag: Diagnostics) -> None:
    """COMPUTE_TASK_INFO, then the device tasks matched with the host's, a device after the other
    (by id) and a window of starts at a time, into TASK, KIT_TASK and KIT_TASK_PMU, then
    OVERLAP_ANALYSIS and the small tables."""
    pid = host.pid if host else 0
    host_tasks = host.tasks if host is not None else None
    largest = dict(host_tasks.largest) if host_tasks is not None else dict.fromkeys(GID_KEYS, 0)
    for _, dev in devices:
        largest["device_id"] = max(largest["device_id"], dev.device_id)
        largest["batch"] = max(largest["batch"], len(dev.flips.get("syscnt", ())))
    largest["stream_id"] = max(largest["stream_id"], 0xFFFF)
    largest["task_id"] = max(largest["task_id"], 0xFFFF)
    largest["ctx"] = max(largest["ctx"], 0x10000)
    gids = GlobalIds(largest)
    who = label(coll.path)
    with diag.progress.phase(f"{who}: op descriptions"):
        compute_ok = _write_compute_info(host, gids, strings, put) if host is not None else np.zeros(0, dtype=bool)
    memory.give_back()
    # host task types (codes into the host's texts) and device task types (past them) as one code
    texts = host_tasks.text_table() if host_tasks is not None else _texts(1, "")
    dev_names = _dev_type_names()
    type_texts = np.concatenate([texts, dev_names])
    is_mix_type = _where_text(type_texts, lambda k: k in MIX_TYPES)
    is_mix_aic = _where_text(type_texts, lambda k: k == "KERNEL_MIX_AIC")
    is_compute_type = _where_text(type_texts, lambda k: k in COMPUTE_HOST_TYPES)
    stars = chip.family == "stars"
    with_pmu = [rd for rd, dev in devices if dev.tasks.rows and _has_pmu(dev, stars)]
    rules = metrics.rules_for(chip.platform)
    columns = list(dict.fromkeys(c for rd in with_pmu for c in pmu_columns(rd, stars, rules)))
    # where the store keeps C++-rule metrics, an iteration export needs the Python rules' (KIT_TASK_PMU_PY)
    py_rules = metrics.iteration_rules(rules) if stars else None
    py_columns: List[str] = []
    if py_rules is not None:
        for rd in with_pmu:
            by_core = metrics.ffts_python_columns({core: _group_of(rd, core) for core in ("aic", "aiv")}, py_rules)
            listed = [f"{core}_{name}" for core, names in by_core.items() for name in names]
            info.append((rd.device_id, "pmu_iteration_columns", ",".join(listed)))
            py_columns += [c for c in listed if c not in py_columns]
    for rd in with_pmu:
        cores = ("aic", "aiv") if stars else ("aic",)
        if not any(_group_of(rd, core)[1] for core in cores):
            where = rd.files.get("sample.json")
            what = f"{where}: names no PMU metrics (ai_core_metrics and ai_core_profiling_events)" if where else \
                f"{rd.path}: no sample.json to name the PMU metrics (ai_core_metrics and ai_core_profiling_events)"
            diag.warn(f"{what}; the PMU metric columns of device {rd.device_id} (all but total_time and "
                      f"total_cycles) are dropped although its PMU records are there")
            continue
        for core in cores:
            group, events = _group_of(rd, core)
            why = metrics.problem(events, group, rules)
            if why is not None:
                where = rd.files.get("sample.json", rd.path)
                key = "ai_core_metrics" if core == "aic" else "aiv_metrics"
                diag.warn(f"{where}: {key}: {why}; the {core.upper()} metric columns of device {rd.device_id} "
                          f"(all but total_time and total_cycles) are left out")
    overlaps: List[_Overlap] = []
    row = 0
    matching = diag.progress.phase(f"{who}: matching device tasks", total=sum(int(dev.tasks.rows) for _, dev in devices),
                                   unit="tasks")
    try:
        for rd, dev in sorted(devices, key=lambda d: d[1].device_id):
            runs = dev.tasks
            if not runs.rows:
                continue
            edges = runs.edges(TASK_ROWS)
            runs.cut(edges)
            entries = host_tasks.entries.get(dev.device_id) if host_tasks is not None else None
            info_clock = _pmu_host_clock(rd, coll)
            if entries is not None:
                entries.cut(edges)
            match = _Match(host_tasks.first.get(dev.device_id) if host_tasks is not None else None)
            pmu: Optional[Union[_StarsPmu, _HwtsPmu]] = None
            if rd in with_pmu:
                pmu = _StarsPmu(rd, dev, edges, rules, py_rules) if stars else _HwtsPmu(rd, dev, rules)
            overlap = _Overlap(runs.folder, dev.device_id)
            overlaps.append(overlap)
            for w in range(len(edges) + 1):
                # (a window without tasks, which ties can leave first, still passes on its entries
                # and PMU records)
                t = device_tasks(dev, runs.window(w))
                n = len(t)
                key = match_keys(t["stream_id"].to_numpy(), t["task_id"].to_numpy(), t["ctx"].to_numpy())
                matched, e = match.window(key, t["start_ns"].to_numpy(), entries.window(w) if entries is not None else None)
                dev_type = t["dev_type"].to_numpy()
                host_type = np.where(matched, e["type"], len(texts) + dev_type)
                hbatch = np.where(matched, e["batch"], t["batch"].to_numpy())
                gid = gids.ids(np.full(n, dev.device_id), t["stream_id"].to_numpy(), t["task_id"].to_numpy(),
                               t["ctx"].to_numpy(), hbatch)
                rows = np.arange(row, row + n, dtype=np.int64)
                row += n
                put("TASK", _frame({
                    "startNs": t["start_ns"].to_numpy(), "endNs": t["end_ns"].to_numpy(), "deviceId": dev.device_id,
                    "connectionId": np.where(matched, e["conn"].astype(np.int64), -1), "globalTaskId": gid, "globalPid": pid,
                    "taskType": strings.ids_of(CodedTexts(host_type, type_texts)), "contextId": t["ctx"].to_numpy(),
                    "streamId": t["stream_id"].to_numpy(), "taskId": t["task_id"].to_numpy(),
                    "modelId": np.where(matched, e["model_id"], NO_MODEL)}), last=False)
                put("KIT_TASK", {
                    "taskRow": rows, "globalTaskId": gid, "batchId": hbatch,
                    "requestId": np.where(matched, e["request_id"].astype(np.int64), -1), "deviceTaskType": CodedTexts(dev_type, dev_names),
                    "kernelName": CodedTexts(np.where(matched, e["kernel"], 0), texts),
                    "threadId": np.where(matched, e["thread_id"].astype(np.int64), -1), "matched": matched.astype(np.int64),
                    "trackNs": np.where(matched, e["ts_ns"].astype(np.int64), -1),
                    "infoNs": _info_ns(info_clock, np.where(matched, e["info_ts"].astype(np.int64), -1))}, last=False)
                if pmu is not None:
                    got = pmu.step(w, {
                        "key": key, "stream_id": t["stream_id"].to_numpy(), "task_id": t["task_id"].to_numpy(),
                        "start": t["start"].to_numpy(), "end": t["end"].to_numpy(), "end_ns": t["end_ns"].to_numpy(),
                        "row": rows, "is_mix": is_mix_type[host_type], "main_aic": is_mix_aic[host_type],
                        "block": e["block"], "mix": e["mix"], "gid": gid}, int(edges[w]) if w < len(edges) else None)
                    if got is not None:
                        put("KIT_TASK_PMU", {"taskRow": got["taskRow"], "globalTaskId": got["globalTaskId"],
                                             **{c: got[c] if c in got else np.full(len(got["taskRow"]), np.nan)
                                                for c in columns}}, last=False)
                    python = pmu.python_part() if isinstance(pmu, _StarsPmu) else None
                    if python is not None:
                        put("KIT_TASK_PMU_PY", {"taskRow": python["taskRow"], "globalTaskId": python["globalTaskId"],
                                                **{c: python[c] if c in python else np.full(len(python["taskRow"]), np.nan)
                                                   for c in py_columns}}, last=False)
                is_compute = np.zeros(n, dtype=bool)
                known = gid < len(compute_ok)
                is_compute[known] = compute_ok[gid[known]]
                overlap.step(t["start_ns"].to_numpy(), t["end_ns"].to_numpy(), is_compute, ~is_compute_type[host_type])
                del t, e, key, matched, host_type, gid
                matching.advance(n)
            if pmu is not None:
                pmu.finish(diag)
            dev.close()
            memory.give_back()
        put("TASK", None, last=True)
        put("KIT_TASK", None, last=True)
        if with_pmu:
            put("KIT_TASK_PMU", None, last=True)
            if py_rules is not None:
                put("KIT_TASK_PMU_PY", None, last=True)
            if stars:  # only these chips carry TASK_PMU_INFO (and its strings) in the unified DB
                for name in columns:
                    strings.id(name)
            info.append((-1, "pmu_prefixed", "1" if stars else "0"))
        matching.close()
        with diag.progress.phase(f"{who}: overlap analysis", total=len(overlaps), unit="devices") as phase:
            next_id = 0
            for overlap in overlaps:
                next_id = overlap.write(next_id, put)
                phase.advance()
            put("OVERLAP_ANALYSIS", None, last=True)
    finally:
        matching.close()
        for overlap in overlaps:
            overlap.close()
    _small_tables(coll, chip, devices, put, info, diag)
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


def _small_tables(coll: Collection, chip: Chip, devices: List[Tuple[ResultDir, DeviceData]], put: Sink,
                  info: List[Tuple[int, str, str]], diag: Diagnostics) -> None:
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
    for rd in coll.result_dirs():
        problem = end_info_problem(rd)
        if problem is not None and start:
            diag.warn(f"{problem}; the collection's end is taken from another end_info, or its start plus 30 "
                      "minutes (the reference's default), so the end of the session and of the AI Core frequency "
                      "line may be wrong")
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
