"""Tables derived from other tables: op_statistic from op rows and api_statistic from API calls
(as msprof aggregates them), what op rows stand in for in a Trace, and the aggregates plot and
compare draw (model executions, op totals, PMU ratio columns)."""
from __future__ import annotations

from typing import List, Optional, Sequence

import numpy as np
import pandas as pd

from .frames import (API_NAME, CORE_TYPE, DEVICE, DURATION, LEVEL, MODEL_EXECUTE_APIS, NA, NA_TEXTS, OP_NAME,
                     OP_TYPE, START, STATISTIC_EXCLUDED, STREAM, TASK_TYPE, Trace, iteration_frame)

def statistic_from_ops(ops: Optional[pd.DataFrame]) -> Optional[pd.DataFrame]:
    """op_statistic from op rows, as msprof aggregates it (outputs.md §5): per device and (OP Type,
    Task Type), leaving out communication, WRITE_BACK and INVALID tasks and ops of unknown type.
    Ratio(%) is the group's share of its device's total."""
    if ops is None or ops.empty or OP_TYPE not in ops.columns or DURATION not in ops.columns:
        return None
    task_type = ops[TASK_TYPE] if TASK_TYPE in ops.columns else pd.Series(NA, index=ops.index)
    keep = ~ops[OP_TYPE].isin(NA_TEXTS) & ~task_type.isin(STATISTIC_EXCLUDED) & ops[DURATION].notna()
    g = pd.DataFrame({DEVICE: ops[DEVICE][keep], OP_TYPE: ops[OP_TYPE][keep], CORE_TYPE: task_type[keep],
                      "d": ops[DURATION][keep]})
    if g.empty:
        return None
    stats = g.groupby([DEVICE, OP_TYPE, CORE_TYPE], sort=False)["d"].agg(["count", "sum", "min", "mean", "max"])
    stats = stats.reset_index()
    totals = stats.groupby(DEVICE)["sum"].transform("sum")
    out = pd.DataFrame({
        DEVICE: stats[DEVICE], OP_TYPE: stats[OP_TYPE], CORE_TYPE: stats[CORE_TYPE],
        "Count": stats["count"].astype(np.float64), "Total Time(us)": stats["sum"], "Min Time(us)": stats["min"],
        "Avg Time(us)": stats["mean"], "Max Time(us)": stats["max"],
        "Ratio(%)": np.where(totals > 0, stats["sum"] / totals.where(totals > 0, 1) * 100, 0.0)})
    return out.sort_values([DEVICE, "Total Time(us)"], ascending=[True, False], kind="stable").reset_index(drop=True)


def api_statistic_from_calls(calls: pd.DataFrame) -> Optional[pd.DataFrame]:
    """api_statistic from API calls (`level`, `name`, `dur` µs), as msprof computes it (outputs.md
    §6): per (API name, level) the sum, count, mean, min, max and population variance."""
    if calls is None or calls.empty:
        return None
    g = calls.groupby(["name", "level"], sort=True)["dur"]
    stats = g.agg(["sum", "count", "mean", "min", "max"]).reset_index()
    stats["var"] = g.var(ddof=0).to_numpy()
    return pd.DataFrame({
        DEVICE: "host", LEVEL: stats["level"].astype(str), API_NAME: stats["name"].astype(str),
        "Time(us)": stats["sum"], "Count": stats["count"].astype(np.float64), "Avg(us)": stats["mean"],
        "Min(us)": stats["min"], "Max(us)": stats["max"], "Variance": stats["var"]})


def trace_from_ops(trace: Trace, ops: Optional[pd.DataFrame], source: str, parts: Sequence[str]) -> None:
    """What op rows can stand in for: tasks (rows with a start time; streams when the rows say) and
    iterations (per `Step Id`, from its first task's start to its last task's end)."""
    if ops is None or ops.empty or START not in ops.columns or DURATION not in ops.columns:
        return
    rows = ops[ops[START].notna() & ops[DURATION].notna()]
    if rows.empty:
        return
    if "tasks" in parts:
        tasks = pd.DataFrame({DEVICE: rows[DEVICE].astype(str),
                              STREAM: rows[STREAM].astype(np.float64) if STREAM in rows else np.nan,
                              TASK_TYPE: rows[TASK_TYPE].astype(str) if TASK_TYPE in rows else NA,
                              OP_NAME: rows[OP_NAME].astype(str) if OP_NAME in rows else NA,
                              OP_TYPE: rows[OP_TYPE].astype(str) if OP_TYPE in rows else NA,
                              START: rows[START], DURATION: rows[DURATION]})
        trace.set("tasks", tasks.sort_values(START, kind="stable"), source + " (op rows)")
    if "iterations" in parts and "Step Id" in rows.columns and rows["Step Id"].notna().any():
        stepped = rows[rows["Step Id"].notna()]
        end = stepped[START] + stepped[DURATION]
        g = pd.DataFrame({"dev": stepped[DEVICE], "step": stepped["Step Id"], "s": stepped[START], "e": end}) \
            .groupby(["dev", "step"], sort=True).agg(s=("s", "min"), e=("e", "max")).reset_index()
        trace.set("iterations", iteration_frame(g["dev"], [np.nan] * len(g), g["step"], g["s"], g["e"]),
                  source + " (Step Id)")


