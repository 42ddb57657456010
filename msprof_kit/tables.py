"""The key tables of a collection as normalized DataFrames, whatever its directory holds.

A directory may hold a raw collection (PROF_xxx, or a legacy JOB once its import exists), the store
msprof-kit made of one (`sqlite/msprof_kit.db`), or only what a profiler exported:
`mindstudio_profiler_output/` CSVs (msprof), `ASCEND_PROFILER_OUTPUT/` CSVs (the PyTorch profiler),
loose summary CSVs in a per-run folder, unified databases (`msprof_*.db`,
`ascend_pytorch_profiler*.db`) or timelines (`msprof_*.json`, `task_time_*.json`,
`trace_view.json`). `discover` finds the collections below a directory without changing anything;
`load` reads one of them (a raw collection from its store, which the caller's EnsureStores makes
first when there is none, as `export` imports first: nothing here imports or parses raw data).

Every table comes back with the column names of the modern msprof export (outputs.md §4-§6), so
the many header generations found in the wild (`Block Dim` / `Block Num`, `Name` / `Op Name`,
`Duration(us)` / `Task Duration(us)`, `Accelerator Core` / `Task Type`, with or without
`Device_id`, ...) read alike; docs/show.md lists them. Times are µs (float64), `Device_id` is text
(`0`, `host`, or `N/A` when the source does not say), missing numbers are NaN.

Nothing here prints or renders: `show.py` does the terminal side, and plot/compare reuse this.
"""
from __future__ import annotations

import csv
import json
import os
import re
import sqlite3
import urllib.parse
import warnings
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np
import numpy.typing as npt
import pandas as pd

from . import store
from .errors import Diagnostics, MsprofKitError, NoCollection, NoData, NotACollection, PathNotFound, UnreadableFile
from .exporters.summary import pmu_header
from .layout import find_collections

REPORTS = ("op_summary", "op_statistic", "api_statistic", "freq")

DEVICE = "Device_id"
OP_NAME = "Op Name"
OP_TYPE = "OP Type"
TASK_TYPE = "Task Type"
START = "Task Start Time(us)"
DURATION = "Task Duration(us)"
WAIT = "Task Wait Time(us)"
CORE_TYPE = "Core Type"
LEVEL = "Level"
API_NAME = "API Name"
FREQ_TIME = "Timestamp(us)"
FREQ_MHZ = "Frequency(MHz)"
FREQ_SOURCE = "Source"
NA = "N/A"
NA_TEXTS = ("N/A", "NA", "", "-", "nan", "NaN", "None", "null")

OP_STATISTIC_COLUMNS = (DEVICE, OP_TYPE, CORE_TYPE, "Count", "Total Time(us)", "Min Time(us)", "Avg Time(us)",
                        "Max Time(us)", "Ratio(%)")
API_STATISTIC_COLUMNS = (DEVICE, LEVEL, API_NAME, "Time(us)", "Count", "Avg(us)", "Min(us)", "Max(us)", "Variance")
FREQ_COLUMNS = (DEVICE, FREQ_TIME, FREQ_MHZ, FREQ_SOURCE)

# Header variants → the modern msprof name, per kind of table. The left sides are the names seen in
# exports (docs/show.md lists where each was found).
OP_VARIANTS: Dict[str, str] = {
    "Name": OP_NAME, "OP Name": OP_NAME, "kernel_name": OP_NAME,
    "Type": OP_TYPE, "Op Type": OP_TYPE, "kernel_type": TASK_TYPE,
    "Accelerator Core": TASK_TYPE,
    "Start Time(us)": START, "task_start(us)": START,
    "Duration(us)": DURATION, "task_time(us)": DURATION,
    "Wait Time(us)": WAIT,
    "Block Dim": "Block Num", "Mix Block Dim": "Mix Block Num",
    "Device ID": DEVICE, "Device Id": DEVICE, "device_id": DEVICE,
    "task_id": "Task ID", "stream_id": "Stream ID", "task_stop(us)": "Task End Time(us)",
}
STATISTIC_VARIANTS: Dict[str, str] = {"Op Type": OP_TYPE, "Device ID": DEVICE, "Device Id": DEVICE}
API_VARIANTS: Dict[str, str] = {"Device ID": DEVICE, "Device Id": DEVICE}
VARIANTS = {"op_summary": OP_VARIANTS, "task_time": OP_VARIANTS, "op_statistic": STATISTIC_VARIANTS,
            "api_statistic": API_VARIANTS}
# columns that hold text whatever their values look like (all others are numbers where they parse)
TEXT_COLUMNS = frozenset({DEVICE, OP_NAME, OP_TYPE, TASK_TYPE, "OP State", "HF32 Eligible", "Input Shapes",
                          "Input Data Types", "Input Formats", "Output Shapes", "Output Data Types",
                          "Output Formats", "Model Name", CORE_TYPE, LEVEL, API_NAME, FREQ_SOURCE})

# op_statistic, as msprof aggregates it (outputs.md §5): task types it leaves out
STATISTIC_EXCLUDED = ("COMMUNICATION", "HCCL_AI_CPU", "HCCL", "WRITE_BACK", "INVALID")
# unified DB API levels when the DB has no ENUM_API_TYPE (outputs.md §8.4)
API_LEVELS = {20000: "acl", 15000: "model", 10000: "node", 5500: "communication", 5000: "runtime"}

GIVES_NO = "the raw data gives no "  # the raw_problem of a store that lacks what exported files have
CSV_CHUNK_ROWS = 200_000
TIMELINE_MAX_BYTES = 512 * 1024 * 1024   # a timeline is loaded whole: not when larger than this,
FREQ_TIMELINE_MAX_BYTES = 64 * 1024 * 1024  # nor larger than this when only the frequency is wanted
WALK_DEPTH = 6                           # how deep below -dir collections are looked for
STAMPED = re.compile(r"^(?P<stem>.+?)(?:_slice_(?P<part>\d+))?_(?P<stamp>\d{14})\.csv$")
RESULT_DIR = re.compile(r"^(host|device_\d+)$")
SKIPPED_DIRS = {"sqlite", "log", "mindstudio_profiler_log", ".profiler", "__pycache__", ".git"}

LOOKED_FOR = ("a raw PROF_xxx collection or its store (sqlite/msprof_kit.db); mindstudio_profiler_output/ "
              "CSVs (op_summary, op_statistic, api_statistic, task_time); ASCEND_PROFILER_OUTPUT/ CSVs "
              "(kernel_details, op_statistic, api_statistic); loose summary CSVs with those headers; "
              "msprof_*.db or ascend_pytorch_profiler*.db; or a timeline (msprof_*.json, task_time_*.json, "
              "trace_view.json)")
LOOKED_FOR_REPORT = {
    "op_summary": "a store or unified DB with TASK and COMPUTE_TASK_INFO, op_summary / kernel_details / task_time "
                  "CSVs, or a timeline with 'Ascend Hardware' events",
    "op_statistic": "a store, op_statistic CSVs, or operator rows with an OP Type to aggregate",
    "api_statistic": "a store or unified DB with CANN_API, or api_statistic CSVs",
    "freq": "a store or unified DB with AICORE_FREQ (or the AI Core frequency in info.json), or a timeline with "
            "'AI Core Freq' counters",
}


# ------------------------------------------------------------------------------------------------
# What a directory holds


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


