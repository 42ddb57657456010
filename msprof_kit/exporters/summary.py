"""`export summary`: op_summary, op_statistic, api_statistic and task_time (outputs.md §3-§7.1).

Everything comes from the store. Each summary is assembled as a `Table`: a header and one column
per header cell, each column able to describe any slice of its rows as a typed slot over compact
numeric arrays (an integer, a decimal from integer units, a code into distinct texts, with N/A
cells). The CSV writer renders CHUNK_ROWS rows at a time into one bytes block with
`native_impl.format_rows` (one C call per chunk when the extension is built), so a million-task
export never holds all its cell texts at once.

Two flavours, as a CANN install ships them (outputs.md §0, §3.5):
* 'cpp' (910B family, all-export): durations and timestamps with 3 fixed decimals from integer ns,
  `Task Wait Time` as `std::to_string` (6 decimals), statistics with trailing zeros stripped,
  Device_id `host` for the host API table;
* 'python' (other chips, and every iteration export): Python float texts (`round(x, 3)`), PMU times
  from the total time rounded to 2 decimals, one host API table per device.

Where the reference is wrong, msprof-kit writes the correct value instead: CSV fields holding a comma
or a quote are quoted (the C++ writer does not quote), `Task Wait Time` is exact (the C++ path
subtracts start times parsed back from text) and restarts at each device, and task_time groups tasks
per device (the C++ path drops tasks whose stream and task id repeat on another device).
"""
from __future__ import annotations

import functools
import glob
import json
import math
import os
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np
import pandas as pd
from numpy.dtypes import StringDType

from .. import native_impl
from ..forked import Forked, can_fork
from ..native_impl import Slot, fixed_slot, format_rows, int_slot, overlay, text_slot, text_table, trim_slot
from .context import ExportContext

NA = "N/A"
CSV_LIMIT = 1_000_000          # data rows per CSV file (outputs.md §2.1)
CHUNK_ROWS = 50_000            # rows rendered and written at a time
INVALID_CONTEXT = 4294967295   # context id of a task that is not a subtask
HOST_DEVICE = 64               # result-directory id of host/
NS_PER_US = 1000

# GE task types that never get an op_summary row (a COMMUNICATION op named *AivKernel does)
OP_SUMMARY_EXCLUDED = ("WRITE_BACK", "INVALID", "HCCL_AI_CPU", "COMMUNICATION")
AIV_KERNEL = "AivKernel"
# task types whose PMU cells are always N/A
NO_PMU_TYPES = ("AI_CPU", "DSA", "DVPP")
# op_statistic: task types left out of the aggregation, and groups left out of the file
STATISTIC_EXCLUDED = ("COMMUNICATION", "HCCL_AI_CPU")
STATISTIC_HIDDEN = ("WRITE_BACK", "INVALID")

# PMU metrics the split-core (aic_/aiv_) chips do not support (C++ MetricProcessor and Python
# AiCoreOpReport both drop them)
UNSUPPORTED_PMU = frozenset({
    "aic_vec_ratio", "aic_vec_time", "aiv_mac_ratio", "aiv_mac_time", "aiv_mte1_ratio", "aiv_mte1_time",
    "aic_ub_read_bw", "aic_ub_write_bw", "aiv_l1_read_bw", "aiv_l1_write_bw", "aic_l0c_read_bw",
    "aic_l0c_write_bw", "aiv_l0a_read_bw", "aiv_l0a_write_bw", "aiv_l0b_read_bw", "aiv_l0b_write_bw",
    "aiv_l0c_read_bw_cube", "aiv_l0c_write_bw_cube", "aic_ub_read_bw_mte", "aic_ub_write_bw_mte",
    "aic_ub_read_bw_vector", "aic_ub_write_bw_vector", "aiv_mac_fp16_ratio", "aiv_mac_int8_ratio",
    "aic_vec_fp32_ratio", "aic_vec_fp16_ratio", "aic_vec_int32_ratio", "aic_vec_misc_ratio",
    "aic_vec_fp16_128lane_ratio", "aic_vec_fp16_64lane_ratio", "aic_vec_bankgroup_cflt_ratio",
    "aic_vec_bank_cflt_ratio", "aic_vec_resc_cflt_ratio", "aic_vector_fops", "aiv_cube_fops",
    "aiv_fixpipe_ratio", "aiv_fixpipe_time",
})
# op_summary columns only STARS chips have (§4.1)
STARS_ONLY = ("Context ID", "Mix Block Num", "aiv_time(us)", "aiv_total_time(us)")
# memory_bound inputs (mac, vec, mte2): plain names or the *_exe_* variants
MEMORY_BOUND_INPUTS = (("mac_ratio", "vec_ratio", "mte2_ratio"), ("mac_exe_ratio", "vec_exe_ratio", "mte2_exe_ratio"))

API_LEVELS: Dict[int, str] = {20000: "acl", 15000: "model", 10000: "node", 5500: "communication", 5000: "runtime"}
# the level names the Python path knows besides (its LevelDataType)
PY_API_LEVELS: Dict[int, str] = {**API_LEVELS, 30000: "pytorch_tx", 25000: "pta", 20500: "msproftx", 6000: "aicpu"}
MODEL_LEVEL = 15000
# model-level APIs the collector reports as begin/end Event pairs (host_formats.md §2.2). The
# Python path keeps events apart from its API table, so its api_statistic never counts them.
EVENT_PAIR_APIS = ("ModelLoad", "ModelExecute")

# ------------------------------------------------------------------------------------------------
# Cell texts, vectorized. Numbers are first brought to integer units of 10^-decimals (with the
# rounding of the reference's code path), then printed from those integers.

SD = StringDType()


def int_text(a: np.ndarray) -> np.ndarray:
    return native_impl.int_texts(np.asarray(a).astype(np.int64))


def decimal_text(k: np.ndarray, decimals: int = 3, strip: bool = False) -> np.ndarray:
    """Integer counts of 10^-decimals as decimal text: 1234567 → '1234.567' (decimals 3).

    strip=True gives Python's float repr of k / 1000 ('1234.5', '0.0') for decimals 3, exact for
    |k| < 2^53."""
    return native_impl.decimal_texts(k, decimals, trim=strip)


def fixed_ns(ns: np.ndarray) -> np.ndarray:
    """Integer ns as µs with 3 decimals by shifting the decimal point, as the C++ exporter prints
    times and durations (DivideByPowersOfTenWithPrecision): 1234567 → '1234.567'."""
    return decimal_text(ns, 3)


def stamp_ns(ns: np.ndarray) -> np.ndarray:
    """Absolute local ns as a CSV timestamp cell: µs with 3 decimals and a trailing TAB (§3.3)."""
    return np.strings.add(np.asarray(fixed_ns(ns)).astype(SD), "\t")


def repr_us(ns: np.ndarray) -> np.ndarray:
    """repr(ns / 1000): the Python path's round(ns / 1000, 3) of integer ns."""
    return decimal_text(ns, 3, strip=True)


