"""The SoC flavour: what the older msprof (SS928-class boards, legacy `JOBxxx` collections) exports.

`export timeline` writes `JOBxxx/timeline/`, `export summary` writes `JOBxxx/summary/`, one set of
files per device, model and batch (collectors.md §4.1, outputs.md §11):

    timeline/task_time_{dev}.{model}.{model_id}.{batch}.json   device tasks (Chrome trace)
    timeline/acl_{dev}.{model}.{model_id}.{batch}.json         AscendCL calls (durations in ms)
    summary/op_summary_{dev}.{model}.{model_id}.{batch}.{input_pic_num}.{cur_pic}.{icache_miss_rate}.{freq}.csv
    summary/op_statistic_{dev}_{model_id}_{cur_pic}_{iter}.csv
    summary/acl_statistic_{dev}_{model_id}_{iter}.csv

How the store maps onto these names (docs/exports.md, "SoC flavour"):
* a batch is one iteration of the model from the step trace, numbered from 1; without a step trace
  every task of the model is batch 1;
* `model` is the model name (KIT_MODEL), `NA` when unknown; `iter` and `cur_pic` are the batch,
  `input_pic_num` the model's batch count; `icache_miss_rate` is `NA` (no source data) and `freq`
  the AI Core frequency in MHz from the collection's info, else `NA`.
A column with no source data (the AA-core PMU ratios, DDR bytes, the original layer name) is N/A.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import Dict, Iterator, List, Sequence, cast

import numpy as np
import pandas as pd

from ..store import string_table
from .context import ExportContext
from .scope import step_iterations

NA = "N/A"
NO_NAME = "NA"                # a file name part without source data
TIMELINE_DIR, SUMMARY_DIR = "timeline", "summary"
LEVEL_ACL = 20000
OP_SUMMARY_HEADER = (
    "Layer Id", "Ori Layer Name", "Layer Name", "Layer Type", "Time(us)", "Time Ratio",
    "Mac Busy Ratio", "Mac Ppen Ratio", "Vec Busy Ratio", "Vec Ppen Ratio", "Dstr Ratio", "Dtrans Ratio",
    "DLD Ratio", "WLD Ratio", "Memory Bound", "DDR Read(byte)", "DDR Write(byte)", "DDR Total(byte)")
OP_STATISTIC_HEADER = ("Task ID", "Stream ID", "OP Name", "Task Type", "Total Time Ratio(%)", "Total Time(us)",
                       "Count", "Avg(us)", "Max(us)", "Min(us)")
ACL_STATISTIC_HEADER = ("Process ID", "Thread ID", "Type", "Name", "Total Time Ratio(%)", "Total Time(us)",
                        "Count", "Avg(us)", "Max(us)", "Min(us)")
EARLIEST, LATEST = -(1 << 62), 1 << 62
_UNSAFE = re.compile(r"[^A-Za-z0-9_\-]+")


@dataclass
class Batch:
    """The tasks of one (device, model, batch) and the time window the batch covers."""

    device: int
    model_id: int
    model: str        # file-name-safe model name, NA when unknown
    index: int        # batch number, from 1
    count: int        # the model's batch count on this device
    start: int        # window [start, end), local ns: the tasks and calls that start in it
    end: int
    rows: np.ndarray  # positions in the TASK arrays
    calls_from: int   # the AscendCL calls of the batch end in [calls_from, calls_to): every call of
    calls_to: int     # the run belongs to exactly one of the model's batches


# ------------------------------------------------------------------------------------------------
# What the SoC files read from the store


@dataclass
class JobData:
    """What a legacy JOB store gives its exports: the device tasks with their texts, the ACL APIs and the model
    batches."""
    tasks: Dict[str, np.ndarray]  # TASK columns (int64) plus name/op_type/task_type texts (object)
    apis: pd.DataFrame            # CANN_API at the ACL level: start, end, pid, tid, mode, name
    batches: List[Batch]


def _strings(ctx: ExportContext) -> np.ndarray:
    if not ctx.has("STRING_IDS"):
        return np.array([NA], dtype=object)
    return np.append(string_table(ctx.conn, NA), NA)  # the last entry N/A: the text of id -1


def _model_names(ctx: ExportContext) -> Dict[int, str]:
    if not ctx.has("KIT_MODEL"):
        return {}
    return {int(m): _UNSAFE.sub("_", str(n)) or NO_NAME for m, n in ctx.conn.execute(
        "SELECT modelId, name FROM KIT_MODEL")}


def load_job(ctx: ExportContext) -> JobData:
    """Read a legacy JOB store's tasks and APIs, grouped into the batches its timeline and summary files are
    written per."""
    strings = _strings(ctx)
    cols = ("startNs", "endNs", "deviceId", "streamId", "taskId", "modelId", "globalTaskId", "taskType")
    t = ctx.ints("TASK", cols)
    order = np.argsort(t["startNs"], kind="stable")
    t = {k: v[order] for k, v in t.items()}
    n = len(t["startNs"])
    name: np.ndarray = np.full(n, NA, dtype=object)
    op_type: np.ndarray = np.full(n, NA, dtype=object)
    if ctx.has("COMPUTE_TASK_INFO") and n:
        info = ctx.ints("COMPUTE_TASK_INFO", ("globalTaskId", "name", "opType"))
        pos = pd.Index(info["globalTaskId"]).get_indexer(t["globalTaskId"])
        found = pos >= 0
        name[found] = strings[info["name"][pos[found]]]
        op_type[found] = strings[info["opType"][pos[found]]]
    tasks = {**t, "name": name, "op_type": op_type, "task_type": strings[t["taskType"]]}
    return JobData(tasks, _acl_apis(ctx, strings), _batches(ctx, t))


def _acl_apis(ctx: ExportContext, strings: np.ndarray) -> pd.DataFrame:
    api = ctx.ints("CANN_API", ("startNs", "endNs", "type", "globalTid", "connectionId", "name"))
    acl = api["type"] == LEVEL_ACL
    mode: np.ndarray = np.full(int(acl.sum()), "AscendCL", dtype=object)
    kit = {name: (values, labels) for name, values, labels in ctx.stored_columns("KIT_API")}
    if "connectionId" in kit and "mode" in kit and kit["mode"][1] is not None:
        by_conn = pd.Series(kit["mode"][1][kit["mode"][0]], index=kit["connectionId"][0].astype(np.int64))
        by_conn = by_conn[~by_conn.index.duplicated()]
        found = by_conn.reindex(api["connectionId"][acl]).to_numpy(dtype=object)
        mode = np.where(pd.isna(found), mode, found)
    tid = api["globalTid"][acl]
    return pd.DataFrame({"start": api["startNs"][acl], "end": api["endNs"][acl], "pid": tid >> 32,
                         "tid": tid & 0xFFFFFFFF, "mode": mode, "name": strings[api["name"][acl]]})


def _batches(ctx: ExportContext, t: Dict[str, np.ndarray]) -> List[Batch]:
    """Per device and model: its iterations from the step trace (tasks inside an iteration's
    window), or one batch of all its tasks. An iteration export keeps the chosen model and
    iterations only."""
    names = _model_names(ctx)
    steps = step_iterations(ctx)
    scope = ctx.scope
    # the iterations an iteration export keeps (scope.resolve sets iteration_id with the model id)
    wanted = range(scope.iteration_id, scope.iteration_id + scope.iteration_count) \
        if scope.iteration_id is not None else range(0)
    out: List[Batch] = []
    dev, model, start = t["deviceId"], t["modelId"], t["startNs"]
    for d in np.unique(dev).tolist():
        for m in np.unique(model[dev == d]).tolist():
            if not scope.all_export and m != scope.model_id:
                continue
            mine = np.flatnonzero((dev == d) & (model == m))
            its = sorted((i, s, e) for mm, i, s, e in steps.get(d, []) if mm == m)
            if not its:
                its = [(1, int(start[mine].min()), int(start[mine].max()) + 1)]
            for k, (index, lo, hi) in enumerate(its):
                if not scope.all_export and index not in wanted:
                    continue
                rows = mine[(start[mine] >= lo) & (start[mine] < hi)]
                calls_from = its[k - 1][2] if k else EARLIEST
                calls_to = hi if k + 1 < len(its) else LATEST
                out.append(Batch(d, m, names.get(m, NO_NAME), index, len(its), lo, hi, rows, calls_from, calls_to))
    return out


# ------------------------------------------------------------------------------------------------
# Texts


def us3(ns: np.ndarray) -> List[str]:
    """ns as µs with 3 decimals, exactly."""
    q, r = np.divmod(np.asarray(ns, dtype=np.int64), 1000)
    return [f"{a}.{b:03d}" for a, b in zip(q.tolist(), r.tolist())]


def percent(part: np.ndarray, whole: float) -> List[str]:
    """part / whole × 100 with 2 decimals (0 when whole is 0)."""
    share = np.asarray(part, dtype=np.float64) / whole * 100 if whole > 0 else np.zeros(len(part))
    return [f"{x:.2f}" for x in share.tolist()]


def _write_csv(path: str, header: Sequence[str], columns: Sequence[Sequence[object]]) -> None:
    with open(path, "w", encoding="utf-8", newline="") as out:
        out.write(",".join(header) + "\n")
        for row in zip(*columns):
            out.write(",".join(_field(str(c)) for c in row) + "\n")


def _write_json_rows(path: str, header: Sequence[str], columns: Sequence[Sequence[object]]) -> None:
    with open(path, "w", encoding="utf-8") as out:
        json.dump([dict(zip(header, map(str, row))) for row in zip(*columns)], out, ensure_ascii=False)


def _field(text: str) -> str:
    if "," in text or '"' in text or "\n" in text or "\r" in text:
        return '"' + text.replace('"', '""') + '"'
    return text


def _folder(ctx: ExportContext, name: str) -> str:
    path = os.path.join(ctx.output_root or ctx.collection_path, name)
    os.makedirs(path, exist_ok=True)
    return path


def _freq_name(ctx: ExportContext, device: int) -> str:
    mhz = ctx.device_info.get(device, {}).get("aic_frequency") or ctx.info.get("aic_frequency")
    try:
        return str(int(float(mhz))) if mhz else NO_NAME
    except ValueError:
        return NO_NAME


# ------------------------------------------------------------------------------------------------
# Summaries


def op_summary_columns(data: JobData, b: Batch) -> List[List[str]]:
    """One row per device task of the batch, in execution order."""
    t = data.tasks
    dur = (t["endNs"][b.rows] - t["startNs"][b.rows])
    n = len(b.rows)
    na = [NA] * n
    return [[str(i) for i in range(1, n + 1)], na, list(t["name"][b.rows]), list(t["op_type"][b.rows]),
            us3(dur), percent(dur, float(dur.sum()))] + [na] * 12


def op_statistic_columns(data: JobData, b: Batch) -> List[List[str]]:
    """Per op instance (task id, stream id, op name, task type): its executions in the batch, by
    total time, longest first."""
    t = data.tasks
    frame = pd.DataFrame({"task": t["taskId"][b.rows], "stream": t["streamId"][b.rows],
                          "name": t["name"][b.rows], "type": t["task_type"][b.rows],
                          "dur": t["endNs"][b.rows] - t["startNs"][b.rows]})
    g = frame.groupby(["task", "stream", "name", "type"], sort=False)["dur"].agg(["sum", "count", "max", "min"])
    g = g.reset_index().sort_values("sum", ascending=False, kind="stable")
    avg = g["sum"].to_numpy() / g["count"].to_numpy()
    return [g["task"].astype(str).tolist(), g["stream"].astype(str).tolist(), g["name"].tolist(),
            g["type"].tolist(), percent(g["sum"].to_numpy(), float(frame["dur"].sum())), us3(g["sum"]),
            g["count"].astype(str).tolist(), [f"{x / 1000:.3f}" for x in avg.tolist()], us3(g["max"]),
            us3(g["min"])]


def _batch_apis(data: JobData, b: Batch) -> pd.DataFrame:
    a = data.apis
    inside = a[(a["end"] >= b.calls_from) & (a["end"] < b.calls_to)]
    return cast(pd.DataFrame, inside)  # rows by a boolean mask: a DataFrame (the stubs allow a Series)


def acl_statistic_columns(data: JobData, b: Batch) -> List[List[str]]:
    """Per (process, thread, type, API name): its calls in the batch, by total time."""
    a = _batch_apis(data, b).assign(dur=lambda f: f["end"] - f["start"])
    g = a.groupby(["pid", "tid", "mode", "name"], sort=False)["dur"].agg(["sum", "count", "max", "min"])
    g = g.reset_index().sort_values("sum", ascending=False, kind="stable")
    avg = g["sum"].to_numpy() / np.maximum(g["count"].to_numpy(), 1)
    return [g["pid"].astype(str).tolist(), g["tid"].astype(str).tolist(), g["mode"].tolist(), g["name"].tolist(),
            percent(g["sum"].to_numpy(), float(a["dur"].sum())), us3(g["sum"]), g["count"].astype(str).tolist(),
            [f"{x / 1000:.3f}" for x in avg.tolist()], us3(g["max"]), us3(g["min"])]


def write_summary(ctx: ExportContext, fmt: str = "csv") -> None:
    """Write the SoC summary files of a legacy JOB collection, one set per batch (CSV, or JSON rows with fmt
    'json')."""
    data = load_job(ctx)
    if not data.batches:
        return
    folder = _folder(ctx, SUMMARY_DIR)
    writer = _write_json_rows if fmt == "json" else _write_csv
    for b in data.batches:
        names = {
            "op_summary": (f"op_summary_{b.device}.{b.model}.{b.model_id}.{b.index}.{b.count}.{b.index}."
                           f"{NO_NAME}.{_freq_name(ctx, b.device)}", OP_SUMMARY_HEADER, op_summary_columns),
            "op_statistic": (f"op_statistic_{b.device}_{b.model_id}_{b.index}_{b.index}", OP_STATISTIC_HEADER,
                             op_statistic_columns),
            "acl_statistic": (f"acl_statistic_{b.device}_{b.model_id}_{b.index}", ACL_STATISTIC_HEADER,
                              acl_statistic_columns),
        }
        for kind, (stem, header, columns) in names.items():
            if kind == "acl_statistic" and _batch_apis(data, b).empty:
                continue
            if kind != "acl_statistic" and not len(b.rows):
                continue
            path = os.path.join(folder, f"{stem}.{fmt}")
            writer(path, header, columns(data, b))
            ctx.written.append(path)


# ------------------------------------------------------------------------------------------------
# Timelines


def _meta(name: str, pid: int, tid: int, args: Dict[str, object]) -> Dict[str, object]:
    return {"name": name, "ph": "M", "pid": pid, "tid": tid, "args": args}


def task_events(data: JobData, b: Batch) -> Iterator[Dict[str, object]]:
    """The batch's device tasks: one X event each on the thread of its stream (ts, dur in µs)."""
    t = data.tasks
    yield _meta("process_name", b.device, 0, {"name": f"NPU {b.device}"})
    for s in np.unique(t["streamId"][b.rows]).tolist():
        yield _meta("thread_name", b.device, s, {"name": f"Stream {s}"})
    for r in b.rows.tolist():
        start, end = int(t["startNs"][r]), int(t["endNs"][r])
        name = t["name"][r] if t["name"][r] != NA else t["task_type"][r]
        yield {"name": name, "pid": b.device, "tid": int(t["streamId"][r]), "ts": start / 1000,
               "dur": (end - start) / 1000, "ph": "X",
               "args": {"Task Type": t["task_type"][r], "Stream Id": int(t["streamId"][r]),
                        "Task Id": int(t["taskId"][r])}}


