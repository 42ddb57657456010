"""The host side of a collection: its APIs into CANN_API and KIT_API a window at a time, its task
tracks and op records associated with the call tree (association.py), and the host compute tasks
and model names the device side needs (HostData)."""
from __future__ import annotations

import collections
import functools
from dataclasses import dataclass, field
from typing import Callable, Deque, Dict, Iterator, Optional, Tuple

import numpy as np
import pandas as pd

from .. import losses
from ..store import CodedTexts
from ..errors import Diagnostics
from ..forked import Forked, can_fork
from ..layout import Collection, ResultDir, data_files
from ..parsers import host as host_parsers
from ..progress import label
from ..spill import Runs
from ..timebase import Clock
from . import limits
from .api_windows import ApiWindows
from .association import OP_KINDS, TREE_COLUMNS, Association, LatestEnds, tree_mask
from .clocks import host_clock_of
from .columns import (ACL_API_TAGS, INVALID_CTX, LEVEL_ACL, LEVEL_HCCL, LEVEL_MODEL, LEVEL_NODE, STEP_INFO_API,
                      Columns, DataFiles, frame_of)
from .hccl import INFO_FIELDS, OP_INFO_FIELDS, HcclHost, HcclHostData
from .matching import HostTasks
from .names import (HashTable, TypeTable, code_text, distinct, group_paths, hash_names, per_distinct, read_dictionary,
                    read_hashes, type_name_of)
from .sink import TableSink
from .streams import compact_stream
from .tasks import StringPool
from .tensors import TensorTable, tensor_job, tensor_texts


@dataclass
class HostData:
    """What the device side needs of the host: its compute tasks and match entries, model names,
    pid and the texts of the compute tasks' tensors."""
    tasks: Optional[HostTasks]  # the tracks and compute tasks, spilled (None: no task_track)
    models: pd.DataFrame         # model id -> name
    pid: int
    tensor_table: TensorTable = field(default_factory=TensorTable.empty)  # compute tensors' rows
    hccl: Optional[HcclHostData] = None  # the communication tasks and ops (None: none)
    hashes: HashTable = field(default_factory=HashTable)  # hash_dic


def load_host(rd: ResultDir, coll: Collection, diag: Diagnostics, strings: StringPool, put: TableSink,
              jobs: int = 1, scratch: str = "") -> Optional[HostData]:
    """The host's tracks and compute tasks, associated with its APIs; the APIs themselves go to
    `put` (CANN_API, KIT_API) as soon as they are numbered. With jobs > 1 the tensor texts are
    rendered in a forked worker meanwhile."""
    files = data_files(rd, diag)
    if not files:
        diag.warn(f"{rd.data_dir}: no host data files; expected *.api_event.data.slice_N and friends")
        return None
    losses.check_slices(files, diag)
    worker = Forked(functools.partial(tensor_job, rd, files, scratch), "tensor texts") \
        if jobs > 1 and can_fork() else None

    def read_tensors() -> Tuple[Runs, TensorTable]:
        if worker is None:
            return tensor_texts(files, diag, scratch)
        tensors, table, warnings = worker.result()
        diag.extend(warnings)
        return tensors, table

    try:
        return _load_host(rd, coll, diag, files, read_tensors, strings, put, scratch)
    finally:
        if worker is not None:
            worker.cancel()


