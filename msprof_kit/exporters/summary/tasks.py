"""What the summaries read from the store: STRING_IDS, the collection start, the device tasks in
scope with their host descriptions (`Tasks`, read a block at a time), model names; and the rules
the per-task summaries share (device order, tasks kept around the collection start)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterator, Optional, Sequence, Tuple, Union

import numpy as np

from ...arrays import SortedKeys, ascending
from ...store import string_table
from ..context import ExportContext, RowReader
from .cells import NA
from .columns import string_codes

INVALID_CONTEXT = 4294967295   # context id of a task that is not a subtask


def load_strings(ctx: ExportContext) -> np.ndarray:
    """STRING_IDS values as an object array indexed by id."""
    if not ctx.has("STRING_IDS"):
        return np.array([], dtype=object)
    return string_table(ctx.conn, NA)


def session_start(ctx: ExportContext) -> Optional[int]:
    """The collection start (local ns), or None when the store does not know it."""
    if not ctx.has("SESSION_TIME_INFO"):
        return None
    row = ctx.conn.execute("SELECT MIN(startTimeNs) FROM SESSION_TIME_INFO").fetchone()
    return int(row[0]) if row and row[0] is not None else None


TASK_COLUMNS = ("startNs", "endNs", "deviceId", "globalTaskId", "taskType", "contextId", "streamId", "taskId",
                "modelId")
INFO_COLUMNS = ("name", "blockNum", "mixBlockNum", "taskType", "opType", "inputFormats", "inputDataTypes",
                "inputShapes", "outputFormats", "outputDataTypes", "outputShapes", "opState", "hf32Eligible")


TASK_BLOCK = 1 << 20  # tasks whose columns are read at a time to select and group them

Where = Union[None, slice, np.ndarray]  # all tasks, a range of them, or some positions


@dataclass
class Tasks:
    """Device tasks in scope, in TASK order, with their host descriptions. Their columns stay in
    the store: `col` and `info_ids` read what they are asked for (all tasks, a range or some
    positions), widened to int64, so that an export holds a block of tasks at a time.

    `task`: TASK_COLUMNS (times in local ns, taskType a STRING_IDS id); `row`: each task's position
    in TASK (None: every TASK row, in order); `iteration`: in a graph export, the iteration each
    task is exported for; `info`: COMPUTE_TASK_INFO's columns (STRING_IDS ids; None without the
    table) and `info_pos`: the position of each task's row in them (-1: none)."""
    task: RowReader
    row: Optional[np.ndarray]
    iteration: Optional[np.ndarray]
    info: Optional[RowReader]
    info_pos: np.ndarray
    strings: np.ndarray
    stored: int  # rows of TASK (in scope or not)
    _passed: Dict[object, np.ndarray] = field(default_factory=dict, repr=False)  # id_test's tables by key

    def __len__(self) -> int:
        return len(self.info_pos)

    def on(self, ctx: ExportContext) -> "Tasks":
        """These tasks read through another context's connection (a forked child's)."""
        return dataclasses.replace(self, task=self.task.on(ctx), info=self.info.on(ctx) if self.info else None)

    def spans(self) -> Iterator[slice]:
        """The tasks TASK_BLOCK at a time, as ranges of positions."""
        size = TASK_BLOCK
        for lo in range(0, len(self), size):
            yield slice(lo, min(len(self), lo + size))

    def has_info(self, at: Where = None) -> np.ndarray:
        return (self.info_pos if at is None else self.info_pos[at]) >= 0

    def rows(self, at: Where = None) -> np.ndarray:
        """TASK row positions of the tasks (at these positions)."""
        if self.row is None:
            if at is None:
                return np.arange(len(self), dtype=np.int64)
            return np.arange(at.start, at.stop, dtype=np.int64) if isinstance(at, slice) \
                else np.asarray(at, dtype=np.int64)
        return self.row if at is None else self.row[at]

    def stored_col(self, name: str) -> np.ndarray:
        """A TASK column of all the tasks, as stored (the narrowest integer type)."""
        return self.task.read(name) if self.row is None else self.task.read(name, self.row)

    def col(self, name: str, at: Where = None) -> np.ndarray:
        """A TASK column as int64, whole or at these positions."""
        if at is None:
            values = self.stored_col(name)
        elif self.row is not None:
            values = self.task.read(name, self.rows(at))
        elif isinstance(at, slice):
            values = self.task.span(name, at.start, at.stop)
        else:
            values = self.task.read(name, at)
        return values.astype(np.int64, copy=False)

    def info_ids(self, name: str, at: Where = None) -> np.ndarray:
        """A COMPUTE_TASK_INFO column per task as int64 (-1 where the task has no row)."""
        pos = self.info_pos if at is None else self.info_pos[at]
        out: np.ndarray = np.full(len(pos), -1, dtype=np.int64)
        if self.info is not None:
            found = pos >= 0
            out[found] = self.info.read(name, pos[found])
        return out

    def text(self, ids: np.ndarray) -> np.ndarray:
        """Strings of STRING_IDS ids (N/A for -1)."""
        return np.append(self.strings, NA)[string_codes(ids, self.strings)]

    def id_test(self, ids: np.ndarray, key: object, test: Callable[[str], bool]) -> np.ndarray:
        """Whether the text of each STRING_IDS id passes `test`, tested once per string for all the
        calls that name the same `key` (each block of tasks asks again)."""
        passed = self._passed.get(key)
        if passed is None:
            passed = np.array([test(str(t)) for t in np.append(self.strings, NA).tolist()], dtype=bool)
            self._passed[key] = passed
        return passed[string_codes(ids, self.strings)]

    def id_in(self, ids: np.ndarray, texts: Sequence[str]) -> np.ndarray:
        """Whether the text of each STRING_IDS id is one of `texts`."""
        return self.id_test(ids, tuple(texts), lambda text: text in texts)


