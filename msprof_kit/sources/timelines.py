"""Chrome-trace timelines (msprof_*.json, task_time_*.json, trace_view.json): their op rows and AI
Core frequency (for Tables) and their tasks, API calls and iterations (for Trace). Each file is
loaded whole, so files above a size are skipped."""
from __future__ import annotations

import json
import os
from typing import Dict, List, Sequence, Tuple

import numpy as np
import pandas as pd

from ..errors import Diagnostics
from .frames import (API_NAME, DEVICE, DURATION, LEVEL, NA, OP_NAME, OP_TYPE, START, STREAM, TASK_TYPE, THREAD,
                     Tables, Trace, device_in_path, device_of_label, freq_frame, iteration_frame, to_float)

TIMELINE_MAX_BYTES = 512 * 1024 * 1024   # a timeline is loaded whole: not when larger than this,
FREQ_TIMELINE_MAX_BYTES = 64 * 1024 * 1024  # nor larger than this when only the frequency is wanted
# the level of a timeline's CANN event from its name prefix, when its args carry none
API_PREFIX_LEVELS = {"AscendCL": "acl", "Model": "model", "Node": "node", "Runtime": "runtime", "Hccl": "communication",
                     "HCCL": "communication", "GE": "model"}

def read_timelines(tables: Tables, paths: Sequence[str], reports: Sequence[str], diag: Diagnostics) -> None:
    """Op rows and AI Core frequency from chrome-trace timelines: the complete events of the
    'Ascend Hardware' processes (device tasks; no OP Type there) except those named after their
    task type (MEMCPY_ASYNC, NOTIFY_WAIT, ...: not operators, and not in op_summary either), and
    the counter events of the 'AI Core Freq' processes. Each file is loaded whole, so files above
    TIMELINE_MAX_BYTES (with a warning), or above FREQ_TIMELINE_MAX_BYTES when only the frequency
    is wanted, are skipped."""
    ops: List[dict] = []
    freq: List[Tuple[str, float, float]] = []
    need_ops = "op_summary" in reports
    limit = TIMELINE_MAX_BYTES if need_ops else FREQ_TIMELINE_MAX_BYTES
    for path in paths:
        if os.path.getsize(path) > limit:
            if need_ops:
                diag.warn(f"{path}: larger than {limit >> 20} MiB; not read")
            continue
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                events = json.load(f)
        except (OSError, ValueError) as exc:
            diag.warn(f"{path}: not a readable JSON timeline ({exc}); skipped")
            continue
        if isinstance(events, dict):
            events = events.get("traceEvents", [])
        if not isinstance(events, list):
            continue
        names: Dict[object, str] = {}
        labels: Dict[object, str] = {}
        for e in events:
            if isinstance(e, dict) and e.get("ph") == "M" and isinstance(e.get("args"), dict):
                if e.get("name") == "process_name":
                    names[e.get("pid")] = str(e["args"].get("name", ""))
                elif e.get("name") == "process_labels":
                    labels[e.get("pid")] = str(e["args"].get("labels", ""))
        fallback = device_in_path(path)
        for e in events:
            if not isinstance(e, dict):
                continue
            proc = names.get(e.get("pid"), "")
            device = device_of_label(labels.get(e.get("pid"), ""), fallback)
            args: Dict[str, object] = e["args"] if isinstance(e.get("args"), dict) else {}
            if e.get("ph") == "X" and proc.startswith("Ascend Hardware") and e.get("name") != args.get("Task Type"):
                # (a task named after its task type, such as MEMCPY_ASYNC or NOTIFY_WAIT, is no operator)
                ops.append({DEVICE: device, OP_NAME: str(e.get("name", NA)), OP_TYPE: NA,
                            TASK_TYPE: str(args.get("Task Type", NA)), "Stream ID": args.get("Stream Id",
                            args.get("Physic Stream Id")), "Task ID": args.get("Task Id"),
                            START: to_float(e.get("ts")), DURATION: to_float(e.get("dur"))})
            elif e.get("ph") == "C" and proc == "AI Core Freq":
                mhz = next((v for k, v in args.items() if "MHz" in str(k)), None)
                if mhz is not None:
                    freq.append((device, to_float(e.get("ts")), to_float(mhz)))
    if ops and "op_summary" in reports:
        frame = pd.DataFrame(ops).drop_duplicates()
        for c in ("Stream ID", "Task ID"):
            frame[c] = pd.to_numeric(frame[c], errors="coerce")
        tables.set("op_summary", frame.sort_values(START, kind="stable"), ", ".join(paths[:1]) +
                   (f" (+{len(paths) - 1} more)" if len(paths) > 1 else ""))
    if freq and "freq" in reports:
        dev, ts, mhz = zip(*freq)
        tables.set("freq", freq_frame(dev, ts, mhz, "recorded"), paths[0])