def _load_host(rd: ResultDir, coll: Collection, diag: Diagnostics, files: DataFiles,
               read_tensors: Callable[[], Tuple[Runs, TensorTable]], strings: StringPool,
               put: TableSink, scratch: str) -> HostData:
    clock = host_clock_of(rd, coll, diag)
    hashes = read_hashes(files, diag)
    types = read_dictionary(files, "type_info_dic", True, diag)
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
    hccl = HcclHost(clock, types, scratch)
    host_tasks = None
    try:
        with reading:
            _spill_records(files, types, records, hccl, diag)
            tensors_at = len(diag.warnings)  # (the ops' warnings come here, though awaited later)
            models = _model_names(rd, files, hashes, diag)
        if records.runs["track"].rows:
            host_tasks = HostTasks(scratch, types, hashes)
        assoc = Association(clock, types, hashes, host_tasks.add, hccl) if host_tasks is not None else None
        if not apis.count:
            diag.warn(f"{rd.data_dir}: no api_event records; CANN_API and api_statistic stay empty, and without "
                      f"launch APIs the device tasks are named by their kernels only")
        edges = apis.edges(tracks=records.runs["track"])
        records.cut(edges)
        tensor_table: Optional[TensorTable] = None

        def take_tensors() -> TensorTable:
            """The tensor_info ops, awaited only when the association needs them (the first
            window's APIs are written meanwhile), cut as the other records; their warnings put
            where reading them would have."""
            later = diag.warnings[tensors_at:]
            del diag.warnings[tensors_at:]
            records.runs["tensor"], table = read_tensors()
            diag.extend(later)
            records.runs["tensor"].cut(edges)
            return table
        latest = LatestEnds()
        with diag.progress.phase(f"{name}: host APIs", total=int(apis.count), unit="APIs") as phase:
            # (window, its tree APIs, its API count) numbered but not associated yet: with more than
            # one window, the second window's APIs are numbered before the first is associated, while
            # the tensor worker finishes (the APIs and the association share no state; the order is
            # the same whatever the worker's speed)
            ahead: Deque[Tuple[int, Optional[Columns], int]] = collections.deque()
            for w, window in enumerate(apis.windows(edges)):
                n = len(window["begin"])
                ahead.append((w, _api_window(window, clock, types, hashes, pid, strings, put, latest, hccl)
                              if n else None, n))
                del window
                if w == 0 and len(edges) and assoc is not None:
                    continue
                while ahead:
                    at, tree, count = ahead.popleft()
                    if assoc is not None:
                        if tensor_table is None:
                            tensor_table = take_tensors()
                        assoc.step(tree, records.window(at), int(edges[at]) if at < len(edges) else None)
                    del tree
                    phase.advance(count)
        if tensor_table is None:
            tensor_table = take_tensors()
        put("CANN_API", None, last=True)
        put("KIT_API", None, last=True)
        if assoc is not None:
            assoc.finish()
        where = next((p for _, group in group_paths(files, "hash_dic") for p in group),
                     f"{rd.data_dir}/*.hash_dic.slice_N")
        hashes.warn_misses(where, diag)
        if isinstance(types, TypeTable):
            where = next((p for _, group in group_paths(files, "type_info_dic") for p in group),
                         f"{rd.data_dir}/*.type_info_dic.slice_N")
            types.warn_misses(where, diag)
    except BaseException:
        if host_tasks is not None:
            host_tasks.close()
        hccl.close()
        raise
    finally:
        apis.close()
        records.close()
    hccl_data = hccl.finish()
    if hccl_data is not None:
        hccl_data.info_where = f"{rd.data_dir}/*.hccl_info.slice_N"
    return HostData(tasks=host_tasks, models=models, pid=pid, tensor_table=tensor_table, hccl=hccl_data,
                    hashes=hashes)


TRACK_FIELDS = ("thread_id", "timestamp", "device_id", "stream_id", "task_id", "task_type", "kernel_name",
                "data_len", "num_blocks", "ratio")
NBI_FIELDS = ("thread_id", "timestamp", "op_name", "op_type", "task_type", "block_dim", "op_flag")
HCCL_KINDS = ("hop", "hinfo")  # hccl_op_info and hccl_info records (hccl.py)


