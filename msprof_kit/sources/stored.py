"""A store msprof-kit made (sqlite/msprof_kit.db): its tables built by the summary exporter's own
table builders (so they equal what `export summary` writes), its AI Core frequency, and its
tasks, API calls and iterations."""
from __future__ import annotations

from typing import Iterator, List, Optional, Protocol, Sequence, Tuple

import numpy as np
import pandas as pd

from .. import store
from ..errors import Diagnostics
from .communication import read_store_communication
from .memory import memory_series, memory_table
from .database import api_levels, level_names
from .frames import (NA, TEXT_COLUMNS, Tables, Trace, api_frame, freq_frame, iteration_frame, lookup_strings,
                     normalize, task_frame)

class SummaryColumn(Protocol):
    """A column of a summary table the exporter builds: its header name, and the CSV text of its cells."""
    name: str

    def csv(self, rows: slice) -> List[str]: ...


class SummaryTable(Protocol):
    """A summary table the exporter builds (exporters/summary.py Table or BlockTable): `n_rows` rows,
    given as (the columns, a slice of their rows) a chunk at a time."""
    n_rows: int

    def pieces(self, lo: int, hi: int) -> Iterator[Tuple[Sequence[SummaryColumn], slice]]: ...


def _table_frame(table: SummaryTable, kind: str) -> pd.DataFrame:
    """A summary Table built by the exporter (exporters/summary.py), as a normalized frame: its
    cells rendered as the CSV would hold them, a chunk of rows at a time."""
    parts = []
    for columns, rows in table.pieces(0, table.n_rows):
        cells = {c.name: c.csv(rows) for c in columns}
        text = pd.DataFrame(cells, dtype=object)
        # the CSV quoting of a text field (shapes) is undone as a CSV reader would
        for name in text.columns:
            if name in TEXT_COLUMNS:
                text[name] = [_unquote(v) for v in text[name]]
        parts.append(normalize(text, kind))
    return pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]


def _unquote(cell: str) -> str:
    if len(cell) >= 2 and cell[0] == '"' and cell[-1] == '"':
        return cell[1:-1].replace('""', '"')
    return cell


def read_store(tables: Tables, collection_path: str, reports: Sequence[str],
               diag: Optional[Diagnostics] = None) -> None:
    """The tables of an imported collection, built by the summary exporter's own table builders
    (so they equal what `export summary` writes), its AI Core frequency, and its communication
    (sources/communication.py; what keeps its wait times from being computed goes to `diag`)."""
    from ..exporters.context import open_context
    from ..exporters.summary.export import summary_tables
    from ..exporters.summary.tasks import summary_flavour
    where = store.store_path(collection_path)
    ctx = open_context(collection_path)
    try:
        if set(reports) & {"op_summary", "op_statistic", "api_statistic", "communication"}:
            built = dict(summary_tables(ctx, summary_flavour(ctx)))
            if "op_summary" in built:
                tables.set("op_summary", _table_frame(built["op_summary"], "op_summary"), where)
            elif "task_time" in built:
                tables.set("op_summary", _table_frame(built["task_time"], "task_time"), where + " (task_time)")
            for kind in ("op_statistic", "api_statistic"):
                if kind in built:
                    tables.set(kind, _table_frame(built[kind], kind), where)
            if "communication" in reports and "communication_statistic" in built:
                stat = _table_frame(built["communication_statistic"], "communication_statistic")
                read_store_communication(tables, ctx, stat, where, diag)
        if "memory" in reports and (ctx.has("NPU_MEM") or ctx.has("NPU_MODULE_MEM")):
            tables.set("memory", memory_table(ctx.conn), where)
            tables.set("memory_series", memory_series(ctx.conn), where)
        if "freq" in reports:
            if ctx.has("AICORE_FREQ"):
                rows = ctx.conn.execute("SELECT deviceId, timestampNs, freq FROM AICORE_FREQ").fetchall()
                if rows:
                    dev, ts, mhz = zip(*rows)
                    tables.set("freq", freq_frame(dev, [t / 1000 for t in ts], mhz, "recorded"), where)
            if tables.table("freq") is None:
                nominal = [(d, float(i["aic_frequency"])) for d, i in sorted(ctx.device_info.items())
                           if str(i.get("aic_frequency", "")).replace(".", "", 1).isdigit()]
                if nominal:
                    tables.set("freq", freq_frame([d for d, _ in nominal], [np.nan] * len(nominal),
                                                  [f for _, f in nominal], "info.json"), where)
    finally:
        ctx.conn.close()


def trace_from_store(trace: Trace, collection_path: str, parts: Sequence[str]) -> None:
    """Tasks (TASK, named from COMPUTE_TASK_INFO, else by their task type), host APIs (CANN_API)
    and iterations (the step trace, as `export` windows them) of an imported collection."""
    from ..exporters.context import open_context
    from ..exporters.scope import step_iterations
    where = store.store_path(collection_path)
    ctx = open_context(collection_path)
    try:
        strings = {int(i): str(v) for i, v in ctx.conn.execute("SELECT id, value FROM STRING_IDS").fetchall()} \
            if ctx.has("STRING_IDS") else {}
        if "tasks" in parts and ctx.has("TASK"):
            t = ctx.ints("TASK", ("startNs", "endNs", "deviceId", "streamId", "taskType", "globalTaskId"))
            task_type = lookup_strings(t["taskType"], strings)
            name = task_type.copy()
            op_type: np.ndarray = np.full(len(name), NA, dtype=object)
            if ctx.has("COMPUTE_TASK_INFO"):
                info = ctx.ints("COMPUTE_TASK_INFO", ("globalTaskId", "name", "opType"))
                at = pd.Index(info["globalTaskId"]).get_indexer(t["globalTaskId"])
                known = at >= 0
                name[known] = lookup_strings(info["name"][at[known]], strings)
                op_type[known] = lookup_strings(info["opType"][at[known]], strings)
            trace.set("tasks", task_frame(t["deviceId"], t["streamId"], task_type, name, op_type, t["startNs"],
                                          t["endNs"]), where + " (TASK)")
        if "apis" in parts and ctx.has("CANN_API"):
            a = ctx.ints("CANN_API", ("startNs", "endNs", "type", "globalTid", "name"))
            levels = api_levels(ctx.conn, ctx.tables)
            level = level_names(a["type"], levels)
            trace.set("apis", api_frame(a["globalTid"] & 0xFFFFFFFF, level, lookup_strings(a["name"], strings),
                                        a["startNs"], a["endNs"]), where + " (CANN_API)")
        if "iterations" in parts:
            rows = [(dev, model, index, start, end)
                    for dev, per in sorted(step_iterations(ctx).items()) for model, index, start, end in per]
            if rows:
                dev, model, index, start, end = zip(*rows)
                s_ns, e_ns = np.array(start, dtype=np.int64), np.array(end, dtype=np.int64)
                trace.set("iterations", iteration_frame(dev, model, index, s_ns / 1000, e_ns / 1000,
                                                        (e_ns - s_ns) / 1000), where + " (KIT_STEP_TRACE)")
    finally:
        ctx.conn.close()
