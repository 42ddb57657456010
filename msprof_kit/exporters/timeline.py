"""msprof_{ts}.json, the timeline (Chrome trace event format, outputs.md §9), and step_trace_{ts}.json.

The file is a bare JSON array. Its processes, one per layer and device (pid = real pid << 10 |
sort index << 5 | device id, 31 for the host):

* CANN (sort index 7): the host APIs, one thread per OS thread, named `<Level>@<api>`;
* Ascend Hardware (14): the device tasks, one thread per stream, named after their op (or task
  type); and the step-trace iterations of each model (thread 70000 + model id);
* AI Core Freq (15): a counter of the AI Core frequency (MHz);
* Overlap Analysis (31; 20 in the Python flavour): when the device computed and when it was idle.

HostToDevice flow arrows join each device task to the host call that issued it: the node launch
(or the ACL call of a memory copy or event task) in the C++ flavour; in the Python flavour the
host task record inside the launch (outputs.md §9.5). Only complete arrows are written: the
reference also writes an arrow start without an end when a launch's task is missing.

Every event kind has one text template (a `Template` of literal pieces and typed slots), filled
from column arrays a chunk at a time by `native_impl.format_rows` (one C call per chunk when the
extension is built, its Python twin otherwise); each chunk is written as soon as it is made, so
memory is bounded by a chunk. Texts (names, modes, task types) are JSON-encoded once per distinct
value and referenced by code. Times are printed from integer ns as "<µs>.<3 decimals>" (exact);
durations are the float µs the reference prints (Python's repr of ns / 1000). Times are µs since the
Unix epoch, as the reference writes them, or with `ts_origin="start"` µs since the collection's start
(`ts_origin_ns`): Perfetto turns a time into ns through a double, which keeps 3 decimals of µs
exact below about 10^12 µs but not at epoch values (~1.7 * 10^15), where back-to-back slices then
overlap by a few ns and are dropped.

The rules follow the flavour a CANN install uses for the chip (`ctx.flavour`): the C++ exporters
on the 910B family, the Python exporters on other chips and for every iteration (graph) export.
An iteration export applies the reference's windows (docs/research/iteration_export.md §2, §3.8):
device tasks whose start and end lie in the iterations (the window's tasks of other models shown as
device-only tasks), host APIs in or spanning the API window, the requested iterations only, the
overlap recomputed from the exported tasks, and every device layer cut to the timeline window.
"""
from __future__ import annotations

import copy
import json
import os
import queue
import shutil
import sqlite3
import threading
from dataclasses import dataclass, field
from typing import BinaryIO, Callable, Dict, Iterator, List, Optional, Sequence, Set, Tuple, Union

import numpy as np
import pandas as pd

from .. import memory, store
from ..store import before_start
from ..arrays import SortedKeys, ascending, distinct, first_seen, in_marked_groups, in_sorted, isin
from ..intervals import interval_gaps, union_intervals
from ..forked import Forked
from ..progress import Phase, label
from ..native_impl import Slot, fixed_slot, float_slot, format_rows, int_slot, text_slot, text_table
from .context import ExportContext, RowReader, Scope
from .scope import step_iterations

HOST_DEVICE = 31          # the device id part of a host process id
HOST_DIR = 64             # KIT_INFO's device id of the host result dir
SORT_CANN, SORT_HARDWARE, SORT_FREQ = 7, 14, 15
SORT_OVERLAP = {"cpp": 31, "python": 20}
STEP_TID_BASE = 70000     # step-trace thread of model m: 70000 + m
INVALID_CTX = 4294967295
NO_MODEL = 4294967295     # model id of eager (single-operator) tasks
CHUNK = 100_000           # rows rendered and written at a time
WRITE_AHEAD = 2           # rendered chunks that may wait for the disk
PART_COPY = 1 << 20       # bytes copied at a time when a part file is appended
FORK_KEEP_FREE = 64 << 20  # free heap kept when the device layers' process is forked

LEVEL_ACL, LEVEL_MODEL, LEVEL_NODE = 20000, 15000, 10000
# API level -> (event name prefix, args "level")
LEVELS: Dict[int, Tuple[str, str]] = {
    30000: ("Api", "pytorch"), 25000: ("Api", "pta"), 20500: ("Api", "msproftx"), LEVEL_ACL: ("AscendCL", "acl"),
    LEVEL_MODEL: ("Model", "model"), LEVEL_NODE: ("Node", "node"), 5500: ("Communication", "communication"),
    5000: ("Runtime", "runtime")}
ACL_EVENT_APIS = ("aclrtRecordEvent", "aclrtStreamWaitEvent")  # ACL calls whose device task gets an arrow
MEMCPY_ASYNC = "MEMCPY_ASYNC"
DEVICE_NAMED = ("FFTS_PLUS", "UNKNOWN")  # host task types for which the device's task type name is shown
OVERLAP_THREADS = ("Computing", "Communication", "Communication(Not Overlapped)", "Free")  # tid = OVERLAP type
FREQ_DIES = (-1, 0, 1)
FREQ_CHIPS = ("4", "5", "7")  # platform versions whose reference timeline shows AI Core Freq


# ------------------------------------------------------------------------------------------------
# Reading and writing

class TraceWriter:
    """A JSON array written as it is made: each `add` appends a chunk of serialized events.
    `part=True` writes the events without the enclosing brackets, for `append_part` of another
    writer.

    The chunks are encoded here and written to disk by a background thread (the write releases
    the GIL, so the disk works while the next chunk is rendered); at most WRITE_AHEAD chunks wait,
    which bounds the memory. A failed write is raised by the next `add` or by `close`; a file left
    unfinished by an error is removed."""

    def __init__(self, path: str, part: bool = False) -> None:
        self.path = path
        self.part = part
        self.count = 0
        self._f: BinaryIO = open(path, "wb")
        self._queue: "queue.Queue[Union[bytes, str, None]]" = queue.Queue(maxsize=WRITE_AHEAD)
        self._error: Optional[BaseException] = None
        self._thread = threading.Thread(target=self._drain, name="timeline-writer", daemon=True)
        self._thread.start()
        if not part:
            self._put(b"[")

    def _drain(self) -> None:
        """The writing thread: writes blocks until the None mark; after a failure it keeps taking
        blocks (so that `add` never waits forever) and the failure is raised in the caller."""
        while True:
            block = self._queue.get()
            if block is None:
                return
            if self._error is None:
                try:
                    if isinstance(block, str):  # a part file to copy in
                        self._copy_part(block)
                    else:
                        self._f.write(block)
                except BaseException as exc:  # handed to the rendering thread, which raises it
                    self._error = exc

    def _copy_part(self, path: str) -> None:
        """Copy a part file in: inside the kernel where it can (copy_file_range), else read and
        written a PART_COPY block at a time (from where the kernel copy stopped)."""
        with open(path, "rb") as part:
            if not self._kernel_copy(part):
                shutil.copyfileobj(part, self._f, PART_COPY)

    def _kernel_copy(self, part: BinaryIO) -> bool:
        """Copy the rest of `part` with copy_file_range; False when the kernel cannot copy between
        these files (old kernels, some file systems): the caller copies from where it stopped."""
        if not hasattr(os, "copy_file_range"):
            return False
        self._f.flush()
        try:
            while os.copy_file_range(part.fileno(), self._f.fileno(), PART_COPY * 64):
                continue
        except OSError:
            return False
        return True

    def append_part(self, path: str) -> None:
        """Append the events of a finished part file another TraceWriter wrote (copied by the
        writing thread)."""
        if not os.path.getsize(path):
            return
        if self.count:
            self._put(b",")
        self._put(path)
        self.count += 1

    def _put(self, block: Union[bytes, str]) -> None:
        if self._error is not None:
            raise self._error
        self._queue.put(block)

    def add(self, events: Sequence[str]) -> None:
        if not events:
            return
        text = ",".join(events)
        self._put((f",{text}" if self.count else text).encode("utf-8"))
        self.count += len(events)

    def add_block(self, block: bytes, count: int) -> None:
        """Append `count` serialized events, already joined by commas (a `Template.rows` block)."""
        if not count:
            return
        if self.count:
            self._put(b",")
        self._put(block)
        self.count += count

    def _stop(self) -> None:
        self._queue.put(None)
        self._thread.join()
        self._f.close()

    def close(self) -> None:
        try:
            if not self.part:
                self._put(b"]")
        finally:
            self._stop()
        if self._error is not None:
            raise self._error

    def __enter__(self) -> "TraceWriter":
        return self

    def __exit__(self, kind: Optional[type], exc: Optional[BaseException], tb: object) -> None:
        if kind is None:
            self.close()
            return
        self._stop()
        os.remove(self.path)


