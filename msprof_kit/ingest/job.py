"""From a legacy `JOBxxx` collection to the store: the tables PROF collections get.

What is read and what is assumed is described in docs/store.md ("JOB collections"). In short:
* HWTS task logs -> TASK (+ KIT_TASK): start/end records paired per (stream, task);
* Framework op descriptions (binary GE reporter records, or the text `host.vm` files) ->
  COMPUTE_TASK_INFO (+ KIT_COMPUTE_TASK, their keys), linked to TASK rows by
  (device, stream, task id, batch) through globalTaskId, or by an unambiguous task id alone on a
  device whose HWTS stream ids match none of the descriptions' (link_by_task_id);
* AclModule records -> CANN_API at the acl level (+ KIT_API);
* the training trace -> KIT_STEP_TRACE, the Framework points -> KIT_STEP_POINT;
* DATA_PREPROCESS AI CPU records -> KIT_AICPU;
* KIT_INFO, SESSION_TIME_INFO, NPU_INFO, RANK_DEVICE_MAP, HOST_INFO, and STRING_IDS last.

Times: device counter ticks / hwts_frequency. Without sync files (dev_start.log, host_start.log)
that is the device's monotonic clock; with start_info it is moved onto Unix time as for PROF.
A control file that is missing is replaced by a documented default, said in one warning.
"""
from __future__ import annotations

import os
from fractions import Fraction
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import pandas as pd

from ..errors import BadRecords, Diagnostics, MissingControlFile, NoData
from ..files import open_regular
from ..layout import CHIPS, NPU_NAMES, Collection, JobFile, JobLayout
from ..parsers.device import pair_start_end
from ..parsers.host import parse_dictionary_lines
from ..parsers.job import (GE_TASK_TYPES, HWTS_TASK_TYPES, RecordError, decode_acl, decode_aicpu, decode_hwts,
                           decode_step_info, decode_task_desc, decode_tensor_data, decode_training_trace,
                           store_step_tags)
from ..parsers.job_text import (AICPU_SEP, GraphInfo, parse_aicpu_text, parse_graph_desc_text, parse_point_text,
                                parse_task_desc_text)
from ..parsers.stream import Issue, Piece, TextLines, locate
from ..store import Table
from ..timebase import Clock, wall_offset_ns
from .clocks import control_times
from .info import device_info_rows
from .job_links import link_by_task_id, warn_task_id_names
from .streams import read_lines, read_stream
from .tasks import GID_KEYS, StringPool, global_ids

INVALID_CTX = 4294967295
NO_MODEL = 4294967295
LEVEL_ACL = 20000
DEFAULT_HWTS_MHZ = Fraction(100)  # the 910/310-era system counter (10 ns a tick), as MindSpore assumes
WRAP_DROP = 1 << 15               # a task id falling by more than this on a stream is a 16-bit wrap
TEXT_COLUMNS = ("in_shapes", "in_dtypes", "in_formats", "out_shapes", "out_dtypes", "out_formats")
NA = "N/A"

# receives each finished store table (store.TableWriter.put): its name, and its rows as a DataFrame or
# as a dict of column arrays
Sink = Callable[[str, Table], None]
InfoRows = List[Tuple[int, str, str]]


# ------------------------------------------------------------------------------------------------
# Reading

def _decode(fn: Callable[..., Tuple[Dict[str, np.ndarray], List[Issue]]], files: Sequence[JobFile],
            diag: Diagnostics, *args: object) -> Dict[str, np.ndarray]:
    """Run a parsers.job decoder over the concatenated slices of `files`; slices of 0 bytes are
    named in a warning (what they should hold is missing)."""
    _warn_empty([f.path for f in files], diag)
    buf, pieces = read_stream([f.path for f in files])
    try:
        cols, issues = fn(buf, pieces, files[-1].done, *args)
    except RecordError as exc:
        raise BadRecords(exc.message, path=exc.path, offset=exc.offset) from exc
    diag.extend(issues)
    return cols


