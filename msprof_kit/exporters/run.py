"""`export timeline` and `export summary` of collections already imported: exporters read only
the store (cli.run_export imports first, as the reference parses before it exports). EXPORTERS
(and SOC_EXPORTERS for legacy JOB collections) says which exporter writes which export."""
from __future__ import annotations

import functools
import glob
import json
import os
import shutil
import sqlite3
from typing import Callable, Dict, List, Optional, Sequence, Set, Tuple

from .. import forked, store
from ..errors import Diagnostics, OutputError, PathNotFound
from ..forked import Forked
from ..progress import Phase, Progress, label
from . import soc
from .context import OUTPUT_DIR, ExportContext, open_context
from .readme import readme_path, write_readme
from .scope import check_options, resolve


# tables whose presence makes a 910B export write the unified DB
DB_TABLES = ("TASK", "CANN_API", "COMPUTE_TASK_INFO")
# above this many device tasks `export summary` writes the unified DB after its files, not beside
# them: the summary's task columns and the DB's writer together would pass 1.5 GB at 10M tasks
# (docs/benchmarks.md, issue 27); the timeline's blocks leave room for it at any size
DB_AFTER_SUMMARY_TASKS = 4_000_000

#: An exporter writes one kind of export of an open collection: (its context, the summary format
#: 'csv' or 'json', where its warnings go). The files it writes are listed in ctx.written.
Exporter = Callable[[ExportContext, str, Diagnostics], None]


def _summary(ctx: ExportContext, fmt: str, diag: Diagnostics) -> None:
    """op_summary, op_statistic, task_time, api_statistic and step_trace_{ts}.csv."""
    from .step_trace import write_step_trace_csv  # (each exporter imported when it runs: start-up)
    from .summary.export import write_summary
    from .summary.tasks import summary_flavour

    write_summary(ctx, fmt, diag)
    write_step_trace_csv(ctx, diag)
    if fmt == "json" and summary_flavour(ctx) == "cpp" and any(p.endswith(".csv") for p in ctx.written):
        diag.warn(f"{ctx.collection_path}: --format json: on the 910B family msprof's C++ exporters write the "
                  "summaries as CSV whatever the format, and so does msprof-kit (docs/exports.md)")


def _timeline(ctx: ExportContext, fmt: str, diag: Diagnostics) -> None:
    """msprof_{ts}.json and step_trace_{ts}.json."""
    from .timeline.export import write_timeline

    write_timeline(ctx)


def _soc_summary(ctx: ExportContext, fmt: str, diag: Diagnostics) -> None:
    """A legacy JOB collection's summaries, as the SoC tool wrote them."""
    soc.write_summary(ctx, fmt)


def _soc_timeline(ctx: ExportContext, fmt: str, diag: Diagnostics) -> None:
    """A legacy JOB collection's timeline files, as the SoC tool wrote them."""
    if ctx.ts_origin != "epoch":
        diag.warn(f"{ctx.collection_path}: --ts-origin applies to msprof_{{ts}}.json; the SoC flavour's "
                  "timeline keeps its times")
    soc.write_timeline(ctx)


#: `export <what>` -> the exporter that writes it, for collections msprof-kit imports, and for
#: legacy JOB collections (the SoC tool's files). `export db` is the store's (store.export_db).
EXPORTERS: Dict[str, Exporter] = {"summary": _summary, "timeline": _timeline}
SOC_EXPORTERS: Dict[str, Exporter] = {"summary": _soc_summary, "timeline": _soc_timeline}


