"""`show`: the key tables of a collection for the terminal (tabulate), or as CSV or JSON.

The data comes from `sources/` (store, exported CSVs, unified DBs or timelines, whichever the
directory holds). This module only chooses, orders, cuts and renders:

* op_summary: one row per operator (device, Op Name, OP Type, Task Type) with its task count,
  total and average duration and the mean of each PMU ratio column present; by total time;
* op_statistic: per (OP Type, Core Type), as exported; by total time;
* api_statistic: per (Level, API Name), as exported; by total time;
* freq: the AI Core frequency records (or the nominal frequency when none was recorded);
* communication: per communication OP Type (HcomAllReduce, ...) the op count, total, average and
  max time, and the Notify_Wait time of the ops' master planes with its share of their elapse
  (sources/communication.py); by total time;
* memory: per device the peak (and when) and average memory of the Device and the APP (npu_mem,
  with peak DDR and HBM) and of each module (npu_module_mem), in KB (sources/memory.py); in that
  order (modules by peak).

On a cluster analysis output (`cluster_analysis_output/`, or a cluster folder holding one) three
other reports (sources/cluster.py): slow_ranks and slow_links (slow_ranks.csv, slow_links.csv,
slowest first), then cluster: per rank its computing, communication (not overlapped) and free time
and its wait ratio, in the slow ranks' order.

Numbers sort largest first and texts alphabetically. Nothing here prints; the CLI does.
"""
from __future__ import annotations

import io
import json
import math
import os
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple, cast

import numpy as np
import pandas as pd

from . import sources
from .errors import BadOption, Diagnostics, NoData
from .show_options import DEFAULT_TOP, FORMATS
from .sources import cluster as cluster_files

TITLES = {"op_summary": "Op summary", "op_statistic": "Op statistic", "api_statistic": "API statistic",
          "freq": "AI Core frequency", "communication": "Communication", "memory": "Device memory",
          "slow_ranks": "Slow ranks", "slow_links": "Slow links", "cluster": "Cluster ranks"}
UNITS = {"op_summary": "operators", "op_statistic": "op types", "api_statistic": "APIs", "freq": "records",
         "communication": "op types", "memory": "components", "slow_ranks": "ranks", "slow_links": "links",
         "cluster": "ranks"}
CLUSTER_REPORTS = ("slow_ranks", "slow_links", "cluster")
CLUSTER_ALIASES = {"slow_rank": "slow_ranks", "slow_link": "slow_links", "ranks": "cluster", "step_trace": "cluster"}
# the columns of slow_ranks.csv / slow_links.csv a table shows (all of them in csv and json)
SLOW_RANK_SHOWN = ("rank", "wait_caused_ms", "votes", "collectives", "wait_ms", "wait_vs_median", "wait_ratio",
                   "computing_vs_median")
SLOW_LINK_SHOWN = ("link", "transport", "bandwidth_gbps", "transport_median_gbps", "ratio", "op_ratio", "slowest_op",
                   "slowest_op_gbps")
REPORT_ALIASES = {"frequency": "freq", "aicore_freq": "freq", "ai_core_freq": "freq", "op_summary": "op_summary",
                  "kernel_details": "op_summary", "acl_statistic": "api_statistic",
                  "communication_statistic": "communication", "hccl": "communication", "comm": "communication",
                  "mem": "memory", "npu_mem": "memory", "npu_module_mem": "memory"}
DEFAULT_SORT = {"op_summary": ("Total Time(us)", False), "op_statistic": ("Total Time(us)", False),
                "api_statistic": ("Time(us)", False), "freq": None, "communication": ("Total Time(us)", False), "memory": None}
INTEGER_COLUMNS = ("Count", "Frequency(MHz)", "Rank", "rank", "votes", "collectives", "op_samples")
EXTRA_PMU = ("memory_bound", "cube_utilization(%)")


def parse_reports(values: Optional[Sequence[str]]) -> Optional[List[str]]:
    """The reports named by -r (repeated or comma-separated, any case), in REPORTS order; None
    when none were named (then every report that has data is shown)."""
    if not values:
        return None
    wanted = set()
    for value in values:
        for name in value.split(","):
            key = name.strip().lower()
            if not key:
                continue
            key = REPORT_ALIASES.get(key, key)
            if key not in sources.REPORTS:
                raise BadOption(f"unknown report {name.strip()!r}; choose from {', '.join(sources.REPORTS)}")
            wanted.add(key)
    if not wanted:
        raise BadOption(f"-r names no report; choose from {', '.join(sources.REPORTS)}")
    return [r for r in sources.REPORTS if r in wanted]