def _text_columns(fn: Callable[[TextLines], Tuple[Dict[str, np.ndarray], List[Issue]]],
                  files: Sequence[JobFile], diag: Diagnostics, sep: bytes = b"\n") -> Dict[str, np.ndarray]:
    """Run a parsers.job text parser over the lines (of bounded length) of the concatenated
    slices of `files`."""
    _warn_empty([f.path for f in files], diag)
    out, issues = fn(read_lines([f.path for f in files], sep))
    diag.extend(issues)
    return out


def _warn_empty(paths: Sequence[str], diag: Diagnostics) -> None:
    """Slices of 0 bytes are named in one warning: what they should hold is missing."""
    empty = [p for p in paths if os.path.getsize(p) == 0]
    if empty:
        more = f" (and {len(empty) - 1} more of its slices)" if len(empty) > 1 else ""
        diag.warn(f"{empty[0]}: 0 bytes{more}; the records it should hold are missing")


def _starts_with_magic(files: Sequence[JobFile]) -> bool:
    with open_regular(files[0].path) as f:
        return f.read(2) == b"ZZ"  # 0x5A5A, little-endian


# ------------------------------------------------------------------------------------------------
# Clocks

class Clocks:
    """Each device's counter clock, the host clock of AclModule times, and what was assumed."""

    def __init__(self, coll: Collection, layout: JobLayout) -> None:
        self.device: Dict[int, Clock] = {}
        self.assumed: List[str] = []
        self.info: InfoRows = []
        timed = {f.device_id for f in layout.files if f.kind in ("hwts", "training_trace")}
        start = next((rd for rd in coll.devices if str(rd.start_info.get("collectionTimeBegin", "")).isdigit()), None)
        self.offset = 0
        self.time_base = "monotonic"
        if start is not None:
            try:
                self.offset = wall_offset_ns(int(str(start.start_info["collectionTimeBegin"])),
                                             int(str(start.start_info.get("clockMonotonicRaw", 0))))
                self.time_base = "unix"
            except ValueError as exc:
                raise MissingControlFile(f"start_info has a non-numeric clockMonotonicRaw ({exc})",
                                         path=start.files.get("start_info", start.path)) from exc
        elif any(f.kind in ("hwts", "training_trace", "acl", "aicpu") for f in layout.files):
            self.assumed.append("times stay on the monotonic clocks they were recorded with (no start_info: "
                                "not Unix time)")
        lacking: List[str] = []
        for rd in coll.devices:
            mhz = rd.hwts_mhz()
            if mhz <= 0:
                mhz = DEFAULT_HWTS_MHZ
                if rd.device_id in timed:
                    where = "no info.json" if not rd.info else "no DeviceInfo hwts_frequency in info.json"
                    lacking.append(f"{rd.device_id} ({where})")
                    self.info.append((rd.device_id, "hwts_frequency_assumed", str(DEFAULT_HWTS_MHZ)))
            if "cntvct" in rd.dev_start and "clock_monotonic_raw" in rd.host_start:
                base = Clock(rd.dev_start["cntvct"], rd.host_start["clock_monotonic_raw"] + self.offset, mhz)
            else:
                base = Clock(0, self.offset, mhz)
            self.device[rd.device_id] = base
        if lacking:
            self.assumed.insert(0, f"a {DEFAULT_HWTS_MHZ} MHz HWTS clock on device {', '.join(lacking)}")
        self.host = Clock(0, self.offset, None)  # AclModule times are host ns as recorded
        self.info.append((-1, "time_base", self.time_base))

    def of(self, device: int) -> Clock:
        return self.device.get(device) or Clock(0, self.offset, DEFAULT_HWTS_MHZ)


# ------------------------------------------------------------------------------------------------
# Ops (Framework files)

def _op_frame(n: int) -> Dict[str, np.ndarray]:
    def texts(value: str) -> np.ndarray:
        out: np.ndarray = np.empty(n, dtype=object)
        out.fill(value)
        return out
    return {"op_type": texts(NA), "ge_type": texts(NA), "state": texts(NA), "model_id": np.full(n, NO_MODEL),
            **{c: texts(NA) for c in TEXT_COLUMNS}}