def _in_windows(ctx: ExportContext, dev: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Tasks the export covers: all, or in a graph export those whose start and end both lie in the
    iteration window of their device (docs/research/iteration_export.md §2.1)."""
    if ctx.scope.all_export:
        return np.ones(len(start), dtype=bool)
    inside: np.ndarray = np.zeros(len(start), dtype=bool)
    for device, (lo, hi) in ctx.scope.windows.items():
        inside |= (dev == device) & (start >= lo) & (end <= hi)
    return inside


def _iteration_of(ctx: ExportContext, dev: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Graph export: the iteration each task is exported for, the first requested iteration whose
    [end of the previous iteration, its own end] the task overlaps (-1: none)."""
    out: np.ndarray = np.full(len(start), -1, dtype=np.int64)
    for device, its in ctx.scope.iterations.items():
        for index, _, it_end, prev_end in sorted(its, reverse=True):
            out[(dev == device) & (end >= prev_end) & (start <= it_end)] = index
    return out


def load_tasks(ctx: ExportContext, strings: np.ndarray) -> Optional[Tasks]:
    """The device tasks in scope with their host descriptions, or None."""
    if not ctx.has("TASK"):
        return None
    task = ctx.reader("TASK", TASK_COLUMNS)
    if not len(task):
        return None
    row, iteration = None, None
    if not ctx.scope.all_export:
        dev, start, end = (np.asarray(task.read(c), dtype=np.int64) for c in ("deviceId", "startNs", "endNs"))
        row = np.flatnonzero(_in_windows(ctx, dev, start, end))
        if not len(row):
            return None
        iteration = _iteration_of(ctx, dev[row], start[row], end[row])
    info, info_pos = _task_info(ctx, task, row)
    return Tasks(task, row, iteration, info, info_pos, strings, len(task))


def _task_info(ctx: ExportContext, task: RowReader, row: Optional[np.ndarray]
               ) -> Tuple[Optional[RowReader], np.ndarray]:
    """COMPUTE_TASK_INFO's columns, and the position of each task's row in them (-1: none; of
    several rows with its globalTaskId, the first)."""
    n = len(task) if row is None else len(row)
    if not ctx.has("COMPUTE_TASK_INFO"):
        return None, np.full(n, -1, dtype=np.int64)
    keys = ctx.columns("COMPUTE_TASK_INFO", ("globalTaskId",))["globalTaskId"]
    if not len(keys):
        return None, np.full(n, -1, dtype=np.int64)
    found = SortedKeys(keys)
    del keys
    pos: np.ndarray = np.empty(n, dtype=np.int64)
    for lo in range(0, n, TASK_BLOCK):
        hi = min(n, lo + TASK_BLOCK)
        gtid = task.span("globalTaskId", lo, hi) if row is None else task.read("globalTaskId", row[lo:hi])
        pos[lo:hi] = found.find(gtid)
    return ctx.reader("COMPUTE_TASK_INFO", INFO_COLUMNS), pos


def device_number(ctx: ExportContext, device: int, key: str) -> float:
    """A numeric per-device fact (aic_frequency in MHz, ai_core_num), 0 when unknown."""
    try:
        return float(ctx.device_info.get(device, {}).get(key, 0) or 0)
    except ValueError:
        return 0.0


def device_rank(devices: np.ndarray) -> np.ndarray:
    """Sort rank of each device id in text order: the Python merger walks `device_<id>` folders in
    sorted() order, the C++ exporter sorts its rows by the Device_id text."""
    ids = np.unique(devices)
    by_text = np.array(sorted(ids.tolist(), key=str), dtype=np.int64)
    rank: np.ndarray = np.empty(len(ids), dtype=np.int64)
    rank[np.searchsorted(ids, by_text)] = np.arange(len(ids))
    return rank[np.searchsorted(ids, devices)]


def keep_after_start(start: np.ndarray, end: np.ndarray, begin: Optional[int], flavour: str) -> np.ndarray:
    """Tasks kept relative to the collection start: C++ drops those that ended before it, Python
    keeps those that start after it or straddle it."""
    if begin is None:
        return np.ones(len(start), dtype=bool)
    if flavour == "cpp":
        return end >= begin
    return (start > begin) | ((start < begin) & (end > begin))


def graph_mode(ctx: ExportContext) -> bool:
    """An iteration (graph) export: `--model-id` and `--iteration-id` given."""
    return not ctx.scope.all_export


def of_model(ctx: ExportContext, tasks: Tasks, at: Where = None) -> np.ndarray:
    """op_summary and op_statistic of a graph export cover the exported model's tasks only."""
    if ctx.scope.all_export:
        return np.ones(len(tasks.info_pos if at is None else tasks.info_pos[at]), dtype=bool)
    return tasks.col("modelId", at) == ctx.scope.model_id


def ordered(tasks: Tasks, idx: np.ndarray, by_device: bool) -> np.ndarray:
    """Task positions ordered by start time (stably), first by device in device text order when
    `by_device`; left as they are when they are in that order already (TASK is kept by device and
    start)."""
    start = tasks.col("startNs", idx)
    keys = [start]
    if by_device:
        rank = device_rank(tasks.col("deviceId", idx))
        step = np.diff(rank)
        if (step >= 0).all() and ((step > 0) | (np.diff(start) >= 0)).all():
            return idx
        keys.append(rank)
    elif ascending(start):
        return idx
    return idx[np.lexsort(keys)]


def model_table(ctx: ExportContext) -> Dict[int, str]:
    """Model id to model name (graph_id_map)."""
    if not ctx.has("KIT_MODEL"):
        return {}
    return {int(m): str(n) for m, n in ctx.conn.execute("SELECT modelId, name FROM KIT_MODEL")}


def names_of(names: Dict[int, str], model_ids: np.ndarray) -> np.ndarray:
    """Model names of model ids, N/A when unknown (looked up once per distinct id)."""
    ids, inverse = np.unique(model_ids, return_inverse=True)
    return np.array([names.get(int(m), NA) for m in ids.tolist()], dtype=object)[inverse.reshape(-1)]


def summary_flavour(ctx: ExportContext) -> str:
    """The reference's C++ summaries run on the 910B family in all-export mode only; iteration
    exports and other chips get the Python viewers' output."""
    return ctx.flavour if ctx.scope.all_export else "python"