def csv_kind(path: str) -> Optional[str]:
    """Which summary a CSV holds, from its header: 'op_summary' (one row per task: op_summary,
    kernel_details), 'task_time', 'op_statistic', 'api_statistic', or None."""
    try:
        with open(path, encoding="utf-8", errors="replace", newline="") as f:
            header = next(csv.reader([f.readline()]), [])
    except OSError:
        return None
    cols = {h.strip().lstrip("\ufeff") for h in header}
    if {"kernel_name", "task_time(us)"} <= cols:
        return "task_time"
    named = {OP_VARIANTS.get(c, c) for c in cols}
    if {OP_NAME, DURATION} <= named and named & {OP_TYPE, TASK_TYPE}:
        return "op_summary"
    if {CORE_TYPE, "Count", "Total Time(us)"} <= cols and named & {OP_TYPE}:
        return "op_statistic"
    if {API_NAME, "Time(us)", "Count"} <= cols:
        return "api_statistic"
    return None


def _uri(path: str, extra: str = "mode=ro") -> str:
    return "file:" + urllib.parse.quote(os.path.abspath(path)) + "?" + extra


def open_db(path: str) -> sqlite3.Connection:
    """A unified database, read-only and leaving no file behind. Without a `-wal` file beside it the
    database is opened as immutable, so that sqlite creates no `-wal`/`-shm` files for a database in
    WAL mode; with one, read-only (the WAL holds data), or immutable when even that fails (a
    read-only folder)."""
    modes = ["mode=ro", "mode=ro&immutable=1"] if os.path.exists(path + "-wal") else ["mode=ro&immutable=1"]
    error: Optional[sqlite3.Error] = None
    for mode in modes:
        try:
            conn = sqlite3.connect(_uri(path, mode), uri=True)
            conn.execute("SELECT name FROM sqlite_master LIMIT 1").fetchall()
            return conn
        except sqlite3.Error as exc:
            error = exc
    raise UnreadableFile(f"cannot open the database: {error}", path=path)


def _db_tables(conn: sqlite3.Connection) -> Dict[str, List[str]]:
    """Table name → column names."""
    names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    return {n: [r[1] for r in conn.execute(f'PRAGMA table_info("{n}")')] for n in names}


def _is_unified_db(path: str) -> bool:
    try:
        conn = open_db(path)
    except MsprofKitError:
        return False
    try:
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except sqlite3.Error:
        return False
    finally:
        conn.close()
    return "STRING_IDS" in names and bool(names & {"TASK", "CANN_API", "AICORE_FREQ"})


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


def _examine(path: str) -> Found:
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
                                          or folder != path) and _is_unified_db(p):
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
        found = _examine(folder)
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


# ------------------------------------------------------------------------------------------------
# Normalizing frames


def _numeric(values: pd.Series) -> Optional[pd.Series]:
    """The column as float64 when every cell is a number or a missing-value text, else None."""
    if values.dtype.kind in "iufb":
        return values.astype(np.float64)
    text = values.astype(str).str.strip()
    numbers = pd.to_numeric(text, errors="coerce")
    if (numbers.isna() & ~text.isin(NA_TEXTS)).any():
        return None
    return numbers.astype(np.float64)


def normalize(frame: pd.DataFrame, kind: str) -> pd.DataFrame:
    """A summary frame (all cells text, as read from a CSV) with the modern header names, a text
    Device_id (N/A when absent), and number columns as float64 (N/A → NaN)."""
    variants = VARIANTS.get(kind, {})
    names: List[str] = []
    keep: List[int] = []
    for i, raw in enumerate(frame.columns):
        name = variants.get(str(raw).strip().lstrip("\ufeff"), str(raw).strip().lstrip("\ufeff"))
        if name in names or name.startswith("Unnamed:"):
            continue  # a second variant of a column already taken, or a trailing empty field
        names.append(name)
        keep.append(i)
    out = frame.iloc[:, keep].copy()
    out.columns = names
    if DEVICE not in out.columns:
        out.insert(0, DEVICE, NA)
    for name in out.columns:
        if name in TEXT_COLUMNS:
            out[name] = out[name].astype(str).str.strip() if name == DEVICE else out[name].astype(str)
            continue
        numbers = _numeric(out[name])
        if numbers is not None:
            out[name] = numbers
    return out.reset_index(drop=True)


def read_csvs(paths: Sequence[str], kind: str) -> pd.DataFrame:
    """The rows of one export's CSV parts, normalized, read CSV_CHUNK_ROWS rows at a time."""
    parts: List[pd.DataFrame] = []
    for p in paths:
        try:
            try:
                with warnings.catch_warnings():
                    # pandas only warns when a row has more fields than the header, and drops them
                    warnings.simplefilter("error", pd.errors.ParserWarning)
                    chunks = pd.read_csv(p, dtype=str, keep_default_na=False, chunksize=CSV_CHUNK_ROWS,
                                         encoding="utf-8", encoding_errors="replace", index_col=False)
                    done = [normalize(chunk, kind) for chunk in chunks]
            except (pd.errors.ParserError, pd.errors.ParserWarning):
                done = [normalize(chunk, kind) for chunk in _repaired_chunks(p)]
            parts += done
        except (OSError, ValueError, csv.Error) as exc:
            raise UnreadableFile(f"cannot read as a {kind} CSV: {exc}", path=p) from exc
    if not parts:
        return pd.DataFrame()
    return pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]


def _repaired_chunks(path: str) -> Iterable[pd.DataFrame]:
    """The rows of a CSV some of whose rows have more fields than its header, as the reference's
    C++ writer makes them: it quotes nothing, so an op name holding a comma spans several fields.
    Extra fields that are empty at the end of a row are dropped; others are joined back into the
    name column (Op Name / Name / kernel_name, else the first column)."""
    with open(path, encoding="utf-8", errors="replace", newline="") as f:
        reader = csv.reader(f)
        header = next(reader, [])
        width = len(header)
        stripped = [h.strip().lstrip("\ufeff") for h in header]
        at = next((i for i, h in enumerate(stripped) if OP_VARIANTS.get(h, h) == OP_NAME), 0)
        rows: List[List[str]] = []
        for row in reader:
            extra = len(row) - width
            while extra > 0 and row[-1] == "":
                row.pop()
                extra -= 1
            if extra > 0:
                row[at:at + extra + 1] = [",".join(row[at:at + extra + 1])]
            elif extra < 0:
                row += [""] * -extra
            rows.append(row)
            if len(rows) == CSV_CHUNK_ROWS:
                yield pd.DataFrame(rows, columns=header, dtype=object)
                rows = []
        if rows or not header:
            yield pd.DataFrame(rows, columns=header, dtype=object)


# ------------------------------------------------------------------------------------------------
# Derived tables