def load_ops(layout: JobLayout, diag: Diagnostics) -> Tuple[pd.DataFrame, pd.DataFrame]:
    """(ops, step points). One op row per task description: device, stream, task id (low 16 bits),
    batch (high bits), op name and type, GE task type, block dim, state, model, the six tensor
    texts. Step points: device, model, store tag, op name."""
    hashes: Dict[int, Dict[str, str]] = {}
    for (dev, _), files in layout.group("hash_dic").items():
        table: Dict[str, str] = {}
        for f in files:
            part, issues = parse_dictionary_lines(read_lines([f.path]), False)
            diag.extend(issues)
            table.update(part)
        hashes[dev] = table
    frames: List[pd.DataFrame] = []
    points: List[pd.DataFrame] = []
    graphs = layout.group("graph_desc")
    tensors = layout.group("tensor_data")
    for (dev, _), files in layout.group("task_desc").items():
        if files[0].encoding == "binary" and _starts_with_magic(files):
            c = _decode(decode_task_desc, files, diag, hashes.get(dev, {}))
            n = len(c["task_id"])
            extra = _op_frame(n)
            extra.update(op_type=c["op_type"], model_id=c["model_id"],
                         ge_type=_names(c["task_type"], GE_TASK_TYPES),
                         state=np.where(c["shape_type"] == 1, "dynamic", "static").astype(object))
            frame = pd.DataFrame({"device_id": dev, "stream_id": c["stream_id"], "full_task": c["task_id"],
                                  "op_name": c["op_name"], "block": c["block_dim"], **extra})
            for (tdev, _), tfiles in tensors.items():
                if tdev != dev:
                    continue
                t = pd.DataFrame(_decode(decode_tensor_data, tfiles, diag))
                t = t.drop_duplicates(["model_id", "stream_id", "task_id"], keep="first")
                merged = frame.merge(t.rename(columns={"task_id": "full_task"}),
                                     on=["model_id", "stream_id", "full_task"], how="left", suffixes=("", "_t"))
                for col in TEXT_COLUMNS:
                    frame[col] = merged[f"{col}_t"].fillna(NA).to_numpy(dtype=object)
        else:
            backend = files[0].encoding if files[0].encoding in ("vm", "ge") else "ge"
            c = _text_columns(parse_task_desc_text, files, diag)
            n = len(c["task_id"])
            frame = pd.DataFrame({"device_id": dev, "stream_id": c["stream_id"], "full_task": c["task_id"],
                                  "op_name": c["op_name"], "block": c["block_dim"], **_op_frame(n)})
            info: Dict[str, GraphInfo] = {}
            for (gdev, _), gfiles in graphs.items():
                if gdev == dev:
                    described, issues = parse_graph_desc_text(read_lines([f.path for f in gfiles]), backend)
                    diag.extend(issues)
                    info.update(described)
            _describe(frame, info)
        frames.append(frame)
    ops = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if not ops.empty:
        full = ops["full_task"].to_numpy(dtype=np.int64)
        ops["task_id"] = full & 0xFFFF
        ops["batch"] = full >> 16
        ops["ctx"] = INVALID_CTX
        ops = _unique_ops(ops, diag)
    # step points: binary step_info (tags in the store's numbering) and text point files
    for (dev, _), files in layout.group("step_info").items():
        c = _decode(decode_step_info, files, diag)
        names = ops[ops["device_id"] == dev] if not ops.empty else pd.DataFrame()
        lookup = {(int(s), int(t)): str(n) for s, t, n in zip(names.get("stream_id", []), names.get("full_task", []),
                                                             names.get("op_name", []))}
        points.append(pd.DataFrame({"deviceId": dev, "modelId": c["model_id"], "tagId": c["tag"],
                                    "name": [lookup.get((int(s), int(t)), "") for s, t in
                                             zip(c["stream_id"].tolist(), c["task_id"].tolist())]}))
    for (dev, _), files in layout.group("point").items():
        c = _text_columns(parse_point_text, files, diag)
        points.append(pd.DataFrame({"deviceId": dev, "modelId": NO_MODEL, "tagId": store_step_tags(c["tag"]),
                                    "name": c["op_name"]}))
    return ops, (pd.concat(points, ignore_index=True) if points else pd.DataFrame())


