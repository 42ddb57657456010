"""op_statistic (outputs.md §5): per device (and model, in a graph export), one row per (OP Type,
Core Type)."""
from __future__ import annotations

from typing import Callable, List, Optional

import numpy as np
import pandas as pd

from ...arrays import py_round_units
from ..context import ExportContext
from .cells import NA, NS_PER_US, decimal_text, double_to_str, int_text, sqlite_round_units
from .columns import Column, Table, cells, coded
from .tasks import Tasks, device_rank, graph_mode, model_table, names_of, of_model, session_start

# task types left out of the aggregation, and groups left out of the file
STATISTIC_EXCLUDED = ("COMMUNICATION", "HCCL_AI_CPU")
STATISTIC_HIDDEN = ("WRITE_BACK", "INVALID")


def op_statistic_table(ctx: ExportContext, tasks: Tasks, flavour: str) -> Optional[Table]:
    """Per device (and model, in a graph export), one row per (OP Type, Core Type): task count,
    total/min/avg/max duration and share of the total."""
    if tasks.info is None:
        return None
    graph = graph_mode(ctx)
    begin = session_start(ctx)
    # grouped by ids first (first seen order), then by their texts: ids with the same text (a
    # missing description and a stored "N/A") make one group, where it was first seen. Each block
    # of tasks is grouped on its own; the grouping by texts joins a group's parts from every block.
    share_of = ["device", "model"]
    keys = share_of + ["op_type", "core_type"]
    parts = []
    for at in tasks.spans():
        start = tasks.col("startNs", at)
        task_type = tasks.info_ids("taskType", at)
        keep = tasks.has_info(at) & ~tasks.id_in(task_type, STATISTIC_EXCLUDED) & of_model(ctx, tasks, at)
        if begin is not None:
            keep &= start > begin
        idx = np.flatnonzero(keep)
        if not len(idx):
            continue
        g = pd.DataFrame({
            "device": tasks.col("deviceId", at)[idx],
            "model": tasks.col("modelId", at)[idx] if graph else 0,
            "op_type": tasks.info_ids("opType", at)[idx],
            "core_type": task_type[idx],
            "dur": tasks.col("endNs", at)[idx] - start[idx],
        })
        parts.append(g.groupby(keys, sort=False)["dur"].agg(["count", "sum", "min", "max"]).reset_index())
    if not parts:
        return None
    stats = pd.concat(parts, ignore_index=True)
    del parts
    stats["model"] = names_of(model_table(ctx), stats["model"].to_numpy()) if graph else ""
    stats["op_type"] = tasks.text(stats["op_type"].to_numpy())
    stats["core_type"] = tasks.text(stats["core_type"].to_numpy())
    stats = stats.groupby(keys, sort=False).agg(count=("count", "sum"), sum=("sum", "sum"), min=("min", "min"),
                                                max=("max", "max")).reset_index()
    totals = stats.groupby(share_of)["sum"].transform("sum").to_numpy(dtype=np.float64)
    stats["avg"] = stats["sum"] // stats["count"]  # SQLite's integer division of the ns sums
    # the share is stored rounded to 6 decimals, then read back rounded to 3
    share = stats["sum"].to_numpy(dtype=np.float64) / np.where(totals > 0, totals, 1) * 100
    stats["ratio"] = np.where(totals > 0, py_round_units(share, 6) / 1e6, 0.0)
    stats = stats[(stats["op_type"] != NA) & ~stats["core_type"].isin(STATISTIC_HIDDEN)]
    if stats.empty:
        return None
    return _statistic_table(_order_statistic(stats, flavour, graph), flavour, graph)


def _order_statistic(stats: pd.DataFrame, flavour: str, graph: bool) -> pd.DataFrame:
    """C++: one sort by total time, descending; Python: per device (merge order), by model name in
    a graph export, then total time descending."""
    if flavour == "cpp":
        return stats.sort_values("sum", ascending=False, kind="stable")
    stats = stats.assign(rank=device_rank(stats["device"].to_numpy()))
    keys = ["rank", "model", "sum"] if graph else ["rank", "sum"]
    return stats.sort_values(keys, ascending=[True] * (len(keys) - 1) + [False], kind="stable")


def _statistic_table(stats: pd.DataFrame, flavour: str, graph: bool) -> Table:
    def fmt(x: np.ndarray) -> np.ndarray:
        if flavour == "cpp":  # SQL ROUND(x, 3), then DoubleToStr
            return np.array([double_to_str(v / 1000) for v in sqlite_round_units(x, 3).tolist()], dtype=object)
        return decimal_text(py_round_units(x, 3), 3, strip=True)
    cols: List[Column] = [coded("Device_id", stats["device"].to_numpy().astype(str), number=True)]
    if graph:
        cols.append(coded("Model Name", stats["model"].to_numpy()))
    cols += [coded("OP Type", stats["op_type"].to_numpy()),
             coded("Core Type", stats["core_type"].to_numpy()),
             *statistic_columns(stats, fmt, count_text=True)]  # Count is a TEXT column there
    return Table(cols, len(stats))


def statistic_columns(stats: pd.DataFrame, fmt: Callable[[np.ndarray], np.ndarray],
                      count_text: bool = False) -> List[Column]:
    """The Count, Total/Min/Avg/Max Time(us) and Ratio(%) columns a statistic shares with the others
    (op_statistic, communication_statistic): `stats` has count, sum, min, avg, max in ns and ratio;
    `fmt` prints the numbers as the flavour does."""
    us = {k: stats[k].to_numpy(dtype=np.float64) / NS_PER_US for k in ("sum", "min", "avg", "max")}
    return [cells("Count", int_text(stats["count"].to_numpy()), text=count_text),
            cells("Total Time(us)", fmt(us["sum"])),
            cells("Min Time(us)", fmt(us["min"])),
            cells("Avg Time(us)", fmt(us["avg"])),
            cells("Max Time(us)", fmt(us["max"])),
            cells("Ratio(%)", fmt(stats["ratio"].to_numpy(dtype=np.float64)))]