def _api_window(window: Columns, clock: Clock, types: Dict[str, str], hashes: HashTable, pid: int,
                strings: StringPool, put: TableSink, latest: LatestEnds, hccl: HcclHost) -> Columns:
    """A window of the host's APIs (events merged, in connection-id order: APIs by begin, level
    descending, ties by thread then stream order; an API's connection id is its position + 1)
    into CANN_API and KIT_API parts. Returns its tree APIs (TREE_COLUMNS; begin and end in host
    ticks); `latest` carries the call tree's latest ends from a window to the next."""
    names = _name_apis(window, types, hashes)
    texts = _api_texts(window, names, hashes, types)
    window["start_ns"] = clock.to_ns(window["begin"])
    window["end_ns"] = clock.to_ns(window["end"])
    _write_apis(window, texts, pid, strings, put)
    hccl.add_apis(window)
    keep = tree_mask(window, latest)
    return {k: window[k][keep] for k in TREE_COLUMNS}


class _HostRecords:
    """The host's task tracks (maintenance ones left out) and op records, spilled sorted by time
    (host ticks) and read back a window of times at a time. `pos` numbers each kind's records in
    stream order, unaging files first: the order the call tree's rules take the first of. The
    tensor_info ops come spilled already (`tensor_texts`), as `runs["tensor"]`. The tracks' times
    are sampled: the windows are cut by tracks as well as by APIs (ApiWindows.edges)."""

    def __init__(self, folder: str) -> None:
        self.runs = {kind: Runs(folder, kind, "timestamp", limits.SAMPLE_EVERY if kind == "track" else 0,
                                 background=True)
                     for kind in ("track",) + OP_KINDS + HCCL_KINDS if kind != "tensor"}

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


def _chunks(files: DataFiles, kind: str, diag: Diagnostics) -> Iterator[Tuple[str, Columns]]:
    """(group, columns) of each chunk of a compact or additional record kind, unaging first; each
    stream's issues are reported once it is read."""
    for group, paths in group_paths(files, kind):
        stream = compact_stream(kind, paths)
        for arr, offsets in stream.chunks():
            yield group, host_parsers.compact_columns(kind, arr, offsets)
        diag.extend(stream.issues)


def _spill_records(files: DataFiles, types: Dict[str, str], records: _HostRecords, hccl: HcclHost,
                   diag: Diagnostics) -> None:
    """The task tracks, node_basic_info, hccl_op_info, hccl_info and context_id_info records into
    `records`, a chunk at a time; of the hccl_info records only thread and time ride in the
    windows, their fields go to `hccl` by record position (only HcclHost reads them)."""
    for _, c in _chunks(files, "task_track", diag):
        # (map_names' names, tested once per distinct code: no million texts made and hashed)
        kept = per_distinct(c["task_type"], lambda u: type_name_of(types, f"5000_{int(u)}", str(int(u)))
                            != "MAINTENANCE", bool)
        records.add("track", {k: c[k][kept] for k in TRACK_FIELDS})
    for group, c in _chunks(files, "node_basic_info", diag):
        records.add("nbi", {**{k: c[k] for k in NBI_FIELDS},
                            "aging": np.full(len(c["timestamp"]), group == "aging")})
    for _, c in _chunks(files, "hccl_op_info", diag):
        records.add("hop", {k: c[k] for k in ("thread_id", "timestamp") + OP_INFO_FIELDS})
    for _, c in _chunks(files, "hccl_info", diag):
        hccl.add_info_fields({k: c[k] for k in INFO_FIELDS})  # (in record order: the same positions)
        records.add("hinfo", {"thread_id": c["thread_id"], "timestamp": c["timestamp"]})
    for _, c in _chunks(files, "context_id_info", diag):
        first = np.where(c["ctx_num"] > 0, c["ctx_ids"][:, 0] if len(c["ctx_num"]) else 0, INVALID_CTX)
        records.add("ctx", {"thread_id": c["thread_id"], "timestamp": c["timestamp"],
                            "ctx": first.astype(np.int64)})


