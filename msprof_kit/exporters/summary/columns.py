"""The summary tables: a header and one column per header cell, each column able to describe any
slice of its rows as a typed slot over compact numeric arrays (an integer, a decimal from integer
units, a code into distinct texts, with N/A cells); a per-task summary is built BLOCK_ROWS rows at a
time (`BlockTable`)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np
import pandas as pd

from ... import native_impl
from ...native_impl import Slot, csv_table, fixed_slot, int_slot, text_slot, text_table, trim_slot
from .cells import NA, SD, csv_fields, json_value

CHUNK_ROWS = 50_000            # rows rendered and written at a time
BLOCK_ROWS = 250_000           # rows of a per-task summary built at a time (divides CSV_LIMIT)


class CsvTexts:
    """Texts that many Coded columns show (STRING_IDS' texts and N/A): their CSV fields made once, when
    the first CSV slot asks, and shared by every block of every column drawn from them."""

    def __init__(self, texts: np.ndarray) -> None:
        self.texts = texts  # object array
        self._table: Optional[native_impl.TextTable] = None
        self._with: Dict[Tuple[str, ...], native_impl.TextTable] = {}  # a few texts added, every block

    def table(self, extra: Sequence[object] = ()) -> native_impl.TextTable:
        """The CSV fields of the texts, then those of `extra` (kept when they are few: the same
        ones come with every block)."""
        if self._table is None:
            self._table = csv_table([str(v) for v in self.texts.tolist()])
        more = tuple(str(v) for v in extra)
        if not more:
            return self._table
        found = self._with.get(more)
        if found is None:
            tail = csv_table(more)
            found = native_impl.TextTable(self._table.blob + tail.blob, np.concatenate(
                [self._table.offsets[:-1], tail.offsets + len(self._table.blob)]))
            if len(more) <= 8:
                self._with[more] = found
        return found


@dataclass
class Coded:
    """A text column drawn from a set of values: per-row codes into `labels`. CSV quoting and JSON
    encoding are done once per distinct value. `number`: the labels are numbers in JSON."""
    name: str
    codes: np.ndarray
    labels: np.ndarray  # object array of str
    number: bool = False
    shared: Optional[CsvTexts] = field(default=None, repr=False)  # labels = shared.texts + more
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
        if self._table is None:  # the CSV fields of the distinct texts, in C where it serves
            self._table = self.shared.table(self.labels[len(self.shared.texts):].tolist()) \
                if self.shared is not None else csv_table([str(v) for v in self.labels.tolist()])
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


def coded_numbers(name: str, values: np.ndarray, number: bool = True) -> Coded:
    """`coded(name, values.astype(str), number)` of ids (a column of few distinct values): integers
    are factorized as numbers and only the distinct ones made texts (other values, where distinct
    numbers may print alike, go through their texts)."""
    values = np.asarray(values)
    if values.dtype.kind not in "iu":
        return coded(name, values.astype(str), number)
    codes, uniq = pd.factorize(values, use_na_sentinel=False)
    return Coded(name, codes, np.asarray(uniq).astype(str).astype(object), number)


def string_codes(ids: np.ndarray, strings: np.ndarray) -> np.ndarray:
    """STRING_IDS ids as indexes into `strings` + [N/A]: ids that name no string (-1) point at N/A."""
    ids = np.asarray(ids, dtype=np.int64)
    return np.where((ids >= 0) & (ids < len(strings)), ids, len(strings))


def from_strings(name: str, ids: np.ndarray, strings: np.ndarray, shared: Optional[CsvTexts] = None) -> Coded:
    """A column of STRING_IDS ids (-1: none, shown as N/A); `shared`: `strings` and N/A as CsvTexts,
    made once for all the columns and blocks that show them."""
    if shared is not None:
        return Coded(name, string_codes(ids, strings), shared.texts, shared=shared)
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