def timeline_events(paths: Sequence[str], diag: Diagnostics) -> pd.DataFrame:
    """The complete ('X') events of chrome-trace timelines as one frame: name, ts and dur (µs),
    cat, args, tid, and from the metadata events `process` (process_name), `thread` (thread_name)
    and `device` (an `NPU n` process label, else a `device_N` folder in the path, else N/A).
    Files above TIMELINE_MAX_BYTES, or not readable as JSON, are skipped with a warning."""
    frames: List[pd.DataFrame] = []
    columns = ["ph", "name", "pid", "tid", "ts", "dur", "cat", "args"]
    for path in paths:
        if os.path.getsize(path) > TIMELINE_MAX_BYTES:
            diag.warn(f"{path}: larger than {TIMELINE_MAX_BYTES >> 20} MiB; not read")
            continue
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                events = json.load(f)
            if isinstance(events, dict):
                events = events.get("traceEvents", [])
            ev = pd.DataFrame.from_records(events, columns=columns) if isinstance(events, list) else None
        except (OSError, ValueError, TypeError, AttributeError) as exc:
            diag.warn(f"{path}: not a readable JSON timeline ({exc}); skipped")
            continue
        if ev is None or ev.empty:
            continue
        meta = ev[ev["ph"] == "M"]
        args = meta["args"]
        procs = dict(zip(meta["pid"][meta["name"] == "process_name"],
                         args[meta["name"] == "process_name"].str.get("name").astype(str)))
        labels = dict(zip(meta["pid"][meta["name"] == "process_labels"],
                          args[meta["name"] == "process_labels"].str.get("labels").astype(str)))
        is_thread = meta["name"] == "thread_name"
        threads = dict(zip(zip(meta["pid"][is_thread], meta["tid"][is_thread]),
                           args[is_thread].str.get("name").astype(str)))
        x = ev[ev["ph"] == "X"].copy()
        if x.empty:
            continue
        fallback = device_in_path(path)
        x["process"] = x["pid"].map(procs).astype(object).fillna("").astype(str)
        label = x["pid"].map(labels).astype(object).fillna("").astype(str).str.extract(r"^\s*NPU\s*(\d+)\s*$")[0]
        x["device"] = label.fillna(fallback).astype(str)
        names = pd.Series(threads, dtype=object)
        keys = pd.MultiIndex.from_arrays([x["pid"], x["tid"]])
        x["thread"] = names.reindex(keys).fillna("").astype(str).to_numpy() if len(names) else ""
        x["ts"] = pd.to_numeric(x["ts"].astype(str).str.strip(), errors="coerce")
        x["dur"] = pd.to_numeric(x["dur"].astype(str).str.strip(), errors="coerce")
        frames.append(x.drop(columns=["ph", "pid"]))
    if not frames:
        return pd.DataFrame(columns=["name", "tid", "ts", "dur", "cat", "args", "process", "device", "thread"])
    return pd.concat(frames, ignore_index=True)


def trace_from_timelines(trace: Trace, paths: Sequence[str], parts: Sequence[str], diag: Diagnostics) -> None:
    """Tasks ('Ascend Hardware' events with a Task Type), host APIs ('CANN' events; the level from
    their args, else from the name's prefix: `AscendCL@` acl, `Node@` node, ...) and iterations
    ('Iteration Time' events of a step-trace thread, or the `ProfilerStep#N` events of a PyTorch
    profiler) of timeline files. Events repeated across files are counted once."""
    if not paths:
        return
    ev = timeline_events(paths, diag)
    if ev.empty:
        return
    source = paths[0] + (f" (+{len(paths) - 1} more)" if len(paths) > 1 else "")
    name: pd.Series = ev["name"].astype(str)
    if "tasks" in parts:
        task_type: pd.Series = ev["args"].str.get("Task Type")
        hw = ev["process"].str.startswith("Ascend Hardware") & task_type.notna()
        if hw.any():
            args = ev["args"][hw]
            stream = pd.to_numeric(args.str.get("Stream Id").fillna(args.str.get("Physic Stream Id")), errors="coerce")
            stream = stream.fillna(pd.to_numeric(ev["tid"][hw], errors="coerce"))
            tasks = pd.DataFrame({DEVICE: ev["device"][hw], STREAM: stream.astype(np.float64),
                                  TASK_TYPE: task_type[hw].astype(str), OP_NAME: name[hw], OP_TYPE: NA,
                                  START: ev["ts"][hw].astype(np.float64), DURATION: ev["dur"][hw].astype(np.float64)})
            trace.set("tasks", tasks.drop_duplicates().sort_values(START, kind="stable"), source)
    if "apis" in parts:
        cann = ev["process"] == "CANN"
        if cann.any():
            args = ev["args"][cann]
            prefix = name[cann].str.extract(r"^([^@]+)@")[0]
            level = args.str.get("level").fillna(prefix.map(API_PREFIX_LEVELS)).fillna(prefix).fillna(NA)
            thread = pd.to_numeric(args.str.get("Thread Id"), errors="coerce")
            thread = thread.fillna(pd.to_numeric(ev["tid"][cann], errors="coerce"))
            apis = pd.DataFrame({DEVICE: "host", THREAD: thread.astype(np.float64), LEVEL: level.astype(str),
                                 API_NAME: name[cann].str.replace(r"^[^@]*@", "", regex=True),
                                 START: ev["ts"][cann].astype(np.float64),
                                 DURATION: ev["dur"][cann].astype(np.float64)})
            trace.set("apis", apis.drop_duplicates().sort_values(START, kind="stable"), source)
    if "iterations" in parts:
        steps = ev["cat"].astype(str).eq("Iteration Time") & name.str.match(r"^Iteration \d+$")
        profiler = name.str.match(r"^ProfilerStep#\d+$")
        for mask, host in ((steps, False), (profiler, True)):
            if not mask.any():
                continue
            index = pd.to_numeric(name[mask].str.extract(r"(\d+)$")[0], errors="coerce")
            model = pd.to_numeric(ev["thread"][mask].str.extract(r"Model ID:\s*(\d+)")[0], errors="coerce")
            start = ev["ts"][mask].to_numpy(np.float64)
            dur = ev["dur"][mask].to_numpy(np.float64)
            device = np.where(host, "host", ev["device"][mask].to_numpy(dtype=object))
            frame = iteration_frame(device, model.to_numpy(np.float64), index.to_numpy(np.float64), start,
                                    start + dur, dur)
            trace.set("iterations", frame.drop_duplicates(), source)
            break