def acl_events(data: JobData, b: Batch) -> Iterator[Dict[str, object]]:
    """The batch's AscendCL calls: ts in µs, dur in ms, as the SoC tool wrote them."""
    a = _batch_apis(data, b)
    pids, tids, starts, ends = (a[c].to_numpy(dtype=np.int64).tolist() for c in ("pid", "tid", "start", "end"))
    for pid in sorted(set(pids)):
        yield _meta("process_name", pid, 0, {"name": f"Process {pid}"})
    for name, pid, tid, start, end, mode in zip(a["name"].tolist(), pids, tids, starts, ends, a["mode"].tolist()):
        yield {"name": name, "pid": pid, "tid": tid, "ts": start / 1000, "dur": (end - start) / 1e6, "ph": "X",
               "args": {"Mode": mode, "Process_Id": pid, "Thread_Id": tid}}


def write_timeline(ctx: ExportContext) -> None:
    """Write the SoC timeline files of a legacy JOB collection, one per batch and kind."""
    data = load_job(ctx)
    if not data.batches:
        return
    folder = _folder(ctx, TIMELINE_DIR)
    for b in data.batches:
        stem = f"{b.device}.{b.model}.{b.model_id}.{b.index}.json"
        for prefix, events, has in (("task_time", task_events, len(b.rows) > 0),
                                    ("acl", acl_events, not _batch_apis(data, b).empty)):
            if not has:
                continue
            path = os.path.join(folder, f"{prefix}_{stem}")
            with open(path, "w", encoding="utf-8") as out:
                json.dump(list(events(data, b)), out, ensure_ascii=False, separators=(",", ":"))
            ctx.written.append(path)


def is_job(ctx: ExportContext) -> bool:
    """Whether the store was made from a legacy JOB collection."""
    return ctx.info.get("layout") == "job"
