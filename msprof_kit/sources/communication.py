"""The communication (HCCL) report of a collection: per device and OP Type the op count, total,
average and maximum duration (communication_statistic's numbers), the Notify_Wait time of the ops'
master planes and its share of their elapse; and per device the bandwidth of each transport.

The wait time and the bandwidths are the communication rule of `analyze` (exporters/analyze.py,
whose functions compute them here too): an op's Wait Time is the Notify_Wait time of its master
plane the rule's walk visits, its Elapse the master plane's span; Wait Ratio here is the type's wait
over its elapse (analyze's own "Wait Time Ratio" is wait / (wait + transit)). The bandwidth of a
transport (RDMA, HCCS, PCIE, SDMA, SIO) is the rule's "Total HCCL Operators" entry; SDMA there
includes what went over HCCS, PCIE and SIO, as the reference counts it.

From a store: communication_statistic as `export summary` builds it, the rule run per device over
COMMUNICATION_TASK_INFO and TASK, OP Types from COMMUNICATION_OP. From exported files: the
communication_statistic CSV (else the COMMUNICATION rows of op_summary), PROF/analyze/communication
.json for wait and bandwidth, and op_summary's COMMUNICATION rows to give its ops their OP Type."""
from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Mapping, Optional, Sequence

import numpy as np
import pandas as pd

from ..errors import BadRecords, Diagnostics, NoData
from ..exporters import analyze
from ..exporters.analyze_store import stored_hccl
from ..exporters.context import ExportContext
from .frames import (BANDWIDTH_COLUMNS, COMMUNICATION_COLUMNS, DEVICE, DURATION, NA, NA_TEXTS, OP_NAME, OP_TYPE,
                    TASK_TYPE, WAIT_RATIO, WAIT_TIME, Tables)

COMMUNICATION_TASK = "COMMUNICATION"   # the Task Type of a communication op's op_summary row
ANALYZE_FILE = os.path.join(analyze.ANALYZE_DIR, "communication.json")
PER_OP_COLUMNS = (DEVICE, OP_NAME, WAIT_TIME, "Elapse Time(us)")


def statistic_from_comm_ops(ops: Optional[pd.DataFrame]) -> Optional[pd.DataFrame]:
    """communication_statistic's count, total, average and max per (device, OP Type) from the
    COMMUNICATION rows of op_summary (one row per op, its duration the op's span); None without any."""
    if ops is None or TASK_TYPE not in ops.columns or OP_TYPE not in ops.columns or DURATION not in ops.columns:
        return None
    keep = (ops[TASK_TYPE] == COMMUNICATION_TASK) & ~ops[OP_TYPE].isin(NA_TEXTS) & ops[DURATION].notna()
    if not keep.any():
        return None
    g = pd.DataFrame({DEVICE: ops[DEVICE][keep], OP_TYPE: ops[OP_TYPE][keep], "d": ops[DURATION][keep]})
    stats = g.groupby([DEVICE, OP_TYPE], sort=False)["d"].agg(["count", "sum", "mean", "max"]).reset_index()
    return pd.DataFrame({DEVICE: stats[DEVICE], OP_TYPE: stats[OP_TYPE], "Count": stats["count"].astype(np.float64),
                         "Total Time(us)": stats["sum"], "Avg Time(us)": stats["mean"],
                         "Max Time(us)": stats["max"]})


def comm_op_types(ops: Optional[pd.DataFrame]) -> Optional[pd.DataFrame]:
    """Op Name → OP Type of the communication ops among op_summary rows (None without any)."""
    if ops is None or TASK_TYPE not in ops.columns or OP_TYPE not in ops.columns or OP_NAME not in ops.columns:
        return None
    rows = ops[(ops[TASK_TYPE] == COMMUNICATION_TASK) & ~ops[OP_TYPE].isin(NA_TEXTS)]
    return None if rows.empty else rows[[OP_NAME, OP_TYPE]].drop_duplicates(OP_NAME).reset_index(drop=True)


def per_op_from_analysis(result: Mapping[str, Any], device: str) -> pd.DataFrame:
    """PER_OP_COLUMNS from a communication rule result (its keys `<op name>@<group>`)."""
    keys = [k for k in result if k != analyze.TOTAL]
    times = [result[k].get("Communication Time Info", {}) for k in keys]
    return pd.DataFrame({DEVICE: device, OP_NAME: [k.rsplit("@", 1)[0] for k in keys],
                         WAIT_TIME: np.array([_number(t.get("Wait Time(ms)")) for t in times]) * 1000,
                         "Elapse Time(us)": np.array([_number(t.get("Elapse Time(ms)")) for t in times]) * 1000},
                        columns=list(PER_OP_COLUMNS))


def bandwidth_from_analysis(result: Mapping[str, Any], device: str) -> pd.DataFrame:
    """BANDWIDTH_COLUMNS, one row per transport, from a communication rule result's totals."""
    info = result.get(analyze.TOTAL, {}).get("Communication Bandwidth Info", {})
    rows = [(device, kind, _number(info.get(kind, {}).get("Transit Size(MB)")),
             _number(info.get(kind, {}).get("Transit Time(ms)")), _number(info.get(kind, {}).get("Bandwidth(GB/s)")))
            for kind in analyze.TRANSPORTS]
    return pd.DataFrame(rows, columns=list(BANDWIDTH_COLUMNS))


def _number(value: object) -> float:
    return float(value) if isinstance(value, (int, float)) else float("nan")


