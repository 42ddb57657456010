"""The entry points of the sources room: the tables (`load`, `read_tables`) and intervals
(`read_trace`) of a collection, each report or part from its best source, and the notes and
error texts that say which exported files stood in for raw data."""
from __future__ import annotations

import os
import re
from typing import Callable, Iterable, List, Optional, Sequence

import numpy as np
import pandas as pd

from .. import store
from ..errors import Diagnostics, MsprofKitError, NoCollection, NoData
from .communication import analysis_files, read_exported_communication
from .csv_files import read_csvs
from .database import read_db, trace_from_db
from .derived import statistic_from_ops, trace_from_ops
from .discovery import Found, discover, examine, step_trace_csvs, trace_timelines
from .frames import (DEVICE, DURATION, ITER_TIME, ITERATION, LOOKED_FOR, LOOKED_FOR_REPORT, MODEL, PART_NAMES,
                     REPORTS, START, TRACE_PARTS, Tables, Trace, iteration_frame)
from .stored import read_store, trace_from_store
from .timelines import read_timelines, trace_from_timelines

GIVES_NO = "the raw data gives no "  # the raw_problem of a store that lacks what exported files have

# which imports the collection when it has no usable store). Given the collection's folder, it
# returns the paths of the collections whose stores now hold it, or raises MsprofKitError when the
# raw data cannot be imported. Without one, stored_only: the store as it is.
EnsureStores = Callable[[str, Diagnostics], List[str]]


def stored_only(path: str, diag: Diagnostics) -> List[str]:
    """The EnsureStores of a caller that imports nothing: the raw collection's store as it is (the
    warnings of its import repeated), or the StoreError saying why it has none that can be used."""
    store.open_store(path).close()
    store.repeat_warnings(path, diag)
    return [path]


def _from_stores(found: Found, diag: Diagnostics, read: Callable[[str], None],
                 ensure: Optional[EnsureStores] = None) -> bool:
    """Give `read` the store of each collection found: a raw collection's, which `ensure` makes
    first when it has none (then the store comes first: True), or the store beside exported data.

    When the import of a raw collection stops with an error and the collection holds exported
    files, those are used instead: `found` becomes an exported collection whose `raw_problem` is
    the error (the store folder the import made is removed when empty, and its note that the store
    would go elsewhere is taken back: none is kept)."""
    if found.raw:
        folder = os.path.dirname(store.store_path(found.path, writing=True))
        made = not os.path.isdir(folder)
        try:
            paths = (ensure or stored_only)(found.path, diag)
        except MsprofKitError as exc:
            exported = examine(found.path)
            if not exported.exported():
                raise
            if made and os.path.isdir(folder) and not os.listdir(folder):
                os.rmdir(folder)  # the failed import's empty store folder: the collection stays as it was
            elsewhere = store.elsewhere_note(found.path)
            diag.notes = [n for n in diag.notes if n != elsewhere]
            said = str(exc).replace(os.path.join(found.path, ""), "")  # paths inside the collection, relative
            found.raw, found.raw_problem = False, f"the raw data cannot be used ({said})"
            found.csv, found.dbs, found.timelines = exported.csv, exported.dbs, exported.timelines
            return False
        for path in paths:
            read(path)
        return True
    if found.has_store:
        read(found.path)
        store.repeat_warnings(found.path, diag)
    return False


def _exports_beside(found: Found) -> Found:
    """The exported files inside a raw collection (mindstudio_profiler_output/, msprof_*.db, ...),
    for the reports its store does not give: those older than the store (newer ones were made
    from it, as store.current_db judges a unified DB, and hold nothing it lacks)."""
    exported = examine(found.path)
    exported.raw, exported.has_store = False, False
    try:
        exported.before_ns = os.stat(store.store_path(found.path)).st_mtime_ns
    except OSError:
        return exported
    exported.csv = {k: kept for k, groups in exported.csv.items()
                    for kept in [[g for g in groups if all(exported.keeps(p) for p in g)]] if kept}
    exported.dbs = [p for p in exported.dbs if exported.keeps(p)]
    exported.timelines = [p for p in exported.timelines if exported.keeps(p)]
    return exported


