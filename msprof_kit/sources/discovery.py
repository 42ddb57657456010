"""What a directory holds: the collections at or below it (raw, a store, or exported files) and,
in each, where every kind of data lies. Nothing is imported, read or written here."""
from __future__ import annotations

import csv
import os
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from .. import store
from ..errors import Diagnostics, MsprofKitError, NoCollection, NotACollection, PathNotFound
from ..layout import find_collections
from .csv_files import csv_kind
from .database import is_unified_db
from .frames import ITER_TIME, ITERATION, LOOKED_FOR

WALK_DEPTH = 6                           # how deep below -dir collections are looked for
STAMPED = re.compile(r"^(?P<stem>.+?)(?:_slice_(?P<part>\d+))?_(?P<stamp>\d{14})\.csv$")
RESULT_DIR = re.compile(r"^(host|device_\d+)$")
SKIPPED_DIRS = {"sqlite", "log", "mindstudio_profiler_log", ".profiler", "__pycache__", ".git"}


@dataclass
class Found:
    """One collection found below a directory, and where each kind of data lies in it.

    `raw`: a raw collection, imported into its store when loaded. `csv`: kind ('op_summary',
    'task_time', 'op_statistic', 'api_statistic') → the files holding it, best first as a list of
    file groups (a group is the parts of one export). `dbs`: unified databases. `timelines`: the
    chrome-trace files of one family (task_time_*, msprof_*, or trace_view). `raw_problem`: for
    exported data in a folder that looks like a raw collection (PROF_*, host/ or device_N/ inside),
    why its raw data is not used: absent, or refused by the import (then `raw` turns False)."""
    path: str
    raw: bool = False
    has_store: bool = False
    csv: Dict[str, List[List[str]]] = field(default_factory=dict)
    dbs: List[str] = field(default_factory=list)
    timelines: List[str] = field(default_factory=list)
    raw_problem: Optional[str] = None  # why a collection's raw data is not used (absent, refused)
    before_ns: Optional[int] = None    # only files modified before this are used (see _exports_beside)

    @property
    def mtime(self) -> float:
        """When the collection's folder last changed (what 'newest' compares)."""
        return os.stat(self.path).st_mtime

    def empty(self) -> bool:
        return not (self.raw or self.has_store or self.csv or self.dbs or self.timelines)

    def keeps(self, path: str) -> bool:
        """Whether an exported file may be used (see `before_ns`)."""
        if self.before_ns is None:
            return True
        try:
            return os.stat(path).st_mtime_ns < self.before_ns
        except OSError:
            return False

    def exported(self) -> bool:
        """Whether exported files were found (summary CSVs, unified DBs, timelines)."""
        return bool(self.csv or self.dbs or self.timelines)