def model_execution(api_statistic: Optional[pd.DataFrame]) -> Optional[pd.DataFrame]:
    """The API statistic rows of model executions (MODEL_EXECUTE_APIS: aclmdlExecute, ModelExecute,
    ...), summed over devices: Level, API Name, Count, Time(us) (the total), Avg(us). None without any."""
    if api_statistic is None or api_statistic.empty or API_NAME not in api_statistic.columns:
        return None
    rows = api_statistic[api_statistic[API_NAME].isin(MODEL_EXECUTE_APIS).to_numpy()]
    if rows.empty:
        return None
    # a Python-flavour export repeats the host table once per device: count each (level, API) once
    rows = rows.drop_duplicates(subset=[LEVEL, API_NAME, "Time(us)", "Count"])
    g = rows.groupby([LEVEL, API_NAME], sort=False).agg(Count=("Count", "sum"), Time=("Time(us)", "sum")).reset_index()
    g = g.rename(columns={"Time": "Time(us)"})
    g["Avg(us)"] = g["Time(us)"] / g["Count"].where(g["Count"] > 0)
    order = {name: i for i, name in enumerate(MODEL_EXECUTE_APIS)}
    return g.sort_values(API_NAME, key=lambda s: s.map(order), kind="stable").reset_index(drop=True)


def pmu_ratio_columns(ops: Optional[pd.DataFrame]) -> List[str]:
    """The PMU `*_ratio` columns of op rows that hold at least one number (pipe utilization and
    similar: the share of the core's time a unit was busy)."""
    if ops is None:
        return []
    return [c for c in ops.columns if c.endswith("_ratio") and ops[c].dtype.kind == "f" and ops[c].notna().any()]


def op_totals(ops: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """Op rows summed per key (e.g. [OP_NAME] or [OP_TYPE]) over all devices: Count, Total / Avg /
    Min / Max Time(us), First Start(us) (the earliest task start, NaN when unknown), the OP Type
    and Task Type of the key's tasks ('/'-joined when several), and the mean of each PMU ratio
    column over the tasks that have it."""
    work = ops.copy()
    for c in (OP_TYPE, TASK_TYPE):
        if c not in work.columns:
            work[c] = NA
    if START not in work.columns:
        work[START] = np.nan
    grouped = work.groupby(list(keys), sort=False, dropna=False)
    out = grouped.agg(**{"Count": (DURATION, "size"), "Total Time(us)": (DURATION, "sum"),
                         "Min Time(us)": (DURATION, "min"), "Max Time(us)": (DURATION, "max"),
                         "First Start(us)": (START, "min")}).reset_index()
    out["Count"] = out["Count"].astype(np.float64)
    out["Avg Time(us)"] = out["Total Time(us)"] / out["Count"]
    index = pd.MultiIndex.from_frame(out[list(keys)]) if len(keys) > 1 else pd.Index(out[keys[0]])
    for c in (OP_TYPE, TASK_TYPE):
        if c not in keys:
            out[c] = _distinct_joined(work, list(keys), c).reindex(index).to_numpy()
    for c in pmu_ratio_columns(work):
        out[c] = grouped[c].mean().to_numpy()
    return out


def _distinct_joined(frame: pd.DataFrame, keys: List[str], column: str) -> pd.Series:
    """Per key, the distinct texts of `column`, sorted and '/'-joined. Keys with one value (nearly
    all) are taken as they are; only the few with several are joined one by one."""
    d = frame[keys + [column]].copy()
    d[column] = d[column].astype(str)
    d = d.drop_duplicates().sort_values(keys + [column], kind="stable")
    size = d.groupby(keys, sort=False, dropna=False)[column].transform("size")
    single = d[size == 1].set_index(keys)[column]
    several = d[size > 1]
    if several.empty:
        return single
    joined = several.groupby(keys, sort=False, dropna=False)[column].agg("/".join)
    return pd.concat([single, joined])