def statistic_from_ops(ops: Optional[pd.DataFrame]) -> Optional[pd.DataFrame]:
    """op_statistic from op rows, as msprof aggregates it (outputs.md §5): per device and (OP Type,
    Task Type), leaving out communication, WRITE_BACK and INVALID tasks and ops of unknown type.
    Ratio(%) is the group's share of its device's total."""
    if ops is None or ops.empty or OP_TYPE not in ops.columns or DURATION not in ops.columns:
        return None
    task_type = ops[TASK_TYPE] if TASK_TYPE in ops.columns else pd.Series(NA, index=ops.index)
    keep = ~ops[OP_TYPE].isin(NA_TEXTS) & ~task_type.isin(STATISTIC_EXCLUDED) & ops[DURATION].notna()
    g = pd.DataFrame({DEVICE: ops[DEVICE][keep], OP_TYPE: ops[OP_TYPE][keep], CORE_TYPE: task_type[keep],
                      "d": ops[DURATION][keep]})
    if g.empty:
        return None
    stats = g.groupby([DEVICE, OP_TYPE, CORE_TYPE], sort=False)["d"].agg(["count", "sum", "min", "mean", "max"])
    stats = stats.reset_index()
    totals = stats.groupby(DEVICE)["sum"].transform("sum")
    out = pd.DataFrame({
        DEVICE: stats[DEVICE], OP_TYPE: stats[OP_TYPE], CORE_TYPE: stats[CORE_TYPE],
        "Count": stats["count"].astype(np.float64), "Total Time(us)": stats["sum"], "Min Time(us)": stats["min"],
        "Avg Time(us)": stats["mean"], "Max Time(us)": stats["max"],
        "Ratio(%)": np.where(totals > 0, stats["sum"] / totals.where(totals > 0, 1) * 100, 0.0)})
    return out.sort_values([DEVICE, "Total Time(us)"], ascending=[True, False], kind="stable").reset_index(drop=True)


def api_statistic_from_calls(calls: pd.DataFrame) -> Optional[pd.DataFrame]:
    """api_statistic from API calls (`level`, `name`, `dur` µs), as msprof computes it (outputs.md
    §6): per (API name, level) the sum, count, mean, min, max and population variance."""
    if calls is None or calls.empty:
        return None
    g = calls.groupby(["name", "level"], sort=True)["dur"]
    stats = g.agg(["sum", "count", "mean", "min", "max"]).reset_index()
    stats["var"] = g.var(ddof=0).to_numpy()
    return pd.DataFrame({
        DEVICE: "host", LEVEL: stats["level"].astype(str), API_NAME: stats["name"].astype(str),
        "Time(us)": stats["sum"], "Count": stats["count"].astype(np.float64), "Avg(us)": stats["mean"],
        "Min(us)": stats["min"], "Max(us)": stats["max"], "Variance": stats["var"]})


# ------------------------------------------------------------------------------------------------
# Reading each kind of source


@dataclass
class Tables:
    """The normalized tables of one collection (None: the collection has no such data).

    `op_rows`: one row per operator task (op_summary / kernel_details columns, PMU metrics
    included). `op_statistic`, `api_statistic`: as exported. `freq`: AI Core frequency, one row
    per record (`Source` 'recorded', or 'info.json' for the nominal frequency when none was
    recorded). `sources`: report → the file or store each table came from. `raw_problem`: why
    the collection's raw data was not (or not wholly) used, when exported files stand in for it."""
    path: str
    op_rows: Optional[pd.DataFrame] = None
    op_statistic: Optional[pd.DataFrame] = None
    api_statistic: Optional[pd.DataFrame] = None
    freq: Optional[pd.DataFrame] = None
    sources: Dict[str, str] = field(default_factory=dict)
    raw_problem: Optional[str] = None

    def table(self, report: str) -> Optional[pd.DataFrame]:
        """The table behind a report name (REPORTS); op_summary is op_rows."""
        frame = {"op_summary": self.op_rows, "op_statistic": self.op_statistic,
                 "api_statistic": self.api_statistic, "freq": self.freq}[report]
        return frame if frame is not None and not frame.empty else None

    def set(self, report: str, frame: Optional[pd.DataFrame], source: str) -> None:
        if frame is None or frame.empty or self.table(report) is not None:
            return
        attr = "op_rows" if report == "op_summary" else report
        setattr(self, attr, frame.reset_index(drop=True))
        self.sources[report] = source

    def missing(self, reports: Iterable[str]) -> List[str]:
        return [r for r in reports if self.table(r) is None]


def _freq_frame(device: Sequence[object], ts_us: Sequence[float], mhz: Sequence[float], source: str) -> pd.DataFrame:
    frame = pd.DataFrame({DEVICE: [str(d) for d in device], FREQ_TIME: np.asarray(ts_us, dtype=np.float64),
                          FREQ_MHZ: np.asarray(mhz, dtype=np.float64), FREQ_SOURCE: source})
    frame = frame.drop_duplicates()
    return frame.sort_values([DEVICE, FREQ_TIME], kind="stable").reset_index(drop=True)


def _table_frame(table: object, kind: str) -> pd.DataFrame:
    """A summary Table built by the exporter (exporters/summary.py), as a normalized frame: its
    cells rendered as the CSV would hold them, a chunk of rows at a time."""
    parts = []
    for columns, rows in table.pieces(0, table.n_rows):  # type: ignore[attr-defined]
        cells = {c.name: c.csv(rows) for c in columns}
        text = pd.DataFrame(cells, dtype=object)
        # the CSV quoting of a text field (shapes) is undone as a CSV reader would
        for name in text.columns:
            if name in TEXT_COLUMNS:
                text[name] = [_unquote(v) for v in text[name]]
        parts.append(normalize(text, kind))
    return pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]


def _unquote(cell: str) -> str:
    if len(cell) >= 2 and cell[0] == '"' and cell[-1] == '"':
        return cell[1:-1].replace('""', '"')
    return cell


def read_store(tables: Tables, collection_path: str, reports: Sequence[str]) -> None:
    """The tables of an imported collection, built by the summary exporter's own table builders
    (so they equal what `export summary` writes), and its AI Core frequency."""
    from .exporters.context import open_context
    from .exporters.summary import summary_flavour, summary_tables
    where = store.store_path(collection_path)
    ctx = open_context(collection_path)
    try:
        if set(reports) & {"op_summary", "op_statistic", "api_statistic"}:
            built = dict(summary_tables(ctx, summary_flavour(ctx)))
            if "op_summary" in built:
                tables.set("op_summary", _table_frame(built["op_summary"], "op_summary"), where)
            elif "task_time" in built:
                tables.set("op_summary", _table_frame(built["task_time"], "task_time"), where + " (task_time)")
            for kind in ("op_statistic", "api_statistic"):
                if kind in built:
                    tables.set(kind, _table_frame(built[kind], kind), where)
        if "freq" in reports:
            if ctx.has("AICORE_FREQ"):
                rows = ctx.conn.execute("SELECT deviceId, timestampNs, freq FROM AICORE_FREQ").fetchall()
                if rows:
                    dev, ts, mhz = zip(*rows)
                    tables.set("freq", _freq_frame(dev, [t / 1000 for t in ts], mhz, "recorded"), where)
            if tables.table("freq") is None:
                nominal = [(d, float(i["aic_frequency"])) for d, i in sorted(ctx.device_info.items())
                           if str(i.get("aic_frequency", "")).replace(".", "", 1).isdigit()]
                if nominal:
                    tables.set("freq", _freq_frame([d for d, _ in nominal], [np.nan] * len(nominal),
                                                   [f for _, f in nominal], "info.json"), where)
    finally:
        ctx.conn.close()


def _pmu_header(name: str) -> str:
    """A PMU metric's op_summary header (outputs.md §4.3; the Python flavour's spelling)."""
    return pmu_header(name.replace("_extra", ""), "python")


