"""The device side of a collection: its tasks (start and end records paired by stream and task id,
spilled by start), its PMU records (spilled by end on STARS chips, whole on HWTS chips) and its
ts_track records (task-id wraps, step trace)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, List, Optional, Sequence

import numpy as np
import pandas as pd

from .. import losses
from ..errors import BadControlFile, Diagnostics, MissingControlFile
from ..layout import Chip, Collection, ResultDir, data_files
from ..parsers import device as device_parsers
from ..parsers.records import FFTS_PMU, HWTS_LOG, STARS_LOG
from ..parsers.stream import locate
from .streams import RecordStream, read_aic_pmu, read_stream
from ..spill import Runs
from ..timebase import Clock
from . import limits
from .clocks import device_clock_of
from .columns import INVALID_CTX, Columns, frame_of
from .names import code_text
from .pairing import Pairing
from .pmu_blocks import BlockGroups, block_sums, context_records


@dataclass
class DeviceData:
    """What load_device reads of one device, spilled to scratch files (`close` removes them)."""
    device_id: int
    tasks: Runs              # TASK_COLUMNS, spilled by start (syscnt)
    clock: Clock
    flips: device_parsers.Columns = field(default_factory=dict)  # ts_track task-id wrap records
    ctx_pmu: Optional[Runs] = None   # FFTS context PMU records (STARS chips; pmu_blocks.context_records), by end_ns
    blk_pmu: Optional[Runs] = None   # FFTS block PMU records (STARS chips, MIX ops) summed per task and core
    # (pmu_blocks.block_sums), spilled by the task's start_ns
    aic_pmu: Optional[device_parsers.Columns] = None   # AI Core PMU records (HWTS chips)
    step: Optional[device_parsers.Columns] = None      # ts_track step-trace records

    def close(self) -> None:
        for runs in (self.tasks, self.ctx_pmu, self.blk_pmu):
            if runs is not None:
                runs.close()


# a device task: its start and end (syscnt), dev_type (a code: 256 * DEV_TYPE_TABLES index + value)
# and tie, which orders the tasks of one start, stream and task id (ACSQ tasks, then FFTS+ subtasks
# by subtask and thread id)
TASK_COLUMNS = ("stream_id", "task_id", "ctx", "start", "end", "dev_type", "tie")
DEV_TYPE_TABLES = (device_parsers.SQE_TYPES, device_parsers.SUBTASK_TYPES, device_parsers.HWTS_TASK_TYPES)
# the dev_type codes of each table: 256 * its index in DEV_TYPE_TABLES + the type's value
SQE_CODES, SUBTASK_CODES, HWTS_CODES = (256 * i for i in range(len(DEV_TYPE_TABLES)))
TIE_FFTS = 1 << 32


def dev_type_names() -> np.ndarray:
    """The device task type name of each dev_type code."""
    tables = [code_text(t) for t in DEV_TYPE_TABLES]
    out: np.ndarray = np.empty(256 * len(tables), dtype=object)
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


def _whole_tasks(codes: int, type_column: str, at_end: bool) -> Callable[[Columns, np.ndarray, np.ndarray], Columns]:
    """The `make` of _pair_into for tasks without subtasks (ACSQ, HWTS): no context, tie 0, and
    dev_type `codes` + the record's `type_column`, read from the end record when `at_end`, else
    from the start record."""
    def make(c: Columns, s: np.ndarray, e: np.ndarray) -> Columns:
        return {"stream_id": c["stream_id"][s], "task_id": c["task_id"][s],
                "ctx": np.full(len(s), INVALID_CTX, dtype=np.int64), "start": c["syscnt"][s],
                "end": c["syscnt"][e], "dev_type": codes + c[type_column][e if at_end else s].astype(np.int16),
                "tie": np.zeros(len(s), dtype=np.int64)}
    return make


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
    dev = DeviceData(device_id=rd.device_id, clock=clock,
                     tasks=Runs(scratch, f"{name}.task", "start_ns", limits.SAMPLE_EVERY))
    logs: List[Runs] = []
    try:
        if ("ts_track.data", "") in files:
            buf, pieces = read_stream(files[("ts_track.data", "")])
            ts, issues = device_parsers.decode_ts_track(buf, pieces)
            diag.extend(issues)
            dev.flips, dev.step = ts["flip"], ts["step"]
        if chip.family == "stars":
            if ("stars_soc.data", "") in files:
                stream = RecordStream(STARS_LOG, files[("stars_soc.data", "")], *device_parsers.STARS_VALID)
                logs = [Runs(scratch, f"{name}.{kind}", "syscnt", limits.SAMPLE_EVERY) for kind in ("acsq", "ffts")]
                _spill_stream(stream, device_parsers.stars_columns, logs)
                diag.extend(stream.issues)
                _pair_into(logs[0], ("stream_id", "task_id"), "ACSQ task", stream, dev.tasks, clock, _whole_tasks(SQE_CODES, "sqe_type", at_end=False), diag)
                _pair_into(logs[1], ("stream_id", "task_id", "subtask_id", "thread_id"), "FFTS+ subtask", stream,
                           dev.tasks, clock, lambda c, s, e: {
                               "stream_id": c["stream_id"][s], "task_id": c["task_id"][s],
                               "ctx": np.where(c["ffts_type"][s] == device_parsers.FFTS_PLUS, c["subtask_id"][s], INVALID_CTX),
                               "start": c["syscnt"][s], "end": c["syscnt"][e],
                               "dev_type": SUBTASK_CODES + c["subtask_type"][s].astype(np.int16),
                               "tie": TIE_FFTS | (c["subtask_id"][s] << 16) | c["thread_id"][s].astype(np.int64)},
                           diag)
            if ("ffts_profile.data", "") in files:
                stream = RecordStream(FFTS_PMU, files[("ffts_profile.data", "")], *device_parsers.FFTS_VALID)
                dev.ctx_pmu = Runs(scratch, f"{name}.ctx_pmu", "end_ns")
                blocks = BlockGroups(scratch, f"{name}.blk", stream, clock)
                dropped = [0]

                def convert(arr: np.ndarray, offsets: np.ndarray) -> Columns:
                    ctx, blk, over = device_parsers.ffts_columns(arr, offsets)
                    dropped[0] += int(over["overflow"].sum())
                    ctx["end_ns"] = clock.to_ns(ctx["end_syscnt"])
                    blocks.add(blk)
                    return context_records(ctx)
                try:
                    _spill_stream(stream, convert, (dev.ctx_pmu,))
                    diag.extend(device_parsers.overflow_issues(stream.issues, dropped[0], stream.pieces))
                    dev.blk_pmu = block_sums(dev.tasks, blocks, clock, scratch, f"{name}.blk_sum")
                finally:
                    blocks.close()
        else:
            if ("hwts.data", "") in files:
                stream = RecordStream(HWTS_LOG, files[("hwts.data", "")], *device_parsers.HWTS_VALID)
                logs = [Runs(scratch, f"{name}.hwts", "syscnt", limits.SAMPLE_EVERY)]
                _spill_stream(stream, device_parsers.hwts_columns, logs)
                diag.extend(stream.issues)
                _pair_into(logs[0], ("stream_id", "task_id"), "HWTS task", stream, dev.tasks, clock, _whole_tasks(HWTS_CODES, "task_type", at_end=True), diag)
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


def _flip_batches(stream: np.ndarray, start: np.ndarray, flips: device_parsers.Columns) -> np.ndarray:
    """Batch id of each device task: flips (task-id wrap records) on its stream at or before its start."""
    batch: np.ndarray = np.zeros(len(start), dtype=np.int64)
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
    return frame_of({**t, "batch": _flip_batches(t["stream_id"], t["start"], dev.flips),
                     "end_ns": dev.clock.to_ns(t["end"])})


def has_pmu(dev: DeviceData, stars: bool) -> bool:
    """Whether a device has the PMU records its chip's metrics come from."""
    if stars:
        return dev.ctx_pmu is not None and dev.ctx_pmu.rows > 0
    return dev.aic_pmu is not None and len(dev.aic_pmu["task_id"]) > 0