def newest_collection(cwd: str) -> str:
    """The most recently modified collection at or below `cwd` (the default of -dir)."""
    return sources.newest(cwd).path


# ------------------------------------------------------------------------------------------------
# Views: the frames shown, before cutting and rendering


@dataclass
class View:
    """One report as shown: its rows, where they came from and their order."""

    report: str
    frame: pd.DataFrame      # all rows, in display order
    source: str              # where the data came from
    order: str = ""          # how the rows are ordered, for the title


def _several_devices(frame: pd.DataFrame) -> bool:
    return sources.DEVICE in frame.columns and frame[sources.DEVICE].nunique() > 1


def op_summary_view(ops: pd.DataFrame) -> pd.DataFrame:
    """One row per operator (device, Op Name, OP Type, Task Type): task count, total and average
    duration (µs), and the mean over its tasks of each PMU ratio column (N/A tasks left out)."""
    keys = ([sources.DEVICE] if _several_devices(ops) else []) + \
        [c for c in (sources.OP_NAME, sources.OP_TYPE, sources.TASK_TYPE) if c in ops.columns]
    grouped = ops.groupby(keys, sort=False, dropna=False)
    out = grouped.size().rename("Count").reset_index()
    total = grouped[sources.DURATION].sum(min_count=1).to_numpy()
    out["Count"] = out["Count"].astype(np.float64)
    out["Total Time(us)"] = total
    out["Avg Time(us)"] = total / out["Count"].to_numpy()
    pmu = [c for c in ops.columns if (c.endswith("_ratio") or c in EXTRA_PMU)
           and ops[c].dtype.kind == "f" and ops[c].notna().any()]
    for c in pmu:
        out[c] = grouped[c].mean().to_numpy()
    return out


