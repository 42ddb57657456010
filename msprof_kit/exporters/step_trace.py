"""step_trace_{ts}.csv: one row per model iteration, from the ts_track step-trace records, with the
training-trace points of exporters/training.py and one `Reduce Start(us), Reduce Duration(us)`
pair per all-reduce (as many pairs as the device's iteration with the most reduces; an iteration
with fewer is padded with N/A).

Iteration Time is the iteration's own span (model start, or the previous ITER_END, to its end),
FP to BP Time = BP End - FP Start, Iteration Refresh = Iteration End - BP End, Data Aug Bound =
FP Start - the previous iteration's end.

The cells follow the reference's Python export (viewer/training/step_trace_viewer.py), where a
missing value, or a zero duration, is `N/A`, with one exception: the C++ flavour (910B family,
whole-collection export) prints a missing FP or BP tag, and the cells that need it, as `0.000`
(FP Start and BP End with the timestamp TAB), as the C++ export does (inference collections have
no FP/BP tags). Where the C++ export is wrong the Python one is followed (docs/exports.md
"step_trace"): its first Reduce Duration of an iteration is start - end on unsigned ns, and it
prints 0.000 for the Data Aug Bound of an iteration with an FP tag but no earlier iteration. The
C++ install's iteration export is written by its Python path: Python cells there."""
from __future__ import annotations

import csv
from typing import List

import numpy as np

from ..errors import Diagnostics
from .context import ExportContext
from .scope import step_iterations
from .summary.cells import NA, fixed_ns, int_text, repr_us, stamp_ns
from .training import training_trace

HEADER = ["Device_id", "Iteration ID", "FP Start(us)", "BP End(us)", "Iteration End(us)", "Iteration Time(us)",
          "FP to BP Time(us)", "Iteration Refresh(us)", "Data Aug Bound(us)", "Model ID"]
REDUCE_HEADER = ["Reduce Start(us)", "Reduce Duration(us)"]
CPP_NO_TAG, CPP_NO_TAG_STAMP = "0.000", "0.000\t"


def int_cells(values: np.ndarray) -> np.ndarray:
    """Integers as cell texts."""
    return np.asarray(int_text(values), dtype=object)


def write_step_trace_csv(ctx: ExportContext, diag: Diagnostics) -> List[str]:
    """Write step_trace CSV when the collection has iterations (all of them, whatever the scope:
    the reference does not filter this file either)."""
    its = [(dev, *it) for dev, per in sorted(step_iterations(ctx).items())
           for it in sorted(per, key=lambda r: (r[3], r[0]))]
    if not its:
        return []
    trace = training_trace(ctx)
    unended = trace.unended()
    if unended:
        diag.warn(f"{ctx.collection_path}: step trace: {unended} all-reduce start tag(s) without an end tag; their "
                  f"Reduce Duration is N/A")
    cpp = ctx.flavour == "cpp" and ctx.scope.all_export
    keys = [(d, m, i) for d, m, i, _, _ in its]
    dev, model, index, start, end = (np.array(col, dtype=np.int64) for col in zip(*its))
    fp = np.array([trace.fp.get(k, -1) for k in keys], dtype=np.int64)
    bp = np.array([trace.bp.get(k, -1) for k in keys], dtype=np.int64)
    aug = np.array([trace.data_aug.get(k, 0) for k in keys], dtype=np.int64)
    has_fp, has_bp, has_aug = fp >= 0, bp >= 0, np.array([k in trace.data_aug for k in keys], dtype=bool)
    duration = fixed_ns if cpp else repr_us

    def cells(values: np.ndarray, present: np.ndarray, tag_missing: np.ndarray, stamp: bool = False) -> np.ndarray:
        """The cells of one column: the value where present (the Python export also shows a zero
        duration as N/A); N/A elsewhere, but the C++ export's 0.000 where an FP/BP tag is missing."""
        text = stamp_ns(values) if stamp else duration(values)
        if not cpp and not stamp:
            present = present & (values != 0)
        missing = np.where(tag_missing, CPP_NO_TAG_STAMP if stamp else CPP_NO_TAG, NA) if cpp else NA
        return np.where(present, np.asarray(text, dtype=object), missing)

    columns = [cells(fp, has_fp, ~has_fp, stamp=True), cells(bp, has_bp, ~has_bp, stamp=True),
               stamp_ns(end), duration(end - start),
               cells(bp - fp, has_fp & has_bp, ~(has_fp & has_bp)), cells(end - bp, has_bp, ~has_bp),
               cells(aug, has_aug, ~has_fp)]
    pairs = trace.most_reduces()
    grid: np.ndarray = np.full((len(keys), len(HEADER) + 2 * pairs), NA, dtype=object)
    grid[:, 0], grid[:, 1], grid[:, len(HEADER) - 1] = int_cells(dev), int_cells(index), int_cells(model)
    for c, col in enumerate(columns, start=2):
        grid[:, c] = np.asarray(col, dtype=object)
    flat = [(n, k, s, -1 if e is None else e) for n, key in enumerate(keys)
            for k, (s, e) in enumerate(trace.reduces.get(key, []))]
    if flat:
        at, slot, starts, ends = (np.array(col, dtype=np.int64) for col in zip(*flat))
        col = len(HEADER) + 2 * slot
        grid[at, col] = np.asarray(stamp_ns(starts), dtype=object)
        grid[at, col + 1] = np.where(ends >= 0, np.asarray(duration(ends - starts), dtype=object), NA)
    rows = grid.tolist()
    path = ctx.path_for("step_trace", "csv")
    with open(path, "w", newline="", encoding="utf-8") as f:
        out = csv.writer(f, lineterminator="\n")
        out.writerow(HEADER + REDUCE_HEADER * pairs)
        out.writerows(rows)
    return [path]
