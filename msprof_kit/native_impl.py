"""Rows of text from column arrays: the C extension (`msprof_kit._native`, native/_native.c) and
its pure-Python twin, behind one switch.

`format_rows(pieces, slots, n, sep)` renders n rows of a template made of literal byte pieces and
typed slots, and joins them with `sep`:

    row i = pieces[0] + cell(slots[0], i) + pieces[1] + ... + cell(slots[k-1], i) + pieces[k]

A `Slot` is (kind, values, arg, alt, alts):

* INT: int64 values as decimal text;
* FIXED: int64 counts of 10^-arg as decimal text with `arg` decimals (1234567, 3 → "1234.567";
  -1500, 3 → "-1.500"): exact, no float;
* TRIM: as FIXED with the fraction's trailing zeros dropped, one digit kept ("1234.5", "0.0"),
  which is Python's repr of k / 1000 for 3 decimals;
* FLOAT: float64 values as Python's repr(float);
* TEXT: int32/int64 codes into a `TextTable` of UTF-8 texts, copied as they are (JSON literals,
  CSV fields).

`alt` (None, or a uint8 array) replaces cells: where alt[i] = j > 0 the cell is alts[j - 1]
(N/A cells, a "0" on first rows). Every array holds exactly n items.

The exporters call `format_rows`, which is the C function when the extension is built (and
chosen), else `py_format_rows`. Both give the same bytes; tests run against each
(`use("c" | "python")`; the environment variable MSPROF_KIT_NATIVE=python|c chooses at start).
`slot_texts` gives one slot's cell texts the way the twin renders them, for the writers that need
texts rather than bytes (JSON summaries, terminal tables).
"""
from __future__ import annotations

import functools
import itertools
import json
import os
import struct
from collections import OrderedDict
from typing import Any, Callable, Iterable, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np
from numpy.dtypes import StringDType
from numpy.typing import ArrayLike

from .errors import MsprofKitError

try:  # typed by native/_native.pyi (mypy reads it as .typecheck/msprof_kit/_native.pyi)
    from . import _native
except ImportError:  # built without a compiler: the twin serves
    _native = None  # type: ignore[assignment]  # mypy's idiom for an optional module: None when absent

INT, FIXED, TRIM, FLOAT, TEXT = range(5)
KIND_NAMES = ("INT", "FIXED", "TRIM", "FLOAT", "TEXT")
MAX_DECIMALS = 18
MAX_ALTS = 16
IMPLEMENTATIONS = ("c", "python")
ENV = "MSPROF_KIT_NATIVE"


class NativeUnavailable(MsprofKitError):
    """The C implementation was asked for but the extension is not built."""


class TextTable(NamedTuple):
    """Texts as one UTF-8 blob: text c is blob[offsets[c]:offsets[c + 1]]."""
    blob: bytes
    offsets: np.ndarray  # int64, one more than the texts

    @property
    def size(self) -> int:
        """How many texts."""
        return len(self.offsets) - 1

    def texts(self) -> List[str]:
        """The texts, decoded."""
        off = self.offsets.tolist()
        return [self.blob[a:b].decode("utf-8", "surrogateescape") for a, b in zip(off, off[1:])]


def text_table(texts: Iterable[str]) -> TextTable:
    """A TextTable of these texts (UTF-8)."""
    encoded = [t.encode("utf-8") for t in texts]
    offsets: np.ndarray = np.zeros(len(encoded) + 1, dtype=np.int64)
    if encoded:
        np.cumsum([len(b) for b in encoded], out=offsets[1:])
    return TextTable(b"".join(encoded), offsets)


def csv_field(text: str) -> str:
    """One CSV field, quoted only when it must be (csv.QUOTE_MINIMAL's rule)."""
    if "," in text or '"' in text or "\n" in text or "\r" in text:
        return '"' + text.replace('"', '""') + '"'
    return text


def _all_str(name: str, texts: Sequence[str]) -> None:
    """The TypeError the C functions over texts raise for an item that is not a str."""
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"{name}: item {i} is not a str")


