"""`plot`: every chart kind for each collection at or below a folder, one PNG file each, or a line
saying why a kind is skipped."""
from __future__ import annotations

import os
import re
from typing import Dict, List, Optional, Sequence

import numpy as np

from .. import sources
from ..errors import BadOption, Diagnostics, NoCollection, NoData
from .collection import Data, collection_data
from .communication import plot_communication
from .drawing import DEFAULT_OUT, MAX_BARS, require_matplotlib, save
from .freq import plot_freq
from .gantt import plot_gantt
from .memory import plot_memory
from .operators import plot_op_types, plot_pmu, plot_top_ops


KINDS = ("top_ops", "op_types", "gantt", "pmu", "freq", "communication", "memory")
FILE_NAMES = {"top_ops": "top_operators.png", "op_types": "time_by_type.png", "gantt": "gantt.png",
              "pmu": "pmu_ratios.png", "freq": "aicore_freq.png", "communication": "communication.png",
              "memory": "memory.png"}
DEFAULT_TOP = 20


def _why_not(kind: str, data: Data) -> Optional[str]:
    """Why a kind cannot be drawn for a collection, or None when it can."""
    ops = data.tables.op_rows
    if kind in ("top_ops", "pmu") and ops is None:
        return f"no operator rows; looked for {sources.LOOKED_FOR_REPORT['op_summary']}"
    if kind == "op_types" and data.tables.op_statistic is None and \
            (ops is None or sources.TASK_TYPE not in ops.columns):
        return "no operator types or core types; looked for " + sources.LOOKED_FOR_REPORT["op_statistic"]
    if kind == "pmu" and ops is not None and not sources.pmu_ratio_columns(ops):
        return (f"the operator rows ({data.source('op_summary')}) have no PMU *_ratio columns "
                "(collected without --ai-core / --aic-metrics, or a source that does not carry them)")
    if kind == "gantt" and data.trace.tasks is None and data.trace.apis is None:
        return "no device tasks or host API calls with start times; looked for " + sources.LOOKED_FOR_TRACE["tasks"] + \
            "; and " + sources.LOOKED_FOR_TRACE["apis"]
    if kind == "communication" and data.tables.communication is None:
        return "no communication (HCCL) ops; looked for " + sources.LOOKED_FOR_REPORT["communication"]
    if kind == "memory" and data.tables.memory_series is None:
        return "no device memory samples; looked for " + sources.LOOKED_FOR_REPORT["memory"]
    if kind == "freq":
        freq = data.tables.freq
        if freq is None:
            return "no AI Core frequency; looked for " + sources.LOOKED_FOR_REPORT["freq"]
        recorded = freq[freq[sources.FREQ_SOURCE] == "recorded"]
        if recorded.empty:
            nominal = ", ".join(f"{v:g} MHz" for v in freq[sources.FREQ_MHZ].dropna().unique())
            return f"the frequency was not recorded over time; only the nominal AI Core frequency from info.json " \
                   f"({nominal}) is known"
    return None


def _out_dirs(paths: Sequence[str], root: str, out: str) -> Dict[str, str]:
    """The output folder of each collection: `out` itself for one, else a sub-folder per collection
    named after its path below `root`."""
    if len(paths) == 1:
        return {paths[0]: out}
    dirs = {}
    for p in paths:
        rel = os.path.relpath(p, root)
        dirs[p] = os.path.join(out, re.sub(r"[^\w.-]+", "_", rel if rel != "." else os.path.basename(p)))
    return dirs


def plot(path: str, out: Optional[str], top: int = DEFAULT_TOP, iteration: Optional[int] = None,
         diag: Optional[Diagnostics] = None, start: Optional[float] = None, end: Optional[float] = None,
         ensure: Optional[sources.EnsureStores] = None) -> List[str]:
    """Draw every plot kind for each collection at or below `path`; returns one line per file
    written (`Wrote <file>: <what>`) and per kind skipped (`Skipped <kind>: <why>`).

    out: the output folder (default DEFAULT_OUT below the current directory); with several
    collections each gets a sub-folder. top: bars in the operator charts (0: all, up to MAX_BARS).
    iteration: the iteration the Gantt shows (default: the median-length one, or the whole run).
    start, end: instead, the Gantt's window in µs after the run's start (its first device task, or
    first API call without tasks); either may be left out. ensure: makes the stores of raw
    collections (sources.EnsureStores)."""
    if top < 0:
        raise BadOption(f"--top {top}: expected 0 (all, up to {MAX_BARS}) or a positive number of bars")
    if iteration is not None and iteration < 0:
        raise BadOption(f"--iteration {iteration}: expected an iteration number")
    if iteration is not None and (start is not None or end is not None):
        raise BadOption("--iteration and --start/--end both choose the Gantt's window: give one of them")
    for name, value in (("--start", start), ("--end", end)):
        if value is not None and not (value >= 0 and np.isfinite(value)):
            raise BadOption(f"{name} {value:g}: expected µs after the run's start, 0 or more")
    require_matplotlib()
    diag = diag if diag is not None else Diagnostics()
    found = sources.discover(path)
    if not found:
        raise NoCollection(f"no profiling data here or below; looked for {sources.LOOKED_FOR}", path=path)
    out = out if out is not None else os.path.join(os.getcwd(), DEFAULT_OUT)
    dirs = _out_dirs([f.path for f in found], path, out)
    lines: List[str] = []
    reasons: List[str] = []
    problems: List[Optional[str]] = []
    for f in found:
        data = collection_data(f, diag, ensure)
        problems += [data.tables.raw_problem, data.trace.raw_problem]
        where = "" if len(found) == 1 else f" [{f.path}]"
        stand_in = data.tables.raw_problem or data.trace.raw_problem
        for kind in KINDS:
            why = _why_not(kind, data)
            if why:
                if stand_in:  # exported files stood in for the raw data (the note says why)
                    why += "; not in the exported files read instead of the raw data"
                lines.append(f"Skipped {kind}{where}: {why}")
                reasons.append(f"{kind}: {why}")
                continue
            target = os.path.join(dirs[f.path], FILE_NAMES[kind])
            if kind == "top_ops":
                fig, what = plot_top_ops(data, top)
            elif kind == "op_types":
                fig, what = plot_op_types(data, top)
            elif kind == "gantt":
                fig, what = plot_gantt(data, iteration, start, end)
            elif kind == "pmu":
                fig, what = plot_pmu(data, top)
            elif kind == "communication":
                fig, what = plot_communication(data)
            elif kind == "memory":
                fig, what = plot_memory(data)
            else:
                fig, what = plot_freq(data)
            save(fig, target)
            lines.append(f"Wrote {target}: {what}")
    if not any(line.startswith("Wrote ") for line in lines):
        raise NoData("nothing to plot: " + "; ".join(dict.fromkeys(reasons)) + sources.raw_reason(problems), path=path)
    return lines