def _listdir(path: str) -> List[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def _is_dir(path: str) -> bool:
    return os.path.isdir(path) and not os.path.islink(path)


def _group_csvs(paths: List[str]) -> List[List[str]]:
    """The exports among same-kind CSVs of one folder, best first. Files named
    `<kind>[_slice_<n>]_<14-digit stamp>.csv` group by stamp, newest first, slices in order. Other
    files group by their name without trailing `_<number>` parts (`op_summary_0_1_1.csv` is a part
    of `op_summary`), the known summary names first."""
    stamped: Dict[str, List[Tuple[int, str]]] = {}
    loose: Dict[str, List[str]] = {}
    for p in paths:
        name = os.path.basename(p)
        m = STAMPED.match(name)
        if m:
            stamped.setdefault(m["stamp"], []).append((int(m["part"] or 0), p))
        else:
            loose.setdefault(re.sub(r"(_\d+)+$", "", name[:-4]), []).append(p)
    groups = [[p for _, p in sorted(stamped[s])] for s in sorted(stamped, reverse=True)]
    known = ("op_summary", "kernel_details", "task_time", "op_statistic", "api_statistic")
    for stem in sorted(loose, key=lambda s: (known.index(s) if s in known else len(known), s)):
        groups.append(sorted(loose[stem]))
    return groups


def _timeline_family(paths: List[str]) -> List[str]:
    """One family of timeline files (they repeat each other's device events): task_time_*, else
    msprof_*, else trace_view*."""
    for prefix in ("task_time", "msprof", "trace_view"):
        family = [p for p in paths if os.path.basename(p).startswith(prefix)]
        if family:
            return sorted(family)
    return []


def export_folders(path: str) -> Tuple[List[str], List[str]]:
    """The folders of `path` that may hold exported files, best first: (summary folders, timeline
    folders). Summary folders: `mindstudio_profiler_output/`, the `mindstudio_profiler_output/` of
    exported-only `PROF_*` folders (a PyTorch-profiler run), `ASCEND_PROFILER_OUTPUT/`, the folder
    itself, `summary/`, those `PROF_*` folders. Timeline folders: `timeline/`, `host|device_N/timeline/`.
    Folders that do not exist are listed too."""
    names = _listdir(path)
    folders = [os.path.join(path, "mindstudio_profiler_output")]
    # PROF_xxx folders of a PyTorch-profiler run (exported only: a raw one is a collection of its own)
    profs = [os.path.join(path, n) for n in names if n.startswith("PROF_") and not _looks_raw(os.path.join(path, n))]
    folders += [os.path.join(p, "mindstudio_profiler_output") for p in profs]
    folders += [os.path.join(path, "ASCEND_PROFILER_OUTPUT"), path, os.path.join(path, "summary")] + profs
    timeline_dirs = [os.path.join(path, "timeline")]
    timeline_dirs += [os.path.join(path, n, "timeline") for n in names if RESULT_DIR.match(n)]
    return folders, timeline_dirs


def examine(path: str) -> Found:
    """What exported data `path` holds, in its known sub-folders, best source first."""
    found = Found(path)
    found.has_store = os.path.isfile(store.store_path(path))
    folders, timeline_dirs = export_folders(path)
    timelines: List[str] = []
    for folder in folders + timeline_dirs:
        if not _is_dir(folder):
            continue
        by_kind: Dict[str, List[str]] = {}
        for name in _listdir(folder):
            p = os.path.join(folder, name)
            if not os.path.isfile(p):
                continue
            low = name.lower()
            if low.endswith(".csv"):
                kind = csv_kind(p)
                if kind:
                    by_kind.setdefault(kind, []).append(p)
            elif low.endswith(".db") and (low.startswith("msprof") or low.startswith("ascend_pytorch_profiler")
                                          or folder != path) and is_unified_db(p):
                found.dbs.append(p)
            elif low.endswith(".json") and low.startswith(("msprof", "task_time", "trace_view")):
                timelines.append(p)
        for kind, paths in by_kind.items():
            found.csv.setdefault(kind, []).extend(_group_csvs(paths))
    found.timelines = _timeline_family(timelines)
    return found


def _raw_absent(path: str) -> Optional[str]:
    """Why a folder holding exported files has no raw data to import, when it looks like a raw
    collection (a PROF_* folder, or one with host/ or device_N/ inside); None otherwise."""
    dirs = [n for n in _listdir(path) if RESULT_DIR.match(n) and _is_dir(os.path.join(path, n))]
    if dirs:
        lacks = []
        for n in dirs:
            names = _listdir(os.path.join(path, n))
            what = [w for w, ok in (("info.json", any(m.startswith("info.json") for m in names)),
                                    ("data/", _is_dir(os.path.join(path, n, "data")))) if not ok]
            lacks.append(f"{n}/ has no {' and no '.join(what)}" if what else f"{n}/ is not a result directory")
        return "no raw data: " + ", ".join(lacks)
    if os.path.basename(os.path.normpath(path)).startswith("PROF_"):
        return "no raw data: no host/ or device_N/ folder"
    return None


def _looks_raw(path: str) -> bool:
    """Whether `path` has host/ or device_N/ result dirs holding data/ (a raw PROF_xxx)."""
    return any(RESULT_DIR.match(n) and _is_dir(os.path.join(path, n, "data")) for n in _listdir(path))


def _is_raw(path: str) -> bool:
    """Whether `path` itself is a raw collection the importer recognises (PROF_xxx, legacy JOB).
    A damaged one counts too: loading it then reports what is wrong."""
    try:
        colls = find_collections(path, Diagnostics())
    except NotACollection:
        return False
    except MsprofKitError:
        return True
    here = os.path.normpath(path)
    return any(os.path.normpath(c.path) == here for c in colls)


def discover(path: str, depth: int = WALK_DEPTH) -> List[Found]:
    """The collections at or below `path`, each with what it holds (nothing is imported or written).

    A folder that is a raw collection, or that holds exported data (in itself or its known
    sub-folders), is one collection and is not looked into further; other folders are searched
    down to `depth` levels."""
    if not os.path.exists(path):
        raise PathNotFound("no such file or directory", path=path)
    if not os.path.isdir(path):
        raise NotACollection(f"not a directory; expected a folder holding {LOOKED_FOR}", path=path)
    out: List[Found] = []
    base = os.path.normpath(path).count(os.sep)
    for folder, dirs, _ in os.walk(path):
        if _is_raw(folder):
            out.append(Found(folder, raw=True, has_store=os.path.isfile(store.store_path(folder))))
            dirs[:] = []
            continue
        found = examine(folder)
        if not found.empty():
            found.raw_problem = _raw_absent(folder) if found.exported() else None
            out.append(found)
            dirs[:] = []
            continue
        if os.path.normpath(folder).count(os.sep) - base >= depth:
            dirs[:] = []
        else:
            dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS and not os.path.islink(os.path.join(folder, d)))
    return out


