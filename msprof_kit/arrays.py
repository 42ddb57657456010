"""Set operations on large integer arrays, by sorting.

numpy 2.4's `np.unique` without `return_inverse` goes through a hash table, and `np.isin` falls
back to it when the values span a wide range: on ten million distinct values each takes about
10 s here, where sorting takes 0.2 s (docs/benchmarks.md, issue 6 part 4). Every large array of
ids (connection ids, task ids) goes through these instead.
"""
from __future__ import annotations

import numpy as np


def distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values, ascending (as np.unique gives them)."""
    ordered = np.sort(np.asarray(values), kind="stable")
    if len(ordered) < 2:
        return ordered
    keep = np.empty(len(ordered), dtype=bool)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]


def isin(values: np.ndarray, table: np.ndarray) -> np.ndarray:
    """Which values are in `table` (as np.isin says)."""
    values = np.asarray(values)
    table = np.sort(np.asarray(table).reshape(-1))
    if not len(table) or not len(values):
        return np.zeros(values.shape, dtype=bool)
    pos = np.minimum(np.searchsorted(table, values), len(table) - 1)
    return table[pos] == values