def _with_device(frame: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    """The frame's columns among `columns` (and Model Name, in a graph export), Device_id only when
    the rows span several devices."""
    cols = [c for c in columns if c in frame.columns]
    if "Model Name" in frame.columns:
        cols.insert(1 if cols and cols[0] == sources.DEVICE else 0, "Model Name")
    if not _several_devices(frame):
        cols = [c for c in cols if c != sources.DEVICE]
    # a list of labels selects a frame (pandas-stubs, read for Python 3.9, take it for one label)
    return cast(pd.DataFrame, frame[cols])


def build_views(tables: sources.Tables, reports: Sequence[str]) -> List[View]:
    """The views of the reports that have data, in their default order."""
    views: List[View] = []
    for report in reports:
        frame = tables.table(report)
        if frame is None:
            continue
        if report == "op_summary":
            shown = op_summary_view(frame)
        elif report == "op_statistic":
            shown = _with_device(frame, sources.OP_STATISTIC_COLUMNS)
        elif report == "api_statistic":
            shown = _with_device(frame, sources.API_STATISTIC_COLUMNS)
        elif report == "communication":
            shown = _with_device(frame, sources.COMMUNICATION_COLUMNS)
        elif report == "memory":
            shown = _with_device(frame, sources.MEMORY_COLUMNS)
        else:
            shown = _with_device(frame, sources.FREQ_COLUMNS)
            if (shown.get(sources.FREQ_SOURCE, pd.Series(dtype=str)) == "recorded").all():
                shown = shown.drop(columns=[sources.FREQ_SOURCE], errors="ignore")
        view = View(report, shown.reset_index(drop=True), tables.sources.get(report, ""))
        default = DEFAULT_SORT[report]
        if default:
            sort_frame(view, default[0])
        else:
            view.order = "Device, APP, then modules by peak" if report == "memory" else "in time order"
        views.append(view)
    return views


def resolve_column(columns: Sequence[str], wanted: str) -> Optional[str]:
    """The column `wanted` names: the same name in any case, else the one column it begins
    (`total` → `Total Time(us)`); None when it names none or several."""
    low = wanted.strip().lower()
    exact = [c for c in columns if c.lower() == low]
    if exact:
        return exact[0]
    prefix = [c for c in columns if c.lower().startswith(low)]
    return prefix[0] if len(prefix) == 1 else None


def sort_frame(view: View, column: str) -> None:
    """Order a view by a column: numbers largest first, texts A to Z, missing values last; ties
    keep their order."""
    frame = view.frame
    numeric = frame[column].dtype.kind in "iuf"
    view.frame = frame.sort_values(column, ascending=not numeric, kind="stable", na_position="last") \
        .reset_index(drop=True)
    view.order = f"by {column}" + (", largest first" if numeric else "")


def apply_sort(views: List[View], column: Optional[str]) -> None:
    """--sort: order every view that has the column; an error listing the choices when none has."""
    if not column:
        return
    hits = [(v, resolve_column(list(v.frame.columns), column)) for v in views]
    if not any(c for _, c in hits):
        per_report: Dict[str, List[str]] = {}
        for v in views:
            names = per_report.setdefault(v.report, [])
            names += [c for c in v.frame.columns if c not in names]
        choices = "; ".join(f"{report}: {', '.join(names)}" for report, names in per_report.items())
        raise BadOption(f"--sort {column!r} names no column of the tables shown; choose from {choices}")
    for view, name in hits:
        if name:
            sort_frame(view, name)


# ------------------------------------------------------------------------------------------------
# Rendering


def _cell(value: object, column: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return sources.NA
    if isinstance(value, (float, np.floating)):
        if column in INTEGER_COLUMNS and float(value).is_integer():
            return str(int(value))
        return f"{float(value):.3f}"
    return str(value)


def _json_value(value: object, column: str) -> object:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, (float, np.floating)):
        if column in INTEGER_COLUMNS and float(value).is_integer():
            return int(value)
        return round(float(value), 3)
    if isinstance(value, (np.integer,)):
        return int(value)
    return str(value)


def _rows(frame: pd.DataFrame) -> List[List[str]]:
    cols = list(frame.columns)
    return [[_cell(v, c) for v, c in zip(row, cols)] for row in frame.itertuples(index=False, name=None)]


def _relative(source: str, root: str) -> str:
    try:
        rel = os.path.relpath(source, root)
    except ValueError:
        return source
    return source if rel.startswith("..") else rel


def _table_text(view: View, shown: pd.DataFrame, root: str) -> str:
    from tabulate import tabulate
    total = len(view.frame)
    count = f"top {len(shown)} of {total}" if len(shown) < total else f"all {total}"
    unit = UNITS[view.report] if total != 1 else UNITS[view.report][:-1]
    title = f"{TITLES[view.report]}: {count} {unit} {view.order}"
    if view.source:
        title += f"  [{_relative(view.source, root)}]"
    align = ["right" if shown[c].dtype.kind in "iuf" else "left" for c in shown.columns]
    body = tabulate(_rows(shown), headers=list(shown.columns), tablefmt="simple", disable_numparse=True,
                    colalign=align)
    return f"{title}\n{body}\n"


def _csv_text(shown: pd.DataFrame) -> str:
    import csv as csv_module
    out = io.StringIO()
    writer = csv_module.writer(out, lineterminator="\n")
    writer.writerow(list(shown.columns))
    writer.writerows(_rows(shown))
    return out.getvalue()


def cluster_reports(values: Optional[Sequence[str]]) -> Tuple[List[str], bool]:
    """The cluster reports named by -r (all three when none is), and whether -r named any."""
    named = [REPORT_ALIASES.get(k, CLUSTER_ALIASES.get(k, k)) for v in values or [] for k in
             (n.strip().lower() for n in v.split(",")) if k]
    chosen = [r for r in CLUSTER_REPORTS if r in named]
    return (chosen or list(CLUSTER_REPORTS)), bool(chosen)


def build_cluster_views(files: cluster_files.ClusterFiles, reports: Sequence[str], fmt: str) -> List[View]:
    """The views of a cluster output folder: slow ranks, slow links (slowest first), per-rank summary."""
    views: List[View] = []
    every = fmt != "table"
    if "slow_ranks" in reports and files.slow_ranks is not None:
        frame = files.slow_ranks if every else _with_device(files.slow_ranks, SLOW_RANK_SHOWN)
        views.append(View("slow_ranks", frame.reset_index(drop=True), files.source(cluster_files.SLOW_RANKS_CSV),
                          "slowest first (by how long the others waited on them)"))
    if "slow_links" in reports and files.slow_links is not None:
        frame = files.slow_links if every else _with_device(files.slow_links, SLOW_LINK_SHOWN)
        views.append(View("slow_links", frame.reset_index(drop=True), files.source(cluster_files.SLOW_LINKS_CSV),
                          "slowest first (bandwidth against its transport's median)"))
    summary = cluster_files.rank_summary(files) if "cluster" in reports else None
    if summary is not None:
        source = files.source(cluster_files.STEP_TRACE_CSV if files.step_trace is not None
                              else cluster_files.COMMUNICATION_JSON)
        order = "in the slow ranks' order" if files.slow_ranks is not None else "by rank"
        views.append(View("cluster", summary, source, order))
    for view in views:  # counts and ranks as numbers (INTEGER_COLUMNS print them without decimals)
        ints = [c for c in view.frame.columns if view.frame[c].dtype.kind in "iu"]
        view.frame = view.frame.astype({c: "float64" for c in ints})
    return views


def _emit(shown: List[Tuple[str, List[View]]], fmt: str, top: int) -> str:
    """The text of the views of each collection (its path, its views) in `fmt`."""
    several = len(shown) > 1

    def cut(view: View) -> pd.DataFrame:
        return view.frame if top == 0 else view.frame.head(top)

    if fmt == "json":
        docs = []
        for path, views in shown:
            doc: Dict[str, object] = {"collection": path, "sources": {v.report: v.source for v in views}}
            for v in views:
                part = cut(v)
                cols = list(part.columns)
                doc[v.report] = [{c: _json_value(x, c) for c, x in zip(cols, row)}
                                 for row in part.itertuples(index=False, name=None)]
            docs.append(doc)
        return json.dumps(docs if several else docs[0], indent=1, ensure_ascii=False) + "\n"
    blocks: List[str] = []
    for path, views in shown:
        if fmt == "csv":
            single = not several and len(views) == 1
            head = "" if not several else f"# collection: {path}\n"
            parts = [(_csv_text(cut(v)) if single else f"# {v.report}\n{_csv_text(cut(v))}") for v in views]
            blocks.append(head + "\n".join(parts))
        else:
            parts = [_table_text(v, cut(v), path) for v in views]
            blocks.append(f"Collection: {path}\n\n" + "\n".join(parts))
    return "\n".join(blocks)


def render_cluster(path: str, reports: Optional[Sequence[str]] = None, top: int = DEFAULT_TOP,
                   sort: Optional[str] = None, fmt: str = "table") -> str:
    """The text `msprof-kit show` prints for a cluster analysis output at `path` (the folder, or a
    folder holding cluster_analysis_output/): slow ranks, slow links, then the per-rank summary."""
    files = cluster_files.read_cluster(path)
    chosen, named = cluster_reports(reports)
    views = build_cluster_views(files, chosen, fmt)
    if not views:
        raise NoData(f"no {', '.join(chosen)} data in the cluster output; looked for "
                     f"{cluster_files.LOOKED_FOR_CLUSTER}", path=files.folder)
    apply_sort(views, sort)
    return _emit([(files.folder, views)], fmt, top)


def render(path: str, diag: Diagnostics, reports: Optional[Sequence[str]] = None, top: int = DEFAULT_TOP,
           sort: Optional[str] = None, fmt: str = "table", ensure: Optional[sources.EnsureStores] = None) -> str:
    """The text `msprof-kit show` prints for the collection(s) at `path` (`ensure` makes the stores
    of raw collections: sources.EnsureStores).

    reports: -r values (None: all that have data). top: rows per table (0: all). sort: a column
    name (any case, or the start of one). fmt: 'table' (tabulate), 'csv' (one CSV per table,
    headed by a `# <report>` line when there are several) or 'json' (an object per collection:
    its path, the sources, and per report a list of row objects; a list of them when several)."""
    if fmt not in FORMATS:
        raise BadOption(f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")
    if top < 0:
        raise BadOption(f"--top {top}: expected 0 (all rows) or a positive number of rows")
    named_cluster = cluster_reports(reports)[1]
    if named_cluster or (not reports and cluster_files.cluster_output_dir(path) is not None):
        return render_cluster(path, reports, top, sort, fmt)
    wanted = parse_reports(reports)
    chosen = wanted or list(sources.REPORTS)
    loaded = sources.read_tables(path, diag, chosen, ensure)
    for t in loaded:
        note = sources.exports_note(t.path, [t.raw_problem], t.sources.values())
        if note:
            diag.note(note)
    for report in wanted or []:
        if all(t.table(report) is None for t in loaded):
            raise NoData(f"no {report} data here; looked for {sources.LOOKED_FOR_REPORT[report]}"
                         f"{sources.raw_reason(t.raw_problem for t in loaded)}", path=path)
    shown: List[Tuple[sources.Tables, List[View]]] = []
    for t in loaded:
        views = build_views(t, chosen)
        if views:
            shown.append((t, views))
    apply_sort([v for _, views in shown for v in views], sort)
    return _emit([(t.path, views) for t, views in shown], fmt, top)