def _ints(conn: sqlite3.Connection, sql: str, width: int) -> np.ndarray:
    """All rows of a small all-integer query as one (n, width) int64 array."""
    rows = conn.execute(sql).fetchall()
    return np.array(rows, dtype=np.int64).reshape(len(rows), width)


class Template:
    """One event kind's text: literal pieces with named slots between them, e.g.
    Template('{"name":', "name", ',"pid":', "pid", '}'). A name may appear more than once."""

    def __init__(self, *parts: str) -> None:
        self.pieces = tuple(p.encode("utf-8") for p in parts[0::2])
        self.names = parts[1::2]

    def rows(self, n: int, **slots: Slot) -> bytes:
        """n events, comma-separated, from slots of n rows each."""
        return format_rows(self.pieces, [slots[name] for name in self.names], n, b",")


API_EVENT = Template('{"name":', "name", ',"pid":', "pid", ',"tid":', "tid", ',"ts":"', "ts", '","dur":', "dur",
                     ',"ph":"X","args":{"Thread Id":', "tid", ',"Mode":', "mode", ',"level":', "level", ',"id":', "id",
                     ',"item_id":', "item", ',"connection_id":', "conn", '}}')
TASK_EVENT = Template('{"name":', "name", ',"pid":', "pid", ',"tid":', "stream", ',"ts":"', "ts", '","dur":', "dur",
                      ',"ph":"X","args":{"Model Id":', "model", ',"Task Type":', "task_type", ',"Physic Stream Id":',
                      "stream", ',"Task Id":', "task", ',"Batch Id":', "batch", ',"Subtask Id":', "ctx",
                      ',"connection_id":', "conn", '}}')
FLOW_EVENTS = {ph: Template('{"name":"HostToDevice', "id", '","pid":', "pid", ',"tid":', "tid",
                            f',"ph":"{ph}","cat":"HostToDevice","id":"', "id", '","ts":"', "ts", tail)
               for ph, tail in (("s", '"}'), ("f", '","bp":"e"}'))}
OVERLAP_EVENT = Template('{"name":', "name", ',"pid":', "pid", ',"tid":', "tid", ',"ts":"', "ts", '","dur":', "dur",
                         ',"ph":"X","args":{}}')


def _coded(keys: np.ndarray, literal_of: Callable[[int], str]) -> Slot:
    """A TEXT slot of integer keys: each distinct key's literal made once."""
    codes, uniq = _dense_codes(np.asarray(keys, dtype=np.int64))
    return text_slot(codes, text_table(literal_of(k) for k in uniq.tolist()))


