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
