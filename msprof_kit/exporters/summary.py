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

import dataclasses
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
from ..progress import label
from ..native_impl import Slot, fixed_slot, format_rows, int_slot, overlay, text_slot, text_table, trim_slot
from ..arrays import SortedKeys, ascending, group_ids, in_marked_groups, near_half, py_round_units, scaled_exact
from ..store import StoredColumns
from .context import ExportContext, RowReader

NA = "N/A"
CSV_LIMIT = 1_000_000          # data rows per CSV file (outputs.md §2.1)
CHUNK_ROWS = 50_000            # rows rendered and written at a time
BLOCK_ROWS = 250_000           # rows of a per-task summary built at a time (divides CSV_LIMIT)
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
NO_MODEL = 4294967295  # model id of eager (single-operator) tasks
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
    near = near_half(scaled)
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
    return np.rint(scaled_exact(x, decimals)).astype(np.int64)


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

    def pieces(self, lo: int, hi: int) -> Iterator[Tuple[List[Column], slice]]:
        """Rows lo:hi, CHUNK_ROWS at a time: (the columns, a slice of their rows)."""
        for rows in _slices(lo, hi):
            yield self.columns, rows

    def distinct(self, name: str) -> int:
        """How many distinct cells a column has."""
        column = next(c for c in self.columns if c.name == name)
        return len(set(column.csv(slice(0, self.n_rows))))


@dataclass
class BlockTable:
    """A summary of one row per task, built BLOCK_ROWS rows at a time so that an export never holds
    more than a block of its columns: `block(lo, hi)` gives the columns of output rows lo:hi (each
    column's rows counted from lo). `counts` holds the number of distinct cells of the columns
    whose count a writer asks for."""
    block: Callable[[int, int], List[Column]]
    n_rows: int
    dropped: Tuple[str, ...] = ()
    counts: Dict[str, int] = field(default_factory=dict)
    _first: Optional[List[Column]] = field(default=None, repr=False)

    def _build(self, lo: int, hi: int) -> List[Column]:
        return [c for c in self.block(lo, hi) if c.name not in self.dropped]

    @property
    def columns(self) -> List[Column]:
        """The columns of the first row (for the header and the cell suffixes)."""
        if self._first is None:
            self._first = self._build(0, min(1, self.n_rows))
        return self._first

    @property
    def header(self) -> List[str]:
        return [c.name for c in self.columns]

    def drop(self, names: Sequence[str]) -> "BlockTable":
        return BlockTable(self.block, self.n_rows, tuple(self.dropped) + tuple(names), self.counts)

    def pieces(self, lo: int, hi: int) -> Iterator[Tuple[List[Column], slice]]:
        header = self.header
        for base in range(lo - lo % BLOCK_ROWS, hi, BLOCK_ROWS):
            cols = self._build(base, min(self.n_rows, base + BLOCK_ROWS))
            if [c.name for c in cols] != header:
                raise AssertionError(f"internal: block {base} has other columns than the first")
            for rows in _slices(max(lo, base) - base, min(hi, base + BLOCK_ROWS) - base):
                yield cols, rows

    def distinct(self, name: str) -> int:
        return self.counts[name]


AnyTable = Union[Table, BlockTable]


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


def write_csv(ctx: ExportContext, kind: str, table: AnyTable, flavour: str) -> None:
    """`<kind>_<stamp>.csv` (or its `_slice_<i>` parts): header, then the rows, LF line ends. A
    row is one template of the columns' slots, so each chunk of rows is one `format_rows` call."""
    ends = [","] * (len(table.columns) - 1) + ["\n"]
    pieces = [b""] + [(c.suffix + end).encode("utf-8") for c, end in zip(table.columns, ends)]
    header = (",".join(csv_field(h) for h in table.header) + "\n").encode("utf-8")
    for part, lo, hi in csv_parts(table.n_rows, flavour):
        with open(ctx.path_for(kind, "csv", part), "wb") as out:
            out.write(header)
            for cols, rows in table.pieces(lo, hi):
                out.write(format_rows(pieces, [c.slot(rows) for c in cols], rows.stop - rows.start, b""))


def write_json(ctx: ExportContext, kind: str, table: AnyTable) -> None:
    """`<kind>_<stamp>.json`: a list of one object per row, header → value, as the Python path's
    JSON summaries (numbers as numbers, texts and timestamps as strings, `json.dump` separators)."""
    keys = [json.dumps(h) + ": " for h in table.header]
    with open(ctx.path_for(kind, "json"), "w", encoding="utf-8") as out:
        out.write("[")
        sep = ""
        for cols, rows in table.pieces(0, table.n_rows):
            columns = [c.json(rows) for c in cols]
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


TASK_BLOCK = 1 << 20  # tasks whose columns are read at a time to select and group them

Where = Union[None, slice, np.ndarray]  # all tasks, a range of them, or some positions


