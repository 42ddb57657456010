"""Legacy JOB collections: naming device tasks by task id alone, when the HWTS log numbers its
streams differently from the task descriptions (docs/store.md, "JOB collections"). Used by
ingest/job.py's TASK table."""
from __future__ import annotations

from typing import List, Tuple

import numpy as np
import pandas as pd

from ..errors import Diagnostics

TASK_KEY = ["device_id", "task_id", "batch"]
REASONS = (("described", "described for several ops or streams"),
           ("run", "run on several HWTS streams"),
           ("mixed", "on an HWTS stream whose task ids name ops of several streams"))


def link_by_task_id(ops: pd.DataFrame, tasks: pd.DataFrame, exact: np.ndarray) -> Tuple[np.ndarray, pd.DataFrame]:
    """Ops of the device tasks that (stream, task id) cannot name, found by task id alone.

    Applies to a device none of whose tasks matches a description by (stream, task id, batch): the
    2020-era runtime wrote physical stream ids (519, ...) into the HWTS log and logical ones (3, ...)
    into the task descriptions, so no pair matches. A task is then given the op whose (device, task
    id, batch) it shares, only when that key is unambiguous on both sides: described by exactly one
    op (one stream), run on exactly one HWTS stream, and that HWTS stream's other resolved task ids
    point to ops of the same described stream. Anything else stays unlinked.

    `exact`: per task, whether (stream, task id) already found its op. Returns the op row of each
    task (-1: none) and, per device where the fallback applied, the counts: `resolved`, the
    unresolved tasks by reason (`described`, `run`, `mixed`), and the stream ids of both sides."""
    via: np.ndarray = np.full(len(tasks), -1, dtype=np.int64)
    report = pd.DataFrame(columns=["device_id", "resolved", *(r for r, _ in REASONS),
                                   "hwts_streams", "desc_streams"])
    if ops.empty or tasks.empty:
        return via, report
    dev = tasks["device_id"].to_numpy(dtype=np.int64)
    matched = pd.Series(np.asarray(exact, dtype=bool)).groupby(dev).any()
    devices = np.intersect1d(matched.index[~matched.to_numpy()], ops["device_id"].to_numpy(dtype=np.int64))
    if not len(devices):
        return via, report
    mine = ops["device_id"].isin(devices).to_numpy()
    o = ops.loc[mine, TASK_KEY + ["stream_id"]].astype(np.int64)
    o = o.assign(row=np.flatnonzero(mine), n_desc=o.groupby(TASK_KEY)["stream_id"].transform("size"))
    t = tasks.loc[np.isin(dev, devices), TASK_KEY + ["stream_id"]].astype(np.int64)
    t = t.assign(pos=np.flatnonzero(np.isin(dev, devices)),
                 n_run=t.groupby(TASK_KEY)["stream_id"].transform("nunique"))
    cand = t.merge(o.drop_duplicates(TASK_KEY).rename(columns={"stream_id": "op_stream"}), on=TASK_KEY, how="inner")
    described = cand["n_desc"].to_numpy() > 1
    run = ~described & (cand["n_run"].to_numpy() > 1)
    unique = ~described & ~run
    # one HWTS stream carries one described stream's tasks: a stream whose unique ids name ops of
    # several described streams contradicts that, and none of its tasks is named
    spread = cand[unique].groupby(["device_id", "stream_id"])["op_stream"].nunique()
    bad = spread.index[spread.to_numpy() > 1]
    mixed = unique & pd.MultiIndex.from_frame(cand[["device_id", "stream_id"]]).isin(bad)
    ok = unique & ~mixed
    via[cand["pos"].to_numpy()[ok]] = cand["row"].to_numpy()[ok]
    counts = pd.DataFrame({"device_id": cand["device_id"].to_numpy(), "resolved": ok, "described": described,
                           "run": run, "mixed": mixed}).groupby("device_id").sum()
    counts = counts.reindex(devices, fill_value=0)
    hwts = tasks.groupby("device_id")["stream_id"].agg(["min", "max"]).reindex(devices)
    desc = ops.groupby("device_id")["stream_id"].agg(["min", "max"]).reindex(devices)
    report = counts.reset_index().rename(columns={"index": "device_id"}).astype(np.int64)
    report["hwts_streams"] = [_span(a, b) for a, b in zip(hwts["min"].tolist(), hwts["max"].tolist())]
    report["desc_streams"] = [_span(a, b) for a, b in zip(desc["min"].tolist(), desc["max"].tolist())]
    return via, report


def _span(lo: int, hi: int) -> str:
    return str(int(lo)) if lo == hi else f"{int(lo)}-{int(hi)}"


def warn_task_id_names(report: pd.DataFrame, where: str, diag: Diagnostics,
                       info: List[Tuple[int, str, str]]) -> None:
    """One warning per device where names were taken by task id (what was assumed and how many
    tasks), and one more for the tasks left unnamed because their task id is ambiguous."""
    for row in report.to_dict("records"):
        unresolved = {r: int(row[r]) for r, _ in REASONS}
        left = sum(unresolved.values())
        resolved = int(row["resolved"])
        if not resolved and not left:
            continue
        device = int(row["device_id"])
        info += [(device, "names_by_task_id", str(resolved)), (device, "names_ambiguous", str(left))]
        diag.warn(f"{where}: device {device}: the HWTS log's stream ids ({row['hwts_streams']}) match none of the "
                  f"task descriptions' ({row['desc_streams']}); {resolved} tasks named by task id alone, assuming "
                  "a task id is unique on the device (described once and run on one HWTS stream)")
        if left:
            why = ", ".join(f"{n} {text}" for (r, text), n in zip(REASONS, unresolved.values()) if n)
            diag.warn(f"{where}: device {device}: {left} tasks left N/A: their task id is ambiguous ({why}); "
                      "no name is guessed")
