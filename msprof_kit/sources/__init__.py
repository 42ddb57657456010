"""The key tables of a collection as normalized DataFrames, whatever its directory holds.

A directory may hold a raw collection (PROF_xxx, or a legacy JOB once its import exists), the store
msprof-kit made of one (`sqlite/msprof_kit.db`), or only what a profiler exported:
`mindstudio_profiler_output/` CSVs (msprof), `ASCEND_PROFILER_OUTPUT/` CSVs (the PyTorch profiler),
loose summary CSVs in a per-run folder, unified databases (`msprof_*.db`,
`ascend_pytorch_profiler*.db`) or timelines (`msprof_*.json`, `task_time_*.json`,
`trace_view.json`). `discover` finds the collections below a directory without changing anything;
`load` reads one of them (a raw collection from its store, which the caller's EnsureStores makes
first when there is none, as `export` imports first: nothing here imports or parses raw data).

Every table comes back with the column names of the modern msprof export (outputs.md §4-§6), so
the many header generations found in the wild (`Block Dim` / `Block Num`, `Name` / `Op Name`,
`Duration(us)` / `Task Duration(us)`, `Accelerator Core` / `Task Type`, with or without
`Device_id`, ...) read alike; docs/show.md lists them. Times are µs (float64), `Device_id` is text
(`0`, `host`, or `N/A` when the source does not say), missing numbers are NaN.

Nothing here prints or renders: `show.py` does the terminal side, and plot/compare reuse this.

The modules: `frames` (column names, Tables, Trace, frame builders), `discovery` (what a directory
holds), one per kind of source (`stored`, `csv_files`, `database`, `timelines`), `communication` (the communication report, from a
store or exported files), `derived` (tables
computed from others) and `loading` (the entry points). This file re-exports what the views use.
"""
from __future__ import annotations

from .csv_files import csv_kind, read_csvs
from .database import open_db
from .derived import api_statistic_from_calls, model_execution, op_totals, pmu_ratio_columns, statistic_from_ops
from .discovery import Found, discover, newest
from .frames import (API_COLUMNS, API_NAME, API_STATISTIC_COLUMNS, BANDWIDTH_COLUMNS, COMMUNICATION_COLUMNS,
                     CORE_TYPE, DEVICE, DURATION, FREQ_COLUMNS,
                     FREQ_MHZ, FREQ_SOURCE, FREQ_TIME, ITER_END, ITER_START, ITER_TIME, ITERATION, ITERATION_COLUMNS,
                     LEVEL, LOOKED_FOR, LOOKED_FOR_REPORT, LOOKED_FOR_TRACE, MODEL, NA, NA_TEXTS, OP_NAME,
                     OP_STATISTIC_COLUMNS, OP_TYPE, REPORTS, START, STREAM, TASK_COLUMNS, TASK_TYPE, THREAD,
                     TRACE_PARTS, TRANSPORT, WAIT_RATIO, WAIT_TIME, Tables, Trace, normalize)
from .memory import MEMORY_COLUMNS, SERIES_COLUMNS, operator_memory_rows
from .loading import EnsureStores, exported_files, exports_note, load, raw_reason, read_tables, read_trace, stored_only

__all__ = [
    "API_COLUMNS", "API_NAME", "API_STATISTIC_COLUMNS", "BANDWIDTH_COLUMNS", "COMMUNICATION_COLUMNS", "CORE_TYPE", "DEVICE", "DURATION", "FREQ_COLUMNS", "FREQ_MHZ",
    "FREQ_SOURCE", "FREQ_TIME", "ITER_END", "ITER_START", "ITER_TIME", "ITERATION", "ITERATION_COLUMNS", "LEVEL",
    "LOOKED_FOR", "LOOKED_FOR_REPORT", "LOOKED_FOR_TRACE", "MODEL", "NA", "NA_TEXTS", "OP_NAME",
    "OP_STATISTIC_COLUMNS", "OP_TYPE", "REPORTS", "START", "STREAM", "TASK_COLUMNS", "TASK_TYPE", "THREAD",
    "TRACE_PARTS", "TRANSPORT", "WAIT_RATIO", "WAIT_TIME", "EnsureStores", "Found", "Tables", "Trace", "api_statistic_from_calls", "csv_kind", "discover",
    "exported_files", "exports_note", "load", "model_execution", "newest", "normalize", "op_totals", "open_db",
    "pmu_ratio_columns", "raw_reason", "read_csvs", "read_tables", "read_trace", "statistic_from_ops",
    "stored_only", "MEMORY_COLUMNS", "SERIES_COLUMNS", "operator_memory_rows",
]