def _near_half(scaled: np.ndarray) -> np.ndarray:
    """Where x · 10^d is too close to a half for float64 to decide its rounding."""
    frac = scaled - np.floor(scaled)
    return np.abs(frac - 0.5) <= np.maximum(1e-9, np.abs(scaled) * 1e-14)


def _scaled_exact(x: np.ndarray, decimals: int) -> np.ndarray:
    """x · 10^decimals in 80-bit long double: exact for decimals ≤ 3 (53 + 10 bits)."""
    return x.astype(np.longdouble) * (np.longdouble(10) ** decimals)


def py_round_units(x: np.ndarray, decimals: int) -> np.ndarray:
    """Python's round(x, decimals) in integer units of 10^-decimals: correctly rounded from the
    exact binary value, halves to even (numpy's np.round rounds x · 10^d to double first)."""
    x = np.asarray(x, dtype=np.float64)
    scaled = x * 10.0 ** decimals
    k = np.rint(scaled)
    near = _near_half(scaled)
    if near.any():
        k[near] = np.rint(_scaled_exact(x[near], decimals)).astype(np.float64)
    return k.astype(np.int64)


def sqlite_round_units(x: np.ndarray, decimals: int = 3) -> np.ndarray:
    """SQLite's ROUND(x, decimals) in integer units of 10^-decimals (both paths round PMU values
    in SQL).

    SQLite prints the value with its own "%.<d>f": it adds half a unit of the last place, enlarged
    by 3e-16 of the value, in long double, and truncates. So halves, and values a few ulps below a
    half, round away from zero."""
    x = np.asarray(x, dtype=np.float64)
    mag = np.abs(x)
    scaled = mag * 10.0 ** decimals
    k = np.floor(scaled + 0.5)
    near = _near_half(scaled)
    if near.any():
        m = mag[near]
        base = 0.5 / 10 ** decimals
        exponent = np.frexp(m)[1] - 1
        wide = m.astype(np.longdouble)
        bumped = (np.longdouble(base) + wide * np.longdouble(3e-16)).astype(np.float64)
        rounder = np.where(decimals + np.trunc(exponent / 3) < 15, bumped, base)
        k[near] = np.floor((wide + rounder.astype(np.longdouble)) * np.longdouble(10) ** decimals)
    return np.copysign(k, x).astype(np.int64)


def printf_units(x: np.ndarray, decimals: int) -> np.ndarray:
    """printf("%.<d>f") rounding (C++ std::fixed, std::to_string) in integer units of 10^-d."""
    x = np.asarray(x, dtype=np.float64)
    return np.rint(_scaled_exact(x, decimals)).astype(np.int64)