def _describe(frame: pd.DataFrame, info: Dict[str, GraphInfo]) -> None:
    """Fill the op type and tensor texts of text-described ops from graph_desc_info, by op name."""
    if not info:
        return
    rows = [info.get(str(name)) for name in frame["op_name"].tolist()]
    has = np.array([r is not None for r in rows], dtype=bool)
    if not has.any():
        return
    table = np.array([r for r in rows if r is not None], dtype=object)
    op_type = frame["op_type"].to_numpy(dtype=object).copy()
    op_type[has] = table[:, 0]
    frame["op_type"] = op_type
    for j, col in enumerate(TEXT_COLUMNS):
        values = frame[col].to_numpy(dtype=object).copy()
        values[has] = table[:, j + 1]
        frame[col] = values


def _unique_ops(ops: pd.DataFrame, diag: Diagnostics) -> pd.DataFrame:
    """One op per (device, stream, task, context, batch): a later description of the same task
    replaces an earlier one (a task id reused by a reloaded graph); named conflicts are reported."""
    dup = ops.duplicated(GID_KEYS, keep="last")
    if dup.any():
        last = ops[~dup].set_index(GID_KEYS)["op_name"]
        earlier = ops[dup]
        differ = earlier["op_name"].to_numpy() != last.reindex(pd.MultiIndex.from_frame(earlier[GID_KEYS])).to_numpy()
        if differ.any():
            row = earlier[differ].iloc[0]
            diag.warn(f"device {int(row['device_id'])}: {int(differ.sum())} task descriptions name another op for a "
                      f"(stream, task) described again later (first: stream {int(row['stream_id'])}, task "
                      f"{int(row['full_task'])}, {row['op_name']!r}); the later description is kept")
        ops = ops[~dup.to_numpy()]  # a mask array: pandas-stubs type a frame masked by a Series as a Series
    return ops.reset_index(drop=True)


# ------------------------------------------------------------------------------------------------
# Device tasks (HWTS logs)

def _wrap_batches(tasks: pd.DataFrame) -> np.ndarray:
    """Task-id wrap count of each task on its stream, in start order: legacy logs carry 16-bit
    task ids and no flip records; a fall by more than half the id range is a wrap (a static graph
    re-running its tasks restarts from a nearby id)."""
    if tasks.empty:
        return np.zeros(0, dtype=np.int64)
    order = tasks.sort_values(["device_id", "stream_id", "start"], kind="stable")
    prev = order.groupby(["device_id", "stream_id"], sort=False)["task_id"].shift(1)
    wrap = ((prev - order["task_id"]) > WRAP_DROP).astype(np.int64)
    counts = wrap.groupby([order["device_id"], order["stream_id"]], sort=False).cumsum()
    return counts.reindex(tasks.index).to_numpy(dtype=np.int64)


def _report_orphans(cols: Dict[str, np.ndarray], starts: np.ndarray, ends: np.ndarray, pieces: List[Piece],
                    diag: Diagnostics) -> None:
    used: np.ndarray = np.zeros(len(cols["syscnt"]), dtype=bool)
    used[starts] = used[ends] = True
    for want_start, text in ((True, "start record has no end record; task dropped"),
                             (False, "end record has no start record; dropped")):
        orphan = np.flatnonzero(~used & (cols["is_start"] == want_start))
        if len(orphan):
            first = int(orphan[0])
            path, off = locate(pieces, int(cols["offset"][first]))
            more = f" (and {len(orphan) - 1} more)" if len(orphan) > 1 else ""
            diag.warn(f"{path}: offset {off}: HWTS task {text} (stream {int(cols['stream_id'][first])}, task "
                      f"{int(cols['task_id'][first])}){more}")


