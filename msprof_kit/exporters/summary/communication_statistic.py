"""communication_statistic (formats_more.md §1.5): per device, one row per communication OP Type:
how many ops, their total, min, average and max duration and the type's share of the device's
total. An op's duration runs from the first start to the last end of its master tasks that start
at or after the collection start.

Both reference paths print the numbers of one table, which the Python calculator fills (ns: the
average rounded to 3 decimals, the share in % rounded to 3) and which is read back in µs with
SQLite's ROUND(x, 3); the C++ path prints them with DoubleToStr, the Python path as floats. Rows
by total time, descending (the Python path per device first)."""
from __future__ import annotations

from typing import List, Optional

import numpy as np
import pandas as pd

from ...arrays import py_round_units
from ..context import ExportContext
from .cells import NA, decimal_text, double_to_str, sqlite_round_units
from .columns import Column, Table, coded
from .communication import CommOps, op_type_texts
from .op_statistic import statistic_columns
from .tasks import Tasks, device_rank


def communication_statistic_table(ctx: ExportContext, tasks: Tasks, ops: Optional[CommOps],
                                  flavour: str) -> Optional[Table]:
    """Per device, one row per OP Type of the communication ops in scope; None without ops, or when
    no op has an OP Type (the reference then writes no file)."""
    if ops is None or not ops.kept.any():
        return None
    op_type = op_type_texts(ops, tasks.strings)
    if not (op_type != NA).any():
        return None
    kept = ops.kept
    frame = pd.DataFrame({"device": ops.device[kept], "op_type": op_type[kept],
                          "dur": ops.kept_end[kept] - ops.kept_start[kept]})
    stats = frame.groupby(["device", "op_type"], sort=False)["dur"].agg(["count", "sum", "min", "max"]).reset_index()
    totals = stats.groupby("device")["sum"].transform("sum").to_numpy(dtype=np.float64)
    total = stats["sum"].to_numpy(dtype=np.float64)
    count = stats["count"].to_numpy(dtype=np.float64)
    # the calculator keeps the average (ns) and the share (%) rounded to 3 decimals
    avg = py_round_units(total / count, 3) / 1000.0
    ratio = np.where(totals > 0, py_round_units(total / np.where(totals > 0, totals, 1) * 100, 3) / 1000.0, 0.0)
    stats = stats.assign(avg=avg, ratio=ratio, rank=device_rank(stats["device"].to_numpy()))
    keys = ["sum", "max"] if flavour == "cpp" else ["rank", "sum", "max"]
    stats = stats.sort_values(keys, ascending=[k == "rank" for k in keys], kind="stable")

    def fmt(x: np.ndarray) -> np.ndarray:
        units = sqlite_round_units(x, 3)
        if flavour == "cpp":
            return np.array([double_to_str(v / 1000) for v in units.tolist()], dtype=object)
        return decimal_text(units, 3, strip=True)

    cols: List[Column] = [coded("Device_id", stats["device"].to_numpy().astype(str), number=True),
                          coded("OP Type", stats["op_type"].to_numpy()),
                          *statistic_columns(stats, fmt)]
    return Table(cols, len(stats))