@dataclass
class Tasks:
    """Device tasks in scope, in TASK order, with their host descriptions. Their columns stay in
    the store: `col` and `info_ids` read what they are asked for (all tasks, a range or some
    positions), widened to int64, so that an export holds a block of tasks at a time.

    `task`: TASK_COLUMNS (times in local ns, taskType a STRING_IDS id); `row`: each task's position
    in TASK (None: every TASK row, in order); `iteration`: in a graph export, the iteration each
    task is exported for; `info`: COMPUTE_TASK_INFO's columns (STRING_IDS ids; None without the
    table) and `info_pos`: the position of each task's row in them (-1: none)."""
    task: RowReader
    row: Optional[np.ndarray]
    iteration: Optional[np.ndarray]
    info: Optional[RowReader]
    info_pos: np.ndarray
    strings: np.ndarray
    stored: int  # rows of TASK (in scope or not)
    _passed: Dict[object, np.ndarray] = field(default_factory=dict, repr=False)  # id_test's tables by key

    def __len__(self) -> int:
        return len(self.info_pos)

    def on(self, ctx: ExportContext) -> "Tasks":
        """These tasks read through another context's connection (a forked child's)."""
        return dataclasses.replace(self, task=self.task.on(ctx), info=self.info.on(ctx) if self.info else None)

    def spans(self) -> Iterator[slice]:
        """The tasks TASK_BLOCK at a time, as ranges of positions."""
        size = TASK_BLOCK
        for lo in range(0, len(self), size):
            yield slice(lo, min(len(self), lo + size))

    def has_info(self, at: Where = None) -> np.ndarray:
        return (self.info_pos if at is None else self.info_pos[at]) >= 0

    def rows(self, at: Where = None) -> np.ndarray:
        """TASK row positions of the tasks (at these positions)."""
        if self.row is None:
            if at is None:
                return np.arange(len(self), dtype=np.int64)
            return np.arange(at.start, at.stop, dtype=np.int64) if isinstance(at, slice) \
                else np.asarray(at, dtype=np.int64)
        return self.row if at is None else self.row[at]

    def stored_col(self, name: str) -> np.ndarray:
        """A TASK column of all the tasks, as stored (the narrowest integer type)."""
        return self.task.read(name) if self.row is None else self.task.read(name, self.row)

    def col(self, name: str, at: Where = None) -> np.ndarray:
        """A TASK column as int64, whole or at these positions."""
        if at is None:
            values = self.stored_col(name)
        elif self.row is not None:
            values = self.task.read(name, self.rows(at))
        elif isinstance(at, slice):
            values = self.task.span(name, at.start, at.stop)
        else:
            values = self.task.read(name, at)
        return values.astype(np.int64, copy=False)

    def info_ids(self, name: str, at: Where = None) -> np.ndarray:
        """A COMPUTE_TASK_INFO column per task as int64 (-1 where the task has no row)."""
        pos = self.info_pos if at is None else self.info_pos[at]
        out = np.full(len(pos), -1, dtype=np.int64)
        if self.info is not None:
            found = pos >= 0
            out[found] = self.info.read(name, pos[found])
        return out

    def text(self, ids: np.ndarray) -> np.ndarray:
        """Strings of STRING_IDS ids (N/A for -1)."""
        return np.append(self.strings, NA)[string_codes(ids, self.strings)]

    def id_test(self, ids: np.ndarray, key: object, test: Callable[[str], bool]) -> np.ndarray:
        """Whether the text of each STRING_IDS id passes `test`, tested once per string for all the
        calls that name the same `key` (each block of tasks asks again)."""
        passed = self._passed.get(key)
        if passed is None:
            passed = np.array([test(str(t)) for t in np.append(self.strings, NA).tolist()], dtype=bool)
            self._passed[key] = passed
        return passed[string_codes(ids, self.strings)]

    def id_in(self, ids: np.ndarray, texts: Sequence[str]) -> np.ndarray:
        """Whether the text of each STRING_IDS id is one of `texts`."""
        return self.id_test(ids, tuple(texts), lambda text: text in texts)