def load_tasks(layout: JobLayout, clocks: Clocks, diag: Diagnostics) -> pd.DataFrame:
    """Device tasks of every HWTS log: device, stream, task id, start/end ticks and ns, the
    device's task type name, batch."""
    frames: List[pd.DataFrame] = []
    for (dev, _), files in layout.group("hwts").items():
        buf, pieces = read_stream([f.path for f in files])
        try:
            cols, issues = decode_hwts(buf, pieces, files[-1].done)
        except RecordError as exc:
            raise BadRecords(exc.message, path=exc.path, offset=exc.offset) from exc
        del buf
        diag.extend(issues)
        s, e, _, _ = pair_start_end([cols["stream_id"], cols["task_id"]], cols["syscnt"], cols["is_start"])
        _report_orphans(cols, s, e, pieces, diag)
        clock = clocks.of(dev)
        start, end = cols["syscnt"][s], cols["syscnt"][e]
        frames.append(pd.DataFrame({
            "device_id": dev, "stream_id": cols["stream_id"][s], "task_id": cols["task_id"][s],
            "start": start, "end": end, "start_ns": clock.to_ns(start), "end_ns": clock.to_ns(end),
            "dev_type": _names(cols["task_type"][e], HWTS_TASK_TYPES)}))
    if not frames:
        return pd.DataFrame()
    tasks = pd.concat(frames, ignore_index=True)
    tasks = tasks.sort_values(["device_id", "start", "stream_id", "task_id"], kind="stable").reset_index(drop=True)
    tasks["batch"] = _wrap_batches(tasks)
    tasks["ctx"] = INVALID_CTX
    return tasks


def _names(codes: np.ndarray, table: Dict[int, str]) -> np.ndarray:
    """Names of integer codes (the decimal code when unknown), evaluated once per distinct code."""
    if len(codes) == 0:
        return np.zeros(0, dtype=object)
    uniq, inverse = np.unique(codes, return_inverse=True)
    return np.array([table.get(int(u), str(int(u))) for u in uniq.tolist()], dtype=object)[inverse.ravel()]


# ------------------------------------------------------------------------------------------------
# Store tables

