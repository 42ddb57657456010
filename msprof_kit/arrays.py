"""Set and search operations on large integer arrays, by sorting.

numpy 2.4's `np.unique` without `return_inverse` goes through a hash table, and `np.isin` falls
back to it when the values span a wide range: on ten million distinct values each takes about
10 s here, where sorting takes 0.2 s (docs/benchmarks.md, issue 6 part 4). Every large array of
ids (connection ids, task ids, TASK rows) goes through these instead.
"""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple, cast

import numpy as np


def ascending(values: np.ndarray) -> bool:
    """Whether the values never decrease."""
    return bool(len(values) < 2 or (values[1:] >= values[:-1]).all())


def _run_starts(ordered: np.ndarray) -> np.ndarray:
    """Where each run of equal values of an ordered array starts."""
    starts: np.ndarray = np.empty(len(ordered), dtype=bool)
    if len(ordered):
        starts[0] = True
        np.not_equal(ordered[1:], ordered[:-1], out=starts[1:])
    return starts


def distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values, ascending (as np.unique gives them)."""
    ordered = np.sort(np.asarray(values), kind="stable")
    return ordered[_run_starts(ordered)]


def run_ranks(ordered: np.ndarray) -> np.ndarray:
    """Each element's position within its run of equal values (of an ordered array: a group's
    cumulative count)."""
    at = np.arange(len(ordered))
    return at - np.maximum.accumulate(np.where(_run_starts(ordered), at, 0))


def last_seen(values: np.ndarray) -> np.ndarray:
    """Whether each value is the last of its kind in the array."""
    return first_seen(np.asarray(values)[::-1])[::-1]


def first_seen(values: np.ndarray) -> np.ndarray:
    """Whether each value is the first of its kind in the array (as ~pd.Series.duplicated() says),
    by sorting (ten million ids hashed take several times their size)."""
    values = np.asarray(values)
    if ascending(values):
        return _run_starts(values)
    order = np.argsort(values, kind="stable")
    starts = _run_starts(values[order])
    first: np.ndarray = np.zeros(len(values), dtype=bool)
    first[order[starts]] = True
    return first


SEARCH_BLOCK = 1 << 20  # values searched at a time (the positions of a block are int64)


def _positions(found: object) -> np.ndarray:
    """np.searchsorted's answer for an array of values: an array of positions. (numpy's stubs pick
    the overload of a single value when the values' type is not known precisely.)"""
    return cast(np.ndarray, found)


def in_sorted(values: np.ndarray, table: np.ndarray) -> np.ndarray:
    """Which values are in `table` (ascending)."""
    values = np.asarray(values)
    out: np.ndarray = np.zeros(values.shape, dtype=bool)
    if not len(table) or not len(values):
        return out
    for lo in range(0, len(values), SEARCH_BLOCK):
        part = values[lo:lo + SEARCH_BLOCK]
        pos = np.searchsorted(table, part)
        np.minimum(pos, len(table) - 1, out=pos)
        out[lo:lo + SEARCH_BLOCK] = table[pos] == part
    return out


def isin(values: np.ndarray, table: np.ndarray) -> np.ndarray:
    """Which values are in `table` (as np.isin says)."""
    return in_sorted(values, np.sort(np.asarray(table).reshape(-1)))


class SortedKeys:
    """Integer keys sorted once (stably, and only when they are not in order already), to find
    many values in them."""

    def __init__(self, keys: np.ndarray) -> None:
        keys = np.asarray(keys, dtype=np.int64)
        self.order: Optional[np.ndarray] = None if ascending(keys) else np.argsort(keys, kind="stable")
        self.keys = keys if self.order is None else keys[self.order]

    def find(self, wanted: np.ndarray) -> np.ndarray:
        """For each wanted value, the position in the keys as given of the first one equal to it
        (-1: none)."""
        wanted = np.asarray(wanted, dtype=np.int64)
        out: np.ndarray = np.full(len(wanted), -1, dtype=np.int64)
        if not len(self.keys):
            return out
        for lo in range(0, len(wanted), SEARCH_BLOCK):
            part = wanted[lo:lo + SEARCH_BLOCK]
            pos = _positions(np.searchsorted(self.keys, part))
            np.minimum(pos, len(self.keys) - 1, out=pos)
            found = self.keys[pos] == part
            if self.order is not None:
                pos = self.order[pos]
            pos[~found] = -1
            out[lo:lo + SEARCH_BLOCK] = pos
        return out


def packed_key(keys: Sequence[np.ndarray]) -> Optional[np.ndarray]:
    """One int64 per row of several integer key columns, equal where all of them are (each column
    shifted to start at 0 and given the bits its range needs), or None when they need more than
    63 bits together."""
    code: np.ndarray = np.zeros(len(keys[0]), dtype=np.int64)
    bits = 0
    for key in keys:
        if not len(key):
            continue
        lo, hi = int(key.min()), int(key.max())
        width = (hi - lo).bit_length()
        bits += width
        if bits > 63:
            return None
        code <<= width
        code |= key.astype(np.int64) - lo
    return code


def group_ids(keys: Sequence[np.ndarray]) -> np.ndarray:
    """A dense group number per row of several integer key columns (equal keys, equal numbers)."""
    code: np.ndarray = np.zeros(len(keys[0]), dtype=np.int64)
    width = 1
    for key in keys:
        values, inverse = np.unique(key, return_inverse=True)
        if width * len(values) >= 1 << 62:  # renumber the groups so far densely first
            _, code = np.unique(code, return_inverse=True)
            code, width = code.reshape(-1).astype(np.int64), int(code.max()) + 1
        code = code * len(values) + inverse.reshape(-1)
        width *= len(values)
    return code