def read_db(tables: Tables, path: str, reports: Sequence[str]) -> None:
    """The tables of a unified database (msprof_*.db, ascend_pytorch_profiler*.db): op rows are
    TASK joined with COMPUTE_TASK_INFO (and COMMUNICATION_OP as COMMUNICATION rows), with the
    TASK_PMU_INFO metrics; op_statistic is aggregated from them; api_statistic from CANN_API."""
    conn = open_db(path)
    try:
        schema = _db_tables(conn)
        strings = dict(conn.execute("SELECT id, value FROM STRING_IDS").fetchall()) if "STRING_IDS" in schema else {}

        def text(ids: pd.Series) -> pd.Series:
            return ids.map(lambda i: strings.get(i, NA) if i is not None and i == i else NA).astype(str)

        if set(reports) & {"op_summary", "op_statistic"}:
            ops = _db_ops(conn, schema, text)
            tables.set("op_summary", ops, path)
            tables.set("op_statistic", statistic_from_ops(ops), path + " (aggregated)")
        if "api_statistic" in reports and "CANN_API" in schema:
            api = pd.read_sql_query("SELECT type, name, endNs - startNs AS dur FROM CANN_API", conn)
            levels = dict(API_LEVELS)
            if "ENUM_API_TYPE" in schema:
                levels.update(dict(conn.execute("SELECT id, name FROM ENUM_API_TYPE").fetchall()))
            calls = pd.DataFrame({"level": api["type"].map(lambda t: levels.get(t, str(t))),
                                  "name": text(api["name"]), "dur": api["dur"].astype(np.float64) / 1000})
            tables.set("api_statistic", api_statistic_from_calls(calls), path + " (CANN_API)")
        if "freq" in reports and "AICORE_FREQ" in schema:
            rows = conn.execute("SELECT deviceId, timestampNs, freq FROM AICORE_FREQ").fetchall()
            if rows:
                dev, ts, mhz = zip(*rows)
                tables.set("freq", _freq_frame(dev, [float(t) / 1000 for t in ts], mhz, "recorded"), path)
    except sqlite3.Error as exc:
        raise UnreadableFile(f"cannot read the database: {exc}", path=path) from exc
    finally:
        conn.close()


def _db_ops(conn: sqlite3.Connection, schema: Dict[str, List[str]],
            text: Callable[[pd.Series], pd.Series]) -> Optional[pd.DataFrame]:
    """Op rows of a unified DB (see read_db); `text` maps STRING_IDS ids to their strings."""
    if "TASK" not in schema or "COMPUTE_TASK_INFO" not in schema:
        return None
    info = schema["COMPUTE_TASK_INFO"]
    block = next((c for c in ("blockNum", "blockDim", "block_dim") if c in info), None)
    mix = next((c for c in ("mixBlockNum", "mixBlockDim") if c in info), None)
    extra = "".join(f", c.{c} AS {alias}" for c, alias in ((block, "block"), (mix, "mix")) if c)
    frame = pd.read_sql_query(
        "SELECT t.deviceId, t.modelId, t.taskId, t.streamId, t.startNs, t.endNs, t.contextId, t.globalTaskId, "
        f"c.name, c.opType, c.taskType{extra} FROM TASK t JOIN COMPUTE_TASK_INFO c "
        "ON c.globalTaskId = t.globalTaskId ORDER BY t.startNs", conn)
    ops = pd.DataFrame({
        DEVICE: frame["deviceId"].astype(str), "Model ID": frame["modelId"].astype(np.float64),
        "Task ID": frame["taskId"].astype(np.float64), "Stream ID": frame["streamId"].astype(np.float64),
        OP_NAME: text(frame["name"]), OP_TYPE: text(frame["opType"]), TASK_TYPE: text(frame["taskType"]),
        START: frame["startNs"].astype(np.float64) / 1000,
        DURATION: (frame["endNs"] - frame["startNs"]).astype(np.float64) / 1000,
        "Block Num": frame["block"].astype(np.float64) if block else np.nan,
        "Mix Block Num": frame["mix"].astype(np.float64) if mix else np.nan,
        "Context ID": frame["contextId"].where(frame["contextId"] != 4294967295).astype(np.float64),
    })
    if "TASK_PMU_INFO" in schema:
        pmu = pd.read_sql_query("SELECT globalTaskId, name, value FROM TASK_PMU_INFO", conn)
        if not pmu.empty:
            pmu["metric"] = text(pmu["name"])
            wide = pmu.pivot_table(index="globalTaskId", columns="metric", values="value", aggfunc="first")
            from .exporters.summary import UNSUPPORTED_PMU
            for metric in wide.columns:
                if metric in UNSUPPORTED_PMU:
                    continue
                values = frame["globalTaskId"].map(wide[metric]).astype(np.float64)
                # the DB keeps times in ns; the op_summary shows µs
                ops[_pmu_header(metric)] = values / 1000 if "time" in metric else values
    if "COMMUNICATION_OP" in schema:
        cols = schema["COMMUNICATION_OP"]
        comm = pd.read_sql_query(
            "SELECT opName, opType, startNs, endNs" + (", deviceId" if "deviceId" in cols else "") +
            " FROM COMMUNICATION_OP", conn)
        if not comm.empty:
            devices = ops[DEVICE].unique()
            device = comm["deviceId"].astype(str) if "deviceId" in comm else (devices[0] if len(devices) == 1 else NA)
            rows = pd.DataFrame({DEVICE: device, OP_NAME: text(comm["opName"]), OP_TYPE: text(comm["opType"]),
                                 TASK_TYPE: "COMMUNICATION", START: comm["startNs"].astype(np.float64) / 1000,
                                 DURATION: (comm["endNs"] - comm["startNs"]).astype(np.float64) / 1000})
            ops = pd.concat([ops, rows], ignore_index=True).sort_values(START, kind="stable")
    return ops.reset_index(drop=True)