def _put_tasks(ops: pd.DataFrame, tasks: pd.DataFrame, pid: int, strings: StringPool, put: Sink) -> pd.DataFrame:
    """COMPUTE_TASK_INFO, KIT_COMPUTE_TASK, TASK and KIT_TASK. A task shares its op's globalTaskId
    when (device, stream, task id, batch) match, or by task id alone (link_by_task_id). Returns
    link_by_task_id's per-device counts."""
    op_gid, task_gid = global_ids(ops, tasks)
    if not ops.empty:
        n = len(ops)
        put("COMPUTE_TASK_INFO", pd.DataFrame({
            "name": strings.ids_of(ops["op_name"].to_numpy()), "globalTaskId": op_gid,
            "blockNum": ops["block"].to_numpy(dtype=np.int64), "mixBlockNum": np.zeros(n, np.int64),
            "taskType": strings.ids_of(ops["ge_type"].to_numpy()), "opType": strings.ids_of(ops["op_type"].to_numpy()),
            "inputFormats": strings.ids_of(ops["in_formats"].to_numpy()),
            "inputDataTypes": strings.ids_of(ops["in_dtypes"].to_numpy()),
            "inputShapes": strings.ids_of(ops["in_shapes"].to_numpy()),
            "outputFormats": strings.ids_of(ops["out_formats"].to_numpy()),
            "outputDataTypes": strings.ids_of(ops["out_dtypes"].to_numpy()),
            "outputShapes": strings.ids_of(ops["out_shapes"].to_numpy()),
            "attrInfo": np.full(n, strings.id("")), "opState": strings.ids_of(ops["state"].to_numpy()),
            "hf32Eligible": np.full(n, strings.id(NA)), "gridDim": np.full(n, strings.id(NA)),
            "blockDim": np.full(n, strings.id(NA))}))
        put("KIT_COMPUTE_TASK", pd.DataFrame({
            "globalTaskId": op_gid, "deviceId": ops["device_id"].to_numpy(dtype=np.int64),
            "streamId": ops["stream_id"].to_numpy(dtype=np.int64), "taskId": ops["task_id"].to_numpy(dtype=np.int64),
            "batchId": ops["batch"].to_numpy(dtype=np.int64), "modelId": ops["model_id"].to_numpy(dtype=np.int64)}))
    if tasks.empty:
        return pd.DataFrame()
    pos = pd.Index(op_gid).get_indexer(task_gid) if len(op_gid) else np.full(len(tasks), -1)
    via, report = link_by_task_id(ops, tasks, pos >= 0)
    found = via >= 0
    pos[found] = via[found]
    task_gid = task_gid.copy()
    task_gid[found] = op_gid[via[found]]
    linked = pos >= 0
    at = np.clip(pos, 0, None)
    dev_type = tasks["dev_type"].to_numpy(dtype=object)
    if len(op_gid):
        ge_type = ops["ge_type"].to_numpy(dtype=object)[at]
        task_type = np.where(linked & (ge_type != NA), ge_type, dev_type)
        model = np.where(linked, ops["model_id"].to_numpy(dtype=np.int64)[at], NO_MODEL)
    else:
        task_type, model = dev_type, np.full(len(tasks), NO_MODEL, dtype=np.int64)
    n = len(tasks)
    put("TASK", pd.DataFrame({
        "startNs": tasks["start_ns"].to_numpy(), "endNs": tasks["end_ns"].to_numpy(),
        "deviceId": tasks["device_id"].to_numpy(dtype=np.int64), "connectionId": np.full(n, -1, np.int64),
        "globalTaskId": task_gid, "globalPid": np.full(n, pid, np.int64), "taskType": strings.ids_of(task_type),
        "contextId": np.full(n, INVALID_CTX, np.int64), "streamId": tasks["stream_id"].to_numpy(dtype=np.int64),
        "taskId": tasks["task_id"].to_numpy(dtype=np.int64), "modelId": model.astype(np.int64)}))
    put("KIT_TASK", {
        "taskRow": np.arange(n, dtype=np.int64), "globalTaskId": task_gid,
        "batchId": tasks["batch"].to_numpy(dtype=np.int64), "requestId": np.full(n, -1, np.int64),
        "deviceTaskType": dev_type, "kernelName": np.full(n, "", dtype=object), "threadId": np.full(n, -1, np.int64),
        "matched": linked.astype(np.int64), "trackNs": np.full(n, -1, np.int64), "infoNs": np.full(n, -1, np.int64)})
    return report


Spans = List[Tuple[np.ndarray, np.ndarray]]  # (start ns, end ns) of what each table holds


def _put_apis(layout: JobLayout, clocks: Clocks, strings: StringPool, diag: Diagnostics, put: Sink,
              spans: Spans) -> int:
    frames = []
    for (dev, sub), files in layout.group("acl").items():
        c = _decode(decode_acl, files, diag)
        frames.append(pd.DataFrame({"start": c["start"], "end": c["end"], "pid": c["pid"], "tid": c["tid"],
                                    "name": c["name"], "mode": sub.upper(), "device": dev}))
    if not frames:
        return 0
    a = pd.concat(frames, ignore_index=True).sort_values(["start", "end", "tid"], kind="stable")
    n = len(a)
    conn = np.arange(1, n + 1, dtype=np.int64)
    start, end = clocks.host.to_ns(a["start"].to_numpy()), clocks.host.to_ns(a["end"].to_numpy())
    spans.append((start, end))
    put("CANN_API", pd.DataFrame({
        "startNs": start, "endNs": end,
        "type": np.full(n, LEVEL_ACL, np.int64),
        "globalTid": (a["pid"].to_numpy(dtype=np.int64) << 32) | a["tid"].to_numpy(dtype=np.int64),
        "connectionId": conn, "name": strings.ids_of(a["name"].to_numpy())}))
    put("KIT_API", {"connectionId": conn, "mode": a["mode"].to_numpy(dtype=object),
                    "itemId": np.full(n, "0", dtype=object)})
    return n


