"""step_trace_{ts}.csv: one row per model iteration, from the ts_track step-trace records.

FP start / BP end tags (2, 3) and all-reduce tags are not produced by inference collections. The
columns derived from them follow the flavour a CANN install ships for the chip: the C++ flavour
(910B family, whole-collection export) prints `0.000` (FP Start and BP End with the timestamp TAB),
the Python flavour, and the C++ install's iteration export (which its Python path writes), `N/A`.
Iteration Time is the iteration's own span (model start, or the previous ITER_END, to its end),
as both flavours print it."""
from __future__ import annotations

import csv
from typing import List

import numpy as np

from .context import ExportContext
from .scope import step_iterations
from .summary.cells import fixed_ns, stamp_ns

HEADER = ["Device_id", "Iteration ID", "FP Start(us)", "BP End(us)", "Iteration End(us)", "Iteration Time(us)",
          "FP to BP Time(us)", "Iteration Refresh(us)", "Data Aug Bound(us)", "Model ID"]


def write_step_trace_csv(ctx: ExportContext) -> List[str]:
    """Write step_trace CSV when the collection has iterations (all of them, whatever the scope:
    the reference does not filter this file either)."""
    its = [(dev, *it) for dev, per in sorted(step_iterations(ctx).items())
           for it in sorted(per, key=lambda r: (r[3], r[0]))]
    if not its:
        return []
    dev, model, index, start, end = (np.array(col, dtype=np.int64) for col in zip(*its))
    cpp = ctx.flavour == "cpp" and ctx.scope.all_export
    stamp, time = ("0.000\t", "0.000") if cpp else ("N/A", "N/A")
    rows = [[str(d), str(i), stamp, stamp, e, span, time, time, time, str(m)]
            for d, m, i, e, span in zip(dev.tolist(), model.tolist(), index.tolist(), stamp_ns(end).tolist(),
                                        fixed_ns(end - start).tolist())]
    path = ctx.path_for("step_trace", "csv")
    with open(path, "w", newline="", encoding="utf-8") as f:
        out = csv.writer(f, lineterminator="\n")
        out.writerow(HEADER)
        out.writerows(rows)
    return [path]