def _text_blob(texts: Iterable[str]) -> Tuple[bytes, bytes]:
    table = text_table(texts)
    return table.blob, table.offsets.tobytes()


def py_csv_table(texts: Sequence[str]) -> Tuple[bytes, bytes]:
    """The pure-Python twin of `_native.csv_table`: (blob, int64 offsets bytes) of each text as a
    CSV field, in UTF-8."""
    _all_str("csv_table", texts)
    return _text_blob(csv_field(t) for t in texts)


def py_json_table(texts: Sequence[str]) -> Tuple[bytes, bytes]:
    """The pure-Python twin of `_native.json_table`: (blob, int64 offsets bytes) of each text as a
    JSON string literal (json.dumps with ensure_ascii=False), in UTF-8."""
    _all_str("json_table", texts)
    return _text_blob(json.dumps(t, ensure_ascii=False) for t in texts)


def py_utf8_table(texts: Sequence[str]) -> Tuple[bytes, bytes]:
    """The pure-Python twin of `_native.utf8_table`: (blob, int64 offsets bytes) of the texts' UTF-8."""
    _all_str("utf8_table", texts)
    return _text_blob(texts)


def _table_by(name: str, twin: Callable[[Sequence[str]], Tuple[bytes, bytes]], texts: Sequence[str]) -> TextTable:
    """The TextTable of _native.`name` (or its twin, by the implementation in use) of `texts`."""
    if c_chosen():
        assert _native is not None
        blob, offsets = getattr(_native, name)(texts)
    else:
        blob, offsets = twin(texts)
    return TextTable(blob, np.frombuffer(offsets, dtype=np.int64))


def csv_table(texts: Sequence[str]) -> TextTable:
    """A TextTable of `texts` as CSV fields (quoted when they must be), by the implementation in use."""
    return _table_by("csv_table", py_csv_table, texts)


def json_table(texts: Sequence[str]) -> TextTable:
    """A TextTable of `texts` as JSON string literals, by the implementation in use."""
    return _table_by("json_table", py_json_table, texts)


def utf8_table(texts: Sequence[str]) -> TextTable:
    """A TextTable of `texts` as they are (UTF-8), by the implementation in use."""
    return _table_by("utf8_table", py_utf8_table, texts)


def py_json_list(texts: Sequence[str]) -> str:
    """The pure-Python twin of `_native.json_list`: json.dumps of the list of str `texts`
    (ensure_ascii=False)."""
    _all_str("json_list", texts)
    out = json.dumps(list(texts), ensure_ascii=False)
    out.encode("utf-8")  # (a lone surrogate refused, as the C function refuses it)
    return out


def json_list(texts: Sequence[str]) -> str:
    """The list of str `texts` in JSON (as json.dumps with ensure_ascii=False), by the implementation in use."""
    if c_chosen():
        assert _native is not None
        return _native.json_list(texts)
    return py_json_list(texts)


class Slot(NamedTuple):
    """One typed cell of a row template (see the module docstring)."""
    kind: int
    values: np.ndarray
    arg: Union[int, TextTable, None] = None
    alt: Optional[np.ndarray] = None  # uint8: 0 = the value, j = alts[j - 1]
    alts: Tuple[bytes, ...] = ()

    def take(self, rows: slice) -> "Slot":
        """The slot of a slice of its rows."""
        return self._replace(values=self.values[rows], alt=None if self.alt is None else self.alt[rows])


def _ints(values: ArrayLike) -> np.ndarray:
    return np.ascontiguousarray(values, dtype=np.int64)


def int_slot(values: ArrayLike) -> Slot:
    """Integers as decimal text."""
    return Slot(INT, _ints(values))


def fixed_slot(values: ArrayLike, decimals: int = 3) -> Slot:
    """Integer counts of 10^-decimals with `decimals` decimals."""
    return Slot(FIXED, _ints(values), decimals)


def trim_slot(values: ArrayLike, decimals: int = 3) -> Slot:
    """Integer counts of 10^-decimals, trailing zeros of the fraction dropped."""
    return Slot(TRIM, _ints(values), decimals)


