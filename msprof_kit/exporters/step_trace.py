"""step_trace_{ts}.csv: one row per model iteration, from the ts_track step-trace records.

FP start / BP end tags (2, 3) and all-reduce tags are not produced by inference collections; the
columns derived from them read `N/A` (the reference's C++ flavour prints `0.000` there, which
looks like a measured time, so we follow its Python flavour). Iteration Time is the iteration's
own span (model start, or the previous ITER_END, to its end), as both flavours print it."""
from __future__ import annotations

import csv
from typing import List

from .context import ExportContext
from .scope import step_iterations

HEADER = ["Device_id", "Iteration ID", "FP Start(us)", "BP End(us)", "Iteration End(us)", "Iteration Time(us)",
          "FP to BP Time(us)", "Iteration Refresh(us)", "Data Aug Bound(us)", "Model ID"]


def wall_us(ns: int) -> str:
    """Local ns as µs with exactly 3 decimals and the protecting TAB (integer shifting, no rounding)."""
    sign = "-" if ns < 0 else ""
    q, r = divmod(abs(int(ns)), 1000)
    return f"{sign}{q}.{r:03d}\t"


def duration_us(ns: int) -> str:
    sign = "-" if ns < 0 else ""
    q, r = divmod(abs(int(ns)), 1000)
    return f"{sign}{q}.{r:03d}"


def write_step_trace_csv(ctx: ExportContext) -> List[str]:
    """Write step_trace CSV when the collection has iterations (all of them, whatever the scope:
    the reference does not filter this file either)."""
    rows: List[List[str]] = []
    for dev, its in sorted(step_iterations(ctx).items()):
        for model, index, start, end in sorted(its, key=lambda r: (r[3], r[0])):
            rows.append([str(dev), str(index), "N/A", "N/A", wall_us(end), duration_us(end - start),
                         "N/A", "N/A", "N/A", str(model)])
    if not rows:
        return []
    path = ctx.path_for("step_trace", "csv")
    with open(path, "w", newline="", encoding="utf-8") as f:
        out = csv.writer(f, lineterminator="\n")
        out.writerow(HEADER)
        out.writerows(rows)
    return [path]