def key_codes(keys: Sequence[np.ndarray]) -> np.ndarray:
    """One int64 per row of several integer key columns, equal where all of them are: the packed
    key, or dense group numbers when the columns need more than 63 bits together."""
    key = packed_key(keys)
    return key if key is not None else group_ids(keys)


def numbered_by_first_row(keys: Sequence[np.ndarray]) -> np.ndarray:
    """A group number per row of several integer key columns, the groups numbered 0, 1, ... in the
    order of their first rows (what pandas' groupby(sort=False).ngroup() gives, which hashes the
    rows: at twenty million rows it takes four times as long as sorting them)."""
    key = key_codes(keys)
    order = np.argsort(key, kind="stable")
    starts = _run_starts(key[order])
    first_rows = order[starts]  # a stable sort puts each group's first row at its start
    rank: np.ndarray = np.empty(len(first_rows), dtype=np.int64)
    rank[np.argsort(first_rows)] = np.arange(len(first_rows), dtype=np.int64)
    out: np.ndarray = np.empty(len(key), dtype=np.int64)
    out[order] = rank[np.cumsum(starts) - 1]
    return out


def in_marked_groups(keys: Sequence[np.ndarray], marked: np.ndarray) -> np.ndarray:
    """Whether each row's group (rows equal in all the integer key columns) holds a marked row."""
    key = key_codes(keys)
    return in_sorted(key, distinct(key[marked]))


class Numbering:
    """Integer keys numbered 0, 1, ... in the order they are first seen, across many calls of
    `number` (ids given a window of rows at a time). The keys seen are kept as sorted levels of
    geometrically growing sizes, merged as they fill: lookups search a few levels, and each key
    is moved O(log n) times in all."""

    def __init__(self) -> None:
        self.levels: List[Tuple[np.ndarray, np.ndarray]] = []  # (sorted keys, their numbers)
        self.count = 0

    def find(self, keys: np.ndarray) -> np.ndarray:
        """The number of each key, -1 for keys never seen."""
        keys = np.asarray(keys, dtype=np.int64)
        out: np.ndarray = np.full(len(keys), -1, dtype=np.int64)
        if not len(keys) or not self.levels:
            return out
        order = None if ascending(keys) else np.argsort(keys, kind="stable")
        wanted = keys if order is None else keys[order]
        got: np.ndarray = np.full(len(keys), -1, dtype=np.int64)
        for level, numbers in self.levels:
            pos = _positions(np.searchsorted(level, wanted))
            np.minimum(pos, len(level) - 1, out=pos)
            hit = level[pos] == wanted
            got[hit] = numbers[pos[hit]]
        if order is None:
            return got
        out[order] = got
        return out

    def number(self, keys: np.ndarray) -> np.ndarray:
        """The numbers of `keys`; keys not seen before get the next numbers, in the order of their
        first rows."""
        keys = np.asarray(keys, dtype=np.int64)
        out = self.find(keys)
        new = np.flatnonzero(out < 0)
        if not len(new):
            return out
        fresh_keys = keys[new]
        first = first_seen(fresh_keys)
        fresh = fresh_keys[first]
        numbers = np.arange(self.count, self.count + len(fresh), dtype=np.int64)
        self.count += len(fresh)
        order = np.argsort(fresh, kind="stable")
        fresh, numbers = fresh[order], numbers[order]
        out[new] = numbers[np.searchsorted(fresh, fresh_keys)]
        self.levels.append((fresh, numbers.astype(self._number_type())))
        while len(self.levels) > 1 and len(self.levels[-2][0]) <= 2 * len(self.levels[-1][0]):
            b, a = self.levels.pop(), self.levels.pop()
            self.levels.append(_merged(a, b))
        return out

    def _number_type(self) -> type:
        return np.int32 if self.count < 1 << 31 else np.int64


def _merged(a: Tuple[np.ndarray, np.ndarray], b: Tuple[np.ndarray, np.ndarray]) -> Tuple[np.ndarray, np.ndarray]:
    """Two levels (sorted keys without a key in common, their numbers) as one, without sorting:
    b's keys are placed by binary search, a's fill the other places in order."""
    (ak, an), (bk, bn) = a, b
    n = len(ak) + len(bk)
    at = np.searchsorted(ak, bk) + np.arange(len(bk))
    keys = np.empty(n, dtype=ak.dtype)
    numbers = np.empty(n, dtype=np.result_type(an, bn))
    from_a: np.ndarray = np.ones(n, dtype=bool)
    from_a[at] = False
    keys[from_a] = ak
    numbers[from_a] = an
    keys[at] = bk
    numbers[at] = bn
    return keys, numbers


# ------------------------------------------------------------------------------------------------
# Rounding as the reference prints numbers

def near_half(scaled: np.ndarray) -> np.ndarray:
    """Where x · 10^d is too close to a half for float64 to decide its rounding."""
    frac = scaled - np.floor(scaled)
    return np.abs(frac - 0.5) <= np.maximum(1e-9, np.abs(scaled) * 1e-14)


def scaled_exact(x: np.ndarray, decimals: int) -> np.ndarray:
    """x · 10^decimals in 80-bit long double: exact for decimals ≤ 3 (53 + 10 bits)."""
    return x.astype(np.longdouble) * (np.longdouble(10) ** decimals)


def py_round_units(x: np.ndarray, decimals: int) -> np.ndarray:
    """Python's round(x, decimals) in integer units of 10^-decimals: correctly rounded from the
    exact binary value, halves to even (numpy's np.round rounds x · 10^d to double first)."""
    x = np.asarray(x, dtype=np.float64)
    scaled = x * 10.0 ** decimals
    k = np.rint(scaled)
    near = near_half(scaled)
    if near.any():
        k[near] = np.rint(scaled_exact(x[near], decimals)).astype(np.float64)
    return k.astype(np.int64)