def with_na(cells: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """The cells where `ok`, N/A elsewhere."""
    return cells if ok.all() else np.where(ok, cells, NA)


def double_to_str(value: float) -> str:
    """C++ DoubleToStr: 3 decimals, then trailing zeros and a trailing '.' stripped ('12.5', '3')."""
    text = f"{value:.3f}".rstrip("0")
    return text[:-1] if text.endswith(".") else text


def cpp_round3(value: float) -> float:
    """C++ RoundToDecimalPlaces(x, 3): std::round(x · 1000) / 1000, halves away from zero."""
    scaled = value * 1000.0
    whole = math.floor(abs(scaled))
    if abs(scaled) - whole >= 0.5:
        whole += 1
    return math.copysign(whole, scaled) / 1000.0


def csv_field(text: str) -> str:
    """One CSV field, quoted only when it must be (as csv.QUOTE_MINIMAL)."""
    if "," in text or '"' in text or "\n" in text or "\r" in text:
        return '"' + text.replace('"', '""') + '"'
    return text


def csv_fields(texts: List[str]) -> List[str]:
    """csv_field of each text; one scan of their concatenation when none needs quoting (the usual case)."""
    whole = "\0".join(texts)
    if "," in whole or '"' in whole or "\n" in whole or "\r" in whole:
        return [csv_field(t) for t in texts]
    return texts


# ------------------------------------------------------------------------------------------------
# Tables and their writers


def json_value(text: str, number: bool) -> str:
    """A cell as the Python path's JSON summary writes it: numbers bare, everything else (N/A,
    names, timestamps with their TAB) as a JSON string (json.dumps defaults: ASCII escapes)."""
    return text if number and text != NA else json.dumps(text)


@dataclass
class Coded:
    """A text column drawn from a set of values: per-row codes into `labels`. CSV quoting and JSON
    encoding are done once per distinct value. `number`: the labels are numbers in JSON."""
    name: str
    codes: np.ndarray
    labels: np.ndarray  # object array of str
    number: bool = False
    suffix = ""
    _csv: Optional[np.ndarray] = field(default=None, repr=False)
    _json: Optional[np.ndarray] = field(default=None, repr=False)
    _table: Optional[native_impl.TextTable] = field(default=None, repr=False)

    def _csv_texts(self) -> np.ndarray:
        if self._csv is None:
            self._csv = np.array(csv_fields([str(v) for v in self.labels.tolist()]), dtype=object)
        return self._csv

    def csv(self, rows: slice) -> list:
        return self._csv_texts()[self.codes[rows]].tolist()

    def slot(self, rows: slice) -> Slot:
        """The CSV fields of a slice of rows, as a TEXT slot."""
        if self._table is None:
            self._table = text_table(self._csv_texts().tolist())
        return text_slot(self.codes[rows], self._table)

    def json(self, rows: slice) -> list:
        if self._json is None:
            self._json = np.array([json_value(str(v), self.number) for v in self.labels], dtype=object)
        return self._json[self.codes[rows]].tolist()


@dataclass
class Rendered:
    """A column described on demand: `slot(rows)` gives a slice of its rows as a typed slot over
    numeric arrays (numbers, N/A, timestamps: never anything that needs CSV quoting); each cell is
    followed by `suffix` (the TAB after a timestamp). `text`: JSON writes them as strings."""
    name: str
    slot: Callable[[slice], Slot]
    text: bool = False
    suffix: str = ""

    def render(self, rows: slice) -> np.ndarray:
        """The cell texts of a slice of rows (suffix included)."""
        texts = native_impl.slot_texts(self.slot(rows))
        return np.strings.add(np.asarray(texts).astype(SD), self.suffix) if self.suffix else texts

    def csv(self, rows: slice) -> list:
        return self.render(rows).tolist()

    def json(self, rows: slice) -> list:
        return [json_value(c, not self.text) for c in self.render(rows).tolist()]


Column = Union[Coded, Rendered]


@dataclass
class Table:
    """One summary: its columns in header order, over `n_rows` rows already in output order."""
    columns: List[Column]
    n_rows: int

    @property
    def header(self) -> List[str]:
        return [c.name for c in self.columns]

    def drop(self, names: Sequence[str]) -> "Table":
        return Table([c for c in self.columns if c.name not in names], self.n_rows)


def coded(name: str, values: np.ndarray, number: bool = False) -> Coded:
    """A Coded column from per-row texts (`number`: numbers in JSON)."""
    codes, labels = pd.factorize(np.asarray(values, dtype=object), use_na_sentinel=False)
    return Coded(name, codes, np.asarray(labels, dtype=object), number)


def string_codes(ids: np.ndarray, strings: np.ndarray) -> np.ndarray:
    """STRING_IDS ids as indexes into `strings` + [N/A]: ids that name no string (-1) point at N/A."""
    ids = np.asarray(ids, dtype=np.int64)
    return np.where((ids >= 0) & (ids < len(strings)), ids, len(strings))


def from_strings(name: str, ids: np.ndarray, strings: np.ndarray) -> Coded:
    """A column of STRING_IDS ids (-1: none, shown as N/A)."""
    return Coded(name, string_codes(ids, strings), np.append(strings, NA))


def cells(name: str, values: np.ndarray, text: bool = False) -> Rendered:
    """A Rendered column over texts computed up front (small tables, short texts)."""
    table = text_table(str(v) for v in np.asarray(values).tolist())
    index = np.arange(len(values), dtype=np.int64)
    return Rendered(name, lambda rows: text_slot(index[rows], table), text)


def ints(name: str, values: np.ndarray, text: bool = False) -> Rendered:
    """A column of integers."""
    values = np.asarray(values).astype(np.int64)
    return Rendered(name, lambda rows: int_slot(values[rows]), text)


def stamps(name: str, ns: np.ndarray) -> Rendered:
    """A column of absolute local ns as CSV timestamp cells: µs with 3 decimals and a TAB (§3.3)."""
    ns = np.asarray(ns, dtype=np.int64)
    return Rendered(name, lambda rows: fixed_slot(ns[rows], 3), text=True, suffix="\t")


def durations(name: str, ns: np.ndarray, flavour: str) -> Rendered:
    """A column of ns as µs: 3 fixed decimals (C++, `fixed_ns`), Python's float repr (`repr_us`)."""
    ns = np.asarray(ns, dtype=np.int64)
    make = fixed_slot if flavour == "cpp" else trim_slot
    return Rendered(name, lambda rows: make(ns[rows], 3))


def _slices(lo: int, hi: int) -> Iterator[slice]:
    for start in range(lo, hi, CHUNK_ROWS):
        yield slice(start, min(hi, start + CHUNK_ROWS))


def csv_parts(n: int, flavour: str) -> List[Tuple[Optional[int], int, int]]:
    """(slice index or None, first row, end row) of each CSV file of n rows (outputs.md §2.1): the
    C++ writer numbers every part once there are more than CSV_LIMIT rows; the Python merger numbers
    the full parts, and the remainder only after a numbered part."""
    if n < CSV_LIMIT or (n == CSV_LIMIT and flavour == "cpp"):
        return [(None, 0, n)]
    bounds = list(range(0, n, CSV_LIMIT)) + [n]
    return [(i, lo, hi) for i, (lo, hi) in enumerate(zip(bounds, bounds[1:]))]


def write_csv(ctx: ExportContext, kind: str, table: Table, flavour: str) -> None:
    """`<kind>_<stamp>.csv` (or its `_slice_<i>` parts): header, then the rows, LF line ends. A
    row is one template of the columns' slots, so each chunk of rows is one `format_rows` call."""
    ends = [","] * (len(table.columns) - 1) + ["\n"]
    pieces = [b""] + [(c.suffix + end).encode("utf-8") for c, end in zip(table.columns, ends)]
    header = (",".join(csv_field(h) for h in table.header) + "\n").encode("utf-8")
    for part, lo, hi in csv_parts(table.n_rows, flavour):
        with open(ctx.path_for(kind, "csv", part), "wb") as out:
            out.write(header)
            for rows in _slices(lo, hi):
                out.write(format_rows(pieces, [c.slot(rows) for c in table.columns], rows.stop - rows.start, b""))


def write_json(ctx: ExportContext, kind: str, table: Table) -> None:
    """`<kind>_<stamp>.json`: a list of one object per row, header → value, as the Python path's
    JSON summaries (numbers as numbers, texts and timestamps as strings, `json.dump` separators)."""
    keys = [json.dumps(h) + ": " for h in table.header]
    with open(ctx.path_for(kind, "json"), "w", encoding="utf-8") as out:
        out.write("[")
        sep = ""
        for rows in _slices(0, table.n_rows):
            columns = [c.json(rows) for c in table.columns]
            for row in zip(*columns):
                out.write(sep + "{" + ", ".join(k + v for k, v in zip(keys, row)) + "}")
                sep = ", "
        out.write("]")


# ------------------------------------------------------------------------------------------------
# What the summaries read from the store


def load_strings(ctx: ExportContext) -> np.ndarray:
    """STRING_IDS values as an object array indexed by id."""
    if not ctx.has("STRING_IDS"):
        return np.array([], dtype=object)
    rows = ctx.conn.execute("SELECT id, value FROM STRING_IDS").fetchall()
    out = np.full(max((r[0] for r in rows), default=-1) + 1, NA, dtype=object)
    for sid, value in rows:
        out[sid] = value
    return out


def session_start(ctx: ExportContext) -> Optional[int]:
    """The collection start (local ns), or None when the store does not know it."""
    if not ctx.has("SESSION_TIME_INFO"):
        return None
    row = ctx.conn.execute("SELECT MIN(startTimeNs) FROM SESSION_TIME_INFO").fetchone()
    return int(row[0]) if row and row[0] is not None else None


TASK_COLUMNS = ("startNs", "endNs", "deviceId", "globalTaskId", "taskType", "contextId", "streamId", "taskId",
                "modelId")
INFO_COLUMNS = ("name", "blockNum", "mixBlockNum", "taskType", "opType", "inputFormats", "inputDataTypes",
                "inputShapes", "outputFormats", "outputDataTypes", "outputShapes", "opState", "hf32Eligible")


@dataclass
class Tasks:
    """Device tasks in scope, one entry per TASK row in TASK order, with their host descriptions.

    `frame`: TASK columns (times in local ns, taskType a STRING_IDS id), `row` (position in TASK),
    KIT_TASK's batchId, `kernel` (code into `kernels`, -1: none) and `iteration` (graph export: the
    iteration each task is exported for). `info`: the task's COMPUTE_TASK_INFO columns (STRING_IDS
    ids; -1 where the task has no row, see `has_info`)."""
    frame: pd.DataFrame
    info: Optional[pd.DataFrame]
    has_info: np.ndarray
    strings: np.ndarray
    kernels: np.ndarray

    def text(self, ids: np.ndarray) -> np.ndarray:
        """Strings of STRING_IDS ids (N/A for -1)."""
        return np.append(self.strings, NA)[string_codes(ids, self.strings)]


def _in_windows(ctx: ExportContext, frame: pd.DataFrame) -> np.ndarray:
    """Tasks the export covers: all, or in a graph export those whose start and end both lie in the
    iteration window of their device (docs/research/iteration_export.md §2.1)."""
    if ctx.scope.all_export:
        return np.ones(len(frame), dtype=bool)
    dev, start, end = (frame[c].to_numpy() for c in ("deviceId", "startNs", "endNs"))
    inside = np.zeros(len(frame), dtype=bool)
    for device, (lo, hi) in ctx.scope.windows.items():
        inside |= (dev == device) & (start >= lo) & (end <= hi)
    return inside


def _iteration_of(ctx: ExportContext, frame: pd.DataFrame) -> np.ndarray:
    """Graph export: the iteration each task is exported for, the first requested iteration whose
    [end of the previous iteration, its own end] the task overlaps (-1: none)."""
    out = np.full(len(frame), -1, dtype=np.int64)
    dev, start, end = (frame[c].to_numpy() for c in ("deviceId", "startNs", "endNs"))
    for device, its in ctx.scope.iterations.items():
        for index, _, it_end, prev_end in sorted(its, reverse=True):
            out[(dev == device) & (end >= prev_end) & (start <= it_end)] = index
    return out


def load_tasks(ctx: ExportContext, strings: np.ndarray) -> Optional[Tasks]:
    """The device tasks in scope with their KIT_TASK facts and host descriptions, or None."""
    if not ctx.has("TASK"):
        return None
    frame = pd.DataFrame(ctx.ints("TASK", TASK_COLUMNS))
    if frame.empty:
        return None
    frame["row"] = np.arange(len(frame), dtype=np.int64)
    frame["batchId"] = 0
    frame["kernel"] = -1  # code into `kernels`
    kernels = np.array([""], dtype=object)
    for name, values, labels in ctx.stored_columns("KIT_TASK"):
        if len(values) != len(frame):
            continue
        if name == "batchId":
            frame["batchId"] = values.astype(np.int64)
        elif name == "kernelName" and labels is not None:
            frame["kernel"] = values.astype(np.int64)
            kernels = labels
    inside = _in_windows(ctx, frame)
    if not inside.all():
        frame = frame[inside].reset_index(drop=True)
    if frame.empty:
        return None
    frame["iteration"] = -1 if ctx.scope.all_export else _iteration_of(ctx, frame)
    info, has_info = _task_info(ctx, frame["globalTaskId"].to_numpy())
    return Tasks(frame, info, has_info, strings, kernels)


def _task_info(ctx: ExportContext, gtid: np.ndarray) -> Tuple[Optional[pd.DataFrame], np.ndarray]:
    """COMPUTE_TASK_INFO columns per task (ids; -1 where the task has no row), and which tasks have one."""
    if not ctx.has("COMPUTE_TASK_INFO"):
        return None, np.zeros(len(gtid), dtype=bool)
    cti = ctx.ints("COMPUTE_TASK_INFO", ("globalTaskId",) + INFO_COLUMNS)
    order = np.argsort(cti["globalTaskId"], kind="stable")
    cti = {k: v[order] for k, v in cti.items()}
    keys = cti["globalTaskId"]
    if not len(keys):
        return None, np.zeros(len(gtid), dtype=bool)
    pos = np.minimum(np.searchsorted(keys, gtid), len(keys) - 1)
    found = keys[pos] == gtid
    info = pd.DataFrame({c: np.where(found, cti[c][pos], -1) for c in INFO_COLUMNS})
    return info, found


def load_pmu(ctx: ExportContext, rows: np.ndarray) -> Tuple[Dict[str, np.ndarray], np.ndarray]:
    """KIT_TASK_PMU metrics aligned with the given TASK row positions (float64, NaN where a task has
    no PMU record), and which tasks have one."""
    columns = ctx.stored_columns("KIT_TASK_PMU")
    first = next(columns, None)
    if first is None or first[0] != "taskRow":
        return {}, np.zeros(len(rows), dtype=bool)
    task_row = first[1].astype(np.int64)
    order = np.argsort(task_row, kind="stable")
    at = order[np.minimum(np.searchsorted(task_row[order], rows), len(task_row) - 1)]
    found = task_row[at] == rows
    metrics = {name: np.where(found, values[at].astype(np.float64), np.nan)
               for name, values, _ in columns if name != "globalTaskId"}
    return metrics, found


def device_number(ctx: ExportContext, device: int, key: str) -> float:
    """A numeric per-device fact (aic_frequency in MHz, ai_core_num), 0 when unknown."""
    try:
        return float(ctx.device_info.get(device, {}).get(key, 0) or 0)
    except ValueError:
        return 0.0


def _device_rank(devices: np.ndarray) -> np.ndarray:
    """Sort rank of each device id in text order: the Python merger walks `device_<id>` folders in
    sorted() order, the C++ exporter sorts its rows by the Device_id text."""
    ids = np.unique(devices)
    by_text = np.array(sorted(ids.tolist(), key=str), dtype=np.int64)
    rank = np.empty(len(ids), dtype=np.int64)
    rank[np.searchsorted(ids, by_text)] = np.arange(len(ids))
    return rank[np.searchsorted(ids, devices)]


def _keep_after_start(start: np.ndarray, end: np.ndarray, begin: Optional[int], flavour: str) -> np.ndarray:
    """Tasks kept relative to the collection start: C++ drops those that ended before it, Python
    keeps those that start after it or straddle it."""
    if begin is None:
        return np.ones(len(start), dtype=bool)
    if flavour == "cpp":
        return end >= begin
    return (start > begin) | ((start < begin) & (end > begin))


def _graph_mode(ctx: ExportContext) -> bool:
    return not ctx.scope.all_export


def _of_model(ctx: ExportContext, frame: pd.DataFrame) -> np.ndarray:
    """op_summary and op_statistic of a graph export cover the exported model's tasks only."""
    if ctx.scope.all_export:
        return np.ones(len(frame), dtype=bool)
    return frame["modelId"].to_numpy() == ctx.scope.model_id


def _model_names(ctx: ExportContext, model_ids: np.ndarray) -> np.ndarray:
    """Model names (graph_id_map) of model ids, N/A when unknown."""
    names: Dict[int, str] = {}
    if ctx.has("KIT_MODEL"):
        names = {int(m): str(n) for m, n in ctx.conn.execute("SELECT modelId, name FROM KIT_MODEL")}
    return np.array([names.get(int(m), NA) for m in model_ids.tolist()], dtype=object)


# ------------------------------------------------------------------------------------------------
# op_summary (outputs.md §4)


@dataclass
class PmuColumn:
    """One op_summary PMU column: its store name, its header and its values per output row
    (µs for times; NaN where the task has no PMU record)."""
    store: str
    header: str
    values: np.ndarray


def pmu_header(name: str, flavour: str) -> str:
    """The op_summary header of a metric (§4.3 header rewriting)."""
    if name in ("total_time", "aic_total_time"):
        return "aicore_time(us)"
    if name == "aiv_total_time":
        return "aiv_time(us)"
    if "time" in name:
        return name + "(us)"
    if "bw" in name and "(GB/s)" not in name:
        return name + "(GB/s)"
    if flavour == "cpp" and "datas" in name and "(KB)" not in name:
        return name + "(KB)"
    return name


def _core_prefix(name: str) -> str:
    return name[:4] if name.startswith(("aic_", "aiv_")) else ""


def _to_output_units(metrics: Dict[str, np.ndarray], flavour: str) -> None:
    """Turn the time metrics from ns into µs, in place.

    The Python path then derives each pipe time from the total time rounded to 2 decimals; the C++
    path prints the stored values."""
    for name, values in metrics.items():
        if name.endswith("time"):
            values /= NS_PER_US
    if flavour == "cpp":
        return
    for prefix in ("", "aic_", "aiv_"):
        total = metrics.get(prefix + "total_time")
        if total is None:
            continue
        rounded = py_round_units(np.nan_to_num(total), 2) / 100.0
        rounded[np.isnan(total)] = np.nan
        metrics[prefix + "total_time"] = rounded
        for name in list(metrics):
            ratio = metrics.get(name[: -len("time")] + "ratio")
            if _core_prefix(name) == prefix and name.endswith("_time") and ratio is not None:
                metrics[name] = rounded * ratio


def pmu_columns(metrics: Dict[str, np.ndarray], flavour: str, times_lost: bool = False) -> List[PmuColumn]:
    """The op_summary PMU columns in store order (times in µs), less the metrics split-core chips
    lack. The metric arrays are converted in place.

    `times_lost`: every time column is 0, as in the reference's graph export, whose PMU pass loses
    the block numbers the times derive from (docs/research/iteration_export.md §3.2); ratios and
    cycles are unaffected."""
    _to_output_units(metrics, flavour)
    out = []
    for name, values in metrics.items():
        if name in UNSUPPORTED_PMU:
            continue
        if times_lost and name.endswith("time"):
            values[~np.isnan(values)] = 0.0
        out.append(PmuColumn(name, pmu_header(name, flavour), values))
    return out


def _pmu_cells(col: PmuColumn, ok: np.ndarray) -> Rendered:
    """Cycle counts as integers, everything else as SQLite's ROUND(x, 3) (both paths)."""
    values = col.values
    if "cycle" in col.store:
        return Rendered(col.header, lambda rows: overlay(
            int_slot(np.nan_to_num(values[rows]).astype(np.int64)), ~ok[rows], NA))
    return Rendered(col.header, lambda rows: overlay(
        trim_slot(sqlite_round_units(np.nan_to_num(values[rows]), 3), 3), ~ok[rows], NA))


def _memory_bound(cols: List[PmuColumn], ok: np.ndarray, flavour: str) -> Optional[Rendered]:
    """mte2_ratio / max(mac_ratio, vec_ratio) over the rounded ratios; None when the metrics lack
    those names (split-core chips name them aic_/aiv_)."""
    by_name = {c.store: c.values for c in cols}
    names = next((n for n in MEMORY_BOUND_INPUTS if all(x in by_name for x in n)), None)
    if names is None:
        return None
    mac, vec, mte2 = (sqlite_round_units(np.nan_to_num(by_name[n]), 3) / 1000.0 for n in names)
    top = np.maximum(mac, vec)
    bound = mte2 / np.where(top != 0, top, 1)
    if flavour == "cpp":
        valid = ok & (mac != 0) & (vec != 0)
        return Rendered("memory_bound", lambda rows: overlay(fixed_slot(printf_units(bound[rows], 6), 6),
                                                             ~valid[rows], NA))
    zero = top == 0
    return Rendered("memory_bound", lambda rows: overlay(
        overlay(trim_slot(py_round_units(bound[rows], 3), 3), zero[rows], "0"), ~ok[rows], NA))


def _cube_utilization(cols: List[PmuColumn], ok: np.ndarray, dur_ns: np.ndarray, freq: np.ndarray,
                      cores: np.ndarray, flavour: str) -> Optional[Rendered]:
    """total_cycles / (aic_freq_MHz · ai_core_num · duration_µs) · 100; None when the metrics lack
    the cycles or the mac ratio."""
    by_name = {c.store: c.values for c in cols}
    cyc_name = "aic_total_cycles" if "aic_total_cycles" in by_name else "total_cycles"
    mac_name = "aic_mac_ratio" if "aic_mac_ratio" in by_name else "mac_ratio"
    if cyc_name not in by_name or mac_name not in by_name:
        return None
    cycles = np.nan_to_num(by_name[cyc_name])
    scale = freq * cores
    has_scale = scale > 0
    if flavour == "cpp":
        # C++ prints cycles / (freq · cores) · 100 with std::to_string, then divides that text by the
        # duration text (µs, 3 decimals) and prints %.3f
        per_us = printf_units(cycles / np.where(has_scale, scale, 1) * 100, 6) / 1e6
        usage = per_us / np.where(dur_ns > 0, dur_ns / NS_PER_US, 1)
        valid = ok & has_scale
        positive = dur_ns > 0
        return Rendered("cube_utilization(%)", lambda rows: overlay(
            overlay(fixed_slot(printf_units(usage[rows], 3), 3), ~positive[rows], "0"), ~valid[rows], NA))
    mac = sqlite_round_units(np.nan_to_num(by_name[mac_name]), 3)
    denom = scale * dur_ns
    usage = cycles / np.where(denom > 0, denom, 1) * NS_PER_US * 100
    zero = (mac == 0) | (cycles == 0) | (dur_ns == 0) | ~has_scale
    return Rendered("cube_utilization(%)", lambda rows: overlay(
        overlay(trim_slot(py_round_units(usage[rows], 3), 3), zero[rows], "0"), ~ok[rows], NA))


def _wait_ns(device_rank: np.ndarray, start: np.ndarray, end: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """The gap before each task since the previous task on its device ended (rows sorted by device,
    then start), clipped at 0, and whether a row is its device's first."""
    first = np.ones(len(start), dtype=bool)
    first[1:] = device_rank[1:] != device_rank[:-1]
    wait = np.zeros(len(start), dtype=np.int64)
    wait[1:] = start[1:] - end[:-1]
    return np.where(first, 0, np.maximum(wait, 0)), first


def _wait_cells(wait: np.ndarray, first: np.ndarray, flavour: str) -> Rendered:
    """C++: '0' on the first row, std::to_string (6 decimals) elsewhere; Python: 0 on each device's
    first row, round(x, 3) elsewhere."""
    def slot(rows: slice) -> Slot:
        if flavour == "python":
            return overlay(trim_slot(wait[rows], 3), first[rows], "0")
        cells = fixed_slot(wait[rows] * 1000, 6)
        if rows.start == 0 and len(cells.values):
            cells = overlay(cells, np.arange(len(cells.values)) == 0, "0")
        return cells
    return Rendered("Task Wait Time(us)", slot)


def op_summary_table(ctx: ExportContext, tasks: Tasks, flavour: str) -> Optional[Table]:
    """One row per device task that has a host compute description (§4.2), by device and start."""
    if tasks.info is None:
        return None
    f, info = tasks.frame, tasks.info
    start, end = f["startNs"].to_numpy(), f["endNs"].to_numpy()
    task_type = tasks.text(info["taskType"].to_numpy())
    excluded = np.isin(task_type, OP_SUMMARY_EXCLUDED)
    if (task_type == "COMMUNICATION").any():
        names = tasks.text(info["name"].to_numpy())
        excluded &= ~((task_type == "COMMUNICATION") & np.array([str(n).endswith(AIV_KERNEL) for n in names]))
    keep = (tasks.has_info & ~excluded & _of_model(ctx, f)
            & _keep_after_start(start, end, session_start(ctx), flavour))
    if not keep.any():
        return None
    idx = np.flatnonzero(keep)
    idx = idx[np.lexsort((start[idx], _device_rank(f["deviceId"].to_numpy()[idx])))]
    g = f.iloc[idx].reset_index(drop=True)
    inf = info.iloc[idx].reset_index(drop=True)
    dev, start, end = g["deviceId"].to_numpy(), g["startNs"].to_numpy(), g["endNs"].to_numpy()
    dur = end - start
    wait, first = _wait_ns(_device_rank(dev), start, end)
    ctx_id = g["contextId"].to_numpy()
    s = tasks.strings
    graph = _graph_mode(ctx)

    cols: List[Column] = [coded("Device_id", dev.astype(str), number=True)]
    if graph:
        cols.append(coded("Model Name", _model_names(ctx, g["modelId"].to_numpy())))
    cols += [coded("Model ID", g["modelId"].to_numpy().astype(str), number=True),
             ints("Task ID", g["taskId"].to_numpy()),
             ints("Stream ID", g["streamId"].to_numpy())]
    if graph:
        cols.append(coded("Infer ID", g["iteration"].to_numpy().astype(str), number=True))
    cols += [from_strings("Op Name", inf["name"].to_numpy(), s),
             from_strings("OP Type", inf["opType"].to_numpy(), s),
             from_strings("OP State", inf["opState"].to_numpy(), s),
             from_strings("Task Type", inf["taskType"].to_numpy(), s),
             stamps("Task Start Time(us)", start),
             durations("Task Duration(us)", dur, flavour),
             _wait_cells(wait, first, flavour),
             ints("Block Num", inf["blockNum"].to_numpy()),
             ints("Mix Block Num", inf["mixBlockNum"].to_numpy()),
             from_strings("HF32 Eligible", inf["hf32Eligible"].to_numpy(), s)]
    for header, key in (("Input Shapes", "inputShapes"), ("Input Data Types", "inputDataTypes"),
                        ("Input Formats", "inputFormats"), ("Output Shapes", "outputShapes"),
                        ("Output Data Types", "outputDataTypes"), ("Output Formats", "outputFormats")):
        cols.append(from_strings(header, inf[key].to_numpy(), s))
    cols.append(Rendered("Context ID", lambda rows: overlay(int_slot(ctx_id[rows]), ctx_id[rows] == INVALID_CONTEXT,
                                                            NA)))
    cols += _op_summary_pmu(ctx, g, dur, tasks.text(inf["taskType"].to_numpy()), flavour)
    table = Table(cols, len(g))
    return table if ctx.stars else table.drop(STARS_ONLY)


def _op_summary_pmu(ctx: ExportContext, g: pd.DataFrame, dur: np.ndarray, task_type: np.ndarray,
                    flavour: str) -> List[Column]:
    """The PMU columns, then memory_bound and cube_utilization(%) (§4.3)."""
    metrics, found = load_pmu(ctx, g["row"].to_numpy())
    if not metrics:
        return []
    ok = found & ~np.isin(task_type, NO_PMU_TYPES)
    pmu = pmu_columns(metrics, flavour, times_lost=_graph_mode(ctx))
    del metrics
    out: List[Column] = [_pmu_cells(c, ok) for c in pmu]
    bound = _memory_bound(pmu, ok, flavour)
    if bound is not None:
        out.append(bound)
    dev = g["deviceId"].to_numpy()
    facts = {d: (device_number(ctx, d, "aic_frequency"), device_number(ctx, d, "ai_core_num"))
             for d in np.unique(dev).tolist()}
    freq = np.zeros(len(dev))
    cores = np.zeros(len(dev))
    for d, (mhz, n) in facts.items():
        freq[dev == d] = mhz
        cores[dev == d] = n
    cube = _cube_utilization(pmu, ok, dur, freq, cores, flavour)
    if cube is not None:
        out.append(cube)
    return out


# ------------------------------------------------------------------------------------------------
# op_statistic (outputs.md §5)


def op_statistic_table(ctx: ExportContext, tasks: Tasks, flavour: str) -> Optional[Table]:
    """Per device (and model, in a graph export), one row per (OP Type, Core Type): task count,
    total/min/avg/max duration and share of the total."""
    if tasks.info is None:
        return None
    f, info = tasks.frame, tasks.info
    start = f["startNs"].to_numpy()
    task_type = tasks.text(info["taskType"].to_numpy())
    keep = tasks.has_info & ~np.isin(task_type, STATISTIC_EXCLUDED) & _of_model(ctx, f)
    begin = session_start(ctx)
    if begin is not None:
        keep &= start > begin
    if not keep.any():
        return None
    graph = _graph_mode(ctx)
    g = pd.DataFrame({
        "device": f["deviceId"].to_numpy()[keep],
        "model": _model_names(ctx, f["modelId"].to_numpy()[keep]) if graph else "",
        "op_type": tasks.text(info["opType"].to_numpy()[keep]),
        "core_type": task_type[keep],
        "dur": (f["endNs"].to_numpy() - start)[keep],
    })
    share_of = ["device", "model"]
    stats = g.groupby(share_of + ["op_type", "core_type"], sort=False)["dur"].agg(["count", "sum", "min", "max"])
    stats = stats.reset_index()
    totals = stats.groupby(share_of)["sum"].transform("sum").to_numpy(dtype=np.float64)
    stats["avg"] = stats["sum"] // stats["count"]  # SQLite's integer division of the ns sums
    # the share is stored rounded to 6 decimals, then read back rounded to 3
    share = stats["sum"].to_numpy(dtype=np.float64) / np.where(totals > 0, totals, 1) * 100
    stats["ratio"] = np.where(totals > 0, py_round_units(share, 6) / 1e6, 0.0)
    stats = stats[(stats["op_type"] != NA) & ~stats["core_type"].isin(STATISTIC_HIDDEN)]
    if stats.empty:
        return None
    return _statistic_table(_order_statistic(stats, flavour, graph), flavour, graph)


def _order_statistic(stats: pd.DataFrame, flavour: str, graph: bool) -> pd.DataFrame:
    """C++: one sort by total time, descending; Python: per device (merge order), by model name in
    a graph export, then total time descending."""
    if flavour == "cpp":
        return stats.sort_values("sum", ascending=False, kind="stable")
    stats = stats.assign(rank=_device_rank(stats["device"].to_numpy()))
    keys = ["rank", "model", "sum"] if graph else ["rank", "sum"]
    return stats.sort_values(keys, ascending=[True] * (len(keys) - 1) + [False], kind="stable")


def _statistic_table(stats: pd.DataFrame, flavour: str, graph: bool) -> Table:
    def fmt(x: np.ndarray) -> np.ndarray:
        if flavour == "cpp":  # SQL ROUND(x, 3), then DoubleToStr
            return np.array([double_to_str(v / 1000) for v in sqlite_round_units(x, 3).tolist()], dtype=object)
        return decimal_text(py_round_units(x, 3), 3, strip=True)
    us = {k: stats[k].to_numpy(dtype=np.float64) / NS_PER_US for k in ("sum", "min", "avg", "max")}
    cols: List[Column] = [coded("Device_id", stats["device"].to_numpy().astype(str), number=True)]
    if graph:
        cols.append(coded("Model Name", stats["model"].to_numpy()))
    cols += [coded("OP Type", stats["op_type"].to_numpy()),
             coded("Core Type", stats["core_type"].to_numpy()),
             cells("Count", int_text(stats["count"].to_numpy()), text=True),  # a TEXT column there
             cells("Total Time(us)", fmt(us["sum"])),
             cells("Min Time(us)", fmt(us["min"])),
             cells("Avg Time(us)", fmt(us["avg"])),
             cells("Max Time(us)", fmt(us["max"])),
             cells("Ratio(%)", fmt(stats["ratio"].to_numpy(dtype=np.float64)))]
    return Table(cols, len(stats))


# ------------------------------------------------------------------------------------------------
# task_time (outputs.md §7.1)


def _task_time_keep(f: pd.DataFrame) -> np.ndarray:
    """Tasks grouped by (device, stream, task id, batch): a single task stays; a group holding a
    context id other than 0 is FFTS+ and goes; a group holding context 0 (MIX) keeps only that one;
    any other group (a static graph executed repeatedly) stays whole."""
    ctx_id = f["contextId"].to_numpy()
    frame = pd.DataFrame({"d": f["deviceId"].to_numpy(), "s": f["streamId"].to_numpy(),
                          "t": f["taskId"].to_numpy(), "b": f["batchId"].to_numpy(),
                          "ffts": (ctx_id != 0) & (ctx_id != INVALID_CONTEXT), "zero": ctx_id == 0})
    grouped = frame.groupby(["d", "s", "t", "b"], sort=False)
    size = grouped["ffts"].transform("size").to_numpy()
    ffts = grouped["ffts"].transform("any").to_numpy()
    zero = grouped["zero"].transform("any").to_numpy()
    return (size == 1) | (~ffts & (~zero | (ctx_id == 0)))


def task_time_table(ctx: ExportContext, tasks: Tasks, flavour: str) -> Optional[Table]:
    """One row per device task (§7.1), by start time (C++) or by device and start time (Python)."""
    f = tasks.frame
    start, end = f["startNs"].to_numpy(), f["endNs"].to_numpy()
    keep = _task_time_keep(f) & _keep_after_start(start, end, session_start(ctx), flavour)
    if not keep.any():
        return None
    idx = np.flatnonzero(keep)
    if flavour == "cpp":
        idx = idx[np.argsort(start[idx], kind="stable")]
    else:
        idx = idx[np.lexsort((start[idx], _device_rank(f["deviceId"].to_numpy()[idx])))]
    g = f.iloc[idx].reset_index(drop=True)
    start, end = g["startNs"].to_numpy(), g["endNs"].to_numpy()
    code = g["kernel"].to_numpy()
    named = np.array([bool(k) for k in tasks.kernels], dtype=bool)[np.maximum(code, 0)] & (code >= 0)
    if tasks.info is not None:
        info = tasks.info.iloc[idx]
        op_name = tasks.text(info["name"].to_numpy())
        ge_type = tasks.text(info["taskType"].to_numpy())
    else:
        op_name = ge_type = np.full(len(g), NA, dtype=object)
    # kernel_name: the runtime's kernel name, else the op name; kernel_type: the op's task type,
    # else the task's own (host runtime type, or the device's for a task no host record launched)
    name = np.where(named, tasks.kernels[np.maximum(code, 0)], op_name)
    kind = np.where(ge_type != NA, ge_type, tasks.text(g["taskType"].to_numpy()))
    dur = end - start
    cols: List[Column] = [
        coded("Device_id", g["deviceId"].to_numpy().astype(str), number=True),
        coded("kernel_name", name),
        coded("kernel_type", kind),
        ints("stream_id", g["streamId"].to_numpy()),
        ints("task_id", g["taskId"].to_numpy()),
        durations("task_time(us)", dur, flavour),
        stamps("task_start(us)", start),
        stamps("task_stop(us)", end),
    ]
    return Table(cols, len(g))


# ------------------------------------------------------------------------------------------------
# api_statistic (outputs.md §6)

API_HEADER = ("Device_id", "Level", "API Name", "Time(us)", "Count", "Avg(us)", "Min(us)", "Max(us)", "Variance")


def load_apis(ctx: ExportContext, strings: np.ndarray) -> Optional[pd.DataFrame]:
    """Host APIs in scope, in store order: `type` (level), `name` (STRING_IDS id), `dur` (ns).

    A graph export keeps the APIs that start inside its host window or span the window's start
    (docs/research/iteration_export.md §3.6). The Python path never counts Event pairs."""
    if not ctx.has("CANN_API"):
        return None
    cols = ctx.ints("CANN_API", ("startNs", "endNs", "type", "name"))
    start, end = cols["startNs"], cols["endNs"]
    api = pd.DataFrame({"type": cols["type"], "name": cols["name"], "dur": end - start})
    window = None if ctx.scope.all_export else ctx.scope.api_window()
    if window is not None:
        lo, hi = (int(x) for x in window)
        api = api[((start >= lo) & (start <= hi)) | ((start <= lo) & (end >= lo))]
    if ctx.flavour == "python":
        events = [i for i, v in enumerate(strings) if v in EVENT_PAIR_APIS]
        api = api[~((api["type"] == MODEL_LEVEL) & api["name"].isin(events))]
    return api if len(api) else None


def _sequential_sum(values: np.ndarray) -> float:
    """The sum of the values added one after the other, as a plain loop does (np.sum adds
    pairwise, which rounds differently)."""
    return float(np.cumsum(values)[-1]) if len(values) else 0.0


@dataclass
class ApiGroup:
    """The statistics of one (API name, level), in µs, rounded as the flavour's path rounds them."""
    name: str
    level: int
    total: float
    count: int
    avg: float
    low: float
    high: float
    variance: float


def _api_group(name: str, level: int, durations: np.ndarray, flavour: str) -> ApiGroup:
    """durations: µs per call in store order (integer ns / 1000, so already rounded to 3 decimals)."""
    n = len(durations)
    total = _sequential_sum(durations)
    if flavour == "cpp":
        avg = cpp_round3(total / n)
        variance = cpp_round3(_sequential_sum((durations - avg) ** 2) / n)
    else:
        total = round(total, 3)
        avg = round(total / n, 3)
        variance = round(_sequential_sum(py_round_units((durations - avg) ** 2, 3) / 1000.0) / n, 3)
    return ApiGroup(name, level, total, n, avg, float(durations.min()), float(durations.max()), variance)


def api_groups(api: pd.DataFrame, strings: np.ndarray, flavour: str) -> List[ApiGroup]:
    """One ApiGroup per (API name, level), in the path's row order: by name, then by level (as a
    number in C++, by its name in Python)."""
    names = np.append(strings, NA)
    name_id = string_codes(api["name"].to_numpy(), strings)
    key = name_id * (1 << 20) + api["type"].to_numpy()
    order = np.argsort(key, kind="stable")
    key = key[order]
    bounds = np.flatnonzero(np.r_[True, key[1:] != key[:-1], True])
    durations = api["dur"].to_numpy()[order] / NS_PER_US
    groups = [_api_group(str(names[key[lo] >> 20]), int(key[lo] & ((1 << 20) - 1)), durations[lo:hi], flavour)
              for lo, hi in zip(bounds[:-1], bounds[1:])]
    if flavour == "cpp":
        groups.sort(key=lambda g: (g.name.encode("utf-8"), g.level))
    else:
        groups.sort(key=lambda g: (g.name, PY_API_LEVELS.get(g.level, "")))
    return groups


def api_statistic_table(ctx: ExportContext, strings: np.ndarray, flavour: str) -> Optional[Table]:
    """One row per (API name, level) over the host APIs (§6). C++ writes the table once with
    Device_id `host`; the Python path writes it once per device folder, with the device's id."""
    api = load_apis(ctx, strings)
    if api is None:
        return None
    levels = PY_API_LEVELS if flavour == "python" else API_LEVELS
    if flavour == "cpp":
        number: Callable[[float], str] = double_to_str
        devices = ["host"]
    else:
        number = repr
        devices = [str(d) for d in sorted((d for d in ctx.device_info if d != HOST_DEVICE), key=str)] or ["host"]
    body = [[levels.get(g.level, ""), g.name, number(g.total), str(g.count), number(g.avg), number(g.low),
             number(g.high), number(g.variance)] for g in api_groups(api, strings, flavour)]
    rows = [[dev] + r for dev in devices for r in body]
    columns: List[Column] = []
    for j, header in enumerate(API_HEADER):
        values = np.array([r[j] for r in rows], dtype=object)
        columns.append(coded(header, values) if j < 3 else cells(header, values))
    return Table(columns, len(rows))


# ------------------------------------------------------------------------------------------------
# Entry point


def summary_flavour(ctx: ExportContext) -> str:
    """The reference's C++ summaries run on the 910B family in all-export mode only; iteration
    exports and other chips get the Python viewers' output."""
    return ctx.flavour if ctx.scope.all_export else "python"


def summary_tables(ctx: ExportContext, flavour: str, skip: Sequence[str] = (),
                   loaded: Optional[Tuple[np.ndarray, Optional[Tasks]]] = None) -> Iterator[Tuple[str, Table]]:
    """(kind, table) of each summary the store has data for, built one at a time (but the `skip`
    kinds). `loaded`: the strings and tasks when the caller has read them already."""
    strings, tasks = loaded if loaded is not None else (None, None)
    if loaded is None:
        strings = load_strings(ctx)
        tasks = load_tasks(ctx, strings)
    if tasks is not None:
        for kind, build in (("op_summary", op_summary_table), ("op_statistic", op_statistic_table),
                            ("task_time", task_time_table)):
            if kind in skip:
                continue
            table = build(ctx, tasks, flavour)
            if table is not None and table.n_rows:
                yield kind, table
    if "api_statistic" not in skip:
        table = api_statistic_table(ctx, strings, flavour)
        if table is not None and table.n_rows:
            yield "api_statistic", table


def _write_one(ctx: ExportContext, kind: str, table: Table, flavour: str, fmt: str) -> None:
    if fmt == "json" and flavour == "python":
        write_json(ctx, kind, _json_table(table))
    else:
        write_csv(ctx, kind, table, flavour)


def _op_summary_job(ctx: ExportContext, tasks: Tasks, flavour: str, fmt: str) -> List[str]:
    """op_summary alone, in a forked child (on a connection of its own, sharing the parent's tasks
    copy-on-write); the files it wrote."""
    ctx = ctx.reopened()
    try:
        table = op_summary_table(ctx, tasks, flavour)
        if table is not None and table.n_rows:
            _write_one(ctx, "op_summary", table, flavour, fmt)
        return ctx.written
    finally:
        ctx.conn.close()


def write_summary(ctx: ExportContext, fmt: str = "csv") -> None:
    """Write op_summary, op_statistic, task_time and api_statistic where the store has their data.
    With ctx.jobs > 1 a forked child writes op_summary (the largest) meanwhile.

    `fmt` 'json' writes JSON summaries where the Python path would; the C++ path writes these kinds
    as CSV whatever the format (outputs.md §2.3)."""
    flavour = summary_flavour(ctx)
    strings = load_strings(ctx)
    tasks = load_tasks(ctx, strings)
    helper = Forked(functools.partial(_op_summary_job, ctx, tasks, flavour, fmt), "op_summary") \
        if ctx.jobs > 1 and can_fork() and tasks is not None else None
    try:
        before = len(ctx.written)
        for kind, table in summary_tables(ctx, flavour, skip=("op_summary",) if helper else (),
                                          loaded=(strings, tasks)):
            _write_one(ctx, kind, table, flavour, fmt)
        if helper is not None:  # op_summary's files first, as one process lists them
            ctx.written[before:before] = helper.result()
    except BaseException:
        if helper is not None and helper.cancel() is not None:
            for leftover in glob.glob(os.path.join(ctx.out_dir, f"op_summary_*{ctx.stamp}.*")):
                os.remove(leftover)
        raise


def _json_table(table: Table) -> Table:
    """The Python path's JSON summaries are per-device files without a Device_id key. Keep the key
    when the rows span several devices (the reference lets one device's file overwrite the other's)."""
    dev = next((c for c in table.columns if c.name == "Device_id"), None)
    if dev is None or len(set(dev.csv(slice(0, table.n_rows)))) > 1:
        return table
    return table.drop(["Device_id"])