def _put_steps(layout: JobLayout, clocks: Clocks, ops: pd.DataFrame, diag: Diagnostics, put: Sink,
               spans: Spans) -> int:
    frames = []
    for (dev, _), files in layout.group("training_trace").items():
        c = _decode(decode_training_trace, files, diag)
        models = np.unique(ops.loc[(ops["device_id"] == dev) & (ops["model_id"] != NO_MODEL), "model_id"].to_numpy()) \
            if not ops.empty else np.zeros(0, dtype=np.int64)
        model = int(models[0]) if len(models) == 1 else NO_MODEL  # the legacy trace names no model
        frames.append(pd.DataFrame({
            "deviceId": dev, "timestampNs": clocks.of(dev).to_ns(c["syscnt"]), "indexId": c["iteration"],
            "modelId": model, "streamId": c["stream_id"], "taskId": c["task_id"],
            "tagId": store_step_tags(c["tag"])}))
    return _put_frames(put, "KIT_STEP_TRACE", frames, spans, "timestampNs", "timestampNs")


def _put_aicpu(layout: JobLayout, clocks: Clocks, ops: pd.DataFrame, diag: Diagnostics, put: Sink,
               spans: Spans) -> int:
    frames = []
    for (dev, _), files in layout.group("aicpu").items():
        c = _decode(decode_aicpu, files, diag) if _starts_with_magic(files) else \
            _text_columns(parse_aicpu_text, files, diag, AICPU_SEP)
        name = c["name"].copy()
        binary = c["task_id"] >= 0
        if not ops.empty and binary.any():  # the binary records name no op: take it from the task descriptions
            mine = ops.loc[(ops["device_id"] == dev).to_numpy(), ["stream_id", "task_id", "op_name"]]
            mine = mine.drop_duplicates(["stream_id", "task_id"], keep="last")
            keys = pd.DataFrame({"stream_id": c["stream_id"][binary], "task_id": c["task_id"][binary]})
            found = keys.merge(mine, on=["stream_id", "task_id"], how="left")["op_name"]
            name[binary] = found.fillna("").to_numpy(dtype=object)
        frames.append(pd.DataFrame({
            "deviceId": dev, "streamId": c["stream_id"], "taskId": c["task_id"], "name": name,
            "startNs": c["run_start_us"] * 1000 + clocks.offset, "endNs": c["run_end_us"] * 1000 + clocks.offset,
            "runStartUs": c["run_start_us"], "runEndUs": c["run_end_us"], "runStartTicks": c["start_ticks"],
            "runEndTicks": c["end_ticks"], "dispatchUs": c["dispatch_us"], "totalUs": c["total_us"]}))
    return _put_frames(put, "KIT_AICPU", frames, spans, "startNs", "endNs")


def _put_frames(put: Sink, table: str, frames: List[pd.DataFrame], spans: Spans, start: str, end: str) -> int:
    """Write the rows of `frames` (one a device) as `table`, add their span (columns `start` and
    `end`, ns) to `spans`; the number of rows (none written when there are no frames)."""
    if not frames:
        return 0
    rows = pd.concat(frames, ignore_index=True)
    put(table, rows)
    spans.append((rows[start].to_numpy(), rows[end].to_numpy()))
    return len(rows)


def _time_span(tables: Spans) -> Tuple[int, int]:
    starts = [s for s, _ in tables if len(s)]
    ends = [e for _, e in tables if len(e)]
    if not starts:
        return 0, 0
    return int(min(int(s.min()) for s in starts)), int(max(int(e.max()) for e in ends))


