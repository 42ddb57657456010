"""`export timeline` and `export summary` over every collection at a path."""
from __future__ import annotations

import glob
import json
import os
import sqlite3
from typing import List, Optional, Set

from .. import store
from ..errors import Diagnostics, PathNotFound
from ..importer import ensure_imported
from .context import open_context
from .readme import write_readme
from .scope import check_options, resolve
from .step_trace import write_step_trace_csv


def export(path: str, what: str, diag: Diagnostics, model_id: Optional[int] = None,
           iteration_id: Optional[int] = None, iteration_count: int = 1, fmt: str = "csv",
           stamp: Optional[str] = None, clear: bool = False, reports: Optional[str] = None) -> List[str]:
    """Write the `what` ('timeline' or 'summary') exports of each collection at `path`, importing
    first where needed. With `clear`, the store msprof-kit made is removed afterwards (and
    nothing else). Returns the files written."""
    check_options(model_id, iteration_id)
    layers = read_reports(reports, diag) if reports else None
    written: List[str] = []
    collections = ensure_imported(path, diag)
    try:
        for coll in collections:
            ctx = open_context(coll.path, stamp=stamp)
            try:
                ctx.scope = resolve(ctx, model_id, iteration_id, iteration_count)
                ctx.layers = layers
                if what == "timeline":
                    from .timeline import write_timeline
                    write_timeline(ctx)
                else:
                    from .summary import write_summary
                    write_summary(ctx, fmt)
                    write_step_trace_csv(ctx)
            finally:
                ctx.conn.close()
            if ctx.flavour == "cpp" and ctx.scope.all_export and ctx.written:
                db = unified_db(coll.path, diag)  # the C++ exporters write the unified DB alongside
                if db:
                    written.append(db)
            written += ctx.written
            if ctx.written:
                written.append(write_readme(coll.path))
            else:
                diag.warn(f"{coll.path}: there is no {what} data to export")
    finally:
        if clear:
            for coll in collections:
                clear_store(coll.path)
    return written


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


def unified_db(collection_path: str, diag: Diagnostics) -> Optional[str]:
    """Write msprof_{ts}.db unless a complete one (with STRING_IDS) is already there; an incomplete
    newest one is replaced, as the reference does. Returns the path written, if any."""
    found = sorted(glob.glob(os.path.join(collection_path, "msprof_" + "[0-9]" * 14 + ".db")))
    if found:
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
            return None
        diag.warn(f"{newest}: the database is incomplete; it is replaced")
        os.remove(newest)
    return store.export_db(collection_path)


def clear_store(collection_path: str) -> None:
    """Remove the store msprof-kit wrote (PROF_xxx/sqlite/msprof_kit.db), and its folder if that is
    then empty; nothing else is touched."""
    path = store.store_path(collection_path)
    if os.path.exists(path):
        os.remove(path)
    folder = os.path.dirname(path)
    if os.path.isdir(folder) and not os.listdir(folder):
        os.rmdir(folder)