def communication_table(stat: pd.DataFrame, per_op: Optional[pd.DataFrame],
                        types: Optional[pd.DataFrame]) -> pd.DataFrame:
    """COMMUNICATION_COLUMNS: `stat` (per device and OP Type: Count, Total / Avg / Max Time(us)) with
    the wait of the ops of `per_op` (PER_OP_COLUMNS) whose Op Name `types` gives an OP Type; NaN
    where none is known. By total time, largest first."""
    out = stat[[c for c in COMMUNICATION_COLUMNS if c in stat.columns]].copy()
    out[DEVICE] = out[DEVICE].astype(str)
    out[WAIT_TIME] = np.nan
    out[WAIT_RATIO] = np.nan
    if per_op is not None and not per_op.empty and types is not None:
        typed = per_op.merge(types, on=OP_NAME, how="inner")
        sums = typed.groupby([DEVICE, OP_TYPE], sort=False)[[WAIT_TIME, "Elapse Time(us)"]].sum().reset_index()
        sums[DEVICE] = sums[DEVICE].astype(str)
        at = pd.MultiIndex.from_frame(sums[[DEVICE, OP_TYPE]]).get_indexer(
            pd.MultiIndex.from_frame(out[[DEVICE, OP_TYPE]]))
        found = at >= 0
        wait = sums[WAIT_TIME].to_numpy(np.float64)
        elapse = sums["Elapse Time(us)"].to_numpy(np.float64)
        out.loc[found, WAIT_TIME] = wait[at[found]]
        ratio = np.divide(wait, elapse, out=np.zeros_like(wait), where=elapse > 0)
        out.loc[found, WAIT_RATIO] = ratio[at[found]]
    out = out.sort_values("Total Time(us)", ascending=False, kind="stable")
    return out[list(COMMUNICATION_COLUMNS)].reset_index(drop=True)


def _store_analysis(ctx: ExportContext, diag: Optional[Diagnostics]) -> Dict[str, Dict[str, Any]]:
    """The communication rule's result per device (text) over the store's HCCL tasks; {} without
    any. What stops the rule (an op without a master task, an unknown transport) is a warning."""
    stored = stored_hccl(ctx)
    if stored is None:
        return {}
    results: Dict[str, Dict[str, Any]] = {}
    for device in stored.device_list():   # a few devices at most
        try:
            results[str(device)] = analyze.communication(stored.events(device))
        except (NoData, BadRecords) as exc:
            if diag is not None:
                diag.warn(f"communication wait times and bandwidths of device {device} not computed: {exc}")
    return results


def read_store_communication(tables: Tables, ctx: ExportContext, stat: Optional[pd.DataFrame], where: str,
                             diag: Optional[Diagnostics]) -> None:
    """Fill `communication` and `comm_bandwidth` from a store (`stat`: its communication_statistic)."""
    if stat is None or stat.empty:
        return
    results = _store_analysis(ctx, diag)
    per_op = pd.concat([per_op_from_analysis(r, d) for d, r in results.items()], ignore_index=True) \
        if results else None
    types = ctx.frame("SELECT n.value AS name, t.value AS type FROM COMMUNICATION_OP o "
                      "JOIN STRING_IDS n ON n.id = o.opName JOIN STRING_IDS t ON t.id = o.opType") \
        if ctx.has("COMMUNICATION_OP") else pd.DataFrame(columns=["name", "type"])
    types = types.rename(columns={"name": OP_NAME, "type": OP_TYPE}).drop_duplicates(OP_NAME)
    tables.set("communication", communication_table(stat, per_op, types), where)
    if results:
        tables.set("comm_bandwidth", pd.concat([bandwidth_from_analysis(r, d) for d, r in results.items()],
                                               ignore_index=True), where + " (analyze communication rule)")


def analysis_files(path: str, csv_groups: Sequence[Sequence[str]]) -> List[str]:
    """PROF/analyze/communication.json files that belong to a collection at `path` (beside it, or
    beside the export folder of its CSVs)."""
    folders = [path] + [os.path.dirname(os.path.dirname(g[0])) for g in csv_groups if g]
    files = [os.path.join(f, ANALYZE_FILE) for f in dict.fromkeys(folders)]
    return [f for f in files if os.path.isfile(f)]


def read_exported_communication(tables: Tables, stat: Optional[pd.DataFrame], stat_source: str,
                                analysis: Sequence[str], diag: Diagnostics) -> None:
    """Fill `communication` and `comm_bandwidth` from exported files: `stat` (a communication_statistic
    CSV's rows, or None: then op_summary's COMMUNICATION rows) and the first readable of `analysis`
    (communication.json). Its ops have no device: they are given the one device of `stat`, and none
    when `stat` spans several (no wait then; the reference merges the devices' ops too)."""
    if stat is None or stat.empty:
        stat = statistic_from_comm_ops(tables.op_rows)
        stat_source = tables.sources.get("op_summary", "") + " (COMMUNICATION rows)"
    if stat is None or stat.empty:
        return
    devices = stat[DEVICE].astype(str).unique()
    device = str(devices[0]) if len(devices) == 1 else NA
    result: Optional[Dict[str, Any]] = None
    result_path = ""
    for path in analysis:
        try:
            with open(path, encoding="utf-8") as f:
                loaded = json.load(f)
        except (OSError, ValueError) as exc:
            diag.warn(f"{path}: not a readable communication analysis ({exc}); wait times not shown")
            continue
        if isinstance(loaded, dict):
            result, result_path = loaded, path
            break
        diag.warn(f"{path}: not a communication analysis (a JSON object of ops); wait times not shown")
    per_op = per_op_from_analysis(result, device) if result else None
    tables.set("communication", communication_table(stat, per_op, comm_op_types(tables.op_rows)), stat_source)
    if result:
        tables.set("comm_bandwidth", bandwidth_from_analysis(result, device), result_path)