def newest(path: str) -> Found:
    """The most recently modified collection at or below `path`."""
    found = discover(path)
    if not found:
        raise NoCollection(f"no profiling collection here or below; looked for {LOOKED_FOR}", path=path)
    return max(found, key=lambda f: (f.mtime, f.path))


def trace_timelines(path: str) -> List[str]:
    """The timeline family that holds the most of a collection's intervals: msprof_*.json (tasks,
    CANN APIs and iterations), else trace_view*.json, else task_time_*.json together with
    step_trace_*.json (the MindInsight-era split)."""
    folders, timeline_dirs = export_folders(path)
    files: List[str] = []
    for folder in folders + timeline_dirs:
        if _is_dir(folder):
            files += [os.path.join(folder, n) for n in _listdir(folder) if n.lower().endswith(".json")
                      and os.path.isfile(os.path.join(folder, n))]
    family = {prefix: sorted(p for p in files if os.path.basename(p).startswith(prefix))
              for prefix in ("msprof", "trace_view", "task_time", "step_trace")}
    if family["msprof"]:
        return family["msprof"]
    if family["trace_view"]:
        return family["trace_view"]
    return family["task_time"] + family["step_trace"]


def step_trace_csvs(path: str) -> List[str]:
    """msprof step_trace CSVs of a collection (recognised by their header), newest export first."""
    folders, _ = export_folders(path)
    out: List[str] = []
    for folder in folders:
        if not _is_dir(folder):
            continue
        for name in _listdir(folder):
            p = os.path.join(folder, name)
            if not (name.lower().startswith("step_trace") and name.lower().endswith(".csv") and os.path.isfile(p)):
                continue
            with open(p, encoding="utf-8", errors="replace", newline="") as f:
                header = {h.strip().lstrip("\ufeff") for h in next(csv.reader([f.readline()]), [])}
            if {ITERATION, "Iteration End(us)", ITER_TIME} <= header:
                out.append(p)
        if out:
            break
    return sorted(out, reverse=True)[:1]
