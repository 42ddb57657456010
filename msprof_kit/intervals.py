"""Unions and gaps of time intervals (ns, int64), vectorized: the overlap analysis of the ingest
(OVERLAP_ANALYSIS) and the timeline's free-time layer share them."""
from __future__ import annotations

from typing import Tuple

import numpy as np


def union_intervals(start: np.ndarray, end: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Merge intervals (touching ones merge): sorted disjoint (start, end)."""
    if len(start) == 0:
        return start, end
    order = np.lexsort((end, start))
    s, e = start[order], end[order]
    run_end = np.maximum.accumulate(e)
    new: np.ndarray = np.ones(len(s), dtype=bool)  # where a run of overlapping intervals starts
    new[1:] = s[1:] > run_end[:-1]
    group = np.cumsum(new) - 1
    out_s = s[new]
    out_e = np.zeros(len(out_s), dtype=e.dtype)
    np.maximum.at(out_e, group, e)
    return out_s, out_e


def interval_gaps(lo: int, hi: int, start: np.ndarray, end: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """[lo, hi] minus the union of the (sorted, disjoint) intervals."""
    bounds_s = np.concatenate([[lo], end])
    bounds_e = np.concatenate([start, [hi]])
    bounds_s = np.maximum(bounds_s, lo)
    bounds_e = np.minimum(bounds_e, hi)
    keep = bounds_e > bounds_s
    return bounds_s[keep], bounds_e[keep]


def subtract_intervals(a_start: np.ndarray, a_end: np.ndarray, b_start: np.ndarray, b_end: np.ndarray
                       ) -> Tuple[np.ndarray, np.ndarray]:
    """The (sorted, disjoint) intervals A minus the (sorted, disjoint) intervals B."""
    a_start, a_end = np.asarray(a_start, np.int64), np.asarray(a_end, np.int64)
    gap_s = np.concatenate([[np.iinfo(np.int64).min], np.asarray(b_end, np.int64)])
    gap_e = np.concatenate([np.asarray(b_start, np.int64), [np.iinfo(np.int64).max]])
    first = np.asarray(np.searchsorted(gap_e, a_start, side="right"), dtype=np.int64)  # the first gap ending after each A starts
    stop = np.asarray(np.searchsorted(gap_s, a_end, side="left"), dtype=np.int64)  # gaps starting before each A ends
    counts = np.maximum(stop - first, 0)
    which: np.ndarray = np.repeat(np.arange(len(a_start)), counts)
    offsets: np.ndarray = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    gap = first[which] + (np.arange(len(which)) - offsets[which])
    s = np.maximum(a_start[which], gap_s[gap])
    e = np.minimum(a_end[which], gap_e[gap])
    keep = e > s
    return s[keep], e[keep]
