"""`import`, `export db` and `query`: the library side of those commands (no printing here).

The import runs the ingest (ingest.assemble.build for PROF collections, ingest.job.build_job for legacy
JOB ones) and hands each table it finishes to the store's writer; the store itself knows no parser."""
from __future__ import annotations

import functools
import os
import tempfile
from dataclasses import dataclass
from typing import List, Tuple

from . import forked, store
from .errors import Diagnostics, OutputError, UnreadableFile
from .layout import Collection, find_collections
from .progress import Progress, label


@dataclass
class Imported:
    """One imported collection: the collection, its store's path and the warnings of its import."""
    collection: Collection
    store: str
    warnings: List[str]


def write_store(collection_path: str, coll: Collection, diag: Diagnostics, jobs: int = 1) -> str:
    """Build a collection and write its store table by table; returns the store's path. `jobs`:
    processes decoding its devices at once. What killed imports left is removed first."""
    path = store.store_path(collection_path, writing=True)
    store.remove_leftovers(collection_path)
    finishing = None
    try:
        with store.TableWriter(path, background=True) as out:
            # (the ingest is imported here: an export of a collection already imported starts without it)
            from .ingest.assemble import build
            from .ingest.job import build_job

            if coll.kind == "job":
                with diag.progress.phase(f"{label(coll.path)}: reading the JOB data"):
                    info = build_job(coll, diag, out.put)
            else:
                with tempfile.TemporaryDirectory(prefix=f".scratch-{os.getpid()}-", dir=os.path.dirname(path)) as scratch:
                    info = build(coll, diag, out.put, jobs, scratch)
            store.put_info(out, info, diag)
            finishing = diag.progress.phase(f"{label(coll.path)}: indexing and writing the store")
    finally:
        if finishing is not None:
            finishing.close()
    return path


def _write(coll: Collection, diag: Diagnostics, jobs: int = 1) -> str:
    """write_store, its failures as one error: a full store folder is an OutputError, any other
    OSError an UnreadableFile naming the file."""
    try:
        return write_store(coll.path, coll, diag, jobs)
    except OSError as exc:
        where = store.store_path(coll.path, writing=True)
        failure = store.write_failure(exc, where)  # the store's folder is full: not a read error
        if failure is not None:
            raise OutputError(f"cannot write the store ({failure.cause}); nothing of the import is kept",
                              path=where, cause=failure.cause) from exc
        raise UnreadableFile(f"cannot read: {exc.strerror or exc}", path=exc.filename or coll.path) from exc


def _import_one(coll: Collection, jobs: int, progress: Progress) -> Imported:
    local = Diagnostics(progress=progress)
    return Imported(coll, _write(coll, local, jobs), local.warnings)