def _write_apis(apis: Columns, texts: Dict[str, np.ndarray], pid: int, strings: StringPool, put: TableSink) -> None:
    """CANN_API and KIT_API parts of a window of APIs in connection-id order (`conn`)."""
    n = len(apis["begin"])
    if not n:
        return
    conn = apis["conn"]
    put("CANN_API", frame_of({
        "startNs": apis["start_ns"], "endNs": apis["end_ns"], "type": apis["level"],
        "globalTid": (np.int64(pid) << 32) | apis["thread"].astype(np.int64), "connectionId": conn,
        "name": strings.ids_of(CodedTexts(apis["name"], texts["name"]))}), last=False)
    put("KIT_API", {"connectionId": conn, "mode": CodedTexts(apis["mode"], texts["mode"]),
                    "itemId": CodedTexts(apis["item_text"], texts["item_text"])}, last=False)


def _name_apis(apis: Columns, types: Dict[str, str], hashes: HashTable) -> np.ndarray:
    """API names: type_info_dic '<level>_<type>' (decimal type if unknown); HCCL APIs by item hash.
    Adds `name`, codes into the returned table of names."""
    level = apis["level"]
    codes, texts = distinct((level.astype(np.int64) << 32) | apis["type"].astype(np.int64),
                            lambda k: type_name_of(types, f"{int(k) >> 32}_{int(k) & 0xFFFFFFFF}",
                                                   str(int(k) & 0xFFFFFFFF)))
    hccl = level == LEVEL_HCCL
    if hccl.any():
        by_item, more = pd.factorize(apis["item"][hccl], use_na_sentinel=False)
        codes[hccl] = len(texts) + by_item
        texts += hashes.texts(more).tolist()
    apis["name"] = codes.astype(np.int32)
    return np.array(texts, dtype=object)


def _api_texts(apis: Columns, names: np.ndarray, hashes: HashTable, types: Dict[str, str]
               ) -> Dict[str, np.ndarray]:
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
        tag_codes, tags = distinct(apis["type"][acl] >> 16, code_text(ACL_API_TAGS))
        mode[acl] = len(modes) + tag_codes
        modes += tags
    hccl = level == LEVEL_HCCL  # named by their item; their mode is their type's name (master, slave)
    if hccl.any():
        type_codes, kinds = distinct(apis["type"][hccl], lambda t: type_name_of(types, f"{LEVEL_HCCL}_{int(t)}",
                                                                                str(int(t))))
        mode[hccl] = len(modes) + type_codes
        modes += kinds
    step_info = np.array([t == STEP_INFO_API for t in names.tolist()], dtype=bool)
    by_number = (level == LEVEL_MODEL) | ((level == LEVEL_NODE) & step_info[name])
    item_codes, values = pd.factorize(apis["item"], use_na_sentinel=False)
    values = np.asarray(values)
    # the table: each distinct item as a number, then as its hash text (made for the items read so only)
    item_texts: np.ndarray = np.full(2 * len(values), None, dtype=object)
    shown: np.ndarray = np.zeros(2 * len(values), dtype=bool)
    shown[np.where(by_number, item_codes, len(values) + item_codes)] = True
    as_number, as_text = np.flatnonzero(shown[:len(values)]), np.flatnonzero(shown[len(values):])
    item_texts[as_number] = values[as_number].astype(str).astype(object)
    item_texts[len(values) + as_text] = hashes.texts_or_ids(values[as_text])
    apis["mode"] = mode
    apis["item_text"] = np.where(by_number, item_codes, len(values) + item_codes).astype(np.int32)
    return {"name": names, "mode": np.array(modes, dtype=object), "item_text": item_texts}


def _model_names(rd: ResultDir, files: DataFiles, hashes: HashTable, diag: Diagnostics) -> pd.DataFrame:
    frames = []
    for _, c in _chunks(files, "graph_id_map", diag):
        frames.append(frame_of({"model_id": c["model_id"].astype(np.int64),
                                "name": hash_names(c["model_name"], hashes)}))
    if not frames:
        return frame_of({"model_id": np.zeros(0, np.int64), "name": np.zeros(0, dtype=object)})
    return pd.concat(frames, ignore_index=True).drop_duplicates("model_id", keep="last")