def _put_small(coll: Collection, platform: Optional[int], span: Tuple[int, int], put: Sink) -> None:
    start, end = control_times(coll.devices)
    if not start:
        start, end = span
    elif not end:
        end = max(span[1], start)
    put("SESSION_TIME_INFO", pd.DataFrame({"startTimeNs": [start], "endTimeNs": [end]}))
    first = coll.devices[0] if coll.devices else None
    put("HOST_INFO", pd.DataFrame({"hostUid": [str(first.info.get("hostUid", "0") or "0") if first else "0"],
                                   "hostName": [str(first.info.get("hostname", "")) if first else ""]}))
    ids = [rd.device_id for rd in coll.devices]
    name = NPU_NAMES.get(platform, "Unknown") if platform is not None else "UNKNOWN"
    put("NPU_INFO", pd.DataFrame({"id": ids, "name": [name] * len(ids)}))
    put("RANK_DEVICE_MAP", pd.DataFrame({"rankId": [-1] * len(ids), "deviceId": ids}))


def _platform(coll: Collection, info: InfoRows) -> Optional[int]:
    """platform_version (and the chip, when known) from the first info.json that names one."""
    for rd in coll.devices:
        text = str(rd.info.get("platform_version", "")).strip()
        if text:
            info.append((-1, "platform_version", text))
            if text.isdigit() and int(text) in CHIPS:
                info.append((-1, "chip", CHIPS[int(text)].name))
            return int(text) if text.isdigit() else None
    return None


def build_job(coll: Collection, diag: Diagnostics, put: Sink) -> InfoRows:
    """Parse a JOB collection, handing each store table to `put`. Returns the KIT_INFO rows."""
    layout = coll.job
    if layout is None:
        raise NoData("internal: not a JOB collection", path=coll.path)
    if not layout.files:
        raise NoData("no legacy raw data here; expected hwts.log.data.*, training_trace.*, AclModule.*, "
                     "Framework.* or DATA_PREPROCESS.* slices in the folder or its data/", path=coll.path)
    info: InfoRows = [(-1, "layout", "job"), (-1, "job_name", layout.name), (-1, "collection", coll.path)]
    platform = _platform(coll, info)
    for rd in coll.devices:
        device_info_rows(rd, info)
        for problem in rd.device_info_problems():
            diag.warn(f"{rd.files.get('info.json', rd.path)}: {problem}; taken as unknown (NA in the file names and "
                      "the columns that need it)")
    open_slices = [f for f in layout.files if not f.done]
    if open_slices:
        names = ", ".join(f.path.rsplit("/", 1)[-1] for f in open_slices[:3])
        more = f" and {len(open_slices) - 3} more" if len(open_slices) > 3 else ""
        diag.warn(f"{coll.path}: {len(open_slices)} raw slices have no .done marker and may be incomplete "
                  f"({names}{more}); their whole records are kept")
    clocks = Clocks(coll, layout)
    info += clocks.info
    pid_text = next((str(rd.info.get("pid", "")) for rd in coll.devices if str(rd.info.get("pid", "")).isdigit()), "0")
    strings = StringPool(["release", "allocate"])

    ops, points = load_ops(layout, diag)
    tasks = load_tasks(layout, clocks, diag)
    spans: Spans = [(tasks["start_ns"].to_numpy(), tasks["end_ns"].to_numpy())] if not tasks.empty else []
    warn_task_id_names(_put_tasks(ops, tasks, int(pid_text), strings, put), coll.path, diag, info)
    n_api = _put_apis(layout, clocks, strings, diag, put, spans)
    n_steps = _put_steps(layout, clocks, ops, diag, put, spans)
    if not points.empty:
        put("KIT_STEP_POINT", points)
    n_aicpu = _put_aicpu(layout, clocks, ops, diag, put, spans)
    if ops.empty and tasks.empty and not n_api and not n_steps and not n_aicpu and points.empty:
        raise NoData("none of the legacy raw files holds a usable record", path=coll.path)
    _put_small(coll, platform, _time_span(spans), put)
    if clocks.assumed:
        info.append((-1, "assumptions", "; ".join(clocks.assumed)))
        diag.warn(f"{coll.path}: assumed {'; '.join(clocks.assumed)}")
    put("STRING_IDS", strings.frame())
    return info