def load(found: Found, diag: Diagnostics, reports: Sequence[str] = REPORTS,
         ensure: Optional[EnsureStores] = None) -> Tables:
    """The tables of one collection. A raw collection is read from its store, which `ensure` makes
    first when there is none (as `export` imports first); exported data is read where it lies, each
    report from its best source: the store, then CSVs (op_summary before task_time), then unified
    databases, then timelines.

    A raw collection whose import is refused is read from its exported files (see _from_stores);
    one whose store lacks a report (no device data, say) takes that report from its exported files.
    `raw_problem` then says why (exports_note turns it into the user's note)."""
    tables = Tables(found.path)
    if "communication" in reports and "op_summary" not in reports:
        reports = list(reports) + ["op_summary"]   # its COMMUNICATION rows give the ops' OP Types
    if _from_stores(found, diag, lambda path: read_store(tables, path, reports, diag), ensure):
        missing = tables.missing(reports)
        exported = _exports_beside(found) if missing else None
        if exported is None or not exported.exported():
            return tables
        _read_exported(tables, exported, missing, diag)
        filled = [r for r in missing if tables.table(r) is not None]
        if filled:
            tables.raw_problem = GIVES_NO + ", ".join(filled)
        return tables
    _read_exported(tables, found, reports, diag)
    if not tables.sources or exported_files(found.path, tables.sources.values()):  # not all from a store
        tables.raw_problem = found.raw_problem
    return tables


def _read_exported(tables: Tables, found: Found, reports: Sequence[str], diag: Diagnostics) -> None:
    """Fill the `reports` `tables` lacks from the exported files of `found` (see load)."""
    for report, kinds in (("op_summary", ("op_summary",)), ("op_statistic", ("op_statistic",)),
                          ("api_statistic", ("api_statistic",))):
        if report in reports:
            for kind in kinds:
                for group in found.csv.get(kind, []):
                    if tables.table(report) is None:
                        frame = read_csvs(group, kind)
                        if report == "op_summary" and DURATION not in frame.columns:
                            continue
                        tables.set(report, frame, _describe(group))
    for db in found.dbs:
        if tables.missing(reports):
            read_db(tables, db, tables.missing(reports))
    if "op_summary" in reports and tables.table("op_summary") is None:
        for group in found.csv.get("task_time", []):
            tables.set("op_summary", read_csvs(group, "task_time"), _describe(group))
    if found.timelines and set(tables.missing(reports)) & {"op_summary", "freq"}:
        read_timelines(tables, found.timelines, tables.missing(reports), diag)
    if "op_statistic" in reports and tables.table("op_statistic") is None and tables.table("op_summary") is not None:
        tables.set("op_statistic", statistic_from_ops(tables.op_rows), tables.sources["op_summary"] + " (aggregated)")
    if "communication" in reports and tables.table("communication") is None:
        groups = found.csv.get("communication_statistic", [])
        stat = read_csvs(groups[0], "communication_statistic") if groups else None
        analysis = [p for p in analysis_files(found.path, [g for gs in found.csv.values() for g in gs])
                    if found.keeps(p)]
        read_exported_communication(tables, stat, _describe(groups[0]) if groups else "", analysis, diag)


def exports_note(path: str, problems: Iterable[Optional[str]], sources: Iterable[str]) -> Optional[str]:
    """The one-line note of a collection whose exported files stood in for its raw data: why the
    raw data was not (wholly) used (`problems`, the raw_problem of its Tables / Trace) and which
    exported files were read (among `sources`, those not its store); None when there is none."""
    why = _merged(problems)
    files = exported_files(path, sources)
    if not why or not files:
        return None
    return f"{path}: {'; '.join(why)}; read from the exported files {', '.join(files)}"


def exported_files(path: str, sources: Iterable[str]) -> List[str]:
    """The files among `sources` (Tables / Trace sources) other than the store of the collection
    at `path`, relative to it when inside it."""
    own = os.path.normpath(store.store_path(path))
    files: List[str] = []
    for source in sources:
        file = os.path.normpath(re.sub(r"(\s\([^()]*\))+$", "", source))
        if file == own:
            continue
        rel = os.path.relpath(file, path)
        files.append(file if rel.startswith("..") else rel)
    return list(dict.fromkeys(files))


def raw_reason(problems: Iterable[Optional[str]]) -> str:
    """`; <why the raw data was not used>` for an error that found no data, or ''."""
    why = _merged(problems)
    return "; " + "; ".join(why) if why else ""


def _merged(problems: Iterable[Optional[str]]) -> List[str]:
    """Distinct problems, those of a partial store (GIVES_NO ...) as one."""
    why = list(dict.fromkeys(p for p in problems if p))
    lacking = [p[len(GIVES_NO):] for p in why if p.startswith(GIVES_NO)]
    others = [p for p in why if not p.startswith(GIVES_NO)]
    return others + ([GIVES_NO + ", ".join(lacking)] if lacking else [])