def _in_windows(ctx: ExportContext, dev: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Tasks the export covers: all, or in a graph export those whose start and end both lie in the
    iteration window of their device (docs/research/iteration_export.md §2.1)."""
    if ctx.scope.all_export:
        return np.ones(len(start), dtype=bool)
    inside = np.zeros(len(start), dtype=bool)
    for device, (lo, hi) in ctx.scope.windows.items():
        inside |= (dev == device) & (start >= lo) & (end <= hi)
    return inside


def _iteration_of(ctx: ExportContext, dev: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Graph export: the iteration each task is exported for, the first requested iteration whose
    [end of the previous iteration, its own end] the task overlaps (-1: none)."""
    out = np.full(len(start), -1, dtype=np.int64)
    for device, its in ctx.scope.iterations.items():
        for index, _, it_end, prev_end in sorted(its, reverse=True):
            out[(dev == device) & (end >= prev_end) & (start <= it_end)] = index
    return out


def load_tasks(ctx: ExportContext, strings: np.ndarray) -> Optional[Tasks]:
    """The device tasks in scope with their host descriptions, or None."""
    if not ctx.has("TASK"):
        return None
    task = ctx.reader("TASK", TASK_COLUMNS)
    if not len(task):
        return None
    row, iteration = None, None
    if not ctx.scope.all_export:
        dev, start, end = (task.read(c).astype(np.int64) for c in ("deviceId", "startNs", "endNs"))
        row = np.flatnonzero(_in_windows(ctx, dev, start, end))
        if not len(row):
            return None
        iteration = _iteration_of(ctx, dev[row], start[row], end[row])
    info, info_pos = _task_info(ctx, task, row)
    return Tasks(task, row, iteration, info, info_pos, strings, len(task))


def _task_info(ctx: ExportContext, task: RowReader, row: Optional[np.ndarray]
               ) -> Tuple[Optional[RowReader], np.ndarray]:
    """COMPUTE_TASK_INFO's columns, and the position of each task's row in them (-1: none; of
    several rows with its globalTaskId, the first)."""
    n = len(task) if row is None else len(row)
    if not ctx.has("COMPUTE_TASK_INFO"):
        return None, np.full(n, -1, dtype=np.int64)
    keys = ctx.columns("COMPUTE_TASK_INFO", ("globalTaskId",))["globalTaskId"]
    if not len(keys):
        return None, np.full(n, -1, dtype=np.int64)
    found = SortedKeys(keys)
    del keys
    pos = np.empty(n, dtype=np.int64)
    for lo in range(0, n, TASK_BLOCK):
        hi = min(n, lo + TASK_BLOCK)
        gtid = task.span("globalTaskId", lo, hi) if row is None else task.read("globalTaskId", row[lo:hi])
        pos[lo:hi] = found.find(gtid)
    return ctx.reader("COMPUTE_TASK_INFO", INFO_COLUMNS), pos


#: KIT_INFO, per device of a store whose KIT_TASK_PMU holds C++-rule metrics (910B family): the
#: metric columns of an iteration export (the Python rules', comma-separated; empty: none at all)
ITERATION_COLUMNS = "pmu_iteration_columns"


class PmuReader:
    """KIT_TASK_PMU metrics of given TASK rows, read from the store by row range (so that only the
    rows of a block of tasks are loaded, not the whole table).

    `iteration`: the metrics an iteration export prints. Where the store keeps the C++ rules'
    metrics (KIT_INFO names the Python rules' columns per device), those are the Python rules'
    columns: the value of KIT_TASK_PMU_PY where it holds the task (the tasks whose values differ),
    else KIT_TASK_PMU's (docs/exports.md, "Iteration exports: the Python path's metrics")."""

    def __init__(self, ctx: ExportContext, iteration: bool = False) -> None:
        self.cols = ctx.stored("KIT_TASK_PMU")
        names = self.cols.names
        self.metrics = [n for n in names[1:] if n != "globalTaskId"] if names[:1] == ["taskRow"] else []
        self.rows = SortedKeys(self.cols.read("taskRow") if self.metrics else np.zeros(0, np.int64))
        self.listed: Dict[int, List[str]] = {}
        if iteration:
            self.listed = {d: [n for n in i[ITERATION_COLUMNS].split(",") if n]
                           for d, i in ctx.device_info.items() if ITERATION_COLUMNS in i}
        self.python = ctx.stored("KIT_TASK_PMU_PY") if self.listed else self.cols
        self.python_rows = SortedKeys(self.python.read("taskRow") if self.listed and "taskRow" in self.python
                                      else np.zeros(0, np.int64))

    @staticmethod
    def _take(cols: StoredColumns, names: Sequence[str], keys: SortedKeys,
              rows: np.ndarray) -> Tuple[Dict[str, np.ndarray], np.ndarray]:
        at = keys.find(rows)
        found = at >= 0
        if not found.any():
            return {name: np.full(len(rows), np.nan) for name in names}, found
        lo, hi = int(at[found].min()), int(at[found].max()) + 1
        local = np.where(found, at - lo, 0)
        return {name: np.where(found, cols.read(name, lo, hi)[local].astype(np.float64), np.nan)
                for name in names}, found

    def read(self, rows: np.ndarray, devices: Optional[np.ndarray] = None) -> Tuple[Dict[str, np.ndarray], np.ndarray]:
        """The metrics of these TASK rows (float64, NaN where a task has no PMU record), in store
        column order, and which rows have a record (the first, where a row has several). With
        `iteration` set: the iteration export's columns, NaN on the rows of `devices` whose list
        lacks the column."""
        if not self.metrics or not len(self.rows.keys):
            return {}, np.zeros(len(rows), dtype=bool)
        stored, found = self._take(self.cols, self.metrics, self.rows, rows)
        if not self.listed:
            return stored, found
        names = list(dict.fromkeys(n for listed in self.listed.values() for n in listed))
        python, differs = self._take(self.python, names, self.python_rows, rows)
        out: Dict[str, np.ndarray] = {}
        for name in names:
            values = np.where(differs, python[name], stored[name] if name in stored else np.nan)
            if devices is not None:
                values[np.isin(devices, [d for d, listed in self.listed.items() if name not in listed])] = np.nan
            out[name] = values
        return out, found


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


def _of_model(ctx: ExportContext, tasks: Tasks, at: Where = None) -> np.ndarray:
    """op_summary and op_statistic of a graph export cover the exported model's tasks only."""
    if ctx.scope.all_export:
        return np.ones(len(tasks.info_pos if at is None else tasks.info_pos[at]), dtype=bool)
    return tasks.col("modelId", at) == ctx.scope.model_id


def _ordered(tasks: Tasks, idx: np.ndarray, by_device: bool) -> np.ndarray:
    """Task positions ordered by start time (stably), first by device in device text order when
    `by_device`; left as they are when they are in that order already (TASK is kept by device and
    start)."""
    start = tasks.col("startNs", idx)
    keys = [start]
    if by_device:
        rank = _device_rank(tasks.col("deviceId", idx))
        step = np.diff(rank)
        if (step >= 0).all() and ((step > 0) | (np.diff(start) >= 0)).all():
            return idx
        keys.append(rank)
    elif ascending(start):
        return idx
    return idx[np.lexsort(keys)]


def _model_table(ctx: ExportContext) -> Dict[int, str]:
    """Model id to model name (graph_id_map)."""
    if not ctx.has("KIT_MODEL"):
        return {}
    return {int(m): str(n) for m, n in ctx.conn.execute("SELECT modelId, name FROM KIT_MODEL")}


def _names_of(names: Dict[int, str], model_ids: np.ndarray) -> np.ndarray:
    """Model names of model ids, N/A when unknown (looked up once per distinct id)."""
    ids, inverse = np.unique(model_ids, return_inverse=True)
    return np.array([names.get(int(m), NA) for m in ids.tolist()], dtype=object)[inverse.reshape(-1)]


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


def pmu_columns(metrics: Dict[str, np.ndarray], flavour: str) -> List[PmuColumn]:
    """The op_summary PMU columns in store order (times in µs), less the metrics split-core chips
    lack. The metric arrays are converted in place."""
    _to_output_units(metrics, flavour)
    return [PmuColumn(name, pmu_header(name, flavour), values)
            for name, values in metrics.items() if name not in UNSUPPORTED_PMU]


#: The core whose metrics a MIX op's block PMU records give (the other core's come from its
#: context PMU record): the metric prefix per task type.
MIX_OTHER_CORE = {"MIX_AIC": "aiv_", "MIX_AIV": "aic_"}


def graph_export_losses(metrics: Dict[str, np.ndarray], task_type: np.ndarray,
                        lost: Optional[np.ndarray] = None) -> None:
    """Zero, in place, the metrics of the tasks whose block numbers the reference's Python PMU pass
    does not read (`lost`, bool per task; None: all of them, as in a graph export, where its query
    for the GE task info fails: docs/research/iteration_export.md §3.2). NaN (no PMU record) stays.

    * every time column is 0 (the times derive from the block number); cycles and ratios of the
      core that wrote the context PMU record are unaffected;
    * a MIX op keeps only that core: the other core's cycles and metrics come from the block PMU
      records, which the pass adds only when the op's mix block number is not 0, so they are all
      0 (the AIV side of MIX_AIC, the AIC side of MIX_AIV; docs/exports.md)."""
    rows = np.ones(len(task_type), dtype=bool) if lost is None else lost
    if not rows.any():
        return
    for name, values in metrics.items():
        if name.endswith("time"):
            values[rows & ~np.isnan(values)] = 0.0
    for mix_type, prefix in MIX_OTHER_CORE.items():
        mixed = rows & (task_type == mix_type)
        if not mixed.any():
            continue
        for name, values in metrics.items():
            if name.startswith(prefix):
                values[mixed & ~np.isnan(values)] = 0.0


def described_before_start(ctx: ExportContext, rows: np.ndarray, model: np.ndarray, begin: Optional[int]) -> np.ndarray:
    """Which of these TASK rows are eager ops (no model) whose GE task info (node_basic_info) was
    stamped before the collection start: the reference's Python PMU pass reads the block numbers
    of eager tasks stamped at or after the start only (mscalculate/aic/pmu_calculator.py:118-137),
    so theirs count as 0. False for a store that does not know the stamps (KIT_TASK.infoNs)."""
    kit = ctx.stored("KIT_TASK")
    if begin is None or "infoNs" not in kit or not len(rows):
        return np.zeros(len(rows), dtype=bool)
    stamp = kit.take("infoNs", rows).astype(np.int64)
    return (model == NO_MODEL) & (stamp >= 0) & (stamp < begin)


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


def _wait_ns(device: np.ndarray, start: np.ndarray, end: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """The gap before each task since the previous task on its device ended (rows sorted by device,
    then start), clipped at 0, and whether a row is its device's first."""
    first = np.ones(len(start), dtype=bool)
    first[1:] = device[1:] != device[:-1]
    wait = np.zeros(len(start), dtype=np.int64)
    wait[1:] = start[1:] - end[:-1]
    return np.where(first, 0, np.maximum(wait, 0)), first


def _wait_cells(wait: np.ndarray, first: np.ndarray, flavour: str, top: bool) -> Rendered:
    """C++: '0' on the file's first row (`top`: these rows start the table), std::to_string
    (6 decimals) elsewhere; Python: 0 on each device's first row, round(x, 3) elsewhere."""
    def slot(rows: slice) -> Slot:
        if flavour == "python":
            return overlay(trim_slot(wait[rows], 3), first[rows], "0")
        cells = fixed_slot(wait[rows] * 1000, 6)
        if top and rows.start == 0 and len(cells.values):
            cells = overlay(cells, np.arange(len(cells.values)) == 0, "0")
        return cells
    return Rendered("Task Wait Time(us)", slot)


def op_summary_table(ctx: ExportContext, tasks: Tasks, flavour: str) -> Optional[BlockTable]:
    """One row per device task that has a host compute description (§4.2), by device and start."""
    if tasks.info is None:
        return None
    begin = session_start(ctx)
    keep = np.zeros(len(tasks), dtype=bool)
    for at in tasks.spans():
        task_type = tasks.info_ids("taskType", at)
        excluded = tasks.id_in(task_type, OP_SUMMARY_EXCLUDED)
        communication = tasks.id_in(task_type, ("COMMUNICATION",))
        if communication.any():
            aiv = tasks.id_test(tasks.info_ids("name", at), AIV_KERNEL, lambda name: name.endswith(AIV_KERNEL))
            excluded &= ~(communication & aiv)
        keep[at] = (tasks.has_info(at) & ~excluded & _of_model(ctx, tasks, at)
                    & _keep_after_start(tasks.col("startNs", at), tasks.col("endNs", at), begin, flavour))
    if not keep.any():
        return None
    idx = _ordered(tasks, np.flatnonzero(keep), by_device=True)
    del keep
    devices = len(np.unique(tasks.col("deviceId", idx)))
    s = tasks.strings
    graph = _graph_mode(ctx)
    pmu = PmuReader(ctx, iteration=graph)
    model_names = _model_table(ctx) if graph else {}

    def block(lo: int, hi: int) -> List[Column]:
        at = idx[lo:hi]
        before = idx[lo - 1:lo]  # the row before the block, for its first wait time
        dev, b_start, b_end = (tasks.col(c, np.concatenate([before, at])) for c in ("deviceId", "startNs", "endNs"))
        wait, first = (a[len(before):] for a in _wait_ns(dev, b_start, b_end))
        dev, b_start, b_end = dev[len(before):], b_start[len(before):], b_end[len(before):]
        dur = b_end - b_start
        model = tasks.col("modelId", at)
        ctx_id = tasks.col("contextId", at)

        def info(key: str) -> np.ndarray:
            return tasks.info_ids(key, at)

        cols: List[Column] = [coded("Device_id", dev.astype(str), number=True)]
        if graph:
            cols.append(coded("Model Name", _names_of(model_names, model)))
        cols += [coded("Model ID", model.astype(str), number=True),
                 ints("Task ID", tasks.col("taskId", at)),
                 ints("Stream ID", tasks.col("streamId", at))]
        if graph:
            cols.append(coded("Infer ID", tasks.iteration[at].astype(str), number=True))
        cols += [from_strings("Op Name", info("name"), s),
                 from_strings("OP Type", info("opType"), s),
                 from_strings("OP State", info("opState"), s),
                 from_strings("Task Type", info("taskType"), s),
                 stamps("Task Start Time(us)", b_start),
                 durations("Task Duration(us)", dur, flavour),
                 _wait_cells(wait, first, flavour, top=lo == 0),
                 ints("Block Num", info("blockNum")),
                 ints("Mix Block Num", info("mixBlockNum")),
                 from_strings("HF32 Eligible", info("hf32Eligible"), s)]
        for header, key in (("Input Shapes", "inputShapes"), ("Input Data Types", "inputDataTypes"),
                            ("Input Formats", "inputFormats"), ("Output Shapes", "outputShapes"),
                            ("Output Data Types", "outputDataTypes"), ("Output Formats", "outputFormats")):
            cols.append(from_strings(header, info(key), s))
        cols.append(Rendered("Context ID", lambda rows: overlay(int_slot(ctx_id[rows]),
                                                                ctx_id[rows] == INVALID_CONTEXT, NA)))
        cols += _op_summary_pmu(ctx, pmu, tasks.rows(at), dev, dur, tasks.text(info("taskType")), model, flavour)
        return cols

    return BlockTable(block, len(idx), () if ctx.stars else STARS_ONLY, counts={"Device_id": devices})


def _op_summary_pmu(ctx: ExportContext, pmu: PmuReader, rows: np.ndarray, dev: np.ndarray, dur: np.ndarray,
                    task_type: np.ndarray, model: np.ndarray, flavour: str) -> List[Column]:
    """The PMU columns of these TASK rows (`model`: their model ids), then memory_bound and
    cube_utilization(%) (§4.3)."""
    metrics, found = pmu.read(rows, dev)
    if not metrics:
        return []
    ok = found & ~np.isin(task_type, NO_PMU_TYPES)
    if _graph_mode(ctx):
        graph_export_losses(metrics, task_type)
    elif flavour == "python":
        graph_export_losses(metrics, task_type, described_before_start(ctx, rows, model, session_start(ctx)))
    columns = pmu_columns(metrics, flavour)
    del metrics
    out: List[Column] = [_pmu_cells(c, ok) for c in columns]
    bound = _memory_bound(columns, ok, flavour)
    if bound is not None:
        out.append(bound)
    facts = {d: (device_number(ctx, d, "aic_frequency"), device_number(ctx, d, "ai_core_num"))
             for d in np.unique(dev).tolist()}
    freq = np.zeros(len(dev))
    cores = np.zeros(len(dev))
    for d, (mhz, n) in facts.items():
        freq[dev == d] = mhz
        cores[dev == d] = n
    cube = _cube_utilization(columns, ok, dur, freq, cores, flavour)
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
    graph = _graph_mode(ctx)
    begin = session_start(ctx)
    # grouped by ids first (first seen order), then by their texts: ids with the same text (a
    # missing description and a stored "N/A") make one group, where it was first seen. Each block
    # of tasks is grouped on its own; the grouping by texts joins a group's parts from every block.
    share_of = ["device", "model"]
    keys = share_of + ["op_type", "core_type"]
    parts = []
    for at in tasks.spans():
        start = tasks.col("startNs", at)
        task_type = tasks.info_ids("taskType", at)
        keep = tasks.has_info(at) & ~tasks.id_in(task_type, STATISTIC_EXCLUDED) & _of_model(ctx, tasks, at)
        if begin is not None:
            keep &= start > begin
        idx = np.flatnonzero(keep)
        if not len(idx):
            continue
        g = pd.DataFrame({
            "device": tasks.col("deviceId", at)[idx],
            "model": tasks.col("modelId", at)[idx] if graph else 0,
            "op_type": tasks.info_ids("opType", at)[idx],
            "core_type": task_type[idx],
            "dur": tasks.col("endNs", at)[idx] - start[idx],
        })
        parts.append(g.groupby(keys, sort=False)["dur"].agg(["count", "sum", "min", "max"]).reset_index())
    if not parts:
        return None
    stats = pd.concat(parts, ignore_index=True)
    del parts
    stats["model"] = _names_of(_model_table(ctx), stats["model"].to_numpy()) if graph else ""
    stats["op_type"] = tasks.text(stats["op_type"].to_numpy())
    stats["core_type"] = tasks.text(stats["core_type"].to_numpy())
    stats = stats.groupby(keys, sort=False).agg(count=("count", "sum"), sum=("sum", "sum"), min=("min", "min"),
                                                max=("max", "max")).reset_index()
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


def _task_time_keep(device: np.ndarray, stream: np.ndarray, task: np.ndarray, batch: np.ndarray,
                    ctx_id: np.ndarray) -> np.ndarray:
    """Tasks grouped by (device, stream, task id, batch): a single task stays; a group holding a
    context id other than 0 is FFTS+ and goes; a group holding context 0 (MIX) keeps only that one;
    any other group (a static graph executed repeatedly) stays whole. Only the groups holding a
    task with a context id are grouped: every other task stays."""
    keep = np.ones(len(ctx_id), dtype=bool)
    marked = ctx_id != INVALID_CONTEXT
    if not marked.any():
        return keep
    keys = [device, stream, task, batch]
    at = np.flatnonzero(in_marked_groups(keys, marked))
    del marked
    group = group_ids([k[at] for k in keys])
    ctx_id = ctx_id[at]
    size = np.bincount(group)
    ffts = np.bincount(group, weights=(ctx_id != 0) & (ctx_id != INVALID_CONTEXT)) > 0
    zero = np.bincount(group, weights=ctx_id == 0) > 0
    keep[at] = (size[group] == 1) | (~ffts[group] & (~zero[group] | (ctx_id == 0)))
    return keep


class Kernels:
    """KIT_TASK's kernel names of the tasks: a code per TASK row into `names` (-1: none), read at
    the rows asked for; none for a store without them."""

    def __init__(self, ctx: ExportContext, tasks: Tasks) -> None:
        kit = ctx.stored("KIT_TASK")
        labels = kit.labels("kernelName") if len(kit) == tasks.stored and "kernelName" in kit else None
        self.kit = kit if labels is not None else None
        self.names = labels if labels is not None else np.array([""], dtype=object)
        self.has_name = np.array([bool(k) for k in self.names.tolist()], dtype=bool)

    def of(self, rows: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """(kernel name, whether there is one) of these TASK rows."""
        if self.kit is None:
            return np.full(len(rows), "", dtype=object), np.zeros(len(rows), dtype=bool)
        code = self.kit.take("kernelName", rows).astype(np.int64)
        return self.names[np.maximum(code, 0)], self.has_name[np.maximum(code, 0)] & (code >= 0)


def _batches(ctx: ExportContext, tasks: Tasks) -> np.ndarray:
    """KIT_TASK's batch id per task (zeros for a store without it)."""
    kit = ctx.stored("KIT_TASK")
    if len(kit) != tasks.stored or "batchId" not in kit:
        return np.zeros(len(tasks), dtype=np.int64)
    batch = kit.read("batchId")
    return batch if tasks.row is None else batch[tasks.row]


def task_time_table(ctx: ExportContext, tasks: Tasks, flavour: str) -> Optional[BlockTable]:
    """One row per device task (§7.1), by start time (C++) or by device and start time (Python)."""
    keep = _task_time_keep(tasks.stored_col("deviceId"), tasks.stored_col("streamId"), tasks.stored_col("taskId"),
                           _batches(ctx, tasks), tasks.col("contextId"))
    begin = session_start(ctx)
    for at in tasks.spans():
        keep[at] &= _keep_after_start(tasks.col("startNs", at), tasks.col("endNs", at), begin, flavour)
    if not keep.any():
        return None
    idx = _ordered(tasks, np.flatnonzero(keep), by_device=flavour != "cpp")
    del keep
    devices = len(np.unique(tasks.col("deviceId", idx)))
    kernels = Kernels(ctx, tasks)

    def block(lo: int, hi: int) -> List[Column]:
        at = idx[lo:hi]
        b_start, b_end = tasks.col("startNs", at), tasks.col("endNs", at)
        kernel, named = kernels.of(tasks.rows(at))
        if tasks.info is not None:
            op_name = tasks.text(tasks.info_ids("name", at))
            ge_type = tasks.text(tasks.info_ids("taskType", at))
        else:
            op_name = ge_type = np.full(len(at), NA, dtype=object)
        # kernel_name: the runtime's kernel name, else the op name; kernel_type: the op's task type,
        # else the task's own (host runtime type, or the device's for a task no host record launched)
        name = np.where(named, kernel, op_name)
        kind = np.where(ge_type != NA, ge_type, tasks.text(tasks.col("taskType", at)))
        return [
            coded("Device_id", tasks.col("deviceId", at).astype(str), number=True),
            coded("kernel_name", name),
            coded("kernel_type", kind),
            ints("stream_id", tasks.col("streamId", at)),
            ints("task_id", tasks.col("taskId", at)),
            durations("task_time(us)", b_end - b_start, flavour),
            stamps("task_start(us)", b_start),
            stamps("task_stop(us)", b_end),
        ]

    return BlockTable(block, len(idx), counts={"Device_id": devices})


# ------------------------------------------------------------------------------------------------
# api_statistic (outputs.md §6)

API_HEADER = ("Device_id", "Level", "API Name", "Time(us)", "Count", "Avg(us)", "Min(us)", "Max(us)", "Variance")


API_BLOCK = 1 << 22  # CANN_API rows read at a time


def _api_blocks(ctx: ExportContext, strings: np.ndarray) -> Iterator[Tuple[np.ndarray, np.ndarray]]:
    """The host APIs in scope, API_BLOCK store rows at a time: (group key, duration in µs) per API
    in store order. The key is the name's code into `strings` + [N/A] shifted left 20 bits, plus
    the level.

    A graph export keeps the APIs that start inside its host window or span the window's start
    (docs/research/iteration_export.md §3.6). The Python path never counts Event pairs. The C++
    path leaves out the APIs before the collection start that it drops (msprof_kit.before_start);
    the Python path counts them."""
    names = ("startNs", "endNs", "type", "name", "globalTid")
    window = None if ctx.scope.all_export else ctx.scope.api_window()
    events = [i for i, v in enumerate(strings) if v in EVENT_PAIR_APIS] if ctx.flavour == "python" else []
    rule = ctx.api_rule("cpp") if summary_flavour(ctx) == "cpp" else None
    for _, _, cols in ctx.blocks("CANN_API", names, API_BLOCK):
        start, end, level, name, tid = (cols[c] for c in names)
        keep = np.ones(len(start), dtype=bool) if rule is None else rule.keep(start, end, tid)
        if window is not None:
            lo, hi = (int(x) for x in window)
            keep &= ((start >= lo) & (start <= hi)) | ((start <= lo) & (end >= lo))
        if events:
            keep &= ~((level == MODEL_LEVEL) & np.isin(name, events))
        key = string_codes(name[keep], strings) * (1 << 20) + level[keep]
        yield key, (end[keep] - start[keep]) / NS_PER_US


def _grouped(key: np.ndarray) -> Iterator[Tuple[int, np.ndarray]]:
    """(key, positions of its rows in order) of each distinct key."""
    if not len(key):
        return
    order = np.argsort(key, kind="stable")
    sorted_key = key[order]
    bounds = np.flatnonzero(np.r_[True, sorted_key[1:] != sorted_key[:-1], True])
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        yield int(sorted_key[lo]), order[lo:hi]


def _added(total: float, values: np.ndarray) -> float:
    """`total` with the values added one after the other, as a plain loop does (np.sum adds
    pairwise, which rounds differently)."""
    return float(np.cumsum(np.r_[total, values])[-1]) if len(values) else total


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


def api_groups(ctx: ExportContext, strings: np.ndarray, flavour: str) -> List[ApiGroup]:
    """One ApiGroup per (API name, level) of the host APIs in scope, in the path's row order: by
    name, then by level (as a number in C++, by its name in Python). Two passes over CANN_API in
    blocks: the sums, counts and extremes, then the variances around the averages; each sum adds
    a group's durations in store order."""
    if not ctx.has("CANN_API"):
        return []
    sums: Dict[int, List[float]] = {}  # key -> [sum, count, min, max]
    for key, dur in _api_blocks(ctx, strings):
        for k, at in _grouped(key):
            values = dur[at]
            got = sums.setdefault(k, [0.0, 0, math.inf, -math.inf])
            got[0] = _added(got[0], values)
            got[1] += len(values)
            got[2] = min(got[2], float(values.min()))
            got[3] = max(got[3], float(values.max()))
    if not sums:
        return []
    avgs: Dict[int, Tuple[float, float]] = {}  # key -> (total, avg) as the flavour rounds them
    for k, (total, count, _, _) in sums.items():
        if flavour == "cpp":
            avgs[k] = (total, cpp_round3(total / count))
        else:
            total = round(total, 3)
            avgs[k] = (total, round(total / count, 3))
    squares = dict.fromkeys(sums, 0.0)
    for key, dur in _api_blocks(ctx, strings):
        for k, at in _grouped(key):
            deviation = (dur[at] - avgs[k][1]) ** 2
            if flavour != "cpp":
                deviation = py_round_units(deviation, 3) / 1000.0
            squares[k] = _added(squares[k], deviation)
    names = np.append(strings, NA)
    groups = []
    for k, (_, count, low, high) in sums.items():
        total, avg = avgs[k]
        variance = squares[k] / count
        variance = cpp_round3(variance) if flavour == "cpp" else round(variance, 3)
        groups.append(ApiGroup(str(names[k >> 20]), k & ((1 << 20) - 1), total, count, avg, low, high, variance))
    if flavour == "cpp":
        groups.sort(key=lambda g: (g.name.encode("utf-8"), g.level))
    else:
        groups.sort(key=lambda g: (g.name, PY_API_LEVELS.get(g.level, "")))
    return groups


def api_statistic_table(ctx: ExportContext, strings: np.ndarray, flavour: str) -> Optional[Table]:
    """One row per (API name, level) over the host APIs (§6). C++ writes the table once with
    Device_id `host`; the Python path writes it once per device folder, with the device's id."""
    groups = api_groups(ctx, strings, flavour)
    if not groups:
        return None
    levels = PY_API_LEVELS if flavour == "python" else API_LEVELS
    if flavour == "cpp":
        number: Callable[[float], str] = double_to_str
        devices = ["host"]
    else:
        number = repr
        devices = [str(d) for d in sorted((d for d in ctx.device_info if d != HOST_DEVICE), key=str)] or ["host"]
    body = [[levels.get(g.level, ""), g.name, number(g.total), str(g.count), number(g.avg), number(g.low),
             number(g.high), number(g.variance)] for g in groups]
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
        table = op_summary_table(ctx, tasks.on(ctx), flavour)
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
    who = label(ctx.collection_path)
    with ctx.progress.phase(f"{who}: reading tasks"):
        strings = load_strings(ctx)
        tasks = load_tasks(ctx, strings)
    helper = Forked(functools.partial(_op_summary_job, ctx, tasks, flavour, fmt), "op_summary") \
        if ctx.jobs > 1 and can_fork() and tasks is not None else None
    try:
        before = len(ctx.written)
        with ctx.progress.phase(f"{who}: summary files", unit="files") as phase:
            for kind, table in summary_tables(ctx, flavour, skip=("op_summary",) if helper else (),
                                              loaded=(strings, tasks)):
                _write_one(ctx, kind, table, flavour, fmt)
                phase.advance()
            if helper is not None:  # op_summary's files first, as one process lists them
                ctx.written[before:before] = helper.result()
                phase.advance()
    except BaseException:
        if helper is not None:  # stopped, failed or interrupted: the files it began go too
            helper.cancel()
            for leftover in glob.glob(os.path.join(ctx.out_dir, f"op_summary_*{ctx.stamp}.*")):
                os.remove(leftover)
        raise


def _json_table(table: AnyTable) -> AnyTable:
    """The Python path's JSON summaries are per-device files without a Device_id key. Keep the key
    when the rows span several devices (the reference lets one device's file overwrite the other's)."""
    if "Device_id" not in table.header or table.distinct("Device_id") > 1:
        return table
    return table.drop(["Device_id"])