def read_timelines(tables: Tables, paths: Sequence[str], reports: Sequence[str], diag: Diagnostics) -> None:
    """Op rows and AI Core frequency from chrome-trace timelines: the complete events of the
    'Ascend Hardware' processes (device tasks; no OP Type there) except those named after their
    task type (MEMCPY_ASYNC, NOTIFY_WAIT, ...: not operators, and not in op_summary either), and
    the counter events of the 'AI Core Freq' processes. Each file is loaded whole, so files above
    TIMELINE_MAX_BYTES (with a warning), or above FREQ_TIMELINE_MAX_BYTES when only the frequency
    is wanted, are skipped."""
    ops: List[dict] = []
    freq: List[Tuple[str, float, float]] = []
    need_ops = "op_summary" in reports
    limit = TIMELINE_MAX_BYTES if need_ops else FREQ_TIMELINE_MAX_BYTES
    for path in paths:
        if os.path.getsize(path) > limit:
            if need_ops:
                diag.warn(f"{path}: larger than {limit >> 20} MiB; not read")
            continue
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                events = json.load(f)
        except (OSError, ValueError) as exc:
            diag.warn(f"{path}: not a readable JSON timeline ({exc}); skipped")
            continue
        if isinstance(events, dict):
            events = events.get("traceEvents", [])
        if not isinstance(events, list):
            continue
        names: Dict[object, str] = {}
        labels: Dict[object, str] = {}
        for e in events:
            if isinstance(e, dict) and e.get("ph") == "M" and isinstance(e.get("args"), dict):
                if e.get("name") == "process_name":
                    names[e.get("pid")] = str(e["args"].get("name", ""))
                elif e.get("name") == "process_labels":
                    labels[e.get("pid")] = str(e["args"].get("labels", ""))
        fallback = _device_in_path(path)
        for e in events:
            if not isinstance(e, dict):
                continue
            proc = names.get(e.get("pid"), "")
            device = _device_of(labels.get(e.get("pid"), ""), fallback)
            args: Dict[str, object] = e["args"] if isinstance(e.get("args"), dict) else {}
            if e.get("ph") == "X" and proc.startswith("Ascend Hardware") and e.get("name") != args.get("Task Type"):
                # (a task named after its task type, such as MEMCPY_ASYNC or NOTIFY_WAIT, is no operator)
                ops.append({DEVICE: device, OP_NAME: str(e.get("name", NA)), OP_TYPE: NA,
                            TASK_TYPE: str(args.get("Task Type", NA)), "Stream ID": args.get("Stream Id",
                            args.get("Physic Stream Id")), "Task ID": args.get("Task Id"),
                            START: _float(e.get("ts")), DURATION: _float(e.get("dur"))})
            elif e.get("ph") == "C" and proc == "AI Core Freq":
                mhz = next((v for k, v in args.items() if "MHz" in str(k)), None)
                if mhz is not None:
                    freq.append((device, _float(e.get("ts")), _float(mhz)))
    if ops and "op_summary" in reports:
        frame = pd.DataFrame(ops).drop_duplicates()
        for c in ("Stream ID", "Task ID"):
            frame[c] = pd.to_numeric(frame[c], errors="coerce")
        tables.set("op_summary", frame.sort_values(START, kind="stable"), ", ".join(paths[:1]) +
                   (f" (+{len(paths) - 1} more)" if len(paths) > 1 else ""))
    if freq and "freq" in reports:
        dev, ts, mhz = zip(*freq)
        tables.set("freq", _freq_frame(dev, ts, mhz, "recorded"), paths[0])


def _float(value: object) -> float:
    try:
        return float(str(value).strip())
    except (TypeError, ValueError):
        return float("nan")


def _device_in_path(path: str) -> str:
    m = re.search(r"(?:^|[\\/])device_(\d+)(?:[\\/]|$)", path)
    return m.group(1) if m else NA


def _device_of(label: str, fallback: str) -> str:
    m = re.fullmatch(r"NPU\s*(\d+)", label.strip())
    return m.group(1) if m else fallback


# ------------------------------------------------------------------------------------------------
# Entry points


# How a raw collection gets its store: the caller's to give (cli.py gives importer.imported_paths,
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
            exported = _examine(found.path)
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
    exported = _examine(found.path)
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
    if _from_stores(found, diag, lambda path: read_store(tables, path, reports), ensure):
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
            raise NoData(f"the raw collection{'s' if len(found) > 1 else ''} here hold{'' if len(found) > 1 else 's'} "
                         f"no {what} data (imported into sqlite/{store.STORE_NAME}: no device tasks, host APIs or "
                         "AI Core frequency there)", path=path)
        looked = LOOKED_FOR_REPORT[reports[0]] if len(reports) == 1 else LOOKED_FOR
        raise NoData(f"no {what} data here or below; looked for {looked}{raw_reason(t.raw_problem for t in out)}",
                     path=path)
    return out


# ------------------------------------------------------------------------------------------------
# Intervals and aggregates for plot and compare: device tasks, host APIs, iterations, op totals

TRACE_PARTS = ("tasks", "apis", "iterations")
PART_NAMES = {"tasks": "device tasks", "apis": "host API calls", "iterations": "iterations"}
STREAM = "Stream ID"
THREAD = "Thread ID"
MODEL = "Model ID"
ITERATION = "Iteration ID"
ITER_START = "Iteration Start(us)"
ITER_END = "Iteration End(us)"
ITER_TIME = "Iteration Time(us)"
TASK_COLUMNS = (DEVICE, STREAM, TASK_TYPE, OP_NAME, OP_TYPE, START, DURATION)
API_COLUMNS = (DEVICE, THREAD, LEVEL, API_NAME, START, DURATION)
ITERATION_COLUMNS = (DEVICE, MODEL, ITERATION, ITER_START, ITER_END, ITER_TIME)
# APIs whose time is one model execution, end to end (ACL level, and the model level inside it)
MODEL_EXECUTE_APIS = ("aclmdlExecute", "aclmdlExecuteAsync", "aclmdlExecuteV2", "aclmdlExecuteAsyncV2",
                      "ModelExecute")
# the level of a timeline's CANN event from its name prefix, when its args carry none
API_PREFIX_LEVELS = {"AscendCL": "acl", "Model": "model", "Node": "node", "Runtime": "runtime", "Hccl": "communication",
                     "HCCL": "communication", "GE": "model"}
LOOKED_FOR_TRACE = {
    "tasks": "TASK in a store or unified DB, 'Ascend Hardware' events of a timeline, task_time CSVs, or op rows "
             "with a start time",
    "apis": "CANN_API in a store or unified DB, or 'CANN' events of a timeline (msprof_*.json, trace_view.json)",
    "iterations": "a step trace (store KIT_STEP_TRACE, DB STEP_TIME, 'Iteration N' or 'ProfilerStep#N' timeline "
                  "events, a step_trace CSV) or op rows with a Step Id",
}


@dataclass
class Trace:
    """The intervals of one collection (None: the collection has no such data), times in µs on the
    collection's own clock (Unix time for msprof exports), float64.

    `tasks`: one row per device task, TASK_COLUMNS (communication and memcpy tasks included when
    the source has them; `OP Type` N/A where it does not say). `apis`: one row per host API call,
    API_COLUMNS (`Device_id` 'host'). `iterations`: one row per model iteration or profiler step,
    ITERATION_COLUMNS (`Model ID` NaN for profiler steps). `sources`: part → where it came from."""
    path: str
    tasks: Optional[pd.DataFrame] = None
    apis: Optional[pd.DataFrame] = None
    iterations: Optional[pd.DataFrame] = None
    sources: Dict[str, str] = field(default_factory=dict)
    raw_problem: Optional[str] = None  # as Tables.raw_problem

    def table(self, part: str) -> Optional[pd.DataFrame]:
        frame = {"tasks": self.tasks, "apis": self.apis, "iterations": self.iterations}[part]
        return frame if frame is not None and not frame.empty else None

    def set(self, part: str, frame: Optional[pd.DataFrame], source: str) -> None:
        if frame is None or frame.empty or self.table(part) is not None:
            return
        setattr(self, part, frame.reset_index(drop=True))
        self.sources[part] = source

    def missing(self, parts: Iterable[str]) -> List[str]:
        return [p for p in parts if self.table(p) is None]


def _lookup(ids: np.ndarray, strings: Dict[int, str]) -> np.ndarray:
    """STRING_IDS values of an id array, N/A for unknown ids (vectorized)."""
    if not strings:
        return np.full(len(ids), NA, dtype=object)
    table = pd.Series(strings, dtype=object)
    return table.reindex(pd.Index(np.asarray(ids, dtype=np.int64))).fillna(NA).to_numpy(dtype=object)