def _describe(group: Sequence[str]) -> str:
    return group[0] + (f" (+{len(group) - 1} parts)" if len(group) > 1 else "")


def read_tables(path: str, diag: Diagnostics, reports: Sequence[str] = REPORTS,
                ensure: Optional[EnsureStores] = None) -> List[Tables]:
    """The tables of every collection at or below `path` (see `discover` and `load`; `ensure`
    makes the stores of raw ones). An error names the directory and what was looked for when
    nothing there is usable."""
    found = discover(path)
    if not found:
        raise NoCollection(f"no profiling data here or below; looked for {LOOKED_FOR}", path=path)
    out = [load(f, diag, reports, ensure) for f in found]
    if not any(t.table(r) is not None for t in out for r in reports):
        what = " / ".join(reports)
        if all(f.raw for f in found):
            lacking = "no communication (HCCL) ops" if list(reports) == ["communication"] else \
                "no device tasks, host APIs or AI Core frequency"
            raise NoData(f"the raw collection{'s' if len(found) > 1 else ''} here hold{'' if len(found) > 1 else 's'} "
                         f"no {what} data (imported into sqlite/{store.STORE_NAME}: {lacking} there)", path=path)
        looked = LOOKED_FOR_REPORT[reports[0]] if len(reports) == 1 else LOOKED_FOR
        raise NoData(f"no {what} data here or below; looked for {looked}{raw_reason(t.raw_problem for t in out)}",
                     path=path)
    return out


def read_trace(found: Found, diag: Diagnostics, parts: Sequence[str] = TRACE_PARTS,
               ops: Optional[pd.DataFrame] = None, ops_source: str = "",
               ensure: Optional[EnsureStores] = None) -> Trace:
    """The intervals of one collection (see Trace), each part from the first source that has it:
    the store (of a raw collection: made by `ensure`, as in `load`), unified DBs, timelines (see
    trace_timelines), then task_time CSVs for tasks and msprof step_trace CSVs for iterations,
    then `ops` (the collection's op rows, when the caller has them: see trace_from_ops)."""
    trace = Trace(found.path)
    if _from_stores(found, diag, lambda path: trace_from_store(trace, path, parts), ensure):
        # the store lacks device tasks or host APIs (and then iterations): from the exported files
        missing = trace.missing(parts)
        wanted = [p for p in missing if p != "iterations" or "tasks" in missing]
        exported = _exports_beside(found) if wanted else None
        if exported is None or not exported.exported():
            return trace
        _trace_exported(trace, exported, wanted, diag, ops, ops_source)
        filled = [PART_NAMES[p] for p in wanted if trace.table(p) is not None]
        if filled:
            trace.raw_problem = GIVES_NO + ", ".join(filled)
        return trace
    _trace_exported(trace, found, parts, diag, ops, ops_source)
    if not trace.sources or exported_files(found.path, trace.sources.values()):  # not all from a store
        trace.raw_problem = found.raw_problem
    return trace


def _trace_exported(trace: Trace, found: Found, parts: Sequence[str], diag: Diagnostics,
                    ops: Optional[pd.DataFrame], ops_source: str) -> None:
    """Fill the `parts` `trace` lacks from the exported files of `found` (see read_trace)."""
    for db in found.dbs:
        if trace.missing(parts):
            trace_from_db(trace, db, trace.missing(parts))
    if trace.missing(parts):
        trace_from_timelines(trace, [p for p in trace_timelines(found.path) if found.keeps(p)], trace.missing(parts),
                             diag)
    if "tasks" in trace.missing(parts):
        for group in found.csv.get("task_time", [])[:1]:
            frame = read_csvs(group, "task_time")
            if {START, DURATION} <= set(frame.columns):
                trace_from_ops(trace, frame, _describe(group), ["tasks"])
                if trace.table("tasks") is not None:
                    trace.sources["tasks"] = _describe(group)
    if "iterations" in trace.missing(parts):
        for p in filter(found.keeps, step_trace_csvs(found.path)):
            frame = read_csvs([p], "step_trace")
            if {ITERATION, "Iteration End(us)", ITER_TIME} <= set(frame.columns):
                end = frame["Iteration End(us)"].to_numpy(np.float64)
                span = frame[ITER_TIME].to_numpy(np.float64)
                trace.set("iterations", iteration_frame(frame[DEVICE], frame[MODEL] if MODEL in frame else
                                                        [np.nan] * len(frame), frame[ITERATION], end - span, end,
                                                         span), p)
    if trace.missing(parts):
        trace_from_ops(trace, ops, ops_source or found.path, trace.missing(parts))