def _dense_codes(keys: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """(int32 code of each key, the distinct keys): for keys within a narrow range, by a table over
    the range (sorted keys, no hashing), else as pd.factorize gives them."""
    if len(keys):
        lo, hi = int(keys.min()), int(keys.max())
        if hi - lo < max(1 << 20, 2 * len(keys)):
            shifted = keys - lo
            present = np.zeros(hi - lo + 1, dtype=bool)
            present[shifted] = True
            code_of = np.cumsum(present, dtype=np.int32) - 1
            return code_of[shifted], np.flatnonzero(present) + lo
    codes, uniq = pd.factorize(keys)
    return codes.astype(np.int32), uniq


def _isin_text(values: np.ndarray, texts: Sequence[str]) -> np.ndarray:
    """Which values (texts) are among `texts`, evaluated once per distinct value."""
    if len(values) == 0:
        return np.zeros(0, dtype=bool)
    codes, uniq = pd.factorize(np.asarray(values, dtype=object), use_na_sentinel=False)
    return np.array([u in texts for u in uniq], dtype=bool)[codes]


def _us_text(ns: int) -> str:
    """Local ns as µs with 3 decimals, exact (as a FIXED slot of 3 decimals prints it)."""
    q, r = divmod(abs(int(ns)), 1000)
    return f"{'-' if ns < 0 else ''}{q}.{r:03d}"


def _dur_us(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Durations in µs as floats (a negative span as 0), as the reference prints them."""
    return np.maximum(np.asarray(end, np.int64) - np.asarray(start, np.int64), 0) / 1000.0


def _constant(value: int, n: int) -> Slot:
    return int_slot(np.full(n, value, dtype=np.int64))


def _meta(name: str, pid: int, tid: int, args: Dict[str, object]) -> str:
    """A metadata event (`ph` M): process_name, process_labels, process_sort_index (tid 0),
    thread_name, thread_sort_index."""
    return json.dumps({"name": name, "pid": pid, "tid": tid, "ph": "M", "args": args},
                      ensure_ascii=False, separators=(",", ":"))


def _process_meta(pid: int, name: str, label: str, sort_index: int) -> List[str]:
    return [_meta("process_name", pid, 0, {"name": name}), _meta("process_labels", pid, 0, {"labels": label}),
            _meta("process_sort_index", pid, 0, {"sort_index": sort_index})]


def _thread_meta(pid: int, tid: int, name: str, sort_index: int) -> List[str]:
    return [_meta("thread_name", pid, tid, {"name": name}),
            _meta("thread_sort_index", pid, tid, {"sort_index": sort_index})]


def _flow_events(out: TraceWriter, facts: Facts, ph: str, pid: np.ndarray, tid: np.ndarray, ns: np.ndarray,
                 ids: np.ndarray) -> None:
    """HostToDevice flow starts (`s`) or ends (`f`, bound to the slice that encloses them)."""
    n = len(ns)
    out.add_block(FLOW_EVENTS[ph].rows(n, id=int_slot(ids), pid=int_slot(pid), tid=int_slot(tid), ts=facts.ts(ns)), n)


# ------------------------------------------------------------------------------------------------
# Facts shared by the layers

@dataclass
class Facts:
    """What every layer needs: the flavour's rules, string ids, process ids, the scope."""

    python_rules: bool          # the reference's Python exporters (non-910B chips, iteration exports)
    python_host: bool           # host data as its Python parser keeps it (non-910B chips)
    strings: np.ndarray         # STRING_IDS: id -> text
    host_pid: int
    device_pids: Dict[int, int] = field(default_factory=dict)
    scope: Scope = field(default_factory=Scope)
    origin: int = 0             # ns subtracted from every time written (0: µs since the epoch)

    def ts(self, ns: np.ndarray) -> Slot:
        """A time slot: ns as µs since the origin, 3 decimals."""
        return fixed_slot(np.asarray(ns, dtype=np.int64) - self.origin, 3)

    def us_text(self, ns: int) -> str:
        return _us_text(int(ns) - self.origin)

    def pid(self, sort_index: int, device: int = HOST_DEVICE) -> int:
        real = self.host_pid if device == HOST_DEVICE else self.device_pids.get(device, self.host_pid)
        return (real << 10) | (sort_index << 5) | device

    @property
    def scoped(self) -> bool:
        """An iteration (graph) export."""
        return not self.scope.all_export

    @property
    def flavour(self) -> str:
        return "python" if self.python_rules else "cpp"

    def timeline_window(self, device: int) -> Optional[Tuple[int, int]]:
        """[lo, hi) of a device layer in an iteration export; None in an all-export."""
        return self.scope.timeline_window(device) if self.scoped else None

    def text(self, ids: np.ndarray) -> np.ndarray:
        return self.strings[np.asarray(ids, dtype=np.int64)]

    def ids_of(self, texts: Sequence[str]) -> List[int]:
        return [int(i) for i in np.flatnonzero(_isin_text(self.strings, texts))]


def _facts(ctx: ExportContext) -> Facts:
    strings = np.zeros(0, dtype=object)
    if ctx.has("STRING_IDS"):
        rows = ctx.conn.execute("SELECT id, value FROM STRING_IDS").fetchall()
        ids = np.array([r[0] for r in rows], dtype=np.int64)
        strings = np.full(int(ids.max()) + 1 if len(ids) else 0, "", dtype=object)
        strings[ids] = np.array([r[1] for r in rows], dtype=object)
    pids = {dev: int(v["pid"]) for dev, v in ctx.device_info.items() if str(v.get("pid", "")).isdigit()}
    host_pid = pids.pop(HOST_DIR, None)
    if host_pid is None:
        host_pid = _host_pid_from_tables(ctx)
    return Facts(python_rules=ctx.flavour == "python" or not ctx.scope.all_export,
                 python_host=ctx.flavour == "python", strings=strings, host_pid=host_pid, device_pids=pids,
                 scope=ctx.scope)


def _host_pid_from_tables(ctx: ExportContext) -> int:
    """The host process id where KIT_INFO lacks it (stores written before it was kept)."""
    for table, sql in (("CANN_API", "SELECT globalTid >> 32 FROM CANN_API LIMIT 1"),
                       ("TASK", "SELECT globalPid FROM TASK LIMIT 1")):
        if ctx.has(table):
            row = ctx.conn.execute(sql).fetchone()
            if row and row[0] is not None:
                return int(row[0])
    return 0


# ------------------------------------------------------------------------------------------------
# Device tasks

TASK_COLUMNS = ("startNs", "endNs", "deviceId", "streamId", "taskId", "contextId", "modelId", "connectionId",
                "globalTaskId", "taskType")
TASK_COLS = ("start", "end", "device", "stream", "task", "ctx", "model", "conn")
TASK_BLOCK = 5 * CHUNK   # shown tasks turned into events at a time (a whole number of chunks)
TASK_CACHE = 10 * CHUNK  # up to this many shown tasks, the blocks made for the summary pass are kept


@dataclass
class TaskBlock:
    """Some of the device tasks shown (one X event each), with their texts and arrow roles."""

    cols: Dict[str, np.ndarray]   # as stored (narrow integers): start, end, device, stream, task, ctx, batch,
    #                               model, conn, thread, track_ns
    name: Slot                    # event names (codes into JSON literals)
    task_type: Slot               # args "Task Type" (codes into JSON literals)
    is_op: np.ndarray             # shown as an op (computing, for an iteration export's overlap)
    via_track: np.ndarray         # the arrow starts at the host task record (Python flavour)
    via_api: np.ndarray           # the arrow starts at the CANN API with the task's connection id
    memcpy: np.ndarray            # MEMCPY_ASYNC tasks

    def __len__(self) -> int:
        return len(self.is_op)

    def col(self, name: str) -> np.ndarray:
        return self.cols[name].astype(np.int64, copy=False)

    def flow_ids(self, python_rules: bool) -> np.ndarray:
        """C++: connection id << 32; Python: (connection id << 32) + context id."""
        conn = self.col("conn") << 32
        return conn + (self.col("ctx") & 0xFFFFFFFF) if python_rules else conn


@dataclass
class TaskTexts:
    """Task texts as codes: STRING_IDS ids below len(strings), KIT_TASK's device task type names
    after them, and -1 for none (an empty text)."""
    labels: np.ndarray   # texts of the codes, then "" (code -1)

    def isin(self, codes: np.ndarray, texts: Sequence[str]) -> np.ndarray:
        return np.isin(self.labels, texts)[codes]

    def slot(self, codes: np.ndarray) -> Slot:
        """A TEXT slot of each code's text as a JSON string literal."""
        return _coded(np.where(codes >= 0, codes, len(self.labels) - 1),
                      lambda k: json.dumps(str(self.labels[k]), ensure_ascii=False))


class TaskSource:
    """TASK with KIT_TASK's columns and COMPUTE_TASK_INFO's op names, read by row range from the
    store (whole for a store without column mirrors)."""

    def __init__(self, ctx: ExportContext, facts: Facts) -> None:
        self.task = ctx.reader("TASK", TASK_COLUMNS)
        n = len(self.task)
        kit = ctx.stored("KIT_TASK")
        self.kit = kit if len(kit) == n and n and "deviceTaskType" in kit and "batchId" in kit else None
        self.width = len(facts.strings)
        dev_labels = self.kit.labels("deviceTaskType") if self.kit is not None else None
        self.texts = TaskTexts(np.concatenate([facts.strings, dev_labels if dev_labels is not None else [],
                                               [""]]).astype(object))
        self.op_keys: Optional[SortedKeys] = None
        self.ops: Optional[RowReader] = None
        if ctx.has("COMPUTE_TASK_INFO") and n:
            self.op_keys = SortedKeys(ctx.columns("COMPUTE_TASK_INFO", ("globalTaskId",))["globalTaskId"])
            self.ops = ctx.reader("COMPUTE_TASK_INFO", ("name", "taskType"))

    def __len__(self) -> int:
        return len(self.task)

    def on(self, ctx: ExportContext) -> "TaskSource":
        """The same source read through another context's connection (a forked child's)."""
        other = copy.copy(self)
        other.task = self.task.on(ctx)
        other.kit = self.kit.on(ctx.conn) if self.kit is not None else None
        other.ops = self.ops.on(ctx) if self.ops is not None else None
        return other

    def kit_span(self, name: str, lo: int, hi: int, default: int) -> np.ndarray:
        if self.kit is None or name not in self.kit:
            return np.full(hi - lo, default, dtype=np.int64)
        return self.kit.read(name, lo, hi)

    def dev_type(self, lo: int, hi: int) -> np.ndarray:
        """Device task type codes of rows lo:hi (the host's type where KIT_TASK is missing)."""
        if self.kit is None:
            return self.task.span("taskType", lo, hi).astype(np.int64)
        return self.kit.read("deviceTaskType", lo, hi).astype(np.int64) + self.width

    def read(self, lo: int, hi: int, idx: np.ndarray) -> Tuple[Dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray]:
        """Rows lo + idx: (columns as stored, globalTaskId, host task type code, device task type code)."""
        cols = {name: self.task.span(column, lo, hi)[idx] for name, column in zip(TASK_COLS, TASK_COLUMNS)}
        cols["batch"] = self.kit_span("batchId", lo, hi, 0)[idx]
        cols["thread"] = self.kit_span("threadId", lo, hi, -1)[idx]
        cols["track_ns"] = self.kit_span("trackNs", lo, hi, -1)[idx]
        return (cols, self.task.span("globalTaskId", lo, hi)[idx], self.task.span("taskType", lo, hi)[idx].astype(np.int64),
                self.dev_type(lo, hi)[idx])

    def op_info(self, gid: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(op name, GE task type, found) of each task, from COMPUTE_TASK_INFO by globalTaskId:
        STRING_IDS ids, -1 where the task has no row."""
        name, ge_type = np.full(len(gid), -1, dtype=np.int64), np.full(len(gid), -1, dtype=np.int64)
        if self.op_keys is None or not len(gid):
            return name, ge_type, name >= 0
        pos = self.op_keys.find(gid)
        found = pos >= 0
        name[found] = self.ops.read("name", pos[found])
        ge_type[found] = self.ops.read("taskType", pos[found])
        return name, ge_type, found


class Tasks:
    """The device tasks the timeline shows, TASK_BLOCK at a time (`blocks`), and what the layers
    need of all of them: UNKNOWN device tasks and tasks shown through their FFTS+ subtasks are left
    out; in an iteration export, only the tasks of the iterations' time, those of other models as
    device-only tasks (named by their device type, model 4294967295)."""

    def __init__(self, ctx: ExportContext, facts: Facts) -> None:
        self.facts = facts
        self.source = TaskSource(ctx, facts)
        self.acl_event_conns = _acl_event_conns(ctx, facts)
        self.shown = self._shown()
        self.count = int(self.shown.sum())
        # the TASK row where each block of shown tasks starts (and the end)
        firsts = np.flatnonzero(self.shown)[::TASK_BLOCK]
        self.bounds = np.append(firsts, len(self.source)).tolist() if self.count else [0]
        self._kept: Optional[List[TaskBlock]] = None
        # what the layers need of every shown task
        threads: Set[int] = set()
        streams, conns, memcpy, flows, overlap = [], [], [], [], []
        kept = []
        for block in self.blocks():
            if self.count <= TASK_CACHE:
                kept.append(block)
            c = block.cols
            streams.append(distinct((block.col("device") << 32) | block.col("stream")))
            threads |= set(np.unique(c["thread"][block.via_track]).tolist())
            conns.append(distinct(c["conn"][block.via_api]).astype(np.int64))
            memcpy.append(distinct(c["conn"][block.memcpy & (c["conn"] >= 0)]).astype(np.int64))
            if facts.python_rules:  # (in the C++ rules the flows are the connection ids')
                flows.append(pd.unique(block.flow_ids(True)[block.via_api]))
            if facts.scoped:
                overlap.append(np.column_stack([block.col("device"), block.col("start"), block.col("end"),
                                                block.is_op]))
        self._kept = kept if self.count <= TASK_CACHE else None
        self.streams = distinct(np.concatenate(streams)) if streams else np.zeros(0, np.int64)  # device << 32 | stream
        self.threads = threads
        self.api_conns = distinct(np.concatenate(conns)) if conns else np.zeros(0, np.int64)
        self.memcpy_conns = distinct(np.concatenate(memcpy)) if memcpy else np.zeros(0, np.int64)
        # by connection id, each connection's flows in the order they were first seen
        self._flows = _first_seen_by_conn(np.concatenate(flows)) if flows else None
        self.overlap_input = np.concatenate(overlap) if overlap else np.zeros((0, 4), np.int64)

    def __len__(self) -> int:
        return self.count

    @property
    def flows(self) -> np.ndarray:
        """The flow ids of the arrows that start on an API, by connection id (see TaskBlock.flow_ids)."""
        return self._flows if self._flows is not None else self.api_conns << 32

    def on(self, ctx: ExportContext) -> "Tasks":
        """These tasks read through another context's connection (a forked child's)."""
        other = copy.copy(self)
        other.source = self.source.on(ctx)
        return other

    def _shown(self) -> np.ndarray:
        """Which TASK rows are shown."""
        src, facts = self.source, self.facts
        n = len(src)
        if not n:
            return np.zeros(0, dtype=bool)
        keep = ~src.texts.isin(src.dev_type(0, n), ("UNKNOWN",))
        cols = {name: src.task.read(column) for name, column in zip(TASK_COLS[2:6], TASK_COLUMNS[2:6])}
        cols["batch"] = src.kit_span("batchId", 0, n, 0)
        keep &= ~_hidden_parents(cols)
        if facts.scoped:
            keep &= _in_scope(cols["device"], src.task.read("startNs"), src.task.read("endNs"), facts.scope)
        return keep

    def blocks(self) -> Iterator[TaskBlock]:
        """The shown tasks, TASK_BLOCK at a time (the last block may be shorter)."""
        if self._kept is not None:
            yield from self._kept
            return
        for lo, hi in zip(self.bounds, self.bounds[1:]):
            yield self._block(lo, hi)

    def _block(self, lo: int, hi: int) -> TaskBlock:
        """The shown tasks among TASK rows lo:hi."""
        facts, texts = self.facts, self.source.texts
        cols, gid, host_type, dev_type = self.source.read(lo, hi, np.flatnonzero(self.shown[lo:hi]))
        op_name, ge_type, has_op = self.source.op_info(gid.astype(np.int64))
        device_only = np.zeros(len(gid), dtype=bool)
        del gid
        if facts.scoped:
            device_only = cols["model"] != facts.scope.model_id
            cols["model"] = np.where(device_only, NO_MODEL, cols["model"].astype(np.int64))
        is_op = has_op & ~device_only
        memcpy = texts.isin(host_type, (MEMCPY_ASYNC,))
        plain = np.where(texts.isin(host_type, DEVICE_NAMED) | device_only, dev_type, host_type)  # a task no op
        generic = plain if facts.python_rules else np.where(memcpy, dev_type, plain)
        del dev_type, host_type
        name = texts.slot(np.where(is_op, op_name, plain))
        task_type = texts.slot(np.where(is_op & ~texts.isin(ge_type, ("N/A",)), ge_type, generic))
        del op_name, ge_type, plain, generic

        # arrow ends: ops, memory copies and ACL event tasks with a host call
        conn = cols["conn"]
        ends = (has_op | memcpy | isin(conn, self.acl_event_conns)) & (conn >= 0)
        via_track = np.zeros(len(conn), dtype=bool)
        if facts.python_rules:
            via_track = ends & has_op & (cols["track_ns"] >= 0) & (cols["thread"] >= 0)
        return TaskBlock(cols=cols, name=name, task_type=task_type, is_op=is_op, via_track=via_track,
                         via_api=ends & ~via_track, memcpy=memcpy)


def _first_seen_by_conn(flows: np.ndarray) -> np.ndarray:
    """The distinct flow ids (connection id << 32, plus a context id in the Python rules), by
    connection id, those of one connection in the order they were first seen (found by sorting:
    a hash table of ten million ids would take several times their size)."""
    flows = np.asarray(flows, dtype=np.int64)
    values = flows[first_seen(flows)]
    return values[np.argsort(values >> 32, kind="stable")]


def _hidden_parents(cols: Dict[str, np.ndarray]) -> np.ndarray:
    """Tasks shown through their FFTS+ subtasks: rows without a context id whose (device, stream,
    task, batch) also has rows with one."""
    sub = cols["ctx"] != INVALID_CTX
    if not sub.any():
        return np.zeros(len(sub), dtype=bool)
    return ~sub & in_marked_groups([cols["device"], cols["stream"], cols["task"], cols["batch"]], sub)


def _in_timeline(start: np.ndarray, end: np.ndarray, window: Optional[Tuple[int, int]]) -> np.ndarray:
    """Events kept by a device layer's timeline window [lo, hi): those that start inside it or span
    its start (all of them without a window)."""
    if window is None:
        return np.ones(len(start), dtype=bool)
    lo, hi = window
    return ((start >= lo) & (start < hi)) | ((start < lo) & (end > lo))


def _in_scope(device: np.ndarray, start: np.ndarray, end: np.ndarray, scope: Scope) -> np.ndarray:
    """An iteration export's device tasks: start and end inside the device's iterations
    (`scope.windows`, closed), and kept by the device's timeline window."""
    out = np.zeros(len(device), dtype=bool)
    for dev, (lo, hi) in scope.windows.items():
        m = device == dev
        out[m] = (start[m] >= lo) & (end[m] <= hi) & _in_timeline(start[m], end[m], scope.timeline_window(dev))
    return out


def _acl_event_conns(ctx: ExportContext, facts: Facts) -> np.ndarray:
    """Connection ids of the ACL event record / wait calls."""
    ids = facts.ids_of(ACL_EVENT_APIS)
    if not ctx.has("CANN_API") or not ids:
        return np.zeros(0, np.int64)
    api = ctx.ints("CANN_API", ("type", "name", "connectionId"))
    return distinct(api["connectionId"][(api["type"] == LEVEL_ACL) & np.isin(api["name"], ids)])


# ------------------------------------------------------------------------------------------------
# CANN layer

API_COLUMNS = ("startNs", "endNs", "type", "globalTid", "connectionId", "name")
API_BLOCK = 5 * CHUNK  # CANN_API rows read at a time (whole chunks: the events come in the same order)


class ApiBlocks:
    """CANN_API rows (API_COLUMNS, int64) by connection id, API_BLOCK store rows at a time: (first
    store row, last store row + 1, the rows of that range in scope). In scope are the APIs the
    reference keeps of those recorded before the collection start (`rule`, None: all; see
    msprof_kit.before_start) and, in an iteration export, that end at or after the window's start
    and start at or before its end. The store keeps CANN_API by connection id in its mirror; a
    store without one, or not in that order, is read whole once (and sorted)."""

    def __init__(self, ctx: ExportContext, window: Optional[Tuple[int, int]],
                 rule: Optional[before_start.ApiRule] = None) -> None:
        self.ctx, self.window, self.rule = ctx, window, rule
        self._threads: Optional[Set[int]] = None
        self.whole: Optional[Dict[str, np.ndarray]] = None
        mirror = ctx.stored("CANN_API") if ctx.has("KIT_COLUMNS") else None
        if mirror is None or not all(c in mirror for c in API_COLUMNS) or not ascending(mirror.read("connectionId")):
            api = ctx.ints("CANN_API", API_COLUMNS)
            order = np.argsort(api["connectionId"], kind="stable")
            self.whole = {c: v[order] for c, v in api.items()}
        self.rows = len(self.whole["connectionId"]) if self.whole is not None else len(mirror)  # store rows

    def __iter__(self) -> Iterator[Tuple[int, int, np.ndarray]]:
        for lo, hi, cols in self.each(API_COLUMNS):
            yield lo, hi, np.column_stack([cols[c] for c in API_COLUMNS])

    def counted(self, phase: Phase) -> Iterator[Tuple[int, int, np.ndarray]]:
        """The blocks, each counted in `phase` (its store rows) once it is handed over."""
        with phase:
            for lo, hi, block in self:
                yield lo, hi, block
                phase.advance(hi - lo)

    def each(self, names: Sequence[str]) -> Iterator[Tuple[int, int, Dict[str, np.ndarray]]]:
        """(first store row, last + 1, these columns of the rows of that range in scope), block by block."""
        extra: Tuple[str, ...] = ()
        if self.rule is not None:
            extra = ("startNs", "endNs", "globalTid")
        elif self.window is not None:
            extra = ("startNs", "endNs")
        need = list(names) + [c for c in extra if c not in names]
        if self.whole is not None:
            n = len(self.whole["connectionId"])
            source: Iterator[Tuple[int, int, Dict[str, np.ndarray]]] = (
                (lo, min(n, lo + API_BLOCK), {c: self.whole[c][lo:lo + API_BLOCK] for c in need})
                for lo in range(0, n, API_BLOCK))
        else:
            source = self.ctx.blocks("CANN_API", need, API_BLOCK)
        for lo, hi, cols in source:
            keep = None
            if self.rule is not None:
                keep = self.rule.keep(cols["startNs"], cols["endNs"], cols["globalTid"])
            if self.window is not None:
                inside = (cols["startNs"] <= self.window[1]) & (cols["endNs"] >= self.window[0])
                keep = inside if keep is None else keep & inside
            if keep is not None:
                cols = {c: v[keep] for c, v in cols.items()}
            yield lo, hi, {c: cols[c] for c in names}

    def threads(self) -> Set[int]:
        """The thread ids (globalTid's low 32 bits) of the APIs in scope (read once)."""
        if self._threads is None:
            tids: Set[int] = set()
            for _, _, cols in self.each(("globalTid",)):
                tids |= set((np.unique(cols["globalTid"]) & 0xFFFFFFFF).tolist())
            self._threads = tids
        return set(self._threads)


@dataclass
class ApiTexts:
    """KIT_API: the mode and item id of each API by connection id, as codes into their distinct
    texts. Item code len(items) - 1 is "0", the item of an API KIT_API does not know. KIT_API
    keeps the rows of CANN_API in the same order, so a block of APIs is looked up in the same
    range of KIT_API; rows that are not there are looked up in the whole table."""

    cols: Optional[store.StoredColumns]
    mode_json: np.ndarray   # JSON literal of each distinct mode
    items: np.ndarray       # distinct item texts, "0" last
    _whole: Optional[Tuple[SortedKeys, np.ndarray, np.ndarray]] = None  # all of KIT_API: (ids, mode, item)

    @classmethod
    def load(cls, ctx: ExportContext) -> "ApiTexts":
        cols = ctx.stored("KIT_API")
        if not all(c in cols for c in ("connectionId", "mode", "itemId")) or len(cols) == 0:
            return cls(None, np.zeros(0, dtype=object), np.array(["0"], dtype=object))
        return cls(cols, _json_literals(cols.labels("mode")), np.append(cols.labels("itemId"), "0"))

    def lookup(self, conn: np.ndarray, lo: int, hi: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(mode code, item code, found) of the APIs with these connection ids, read from store
        rows lo:hi of CANN_API."""
        n = len(conn)
        mode, item, hit = np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, dtype=bool)
        if self.cols is None or not n:
            return mode, item, hit
        near = self.cols.read("connectionId", lo, hi)
        if ascending(near):
            pos = SortedKeys(near).find(conn)
            hit = pos >= 0
            mode[hit] = self.cols.read("mode", lo, hi)[pos[hit]]
            item[hit] = self.cols.read("itemId", lo, hi)[pos[hit]]
        if not hit.all():
            if self._whole is None:
                self._whole = (SortedKeys(self.cols.read("connectionId")), self.cols.read("mode"),
                               self.cols.read("itemId"))
            keys, modes, items = self._whole
            miss = np.flatnonzero(~hit)
            pos = keys.find(conn[miss])
            miss, pos = miss[pos >= 0], pos[pos >= 0]
            mode[miss], item[miss], hit[miss] = modes[pos], items[pos], True
        return mode, item, hit


def _json_literals(texts: np.ndarray) -> np.ndarray:
    """Each (distinct) text as a JSON string literal."""
    return np.array([json.dumps(str(t), ensure_ascii=False) for t in texts.tolist()], dtype=object)


@dataclass
class Arrows:
    """Which APIs start arrows: node-level APIs (and the calls behind memory copies and ACL
    events) whose connection id a shown task has."""
    task_conns: np.ndarray   # ascending
    special: np.ndarray      # ascending

    @classmethod
    def of(cls, tasks: Tasks) -> "Arrows":
        return cls(tasks.api_conns, distinct(np.concatenate([tasks.memcpy_conns, tasks.acl_event_conns])).astype(np.int64))

    def starts(self, conn: np.ndarray, level: np.ndarray) -> np.ndarray:
        return in_sorted(conn, self.task_conns) & ((level == LEVEL_NODE) | in_sorted(conn, self.special))

    def started(self, blocks: ApiBlocks) -> np.ndarray:
        """The connection ids (ascending, distinct) of the APIs in scope that start an arrow."""
        parts = [c["connectionId"][self.starts(c["connectionId"], c["type"])]
                 for _, _, c in blocks.each(("connectionId", "type"))]
        return distinct(np.concatenate(parts)) if parts else np.zeros(0, np.int64)


def _write_cann(ctx: ExportContext, out: TraceWriter, facts: Facts, tasks: Tasks, blocks: Optional[ApiBlocks],
                arrows: Optional[Arrows]) -> None:
    """The CANN process: metadata, one X event per API in scope (None: the store has none), and
    the arrow starts (None: no arrows)."""
    pid = facts.pid(SORT_CANN)
    tids = blocks.threads() if blocks is not None else set()
    if arrows is not None:  # the threads of the arrows that start on host task records
        tids |= tasks.threads
    if not tids:
        return
    meta = _process_meta(pid, "CANN", "CPU", SORT_CANN)
    for tid in sorted(tids):
        meta += _thread_meta(pid, tid, f"Thread {tid}", tid)
    out.add(meta)
    if blocks is None:
        return
    texts = ApiTexts.load(ctx)
    # arrows that start on an API: the distinct flow ids of the tasks they end at (first seen
    # first), grouped by connection id (a flow id is the connection id << 32, plus the context id
    # in the Python rules)
    flow = tasks.flows
    flow_conn = flow >> 32
    for lo, hi, block in blocks.counted(ctx.progress.phase(f"{label(ctx.collection_path)}: timeline CANN APIs",
                                                           total=blocks.rows, unit="APIs")):
        if not len(block):
            continue
        slots = _api_texts(block, facts, texts, *texts.lookup(block[:, 4], lo, hi))
        starts = arrows.starts(block[:, 4], block[:, 2]) if arrows is not None else np.zeros(len(block), dtype=bool)
        for first in range(0, len(block), CHUNK):
            rows = block[first:first + CHUNK]
            part = slice(first, first + len(rows))
            out.add_block(_api_events(rows, pid, {key: slot.take(part) for key, slot in slots.items()}, facts),
                          len(rows))
            here = np.flatnonzero(starts[part])
            if len(here):
                row, ids = _flows_of(rows[here, 4], flow, flow_conn)
                row = here[row]
                _flow_events(out, facts, "s", np.full(len(row), pid), rows[row, 3] & 0xFFFFFFFF, rows[row, 0], ids)


def _flows_of(conn: np.ndarray, flow: np.ndarray, flow_conn: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Each connection id joined with its flow ids (`flow` grouped by connection id, `flow_conn`):
    (position in `conn`, flow id) pairs, in `conn` order, a connection's flows in `flow` order."""
    # search only the flows in the range of these connection ids (a chunk's: the search stays in cache)
    lo = int(np.searchsorted(flow_conn, conn.min(), "left"))
    near = flow_conn[lo:int(np.searchsorted(flow_conn, conn.max(), "right"))]
    first = np.searchsorted(near, conn, "left")
    count = np.searchsorted(near, conn, "right") - first
    first += lo
    total = int(count.sum())
    within = np.arange(total) - np.repeat(np.cumsum(count) - count, count)
    return np.repeat(np.arange(len(conn)), count), flow[np.repeat(first, count) + within]


def _api_texts(api: np.ndarray, facts: Facts, texts: ApiTexts, mode: np.ndarray, item: np.ndarray,
               hit: np.ndarray) -> Dict[str, Slot]:
    """The event texts of every CANN_API row (startNs, endNs, type, globalTid, connectionId, name)
    as TEXT slots: `name` (<Level>@<api>), `level`, `id`, `mode` and `item`, each a code into the
    JSON literals of its distinct values, made once per distinct value."""
    level, name = api[:, 2], api[:, 5]
    level_idx, levels = pd.factorize(level)
    heads = [LEVELS.get(lv, ("Api", str(lv))) for lv in levels.tolist()]
    strings = facts.strings
    width = len(strings)

    def name_json(k: int) -> str:
        return json.dumps(strings[k], ensure_ascii=False)

    out = {"level": text_slot(level_idx.astype(np.int32), text_table(json.dumps(text) for _, text in heads)),
           "name": _coded(level_idx * width + name,
                          lambda k: json.dumps(heads[k // width][0] + "@" + strings[k % width], ensure_ascii=False))}
    model = (level == LEVEL_MODEL) & facts.python_host
    # id: an ACL API's name, "0" for the others; the Python host parser keeps a model-level API's as 0
    id_key = np.where(level == LEVEL_ACL, name, -1)
    id_key[model] = -2
    out["id"] = _coded(id_key, lambda k: name_json(k) if k >= 0 else ('"0"' if k == -1 else "0"))
    # mode: KIT_API's (a code >= 0); an API KIT_API does not know: its name (-1 - name id)
    mode_key = np.where(hit, mode, -1 - name)
    out["mode"] = _coded(mode_key, lambda k: str(texts.mode_json[k]) if k >= 0 else name_json(-1 - k))
    # item: KIT_API's, else "0"; the Python host parser keeps a model-level API's numeric item as a number
    item = np.where(hit, item, len(texts.items) - 1)
    if facts.python_host:
        numeric = np.array([str(t).isdigit() for t in texts.items.tolist()], dtype=bool)[item]
        item = np.where(model & numeric, -1 - item, item)
    out["item"] = _coded(item, lambda k: json.dumps(str(texts.items[k]), ensure_ascii=False) if k >= 0
                         else str(texts.items[-1 - k]))
    return out


def _api_events(rows: np.ndarray, pid: int, texts: Dict[str, Slot], facts: Facts) -> bytes:
    """X events of CANN_API rows, with their `_api_texts` slots."""
    n = len(rows)
    return API_EVENT.rows(n, name=texts["name"], pid=_constant(pid, n), tid=int_slot(rows[:, 3] & 0xFFFFFFFF),
                          ts=facts.ts(rows[:, 0]), dur=float_slot(_dur_us(rows[:, 0], rows[:, 1])),
                          mode=texts["mode"], level=texts["level"], id=texts["id"], item=texts["item"],
                          conn=int_slot(rows[:, 4]))


# ------------------------------------------------------------------------------------------------
# Ascend Hardware layer

Iteration = Tuple[int, int, int, int]  # (model id, iteration index, start ns, end ns)


def _write_hardware(out: TraceWriter, facts: Facts, tasks: Tasks, started: np.ndarray,
                    steps: Dict[int, List[Iteration]], show_tasks: bool = True, arrows: bool = True) -> List[str]:
    """The Ascend Hardware processes: metadata, the task X events with their arrow ends (and, in
    the Python flavour, the arrow starts on host task records), then the step-trace iterations.
    Returns the step-trace events with their metadata, for step_trace_{ts}.json."""
    pairs = tasks.streams if show_tasks else tasks.streams[:0]
    device, stream = pairs >> 32, pairs & 0xFFFFFFFF
    devices = sorted(set(np.unique(device).tolist()) | set(steps))
    meta: List[str] = []
    for dev in devices:
        pid = facts.pid(SORT_HARDWARE, dev)
        meta += _process_meta(pid, "Ascend Hardware", f"NPU {dev}", SORT_HARDWARE)
        for s in stream[device == dev].tolist():
            meta += _thread_meta(pid, s, f"Stream {s}", s)
    out.add(meta)
    if len(tasks) and show_tasks:
        _write_tasks(out, facts, tasks, started, arrows)
    step_texts: List[str] = []
    for dev in sorted(steps):
        pid = facts.pid(SORT_HARDWARE, dev)
        threads: List[str] = []
        for model in sorted({it[0] for it in steps[dev]}):
            threads += _thread_meta(pid, STEP_TID_BASE + model, f"Step Trace(Model ID:{model})",
                                    STEP_TID_BASE + model)
        events = _iteration_events(facts, pid, steps[dev])
        out.add(threads + events)  # the process metadata is already out
        step_texts += _process_meta(pid, "Ascend Hardware", f"NPU {dev}", SORT_HARDWARE) + threads + events
    return step_texts


def _write_tasks(out: TraceWriter, facts: Facts, tasks: Tasks, started: np.ndarray, arrows: bool = True) -> None:
    devices = np.unique(tasks.streams >> 32)
    pids = np.array([facts.pid(SORT_HARDWARE, d) for d in devices.tolist()], dtype=np.int64)
    cann_pid = facts.pid(SORT_CANN)
    for block in tasks.blocks():
        c = block.cols
        pid = pids[np.searchsorted(devices, c["device"])] if len(devices) else np.zeros(0, np.int64)
        ends = block.via_track | (block.via_api & in_sorted(c["conn"], started))
        if not arrows:
            ends = np.zeros(len(block), dtype=bool)
        host_starts = block.via_track & arrows
        ids = block.flow_ids(facts.python_rules)
        for lo in range(0, len(block), CHUNK):
            s = slice(lo, min(lo + CHUNK, len(block)))
            n = s.stop - s.start
            start = c["start"][s]
            out.add_block(TASK_EVENT.rows(
                n, name=block.name.take(s), pid=int_slot(pid[s]), stream=int_slot(c["stream"][s]),
                ts=facts.ts(start), dur=float_slot(_dur_us(start, c["end"][s])), model=int_slot(c["model"][s]),
                task_type=block.task_type.take(s), task=int_slot(c["task"][s]), batch=int_slot(c["batch"][s]),
                ctx=int_slot(c["ctx"][s]), conn=int_slot(c["conn"][s])), n)
            e = np.flatnonzero(ends[s])
            if len(e):
                _flow_events(out, facts, "f", pid[s][e], c["stream"][s][e], start[e], ids[s][e])
            t = np.flatnonzero(host_starts[s])
            if len(t):
                _flow_events(out, facts, "s", np.full(len(t), cann_pid), c["thread"][s][t], c["track_ns"][s][t],
                             ids[s][t])


def _iteration_events(facts: Facts, pid: int, its: Sequence[Iteration],
                      tid_of: Optional[Dict[int, int]] = None) -> List[str]:
    """`Iteration <n>` X events (category `Iteration Time`) from model start (or the previous
    iteration end) to iteration end, on thread 70000 + model id (or `tid_of[model]`). FP/BP tags
    are not in inference collections: `N/A`."""
    events = []
    for model, index, start, end in sorted(its, key=lambda it: (it[2], it[0])):
        dur = max(end - start, 0) / 1000.0
        tid = tid_of[model] if tid_of else STEP_TID_BASE + model
        events.append(f'{{"name":"Iteration {index}","pid":{pid},"tid":{tid},'
                      f'"ts":"{facts.us_text(start)}","dur":{dur!r},"ph":"X","cat":"Iteration Time","args":{{'
                      f'"Iteration ID":{index},"FP Start":"N/A","BP End":"N/A","Iteration End":"{facts.us_text(end)}",'
                      f'"Iteration Time(us)":{dur!r}}}}}')
    return events


def _timeline_steps(ctx: ExportContext) -> Dict[int, List[Iteration]]:
    """The iterations msprof.json shows per device: all of them, or the exported ones."""
    sc = ctx.scope
    if sc.model_id is None:
        steps = step_iterations(ctx)
    else:
        model = sc.model_id
        steps = {dev: [(model, index, start, end) for index, start, end, _ in its]
                 for dev, its in sc.iterations.items()}
    return {dev: its for dev, its in steps.items() if its}


def _graph_step_texts(ctx: ExportContext, facts: Facts) -> List[str]:
    """step_trace_{ts}.json of an iteration export: every iteration, in the reference's unlabelled
    form (process `Step Trace` with the device's real pid, thread `Model ID:<m>` = real pid + 70000
    + the model's rank; iteration_export.md §3.5)."""
    texts: List[str] = []
    for dev, its in sorted(step_iterations(ctx).items()):
        if not its:
            continue
        real = facts.device_pids.get(dev, facts.host_pid)
        tid_of = {m: real + STEP_TID_BASE + k for k, m in enumerate(sorted({it[0] for it in its}))}
        texts.append(_meta("process_name", real, 0, {"name": "Step Trace"}))
        for model, tid in tid_of.items():
            texts += _thread_meta(real, tid, f"Model ID:{model}", STEP_TID_BASE + model)
        texts += _iteration_events(facts, real, its, tid_of)
    return texts


# ------------------------------------------------------------------------------------------------
# AI Core Freq and Overlap Analysis layers

def _freq_points(ctx: ExportContext) -> np.ndarray:
    """(device, ts ns, MHz, die) rows of the AI Core frequency: AICORE_FREQ, else each device's
    fixed frequency at the collection start and end, on the chips whose timeline shows it."""
    if ctx.has("AICORE_FREQ"):
        rows = _ints(ctx.conn, "SELECT deviceId, timestampNs, freq, dieId FROM AICORE_FREQ", width=4)
        return rows[np.isin(rows[:, 3], FREQ_DIES)]
    points = []
    if ctx.info.get("platform_version") in FREQ_CHIPS and ctx.has("SESSION_TIME_INFO"):
        start, end = ctx.conn.execute("SELECT startTimeNs, endTimeNs FROM SESSION_TIME_INFO").fetchone()
        for dev, info in sorted(ctx.device_info.items()):
            mhz = str(info.get("aic_frequency", "")).split(".")[0]
            if dev < HOST_DEVICE and mhz.isdigit() and start:
                points += [(dev, int(start), int(mhz), -1), (dev, int(end or start), int(mhz), -1)]
    return np.array(points, dtype=np.int64).reshape(-1, 4)


def _clip_freq(points: np.ndarray, window: Tuple[int, int]) -> np.ndarray:
    """The points of one track (time-sorted) in an iteration export: the value in force at the
    timeline window's start and end, and the changes between."""
    ts, mhz = points[:, 1], points[:, 2]
    lo, hi = max(window[0], int(ts[0])), window[1]  # a window from 0 opens at the first point
    first, last = (mhz[max(int(np.searchsorted(ts, t, side="right")) - 1, 0)] for t in (lo, hi))
    inside = points[(ts > lo) & (ts < hi)]
    edges = np.array([[0, lo, first, 0], [0, hi, last, 0]], dtype=np.int64)
    edges[:, [0, 3]] = points[0, [0, 3]]
    return np.concatenate([edges[:1], inside, edges[1:]])


def _write_freq(ctx: ExportContext, out: TraceWriter, facts: Facts) -> None:
    """One AI Core Freq process per device: counter events `AI Core Freq` (or `... Die <n>`)."""
    points = _freq_points(ctx)
    points = points[np.lexsort((points[:, 1], points[:, 3], points[:, 0]))]  # by device, die, time
    for dev in np.unique(points[:, 0]).tolist():
        pid = facts.pid(SORT_FREQ, dev)
        events = _process_meta(pid, "AI Core Freq", f"NPU {dev}", SORT_FREQ)
        for die in np.unique(points[points[:, 0] == dev, 3]).tolist():
            track = points[(points[:, 0] == dev) & (points[:, 3] == die)]
            window = facts.timeline_window(dev)
            if facts.scoped:
                if window is None:
                    continue
                track = _clip_freq(track, window)
            name = "AI Core Freq" if die == -1 else f"AI Core Freq Die {die}"
            events += [f'{{"name":"{name}","pid":{pid},"tid":0,"ts":"{facts.us_text(ts)}","ph":"C",'
                       f'"args":{{"MHz":{mhz}}}}}' for ts, mhz in zip(track[:, 1].tolist(), track[:, 2].tolist())]
        out.add(events)


def _graph_overlap(tasks: Tasks, facts: Facts) -> np.ndarray:
    """An iteration export's overlap rows (device, start, end, type), recomputed from the exported
    tasks as the reference does: Computing = the merged spans of the model's ops, Free = the gaps
    between them from the first task's start to the last task's end; then cut to the timeline
    window."""
    device, start, end, is_op = tasks.overlap_input.T
    parts = []
    for dev in np.unique(device).tolist():
        mine = device == dev
        comp = mine & (is_op != 0)
        cs, ce = union_intervals(start[comp], end[comp])
        fs, fe = interval_gaps(int(start[mine].min()), int(end[mine].max()), cs, ce)
        rows = np.column_stack([np.full(len(cs) + len(fs), dev), np.concatenate([cs, fs]), np.concatenate([ce, fe]),
                                np.repeat([0, 3], [len(cs), len(fs)])]).astype(np.int64)
        rows = rows[_in_timeline(rows[:, 1], rows[:, 2], facts.timeline_window(dev))]
        parts.append(rows[np.lexsort((rows[:, 3], rows[:, 1]))])
    return np.concatenate(parts) if parts else np.zeros((0, 4), np.int64)


OVERLAP_COLUMNS = ("deviceId", "startNs", "endNs", "type")


def _overlap_chunks(ctx: ExportContext) -> Tuple[List[int], Iterator[np.ndarray]]:
    """The devices of OVERLAP_ANALYSIS and its rows by id, CHUNK at a time as (device, start, end,
    type) rows: read API_BLOCK rows at a time from a store that keeps them in id order, else whole
    and sorted."""
    mirror = ctx.stored("OVERLAP_ANALYSIS") if ctx.has("KIT_COLUMNS") else None
    if mirror is not None and all(c in mirror for c in ("id",) + OVERLAP_COLUMNS) and ascending(mirror.read("id")):
        devices = np.unique(mirror.read("deviceId")).tolist()

        def by_blocks() -> Iterator[np.ndarray]:
            for _, _, cols in ctx.blocks("OVERLAP_ANALYSIS", OVERLAP_COLUMNS, API_BLOCK):
                table = np.column_stack([cols[c] for c in OVERLAP_COLUMNS])
                yield from (table[lo:lo + CHUNK] for lo in range(0, len(table), CHUNK))
        return devices, by_blocks()
    ov = ctx.ints("OVERLAP_ANALYSIS", ("id",) + OVERLAP_COLUMNS)
    order = np.argsort(ov["id"], kind="stable")
    table = np.column_stack([ov[c][order] for c in OVERLAP_COLUMNS])
    return np.unique(table[:, 0]).tolist(), (table[lo:lo + CHUNK] for lo in range(0, len(table), CHUNK))


def _write_overlap(ctx: ExportContext, out: TraceWriter, facts: Facts, graph_rows: Optional[np.ndarray]) -> None:
    """One Overlap Analysis process per device: the OVERLAP_ANALYSIS intervals (or an iteration
    export's `graph_rows`) as X events on the thread of their type."""
    if graph_rows is not None:
        devices = np.unique(graph_rows[:, 0]).tolist()
        chunks: Iterator[np.ndarray] = iter([graph_rows] if len(graph_rows) else [])
    elif ctx.has("OVERLAP_ANALYSIS"):
        devices, chunks = _overlap_chunks(ctx)
    else:
        return
    sort_index = SORT_OVERLAP[facts.flavour]
    pid_of = {dev: facts.pid(sort_index, dev) for dev in devices}
    meta: List[str] = []
    for dev, pid in pid_of.items():
        meta += _process_meta(pid, "Overlap Analysis", f"NPU {dev}", sort_index)
        for tid, name in enumerate(OVERLAP_THREADS):
            meta += _thread_meta(pid, tid, name, tid)
    out.add(meta)
    names = text_table(json.dumps(n) for n in OVERLAP_THREADS)
    ids = np.array(sorted(pid_of), dtype=np.int64)
    pids = np.array([pid_of[d] for d in ids.tolist()], dtype=np.int64)
    for rows in chunks:
        rows = rows[(rows[:, 3] >= 0) & (rows[:, 3] < len(OVERLAP_THREADS))]
        n = len(rows)
        if not n:
            continue
        kind = rows[:, 3]
        out.add_block(OVERLAP_EVENT.rows(
            n, name=text_slot(kind, names), pid=int_slot(pids[np.searchsorted(ids, rows[:, 0])]), tid=int_slot(kind),
            ts=facts.ts(rows[:, 1]), dur=float_slot(_dur_us(rows[:, 1], rows[:, 2]))), n)


# ------------------------------------------------------------------------------------------------
# Entry point

def write_timeline(ctx: ExportContext) -> None:
    """Write mindstudio_profiler_output/msprof_{ts}.json and, when the collection has step-trace
    iterations, step_trace_{ts}.json. Nothing is written for a store with nothing to show.

    Two processes share the work: a forked child writes the device layers (Ascend Hardware, AI
    Core Freq, Overlap Analysis) to a part file while this one writes the CANN layer into the
    trace; the part is then appended."""
    facts = _facts(ctx)
    tasks = Tasks(ctx, facts)
    steps = _timeline_steps(ctx)
    if not len(tasks) and not steps and not any(ctx.has(t) for t in ("CANN_API", "OVERLAP_ANALYSIS",
                                                                       "AICORE_FREQ")):
        return
    if ctx.ts_origin == "start":
        facts.origin = ts_origin_ns(ctx, steps)
    # -reports layers: cann, ascend (tasks), step_trace, freq, overlap_analyse; arrows need both ends
    cann, ascend = ctx.layer_on("cann"), ctx.layer_on("ascend")
    blocks = None
    if cann and ctx.has("CANN_API"):
        # an iteration export: the APIs that start in the API window or span its start; of the
        # APIs before the collection start, those the flavour keeps (the Python rule in an
        # iteration export, which the reference's Python path writes on every chip)
        blocks = ApiBlocks(ctx, facts.scope.api_window() if facts.scoped else None,
                           ctx.api_rule(facts.flavour))
    arrows = Arrows.of(tasks) if cann and ascend else None
    if facts.python_rules and (blocks is None or not blocks.threads()):
        # the Python path draws host-to-device arrows only when the timeline shows some API
        # (viewer/association/host_connect_device.py:306-307)
        arrows = None
    started = arrows.started(blocks) if arrows is not None and blocks is not None else np.zeros(0, np.int64)
    path = ctx.path_for("msprof", "json")
    part_path = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.devices")
    memory.give_back(FORK_KEEP_FREE)
    who = label(ctx.collection_path)
    with ctx.progress.phase(f"{who}: timeline device layers") if ctx.jobs < 2 else Phase():
        device_part = Forked(lambda: _write_device_layers(ctx, part_path, facts, tasks, started, steps,
                                                          arrows=arrows is not None or (cann and not facts.python_rules)),
                             "timeline", inline=ctx.jobs < 2)
    try:
        with TraceWriter(path) as out:
            if cann:
                _write_cann(ctx, out, facts, tasks, blocks, arrows)
            with ctx.progress.phase(f"{who}: timeline device layers") if ctx.jobs >= 2 else Phase():
                step_texts = device_part.result()
                out.append_part(part_path)
    finally:
        device_part.cancel()
        if os.path.exists(part_path):
            os.remove(part_path)
    if facts.scoped:
        step_texts = _graph_step_texts(ctx, facts)
    if step_texts:
        with TraceWriter(ctx.path_for("step_trace", "json")) as st:
            st.add(step_texts)


def ts_origin_ns(ctx: ExportContext, steps: Optional[Dict[int, List[Iteration]]] = None) -> int:
    """The origin of `ts_origin="start"` times, ns since the epoch: the collection's start
    (SESSION_TIME_INFO, from start_info), or its earliest time where something was recorded
    before it (Perfetto drops events of negative time)."""
    found = []
    if ctx.has("SESSION_TIME_INFO"):
        row = ctx.conn.execute("SELECT MIN(startTimeNs) FROM SESSION_TIME_INFO").fetchone()
        if row and row[0] is not None:
            found.append(int(row[0]))
    for table, column in (("TASK", "startNs"), ("CANN_API", "startNs"), ("OVERLAP_ANALYSIS", "startNs")):
        if ctx.has(table):
            found += [int(c[column].min()) for _, _, c in ctx.blocks(table, (column,), API_BLOCK) if len(c[column])]
    if ctx.has("AICORE_FREQ"):
        row = ctx.conn.execute("SELECT MIN(timestampNs) FROM AICORE_FREQ").fetchone()
        if row and row[0] is not None:
            found.append(int(row[0]))
    kit = ctx.stored("KIT_TASK") if ctx.has("KIT_COLUMNS") else None
    if kit is not None and "trackNs" in kit and len(kit):  # host task records (Python-flavour arrow starts)
        track = kit.read("trackNs")
        track = track[track >= 0]
        if len(track):
            found.append(int(track.min()))
    found += [start for its in (steps or {}).values() for _, _, start, _ in its]
    return min(found) if found else 0


def _write_device_layers(ctx: ExportContext, path: str, facts: Facts, tasks: Tasks, started: np.ndarray,
                         steps: Dict[int, List[Iteration]], arrows: bool) -> List[str]:
    """The Ascend Hardware (tasks and iterations), AI Core Freq and Overlap Analysis layers, as a
    part file (events without the enclosing brackets). Returns the step-trace events."""
    ascend = ctx.layer_on("ascend")
    graph_overlap = _graph_overlap(tasks, facts) if facts.scoped else None
    ctx = ctx.reopened()  # a forked child never uses its parent's sqlite connection
    tasks = tasks.on(ctx)
    try:
        with TraceWriter(path, part=True) as out:
            step_texts: List[str] = []
            if ascend or ctx.layer_on("step_trace"):
                step_texts = _write_hardware(out, facts, tasks, started,
                                             steps if ctx.layer_on("step_trace") else {},
                                             show_tasks=ascend, arrows=arrows and ascend)
            if ctx.layer_on("freq"):
                _write_freq(ctx, out, facts)
            if ctx.layer_on("overlap_analyse"):
                _write_overlap(ctx, out, facts, graph_overlap)
    finally:
        ctx.conn.close()
    return step_texts