def float_slot(values: ArrayLike) -> Slot:
    """Floats as Python's repr."""
    return Slot(FLOAT, np.ascontiguousarray(values, dtype=np.float64))


def text_slot(codes: ArrayLike, table: TextTable) -> Slot:
    """Texts of `table` by code (int32 codes as they are, other integers as int64)."""
    arr = np.asarray(codes)
    if arr.dtype != np.int32:
        arr = arr.astype(np.int64, copy=False)
    return Slot(TEXT, np.ascontiguousarray(arr), table)


def overlay(slot: Slot, where: np.ndarray, text: str) -> Slot:
    """The slot with `text` in the rows where `where` is true (over earlier overlays)."""
    where = np.asarray(where, dtype=bool)
    if not where.any():
        return slot
    encoded = text.encode("utf-8")
    alts = slot.alts if encoded in slot.alts else slot.alts + (encoded,)
    if len(alts) > MAX_ALTS:
        raise ValueError(f"at most {MAX_ALTS} alternative texts per slot")
    alt = np.zeros(len(slot.values), dtype=np.uint8) if slot.alt is None else slot.alt.copy()
    alt[where] = alts.index(encoded) + 1
    return slot._replace(alt=alt, alts=alts)


# ------------------------------------------------------------------------------------------------
# The twin: each slot's texts, vectorized with numpy, then one join per row

SD = StringDType()
SMALL = 100_000  # non-negative counts below this are printed from precomputed tables


@functools.lru_cache(maxsize=None)
def _small_texts(style: str, decimals: int) -> np.ndarray:
    """Texts of 0 .. SMALL-1 as 'int', 'fixed' or 'trim' with `decimals` (an object array)."""
    k = np.arange(SMALL, dtype=np.int64)
    texts = k.astype(SD) if style == "int" else _decimal_general(k, decimals, style == "trim")
    return np.asarray(texts, dtype=object)


@functools.lru_cache(maxsize=None)
def _fractions(decimals: int, trim: bool) -> np.ndarray:
    """Fraction texts of 0 .. 10^decimals - 1 (decimals ≤ 3): zero-padded, or trimmed as in repr
    (0 → '0', 500 → '5', 250 → '25', 1 → '001')."""
    texts = [f"{i:0{decimals}d}" for i in range(10 ** decimals)]
    if trim:
        texts = [t.rstrip("0") or "0" for t in texts]
    return np.array(texts, dtype=SD)


def _magnitude(k: np.ndarray) -> np.ndarray:
    """|k| as uint64 (exact for the most negative int64 too)."""
    mag = k.astype(np.uint64)
    neg = k < 0
    if neg.any():
        mag[neg] = (-(k[neg] + 1)).astype(np.uint64) + np.uint64(1)
    return mag