def _task_frame(device: np.ndarray, stream: np.ndarray, task_type: np.ndarray, name: np.ndarray,
                op_type: np.ndarray, start_ns: np.ndarray, end_ns: np.ndarray) -> pd.DataFrame:
    start = np.asarray(start_ns, dtype=np.int64)
    frame = pd.DataFrame({
        DEVICE: pd.Series(device).astype(str).to_numpy(), STREAM: np.asarray(stream, dtype=np.float64),
        TASK_TYPE: task_type, OP_NAME: name, OP_TYPE: op_type, START: start.astype(np.float64) / 1000,
        DURATION: (np.asarray(end_ns, dtype=np.int64) - start).astype(np.float64) / 1000})
    return frame.sort_values(START, kind="stable")


def _api_frame(thread: np.ndarray, level: np.ndarray, name: np.ndarray, start_ns: np.ndarray,
               end_ns: np.ndarray) -> pd.DataFrame:
    start = np.asarray(start_ns, dtype=np.int64)
    frame = pd.DataFrame({
        DEVICE: "host", THREAD: np.asarray(thread, dtype=np.float64), LEVEL: level, API_NAME: name,
        START: start.astype(np.float64) / 1000,
        DURATION: (np.asarray(end_ns, dtype=np.int64) - start).astype(np.float64) / 1000})
    return frame.sort_values(START, kind="stable")


def _iteration_frame(device: "npt.ArrayLike", model: "npt.ArrayLike", index: "npt.ArrayLike",
                     start_us: "npt.ArrayLike", end_us: "npt.ArrayLike",
                     time_us: Optional["npt.ArrayLike"] = None) -> pd.DataFrame:
    """Iterations; `time_us` is their length when the source has it more exactly than end - start
    (µs since the epoch as float64 are 0.25 µs apart)."""
    start = np.asarray(start_us, dtype=np.float64)
    end = np.asarray(end_us, dtype=np.float64)
    span = end - start if time_us is None else np.asarray(time_us, dtype=np.float64)
    frame = pd.DataFrame({DEVICE: pd.Series(np.asarray(device, dtype=object)).astype(str).to_numpy(),
                          MODEL: np.asarray(model, dtype=np.float64),
                          ITERATION: np.asarray(index, dtype=np.float64), ITER_START: start, ITER_END: end,
                          ITER_TIME: span})
    return frame.sort_values([ITER_START, DEVICE], kind="stable")


def _api_levels(conn: sqlite3.Connection, names: Iterable[str]) -> Dict[int, str]:
    levels = dict(API_LEVELS)
    if "ENUM_API_TYPE" in names:
        levels.update({int(i): str(n) for i, n in conn.execute("SELECT id, name FROM ENUM_API_TYPE").fetchall()})
    return levels


def _level_names(types: np.ndarray, levels: Dict[int, str]) -> np.ndarray:
    """API level names of CANN_API type ids (the id itself, as text, when it has no name)."""
    ids = pd.Series(np.asarray(types, dtype=np.int64))
    return ids.map(levels).fillna(ids.astype(str)).to_numpy(dtype=object)


def trace_from_store(trace: Trace, collection_path: str, parts: Sequence[str]) -> None:
    """Tasks (TASK, named from COMPUTE_TASK_INFO, else by their task type), host APIs (CANN_API)
    and iterations (the step trace, as `export` windows them) of an imported collection."""
    from .exporters.context import open_context
    from .exporters.scope import step_iterations
    where = store.store_path(collection_path)
    ctx = open_context(collection_path)
    try:
        strings = {int(i): str(v) for i, v in ctx.conn.execute("SELECT id, value FROM STRING_IDS").fetchall()} \
            if ctx.has("STRING_IDS") else {}
        if "tasks" in parts and ctx.has("TASK"):
            t = ctx.ints("TASK", ("startNs", "endNs", "deviceId", "streamId", "taskType", "globalTaskId"))
            task_type = _lookup(t["taskType"], strings)
            name = task_type.copy()
            op_type = np.full(len(name), NA, dtype=object)
            if ctx.has("COMPUTE_TASK_INFO"):
                info = ctx.ints("COMPUTE_TASK_INFO", ("globalTaskId", "name", "opType"))
                at = pd.Index(info["globalTaskId"]).get_indexer(t["globalTaskId"])
                known = at >= 0
                name[known] = _lookup(info["name"][at[known]], strings)
                op_type[known] = _lookup(info["opType"][at[known]], strings)
            trace.set("tasks", _task_frame(t["deviceId"], t["streamId"], task_type, name, op_type, t["startNs"],
                                           t["endNs"]), where + " (TASK)")
        if "apis" in parts and ctx.has("CANN_API"):
            a = ctx.ints("CANN_API", ("startNs", "endNs", "type", "globalTid", "name"))
            levels = _api_levels(ctx.conn, ctx.tables)
            level = _level_names(a["type"], levels)
            trace.set("apis", _api_frame(a["globalTid"] & 0xFFFFFFFF, level, _lookup(a["name"], strings),
                                         a["startNs"], a["endNs"]), where + " (CANN_API)")
        if "iterations" in parts:
            rows = [(dev, model, index, start, end)
                    for dev, per in sorted(step_iterations(ctx).items()) for model, index, start, end in per]
            if rows:
                dev, model, index, start, end = zip(*rows)
                s_ns, e_ns = np.array(start, dtype=np.int64), np.array(end, dtype=np.int64)
                trace.set("iterations", _iteration_frame(dev, model, index, s_ns / 1000, e_ns / 1000,
                                                         (e_ns - s_ns) / 1000), where + " (KIT_STEP_TRACE)")
    finally:
        ctx.conn.close()


def trace_from_db(trace: Trace, path: str, parts: Sequence[str]) -> None:
    """Tasks (TASK with the names of COMPUTE_TASK_INFO or COMMUNICATION_TASK_INFO), host APIs
    (CANN_API) and profiler steps (STEP_TIME) of a unified database."""
    conn = open_db(path)
    try:
        schema = _db_tables(conn)
        strings = {int(i): str(v) for i, v in conn.execute("SELECT id, value FROM STRING_IDS").fetchall()} \
            if "STRING_IDS" in schema else {}
        if "tasks" in parts and "TASK" in schema:
            joins, names, types = "", [], []
            for table, alias in (("COMPUTE_TASK_INFO", "c"), ("COMMUNICATION_TASK_INFO", "m")):
                if table in schema and "globalTaskId" in schema[table]:
                    joins += f" LEFT JOIN {table} {alias} ON {alias}.globalTaskId = t.globalTaskId"
                    names.append(f"{alias}.name")
                    if "opType" in schema[table]:
                        types.append(f"{alias}.opType")
            name, op_type = (f"COALESCE({', '.join(c)})" if len(c) > 1 else (c[0] if c else "NULL")
                             for c in (names, types))
            frame = pd.read_sql_query(
                "SELECT t.deviceId AS dev, t.streamId AS stream, CAST(t.startNs AS INTEGER) AS s, "
                f"CAST(t.endNs AS INTEGER) AS e, t.taskType AS tt, {name} AS n, {op_type} AS ot FROM TASK t{joins}",
                conn)
            if not frame.empty:
                task_type = _lookup(frame["tt"].fillna(-1).to_numpy(np.int64), strings)
                named = frame["n"].notna().to_numpy()
                name_text = task_type.copy()
                name_text[named] = _lookup(frame["n"][named].to_numpy(np.int64), strings)
                op_text = np.full(len(frame), NA, dtype=object)
                typed = frame["ot"].notna().to_numpy()
                op_text[typed] = _lookup(frame["ot"][typed].to_numpy(np.int64), strings)
                trace.set("tasks", _task_frame(frame["dev"].to_numpy(), frame["stream"].to_numpy(), task_type,
                                               name_text, op_text, frame["s"].to_numpy(), frame["e"].to_numpy()),
                          path + " (TASK)")
        if "apis" in parts and "CANN_API" in schema:
            frame = pd.read_sql_query("SELECT CAST(startNs AS INTEGER) AS s, CAST(endNs AS INTEGER) AS e, type, "
                                      "globalTid, name FROM CANN_API", conn)
            if not frame.empty:
                levels = _api_levels(conn, schema)
                level = _level_names(frame["type"].to_numpy(np.int64), levels)
                trace.set("apis", _api_frame(frame["globalTid"].to_numpy(np.int64) & 0xFFFFFFFF, level,
                                             _lookup(frame["name"].to_numpy(np.int64), strings),
                                             frame["s"].to_numpy(), frame["e"].to_numpy()), path + " (CANN_API)")
        if "iterations" in parts and "STEP_TIME" in schema:
            frame = pd.read_sql_query("SELECT id, CAST(startNs AS INTEGER) AS s, CAST(endNs AS INTEGER) AS e "
                                      "FROM STEP_TIME", conn)
            if not frame.empty:
                devices = conn.execute("SELECT DISTINCT deviceId FROM TASK").fetchall() if "TASK" in schema else []
                device = str(devices[0][0]) if len(devices) == 1 else NA
                s_ns, e_ns = frame["s"].to_numpy(np.int64), frame["e"].to_numpy(np.int64)
                trace.set("iterations", _iteration_frame([device] * len(frame), [np.nan] * len(frame), frame["id"],
                                                         s_ns / 1000, e_ns / 1000, (e_ns - s_ns) / 1000),
                          path + " (STEP_TIME)")
    except (sqlite3.Error, pd.errors.DatabaseError) as exc:
        raise UnreadableFile(f"cannot read the database: {exc}", path=path) from exc
    finally:
        conn.close()


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