def _import_all(colls: List[Collection], diag: Diagnostics, jobs: int) -> List[Imported]:
    """Import collections, up to `jobs` at once (each then decodes its devices in jobs / that many).
    One at a time, each reports its phases; several at once (forked), the parent reports how many
    collections are done."""
    at_once = max(1, min(jobs, len(colls)))
    inner = max(1, jobs // at_once)
    for coll in colls:
        note_elsewhere(coll.path, diag)
    if at_once == 1 or not forked.can_fork():
        done = [_import_one(c, inner, diag.progress) for c in colls]
    else:
        with diag.progress.phase("importing collections", total=len(colls), unit="collections") as phase:
            done = forked.each([functools.partial(_import_one, c, inner, Progress()) for c in colls], at_once,
                               "import", daemon=False, finished=lambda _: phase.advance())
    for item in done:
        diag.extend(item.warnings)
    return done


def note_elsewhere(collection_path: str, diag: Diagnostics, exports: bool = False) -> None:
    """A note when the store (and with `exports` the exports) of a collection go outside it
    because it cannot be written (docs/store.md, "Where the store goes")."""
    note = store.elsewhere_note(collection_path, exports)
    if note is None:
        return
    if exports:  # one line a collection: this one says where its store is too
        diag.notes = [n for n in diag.notes if n != store.elsewhere_note(collection_path)]
    diag.note(note)


def import_path(path: str, diag: Diagnostics, jobs: int = 1) -> List[Imported]:
    """Parse every collection at `path` into its store (re-import replaces it); `jobs` processes
    share the work (collections, and a collection's devices)."""
    return _import_all(find_collections(path, diag), diag, jobs)


def ensure_imported(path: str, diag: Diagnostics, jobs: int = 1) -> List[Collection]:
    """Collections at `path`, importing those without a usable store (as the reference parses
    before export): a damaged, foreign or other-version store is imported again, with a warning.
    The warnings of earlier imports are repeated, one line a collection (store.repeat_warnings)."""
    found = find_collections(path, diag)
    again: List[Collection] = []
    for coll in found:
        note_elsewhere(coll.path, diag)
        problem = store.store_problem(coll.path)
        if problem is None:
            continue
        if problem != store.NO_STORE:
            diag.warn(f"{store.store_path(coll.path)}: {problem}; importing it again from the raw data")
        again.append(coll)
    _import_all(again, diag, jobs)
    imported = {id(c) for c in again}
    for coll in found:
        if id(coll) not in imported:
            store.repeat_warnings(coll.path, diag)
    return found


def imported_paths(path: str, diag: Diagnostics) -> List[str]:
    """The paths of the collections at `path`, each with a usable store (ensure_imported, one
    process): how show, plot and compare get the store of a raw collection (sources.EnsureStores)."""
    return [coll.path for coll in ensure_imported(path, diag)]


def export_db(path: str, diag: Diagnostics, jobs: int = 1) -> List[Tuple[str, bool]]:
    """`msprof_{ts}.db` of each collection at `path`: (its path, True) when written now, (its path,
    False) when the newest one there was made from the store as it is (store.current_db: an
    `export summary` or `export timeline` on the 910B family writes it too) and is kept."""
    colls = ensure_imported(path, diag, jobs)
    for coll in colls:
        note_elsewhere(coll.path, diag, exports=True)
    current = [store.current_db(c.path) for c in colls]
    todo = [c for c, db in zip(colls, current) if db is None]
    with diag.progress.phase("writing the unified DB", total=len(todo), unit="DBs") as phase:
        made = iter(forked.each([functools.partial(store.export_db, c.path) for c in todo], jobs, "unified DB",
                                finished=lambda _: phase.advance()))
        return [(db, False) if db is not None else (next(made), True) for db in current]


QUERY_HEADER = ["Job Info", "Device ID", "Dir Name", "Collection Time", "Model ID", "Iteration Number",
                "Top Time Iteration", "Rank ID"]


def query_rows(path: str, diag: Diagnostics, jobs: int = 1) -> List[List[str]]:
    """The reference's query table: one row per device result dir and model."""
    rows: List[List[str]] = []
    for coll in ensure_imported(path, diag, jobs):
        conn = store.open_store(coll.path)
        try:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            steps = conn.execute("SELECT deviceId, modelId, timestampNs, tagId FROM KIT_STEP_TRACE").fetchall() \
                if "KIT_STEP_TRACE" in tables else []
            compute_models = {r[0] for r in conn.execute("SELECT DISTINCT modelId FROM TASK")} \
                if "TASK" in tables else set()
        finally:
            conn.close()
        for rd in coll.devices:
            job = str(rd.info.get("jobInfo", "N/A") or "N/A")
            dev = str(rd.info.get("devices", ""))
            dev = dev if dev.isdigit() else "N/A"
            when = str(rd.start_info.get("collectionDateBegin", "") or "N/A")
            rank = str(rd.info.get("rank_id", -1))
            its = store.iterations([(m, t, g) for d, m, t, g in steps if d == rd.device_id])
            models = sorted({m for m, *_ in its if not compute_models or m in compute_models})
            if not models:
                rows.append([job, dev, rd.name, when, "N/A", "N/A", "N/A", rank])
                continue
            for m in models:
                mine = [(i, e - s) for mm, i, s, e in its if mm == m]
                top = ",".join(str(i) for i, _ in sorted(mine, key=lambda r: -r[1])[:5])
                rows.append([job, dev, rd.name, when, str(m), str(max(i for i, _ in mine)), top, rank])
    rows.sort(key=lambda r: (r[0], r[3]))
    return rows


def format_query(rows: List[List[str]]) -> str:
    """Each cell left-justified to its column's width and followed by a TAB; a blank line after each row."""
    if not rows:
        return ""
    table = [QUERY_HEADER] + rows
    widths = [max(len(r[i]) for r in table) for i in range(len(QUERY_HEADER))]
    return "".join("".join(c.ljust(w) + "\t" for c, w in zip(r, widths)) + "\n\n" for r in table)