def _decimal_general(k: np.ndarray, decimals: int, trim: bool) -> np.ndarray:
    mag = _magnitude(k)
    scale = np.uint64(10 ** decimals)
    frac = mag % scale
    if decimals <= 3:
        tail = _fractions(decimals, trim)[frac.astype(np.int64)]
    else:  # numpy 2.0 cannot zfill StringDType
        tail = np.strings.zfill(frac.astype(str), decimals)
        if trim:
            tail = np.strings.rstrip(tail, "0")
            tail = np.where(tail == "", "0", tail)
        tail = tail.astype(SD)
    text = np.strings.add(np.strings.add((mag // scale).astype(SD), "."), tail)
    neg = k < 0
    return np.where(neg, np.strings.add("-", text), text) if neg.any() else text


def _by_table(k: np.ndarray, style: str, decimals: int, general: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """Texts of integer counts: small non-negative counts from the style's table, others by `general`."""
    small = (k >= 0) & (k < SMALL)
    if small.all():
        return _small_texts(style, decimals)[k]
    if not small.any():
        return general(k)
    out: np.ndarray = np.empty(len(k), dtype=object)
    out[small] = _small_texts(style, decimals)[k[small]]
    out[~small] = general(k[~small]).astype(object)
    return out


def int_texts(values: ArrayLike) -> np.ndarray:
    """Integers as decimal texts."""
    k = _ints(values)
    return _by_table(k, "int", 0, lambda v: v.astype(SD))


def decimal_texts(values: ArrayLike, decimals: int, trim: bool = False) -> np.ndarray:
    """Integer counts of 10^-decimals as decimal texts (FIXED, or TRIM with trim=True)."""
    if not 1 <= decimals <= MAX_DECIMALS:
        raise ValueError(f"decimals must be 1 to {MAX_DECIMALS}, not {decimals}")
    k = _ints(values)
    return _by_table(k, "trim" if trim else "fixed", decimals,
                     functools.partial(_decimal_general, decimals=decimals, trim=trim))


def float_texts(values: ArrayLike) -> np.ndarray:
    """Python's repr of each float."""
    x = np.asarray(values, dtype=np.float64)
    return np.array(list(map(repr, x.tolist())), dtype=object)


_DECODED: "OrderedDict[Tuple[int, int], Tuple[TextTable, np.ndarray]]" = OrderedDict()
DECODED_TABLES = 16  # tables whose texts the twin keeps decoded (a table is used chunk after chunk)


def _decoded(table: TextTable) -> np.ndarray:
    """The texts of a table as an object array, decoded once for the last few tables seen (the
    cache holds the table, so the ids of its blob and offsets name it while it is cached)."""
    key = (id(table.blob), id(table.offsets))
    hit = _DECODED.get(key)
    if hit is not None and hit[0].blob is table.blob and hit[0].offsets is table.offsets:
        _DECODED.move_to_end(key)
        return hit[1]
    texts = np.array(table.texts(), dtype=object)
    _DECODED[key] = (table, texts)
    while len(_DECODED) > DECODED_TABLES:
        _DECODED.popitem(last=False)
    return texts


def _code_texts(codes: np.ndarray, table: TextTable) -> np.ndarray:
    m = table.size
    if len(codes) and (int(codes.min()) < 0 or int(codes.max()) >= m):
        bad = int(codes[(codes < 0) | (codes >= m)][0])
        raise IndexError(f"format_rows: code {bad} is not below the {m} texts")
    return _decoded(table)[codes]


def _check(slot: Slot, n: Optional[int]) -> None:
    if n is not None and len(slot.values) != n:
        raise ValueError(f"format_rows: a {KIND_NAMES[slot.kind]} slot holds {len(slot.values)} values, not {n}")
    if slot.alt is not None and len(slot.alt) != len(slot.values):
        raise ValueError("format_rows: alt must hold as many items as the values")
    if slot.alt is not None and len(slot.alts) > MAX_ALTS:
        raise TypeError(f"format_rows: alts must be a tuple of at most {MAX_ALTS} bytes")
    if slot.kind in (FIXED, TRIM) and not (isinstance(slot.arg, int) and 1 <= slot.arg <= MAX_DECIMALS):
        raise ValueError(f"format_rows: decimals must be 1 to {MAX_DECIMALS}, not {slot.arg!r}")
    if slot.kind == TEXT and not isinstance(slot.arg, TextTable):
        raise TypeError("format_rows: a TEXT slot needs a TextTable")
    if slot.kind not in range(len(KIND_NAMES)):
        raise ValueError(f"format_rows: unknown kind {slot.kind}")
    wanted = {FLOAT: ("f8",), TEXT: ("i4", "i8")}.get(slot.kind, ("i8",))
    if np.asarray(slot.values).dtype.str[1:] not in wanted:
        raise TypeError(f"format_rows: a {KIND_NAMES[slot.kind]} slot needs {' or '.join(wanted)} values, "
                        f"not {np.asarray(slot.values).dtype}")


def slot_texts(slot: Slot, n: Optional[int] = None) -> np.ndarray:
    """The cell texts of a slot (an array of str), as the twin renders them."""
    _check(slot, n)
    values = slot.values
    if slot.kind == INT:
        texts = int_texts(values)
    elif slot.kind in (FIXED, TRIM):
        assert isinstance(slot.arg, int)
        texts = decimal_texts(values, slot.arg, trim=slot.kind == TRIM)
    elif slot.kind == FLOAT:
        texts = float_texts(values)
    else:
        assert isinstance(slot.arg, TextTable)
        texts = _code_texts(np.asarray(values), slot.arg)
    if slot.alt is None:
        return texts
    alt = np.asarray(slot.alt, dtype=np.int64)
    chosen = np.flatnonzero(alt)
    if not len(chosen):
        return texts
    if int(alt.max()) > len(slot.alts):
        raise IndexError(f"format_rows: alt {int(alt.max())} but only {len(slot.alts)} alts")
    out = np.asarray(texts, dtype=object).copy()
    alts = np.array([a.decode("utf-8", "surrogateescape") for a in slot.alts], dtype=object)
    out[chosen] = alts[alt[chosen] - 1]
    return out


def py_format_rows(pieces: Sequence[bytes], slots: Sequence[Slot], n: int, sep: bytes) -> bytes:
    """The pure-Python twin of `_native.format_rows` (same arguments, same bytes)."""
    if len(pieces) != len(slots) + 1:
        raise ValueError(f"format_rows: {len(slots)} slots need {len(slots) + 1} pieces, not {len(pieces)}")
    if n < 0:
        raise ValueError("format_rows: n must not be negative")
    if n == 0:
        return b""
    texts = [p.decode("utf-8", "surrogateescape") for p in pieces]
    parts: List[Iterable[str]] = [itertools.repeat(texts[0], n)]
    for slot, text in zip(slots, texts[1:]):
        parts += [slot_texts(slot, n).tolist(), itertools.repeat(text, n)]
    rows = map("".join, zip(*parts))
    return sep.decode("utf-8", "surrogateescape").join(rows).encode("utf-8", "surrogateescape")


# ------------------------------------------------------------------------------------------------
# sqlite table b-tree leaves (msprof_kit.store.pages writes them into database files)

LEAF_KINDS = b"irnkt"  # INT int64, REAL float64, NUMERIC float64, rowid alias (stored as NULL), TEXT
TextColumn = Tuple[Union[bytes, bytearray, memoryview], np.ndarray]  # 't': UTF-8 bytes, n + 1 int64 offsets


def varint(v: int) -> bytes:
    """sqlite's variable-length integer: 7 bits a byte, big-endian; a 9th byte holds 8 bits."""
    v &= (1 << 64) - 1
    if v > 0x00FFFFFFFFFFFFFF:
        out = [v & 0xFF]
        v >>= 8
        for _ in range(8):
            out.append((v & 0x7F) | 0x80)
            v >>= 7
        return bytes(reversed(out))
    out = [v & 0x7F]
    v >>= 7
    while v:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    return bytes(reversed(out))


def _int_cell(v: int) -> Tuple[int, bytes]:
    if v in (0, 1):
        return 8 + v, b""
    u = ~v if v < 0 else v
    for serial, size, limit in ((1, 1, 127), (2, 2, 32767), (3, 3, 8388607), (4, 4, 2147483647),
                                (5, 6, 0x7FFFFFFFFFFF)):
        if u <= limit:
            return serial, v.to_bytes(size, "big", signed=True)
    return 6, v.to_bytes(8, "big", signed=True)


def _leaf_value(kind: int, column: Any, i: int) -> Tuple[int, bytes]:
    if kind == ord("k"):
        return 0, b""
    assert column is not None
    if kind == ord("t"):
        blob, offsets = column
        text = bytes(blob[int(offsets[i]):int(offsets[i + 1])])
        return 13 + 2 * len(text), text
    if kind == ord("i"):
        return _int_cell(int(column[i]))
    r = float(column[i])
    if r != r:
        return 0, b""
    if kind == ord("n") and -9223372036854775808.0 < r < 9223372036854775808.0 and r == int(r) \
            and -(1 << 63) < int(r) < (1 << 63) - 1:
        return _int_cell(int(r))
    return 7, struct.pack(">d", r)


def py_table_leaves(kinds: bytes, columns: Sequence[Union[None, np.ndarray, TextColumn]], n: int, page_size: int,
                    rowids: Union[int, np.ndarray]) -> Tuple[bytes, bytes]:
    """The pure-Python twin of `_native.table_leaves` (same arguments, same bytes): n rows as sqlite
    table b-tree leaf pages, and the last rowid of each page as int64 bytes. A TEXT column ('t') is
    a pair (UTF-8 blob, n + 1 int64 offsets); no row may need an overflow page."""
    if len(kinds) != len(columns) or not 1 <= len(kinds) <= 100:
        raise ValueError(f"table_leaves: {len(kinds)} kinds, {len(columns)} columns (1 to 100, one kind each)")
    if n < 0 or page_size < 512 or page_size > 65536 or page_size & (page_size - 1):
        raise ValueError("table_leaves: n must not be negative; page_size a power of two from 512 to 65536")
    if 20 + 10 * len(kinds) > page_size - 43:
        raise ValueError("table_leaves: rows too wide for the page size")
    cols: List[Any] = []
    text_max = 0
    for j, (kind, column) in enumerate(zip(kinds, columns)):
        if kind not in LEAF_KINDS:
            raise ValueError(f"table_leaves: column {j}: kind {chr(kind)} is not one of i, r, n, k, t")
        if kind == ord("k"):
            cols.append(None)
            continue
        if kind == ord("t"):
            if not isinstance(column, tuple) or len(column) != 2:
                raise ValueError(f"table_leaves: column {j} must be a pair (blob, offsets)")
            blob, offsets = column
            off = np.asarray(offsets)
            if off.dtype.kind not in "iu" or off.dtype.itemsize != 8 or off.shape != (n + 1,):
                raise ValueError(f"table_leaves: column {j} must hold {n + 1} int64 offsets")
            off = off.astype(np.int64)
            bad = np.flatnonzero((off[:-1] < 0) | (off[1:] < off[:-1]) | (off[1:] > len(blob)))
            if len(bad):
                raise ValueError(f"table_leaves: column {j}: text {bad[0]} is not inside the blob")
            text_max += (int(np.diff(off).max()) if n else 0) + 2
            cols.append((blob, off))
            continue
        arr = np.asarray(column)
        ok = arr.dtype.kind in "iu" and arr.dtype.itemsize == 8 if kind == ord("i") else arr.dtype == np.float64
        if not ok or arr.shape != (n,):
            raise ValueError(f"table_leaves: column {j} must hold {n} "
                             f"{'int64' if kind == ord('i') else 'float64'} values")
        cols.append(arr)
    if 22 + 10 * len(kinds) + text_max > page_size - 35 - 8:
        raise ValueError("table_leaves: a row's texts are too long for the page size")
    if isinstance(rowids, (int, np.integer)):
        keys_of = [int(rowids) + i for i in range(n)]
    else:
        ids = np.asarray(rowids)
        if ids.dtype.kind not in "iu" or ids.dtype.itemsize != 8 or ids.shape != (n,):
            raise ValueError(f"table_leaves: rowids must hold {n} int64 values")
        keys_of = [int(x) for x in ids]
        for i in range(1, n):
            if keys_of[i] <= keys_of[i - 1]:
                raise ValueError(f"table_leaves: rowid {keys_of[i]} at row {i} does not follow {keys_of[i - 1]}")
    pages: List[bytes] = []
    keys: List[int] = []
    cells: List[bytes] = []
    used = 8

    def close() -> None:
        page = bytearray(page_size)
        top = page_size
        for c, cell in enumerate(cells):
            top -= len(cell)
            page[top:top + len(cell)] = cell
            page[8 + 2 * c:10 + 2 * c] = top.to_bytes(2, "big")
        page[0] = 13
        page[3:5] = len(cells).to_bytes(2, "big")
        page[5:7] = top.to_bytes(2, "big")
        pages.append(bytes(page))

    for i in range(n):
        values = [_leaf_value(kind, col, i) for kind, col in zip(kinds, cols)]
        types = b"".join(varint(s) for s, _ in values)
        header = len(types) + 1 if len(types) + 1 < 128 else len(types) + 2  # (counting its own varint)
        record = varint(header) + types + b"".join(b for _, b in values)
        cell = varint(len(record)) + varint(keys_of[i]) + record
        if not pages and not cells or used + 2 + len(cell) > page_size:
            if cells:
                close()
            cells, used = [], 8
            keys.append(0)
        cells.append(cell)
        used += 2 + len(cell)
        keys[-1] = keys_of[i]
    if cells:
        close()
    return b"".join(pages), np.asarray(keys, dtype=np.int64).tobytes()


# ------------------------------------------------------------------------------------------------
# The switch

FormatRows = Callable[[Sequence[bytes], Sequence[Slot], int, bytes], bytes]


def available() -> bool:
    """Whether the C extension is built."""
    return _native is not None


def _implementation(name: str) -> FormatRows:
    if name == "python":
        return py_format_rows
    if name != "c":
        raise ValueError(f"unknown implementation {name!r}; expected one of {IMPLEMENTATIONS}")
    if _native is None:
        raise NativeUnavailable(f"{ENV}=c, but the C extension msprof_kit._native is not built (reinstall with "
                                "a C compiler and the Python headers: pip install -e .)")
    fn: FormatRows = _native.format_rows
    return fn


_current = os.environ.get(ENV) or ("c" if available() else "python")
_format: Optional[FormatRows] = None


def use(name: str) -> str:
    """Choose the implementation ('c' or 'python'); returns the one chosen before."""
    global _current, _format
    fn = _implementation(name)
    previous = _current
    _current, _format = name, fn
    return previous


def current() -> str:
    """The implementation in use: 'c' or 'python'."""
    return _current


def c_chosen() -> bool:
    """Whether the C implementation is in use (NativeUnavailable if chosen and not built): the
    dispatch of C functions whose twins live next to their one user (parsers/hashdic.py's
    `dict_keys`, ingest/tensors.py's `gather_spans` and `spans_equal`)."""
    if _current == "c":
        _implementation("c")
        return True
    return False


def format_rows(pieces: Sequence[bytes], slots: Sequence[Slot], n: int, sep: bytes) -> bytes:
    """n rows of `pieces` and `slots` joined by `sep`, by the implementation in use."""
    global _format
    if _format is None:
        _format = _implementation(_current)
    return _format(pieces, slots, n, sep)


def table_leaves(kinds: bytes, columns: Sequence[Union[None, np.ndarray, TextColumn]], n: int, page_size: int,
                 rowids: Union[int, np.ndarray]) -> Tuple[bytes, bytes]:
    """sqlite table b-tree leaf pages of n rows (see `py_table_leaves`), by the implementation in use."""
    if _current == "c":
        _implementation("c")
        assert _native is not None
        pages, keys = _native.table_leaves(kinds, columns, n, page_size, rowids)
        return pages, keys
    return py_table_leaves(kinds, columns, n, page_size, rowids)


# ------------------------------------------------------------------------------------------------
# tensor_info texts (native/tensor_texts.c; parsers/host.py renders the ops with them)

TENSOR_WIDTH = 224  # bytes of a tensor_info record from tensor_num on: tensor_num, 5 x (type, format, dtype, 8 dims)
TENSOR_SLOTS = 5
SLOT_WORDS = 11  # uint32 words of a slot
UNDEFINED = 0xFFFFFFFF  # a ge::Format or ge::DataType code that reads UNDEFINED
FNV_OFFSET, FNV_PRIME = 0xCBF29CE484222325, 0x100000001B3
NameTable = Tuple[bytes, np.ndarray]  # (blob, int64 offsets): a TextTable as the C function takes it


def fnv_hashes(blob: bytes, offsets: np.ndarray) -> np.ndarray:
    """The 64-bit FNV-1a hash of each text blob[offsets[i]:offsets[i + 1]] (uint64; one numpy pass
    per byte position over the texts that long)."""
    off = np.asarray(offsets, dtype=np.int64)
    start, length = off[:-1], np.diff(off)
    data = np.frombuffer(blob, dtype=np.uint8)
    h = np.full(len(start), FNV_OFFSET, dtype=np.uint64)
    live = np.flatnonzero(length > 0)
    j = 0
    with np.errstate(over="ignore"):
        while len(live):
            h[live] = (h[live] ^ data[start[live] + j]) * np.uint64(FNV_PRIME)
            j += 1
            live = live[length[live] > j]
    return h


def _name(names: List[str], v: int) -> str:
    if v == UNDEFINED:
        return "UNDEFINED"
    return names[v] if v < len(names) and names[v] else str(v)


def _format_name(names: List[str], v: int) -> str:
    if v == UNDEFINED:
        return "UNDEFINED"
    sub = (v >> 8) & 0xFFFF
    return _name(names, v & 0xFF) + (f":{sub}" if sub else "")


def py_tensor_texts(payload: np.ndarray, order: np.ndarray, starts: np.ndarray, dtypes: NameTable,
                    formats: NameTable) -> Tuple[bytes, bytes, bytes]:
    """The pure-Python twin of `_native.tensor_texts` (native/tensor_texts.c says what it renders):
    (blob, int64 offsets bytes, uint64 FNV-1a hash bytes) of the six texts of each op."""
    raw = np.ascontiguousarray(payload).reshape(-1).view(np.uint8)
    ord_ = np.asarray(order, dtype=np.int64)
    st = np.asarray(starts, dtype=np.int64)
    n = len(raw) // TENSOR_WIDTH
    if len(raw) % TENSOR_WIDTH or len(st) < 1:
        raise ValueError("tensor_texts: payload must hold 224-byte records, order and starts int64 items, "
                         "starts at least one")
    if len(ord_) and (int(ord_.min()) < 0 or int(ord_.max()) >= n):
        raise ValueError("tensor_texts: order holds a number that is not a record")
    if int(st.min()) < 0 or int(st.max()) > len(ord_) or (np.diff(st) < 0).any():
        raise ValueError("tensor_texts: starts must ascend within order")
    words = raw.view("<u4").reshape(n, TENSOR_WIDTH // 4).tolist()
    dt, fm = TextTable(*dtypes).texts(), TextTable(*formats).texts()
    texts: List[str] = []
    bounds = st.tolist()
    members = ord_.tolist()
    for lo, hi in zip(bounds, bounds[1:]):
        tensors = [rec[1 + SLOT_WORDS * s: 1 + SLOT_WORDS * (s + 1)]
                   for rec in (words[r] for r in members[lo:hi]) for s in range(min(rec[0], TENSOR_SLOTS))]
        for output in (False, True):
            mine = [t for t in tensors if (t[0] != 0) == output]
            shapes = ";".join(",".join(map(str, itertools.takewhile(bool, t[3:]))) for t in mine)
            texts += [f'"{shapes}"' if shapes else "N/A",
                      ";".join(_name(dt, t[2]) for t in mine) or "N/A",
                      ";".join(_format_name(fm, t[1]) for t in mine) or "N/A"]
    table = text_table(texts)
    return table.blob, table.offsets.tobytes(), fnv_hashes(table.blob, table.offsets).tobytes()


def tensor_texts(payload: np.ndarray, order: ArrayLike, starts: ArrayLike, dtypes: TextTable,
                 formats: TextTable) -> Tuple[TextTable, np.ndarray]:
    """The six texts of each op of tensor_info records (`payload`: their bytes from tensor_num on,
    TENSOR_WIDTH a record; op g is records order[starts[g]:starts[g + 1]]; `dtypes`, `formats`: the
    names of the codes, empty for a code printed in decimal), by the implementation in use: (the
    texts, text 6g + c being op g's column c; their uint64 FNV-1a hashes)."""
    args = (np.ascontiguousarray(payload, dtype=np.uint8), np.ascontiguousarray(order, dtype=np.int64),
            np.ascontiguousarray(starts, dtype=np.int64), (dtypes.blob, dtypes.offsets),
            (formats.blob, formats.offsets))
    if _current == "c":
        _implementation("c")
        assert _native is not None
        blob, offsets, hashes = _native.tensor_texts(*args)
    else:
        blob, offsets, hashes = py_tensor_texts(*args)
    return TextTable(blob, np.frombuffer(offsets, dtype=np.int64)), np.frombuffer(hashes, dtype=np.uint64)