def timeline_events(paths: Sequence[str], diag: Diagnostics) -> pd.DataFrame:
    """The complete ('X') events of chrome-trace timelines as one frame: name, ts and dur (µs),
    cat, args, tid, and from the metadata events `process` (process_name), `thread` (thread_name)
    and `device` (an `NPU n` process label, else a `device_N` folder in the path, else N/A).
    Files above TIMELINE_MAX_BYTES, or not readable as JSON, are skipped with a warning."""
    frames: List[pd.DataFrame] = []
    columns = ["ph", "name", "pid", "tid", "ts", "dur", "cat", "args"]
    for path in paths:
        if os.path.getsize(path) > TIMELINE_MAX_BYTES:
            diag.warn(f"{path}: larger than {TIMELINE_MAX_BYTES >> 20} MiB; not read")
            continue
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                events = json.load(f)
            if isinstance(events, dict):
                events = events.get("traceEvents", [])
            ev = pd.DataFrame.from_records(events, columns=columns) if isinstance(events, list) else None
        except (OSError, ValueError, TypeError, AttributeError) as exc:
            diag.warn(f"{path}: not a readable JSON timeline ({exc}); skipped")
            continue
        if ev is None or ev.empty:
            continue
        meta = ev[ev["ph"] == "M"]
        args = meta["args"]
        procs = dict(zip(meta["pid"][meta["name"] == "process_name"],
                         args[meta["name"] == "process_name"].str.get("name").astype(str)))
        labels = dict(zip(meta["pid"][meta["name"] == "process_labels"],
                          args[meta["name"] == "process_labels"].str.get("labels").astype(str)))
        is_thread = meta["name"] == "thread_name"
        threads = dict(zip(zip(meta["pid"][is_thread], meta["tid"][is_thread]),
                           args[is_thread].str.get("name").astype(str)))
        x = ev[ev["ph"] == "X"].copy()
        if x.empty:
            continue
        fallback = _device_in_path(path)
        x["process"] = x["pid"].map(procs).astype(object).fillna("").astype(str)
        label = x["pid"].map(labels).astype(object).fillna("").astype(str).str.extract(r"^\s*NPU\s*(\d+)\s*$")[0]
        x["device"] = label.fillna(fallback).astype(str)
        names = pd.Series(threads, dtype=object)
        keys = pd.MultiIndex.from_arrays([x["pid"], x["tid"]])
        x["thread"] = names.reindex(keys).fillna("").astype(str).to_numpy() if len(names) else ""
        x["ts"] = pd.to_numeric(x["ts"].astype(str).str.strip(), errors="coerce")
        x["dur"] = pd.to_numeric(x["dur"].astype(str).str.strip(), errors="coerce")
        frames.append(x.drop(columns=["ph", "pid"]))
    if not frames:
        return pd.DataFrame(columns=["name", "tid", "ts", "dur", "cat", "args", "process", "device", "thread"])
    return pd.concat(frames, ignore_index=True)


def trace_from_timelines(trace: Trace, paths: Sequence[str], parts: Sequence[str], diag: Diagnostics) -> None:
    """Tasks ('Ascend Hardware' events with a Task Type), host APIs ('CANN' events; the level from
    their args, else from the name's prefix: `AscendCL@` acl, `Node@` node, ...) and iterations
    ('Iteration Time' events of a step-trace thread, or the `ProfilerStep#N` events of a PyTorch
    profiler) of timeline files. Events repeated across files are counted once."""
    if not paths:
        return
    ev = timeline_events(paths, diag)
    if ev.empty:
        return
    source = paths[0] + (f" (+{len(paths) - 1} more)" if len(paths) > 1 else "")
    name = ev["name"].astype(str)
    if "tasks" in parts:
        task_type = ev["args"].str.get("Task Type")
        hw = ev["process"].str.startswith("Ascend Hardware") & task_type.notna()
        if hw.any():
            args = ev["args"][hw]
            stream = pd.to_numeric(args.str.get("Stream Id").fillna(args.str.get("Physic Stream Id")), errors="coerce")
            stream = stream.fillna(pd.to_numeric(ev["tid"][hw], errors="coerce"))
            tasks = pd.DataFrame({DEVICE: ev["device"][hw], STREAM: stream.astype(np.float64),
                                  TASK_TYPE: task_type[hw].astype(str), OP_NAME: name[hw], OP_TYPE: NA,
                                  START: ev["ts"][hw].astype(np.float64), DURATION: ev["dur"][hw].astype(np.float64)})
            trace.set("tasks", tasks.drop_duplicates().sort_values(START, kind="stable"), source)
    if "apis" in parts:
        cann = ev["process"] == "CANN"
        if cann.any():
            args = ev["args"][cann]
            prefix = name[cann].str.extract(r"^([^@]+)@")[0]
            level = args.str.get("level").fillna(prefix.map(API_PREFIX_LEVELS)).fillna(prefix).fillna(NA)
            thread = pd.to_numeric(args.str.get("Thread Id"), errors="coerce")
            thread = thread.fillna(pd.to_numeric(ev["tid"][cann], errors="coerce"))
            apis = pd.DataFrame({DEVICE: "host", THREAD: thread.astype(np.float64), LEVEL: level.astype(str),
                                 API_NAME: name[cann].str.replace(r"^[^@]*@", "", regex=True),
                                 START: ev["ts"][cann].astype(np.float64),
                                 DURATION: ev["dur"][cann].astype(np.float64)})
            trace.set("apis", apis.drop_duplicates().sort_values(START, kind="stable"), source)
    if "iterations" in parts:
        steps = ev["cat"].astype(str).eq("Iteration Time") & name.str.match(r"^Iteration \d+$")
        profiler = name.str.match(r"^ProfilerStep#\d+$")
        for mask, host in ((steps, False), (profiler, True)):
            if not mask.any():
                continue
            index = pd.to_numeric(name[mask].str.extract(r"(\d+)$")[0], errors="coerce")
            model = pd.to_numeric(ev["thread"][mask].str.extract(r"Model ID:\s*(\d+)")[0], errors="coerce")
            start = ev["ts"][mask].to_numpy(np.float64)
            dur = ev["dur"][mask].to_numpy(np.float64)
            device = np.where(host, "host", ev["device"][mask].to_numpy(dtype=object))
            frame = _iteration_frame(device, model.to_numpy(np.float64), index.to_numpy(np.float64), start,
                                     start + dur, dur)
            trace.set("iterations", frame.drop_duplicates(), source)
            break


