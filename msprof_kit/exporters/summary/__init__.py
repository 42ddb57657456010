"""`export summary`: op_summary, op_statistic, api_statistic, task_time (outputs.md §3-§7.1) and
communication_statistic (formats_more.md §1.5).

Everything comes from the store. One module per report: op_summary (its PMU columns in pmu.py),
op_statistic, task_time, communication_statistic and api_statistic, each building a table over what
tasks.py (device tasks) and communication.py (communication ops) read from the store; export.py writes them (`write_summary`). Each summary is assembled as a `Table` (columns.py):
a header and one column per header cell, each column able to describe any slice of its rows as a
typed slot over compact numeric arrays (an integer, a decimal from integer units, a code into
distinct texts, with N/A cells), its cells printed as cells.py says. The CSV writer (files.py)
renders CHUNK_ROWS rows at a time into one bytes block with `native_impl.format_rows` (one C call
per chunk when the extension is built), so a million-task export never holds all its cell texts at
once.

Two flavours, as a CANN install ships them (outputs.md §0, §3.5):
* 'cpp' (910B family, all-export): durations and timestamps with 3 fixed decimals from integer ns,
  `Task Wait Time` as `std::to_string` (6 decimals), statistics with trailing zeros stripped,
  Device_id `host` for the host API table;
* 'python' (other chips, and every iteration export): Python float texts (`round(x, 3)`), PMU times
  from the total time rounded to 2 decimals, one host API table per device.

Where the reference is wrong, msprof-kit writes the correct value instead: CSV fields holding a comma
or a quote are quoted (the C++ writer does not quote), `Task Wait Time` is exact (the C++ path
subtracts start times parsed back from text) and restarts at each device, and task_time groups tasks
per device (the C++ path drops tasks whose stream and task id repeat on another device).
"""
from __future__ import annotations

from .export import summary_tables, write_summary
from .pmu import UNSUPPORTED_PMU, pmu_header
from .tasks import summary_flavour

__all__ = ["UNSUPPORTED_PMU", "pmu_header", "summary_flavour", "summary_tables", "write_summary"]