def export_stores(collections: Sequence[str], what: str, diag: Diagnostics, model_id: Optional[int] = None,
                  iteration_id: Optional[int] = None, iteration_count: int = 1, fmt: str = "csv",
                  stamp: Optional[str] = None, clear: bool = False, layers: Optional[Set[str]] = None,
                  jobs: int = 1, ts_origin: str = "epoch") -> List[str]:
    """Write the `what` ('timeline' or 'summary') exports of each collection (its path; its store
    is there already), up to `jobs` collections at once. `layers`: the timeline layers to write
    (read_reports; None for all). With `clear`, the store msprof-kit made is removed afterwards
    (and nothing else). `ts_origin` "start" writes the timeline's times as µs since the
    collection's start instead of the epoch (docs/exports.md). Returns the files written."""
    if what not in EXPORTERS:
        raise ValueError(f"internal: no exporter writes {what!r} (EXPORTERS has {sorted(EXPORTERS)})")
    check_options(model_id, iteration_id)
    written: List[str] = []
    try:
        at_once = max(1, min(jobs, len(collections)))
        # one collection at a time reports its files and blocks; several at once (forked), the
        # parent reports how many collections are done
        alone = at_once == 1 or not forked.can_fork()
        one = functools.partial(_export_one, what=what, model_id=model_id, iteration_id=iteration_id,
                                iteration_count=iteration_count, fmt=fmt, stamp=stamp, layers=layers,
                                jobs=max(1, jobs // at_once), progress=diag.progress if alone else Progress(),
                                ts_origin=ts_origin)
        with (Phase() if alone else diag.progress.phase(f"exporting the {what}", total=len(collections),
                                                         unit="collections")) as phase:
            for files, warnings in forked.each([functools.partial(one, c) for c in collections], at_once, "export",
                                               daemon=False, finished=lambda _: phase.advance()):
                diag.extend(warnings)
                written += files
    finally:
        if clear:
            for path in collections:
                clear_store(path)
    return written


def _export_one(collection_path: str, what: str, model_id: Optional[int], iteration_id: Optional[int],
                iteration_count: int, fmt: str, stamp: Optional[str],
                layers: Optional[Set[str]], jobs: int = 1,
                progress: Optional[Progress] = None, ts_origin: str = "epoch") -> Tuple[List[str], List[str]]:
    """One collection's exports: (files written, warnings); with jobs > 1 forked workers help.
    Whatever fails or stops it (a full disk, Ctrl-C), the files it began are removed. They go to
    the collection, or to its stand-in folder when it cannot be written (store.output_root)."""
    diag = Diagnostics()
    written: List[str] = []
    ctx = open_context(collection_path, stamp=stamp)
    ctx.progress = progress or Progress()
    root = ctx.output_root
    db: Optional[Forked] = None
    write_db: Optional[Callable[[], str]] = None
    began: List[str] = []  # besides ctx.written: the unified DB, its temporary file, README.txt
    try:
        ctx.scope = resolve(ctx, model_id, iteration_id, iteration_count)
        ctx.layers = layers
        ctx.jobs = jobs
        ctx.ts_origin = ts_origin
        if ctx.flavour == "cpp" and ctx.scope.all_export and not soc.is_job(ctx) \
                and any(ctx.has(t) for t in DB_TABLES) \
                and unified_db_wanted(root, diag):
            # the C++ exporters write the unified DB alongside: a second process, forked
            # before this one starts any thread, writes it while this one writes the exports (a
            # large summary export writes it afterwards: DB_AFTER_SUMMARY_TASKS)
            target = store.db_path(root, ctx.stamp)
            began += [target, store.partial_path(target, os.getpid())]
            write_db = functools.partial(store.export_db, collection_path, ctx.stamp)
            after = what == "summary" and _device_tasks(ctx) > DB_AFTER_SUMMARY_TASKS
            if not after:
                db = Forked(write_db, "unified DB", inline=jobs < 2)
                if db.pid is not None:
                    began.append(store.partial_path(target, db.pid))
        (SOC_EXPORTERS if soc.is_job(ctx) else EXPORTERS)[what](ctx, fmt, diag)
        if write_db is not None:  # its failure is this export's failure, before anything is kept
            with ctx.progress.phase(f"{label(collection_path)}: the unified DB"):
                # (a large summary export writes it now, in this process, with the memory the files freed)
                written.append(db.result() if db is not None else write_db())
        written += ctx.written
        if not ctx.written:
            diag.warn(f"{collection_path}: there is no {what} data to export")
        elif not soc.is_job(ctx):
            began.append(readme_path(root))
            written.append(write_readme(root))
    except BaseException as exc:
        if db is not None:  # stop the DB writer (when it still runs)
            db.cancel()
        for leftover in ctx.written + began:  # no half-written export is left behind
            if os.path.isdir(leftover + ".parts"):
                shutil.rmtree(leftover + ".parts")
            if os.path.lexists(leftover):
                os.remove(leftover)
        out_dir = os.path.join(root, OUTPUT_DIR)
        if isinstance(exc, OutputError):  # the unified DB's writer: named by it
            raise OutputError(f"cannot write the {what} export ({exc.cause}); nothing of it is kept",
                              path=exc.path, cause=exc.cause) from exc
        if isinstance(exc, OSError):
            cause = exc.strerror or str(exc)
            raise OutputError(f"cannot write the {what} export ({cause}); nothing of it is kept",
                              path=exc.filename or out_dir, cause=cause) from exc
        raise
    finally:
        ctx.conn.close()
    return written, diag.warnings


REPORT_KEYS = frozenset((
    "ascend", "acc_pmu", "cann", "ddr", "stars_chip_trans", "hbm", "communication", "ccu", "hccs", "os_runtime_api",
    "network_usage", "disk_usage", "memory_usage", "cpu_usage", "msproftx", "npu_mem", "overlap_analyse", "pcie",
    "sio", "stars_soc", "step_trace", "freq", "llc", "nic", "roce", "qos", "device_tx", "biu_perf", "ub",
    "block_detail", "dpu", "fusion_task"))


def read_reports(path: str, diag: Diagnostics) -> Optional[Set[str]]:
    """The timeline layers a -reports file turns on (`{"json_process": {"cann": true, ...}}`), or
    None for all layers. As in the reference, a file that cannot be used exports every layer, with a
    warning saying why; a missing file is an error."""
    if not os.path.isfile(path):
        raise PathNotFound("the -reports file does not exist; expected a JSON file like "
                           '{"json_process": {"cann": true, "ascend": true}}', path=path)
    try:
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
    except (OSError, ValueError) as exc:
        diag.warn(f"{path}: cannot load the report config ({exc}); exporting every layer")
        return None
    layers = config.get("json_process") if isinstance(config, dict) else None
    if not isinstance(layers, dict) or not layers:
        diag.warn(f"{path}: no json_process object; exporting every layer")
        return None
    unknown = sorted(k for k in layers if k not in REPORT_KEYS)
    if unknown:
        diag.warn(f"{path}: json_process has unknown keys {unknown}; exporting every layer")
        return None
    if not all(isinstance(v, bool) for v in layers.values()):
        diag.warn(f"{path}: json_process values must be true or false; exporting every layer")
        return None
    return {k for k, v in layers.items() if v}


def _device_tasks(ctx: ExportContext) -> int:
    """The store's device tasks (TASK's last rowid: its rows are numbered from 1)."""
    row = ctx.conn.execute("SELECT MAX(rowid) FROM TASK").fetchone() if ctx.has("TASK") else None
    return int(row[0]) if row and row[0] is not None else 0


def unified_db_wanted(collection_path: str, diag: Diagnostics) -> bool:
    """Whether msprof_{ts}.db is to be written: not when a complete one (with STRING_IDS) is
    already there; an incomplete newest one is removed and replaced, as the reference does."""
    found = sorted(glob.glob(os.path.join(collection_path, "msprof_" + "[0-9]" * 14 + ".db")))
    if not found:
        return True
    newest = found[-1]
    try:
        conn = sqlite3.connect(f"file:{newest}?mode=ro", uri=True)
        try:
            complete = conn.execute("SELECT 1 FROM sqlite_master WHERE name='STRING_IDS'").fetchone()
        finally:
            conn.close()
    except sqlite3.Error:
        complete = None
    if complete:
        return False
    diag.warn(f"{newest}: the database is incomplete; it is replaced")
    os.remove(newest)
    return True


def clear_store(collection_path: str) -> None:
    """Remove the store msprof-kit wrote (PROF_xxx/sqlite/msprof_kit.db, or the one kept elsewhere),
    and its folder if that is then empty (and the stand-in folder holding it, if then empty);
    nothing else is touched."""
    path = store.store_path(collection_path, writing=True)
    if os.path.exists(path):
        os.remove(path)
    folder = os.path.dirname(path)
    for empty in (folder, os.path.dirname(folder)) if path != store.own_store_path(collection_path) else (folder,):
        if os.path.isdir(empty) and not os.listdir(empty):
            os.rmdir(empty)