def _step_trace_csvs(path: str) -> List[str]:
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


def trace_from_ops(trace: Trace, ops: Optional[pd.DataFrame], source: str, parts: Sequence[str]) -> None:
    """What op rows can stand in for: tasks (rows with a start time; streams when the rows say) and
    iterations (per `Step Id`, from its first task's start to its last task's end)."""
    if ops is None or ops.empty or START not in ops.columns or DURATION not in ops.columns:
        return
    rows = ops[ops[START].notna() & ops[DURATION].notna()]
    if rows.empty:
        return
    if "tasks" in parts:
        tasks = pd.DataFrame({DEVICE: rows[DEVICE].astype(str),
                              STREAM: rows[STREAM].astype(np.float64) if STREAM in rows else np.nan,
                              TASK_TYPE: rows[TASK_TYPE].astype(str) if TASK_TYPE in rows else NA,
                              OP_NAME: rows[OP_NAME].astype(str) if OP_NAME in rows else NA,
                              OP_TYPE: rows[OP_TYPE].astype(str) if OP_TYPE in rows else NA,
                              START: rows[START], DURATION: rows[DURATION]})
        trace.set("tasks", tasks.sort_values(START, kind="stable"), source + " (op rows)")
    if "iterations" in parts and "Step Id" in rows.columns and rows["Step Id"].notna().any():
        stepped = rows[rows["Step Id"].notna()]
        end = stepped[START] + stepped[DURATION]
        g = pd.DataFrame({"dev": stepped[DEVICE], "step": stepped["Step Id"], "s": stepped[START], "e": end}) \
            .groupby(["dev", "step"], sort=True).agg(s=("s", "min"), e=("e", "max")).reset_index()
        trace.set("iterations", _iteration_frame(g["dev"], [np.nan] * len(g), g["step"], g["s"], g["e"]),
                  source + " (Step Id)")


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
        for p in filter(found.keeps, _step_trace_csvs(found.path)):
            frame = read_csvs([p], "step_trace")
            if {ITERATION, "Iteration End(us)", ITER_TIME} <= set(frame.columns):
                end = frame["Iteration End(us)"].to_numpy(np.float64)
                span = frame[ITER_TIME].to_numpy(np.float64)
                trace.set("iterations", _iteration_frame(frame[DEVICE], frame[MODEL] if MODEL in frame else
                                                         [np.nan] * len(frame), frame[ITERATION], end - span, end,
                                                         span), p)
    if trace.missing(parts):
        trace_from_ops(trace, ops, ops_source or found.path, trace.missing(parts))


def model_execution(api_statistic: Optional[pd.DataFrame]) -> Optional[pd.DataFrame]:
    """The API statistic rows of model executions (MODEL_EXECUTE_APIS: aclmdlExecute, ModelExecute,
    ...), summed over devices: Level, API Name, Count, Time(us) (the total), Avg(us). None without any."""
    if api_statistic is None or api_statistic.empty or API_NAME not in api_statistic.columns:
        return None
    rows = api_statistic[api_statistic[API_NAME].isin(MODEL_EXECUTE_APIS)]
    if rows.empty:
        return None
    # a Python-flavour export repeats the host table once per device: count each (level, API) once
    rows = rows.drop_duplicates(subset=[LEVEL, API_NAME, "Time(us)", "Count"])
    g = rows.groupby([LEVEL, API_NAME], sort=False).agg(Count=("Count", "sum"), Time=("Time(us)", "sum")).reset_index()
    g = g.rename(columns={"Time": "Time(us)"})
    g["Avg(us)"] = g["Time(us)"] / g["Count"].where(g["Count"] > 0)
    order = {name: i for i, name in enumerate(MODEL_EXECUTE_APIS)}
    return g.sort_values(API_NAME, key=lambda s: s.map(order), kind="stable").reset_index(drop=True)


def pmu_ratio_columns(ops: Optional[pd.DataFrame]) -> List[str]:
    """The PMU `*_ratio` columns of op rows that hold at least one number (pipe utilization and
    similar: the share of the core's time a unit was busy)."""
    if ops is None:
        return []
    return [c for c in ops.columns if c.endswith("_ratio") and ops[c].dtype.kind == "f" and ops[c].notna().any()]


def op_totals(ops: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """Op rows summed per key (e.g. [OP_NAME] or [OP_TYPE]) over all devices: Count, Total / Avg /
    Min / Max Time(us), First Start(us) (the earliest task start, NaN when unknown), the OP Type
    and Task Type of the key's tasks ('/'-joined when several), and the mean of each PMU ratio
    column over the tasks that have it."""
    work = ops.copy()
    for c in (OP_TYPE, TASK_TYPE):
        if c not in work.columns:
            work[c] = NA
    if START not in work.columns:
        work[START] = np.nan
    grouped = work.groupby(list(keys), sort=False, dropna=False)
    out = grouped.agg(**{"Count": (DURATION, "size"), "Total Time(us)": (DURATION, "sum"),
                         "Min Time(us)": (DURATION, "min"), "Max Time(us)": (DURATION, "max"),
                         "First Start(us)": (START, "min")}).reset_index()
    out["Count"] = out["Count"].astype(np.float64)
    out["Avg Time(us)"] = out["Total Time(us)"] / out["Count"]
    index = pd.MultiIndex.from_frame(out[list(keys)]) if len(keys) > 1 else pd.Index(out[keys[0]])
    for c in (OP_TYPE, TASK_TYPE):
        if c not in keys:
            out[c] = _distinct_joined(work, list(keys), c).reindex(index).to_numpy()
    for c in pmu_ratio_columns(work):
        out[c] = grouped[c].mean().to_numpy()
    return out


def _distinct_joined(frame: pd.DataFrame, keys: List[str], column: str) -> pd.Series:
    """Per key, the distinct texts of `column`, sorted and '/'-joined. Keys with one value (nearly
    all) are taken as they are; only the few with several are joined one by one."""
    d = frame[keys + [column]].astype({column: str}).drop_duplicates().sort_values(keys + [column], kind="stable")
    size = d.groupby(keys, sort=False, dropna=False)[column].transform("size")
    single = d[size == 1].set_index(keys)[column]
    several = d[size > 1]
    if several.empty:
        return single
    joined = several.groupby(keys, sort=False, dropna=False)[column].agg("/".join)
    return pd.concat([single, joined])
