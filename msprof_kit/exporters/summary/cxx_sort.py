"""The order std::sort of libstdc++ (GCC 12) leaves rows in, ties included.

The reference's C++ op_summary sorts its rows with std::sort (op_summary_assembler.cpp,
CalculateWaitTime), which is not stable: rows with equal keys come out in an order that depends on
the whole input. std::sort is an introsort: while a range holds more than 16 elements it moves the
median of (second, middle, last) to the front, partitions the rest around it (Hoare: the left scan
stops at elements not below the pivot, the right scan at elements not above it, the pairs swap),
recurses into the right part and loops on the left; a range 2·log2(n) partitions deep is heap
sorted instead; a final insertion sort (stable) finishes. So the result is the stable sort of the
array the partitions leave, which `cxx_sort_order` computes level by level, every range of a level
at once with numpy (the k-th left stop of a range swaps with its k-th right stop while it lies left
of it). Checked against g++ (tests/test_hccl_8ranks.py)."""
from __future__ import annotations

from typing import List

import numpy as np

THRESHOLD = 16  # libstdc++'s _S_threshold


def _median_to_first(perm: np.ndarray, key: np.ndarray, first: np.ndarray, last: np.ndarray) -> None:
    """__move_median_to_first(first, first + 1, mid, last - 1) of every range, in place."""
    a: np.ndarray = first + 1
    b: np.ndarray = first + (last - first) // 2
    c: np.ndarray = last - 1
    ka, kb, kc = key[perm[a]], key[perm[b]], key[perm[c]]
    pick = np.where(ka < kb, np.where(kb < kc, b, np.where(ka < kc, c, a)),
                    np.where(ka < kc, a, np.where(kb < kc, c, b)))
    head = perm[first].copy()
    perm[first] = perm[pick]
    perm[pick] = head


def _partition(perm: np.ndarray, key: np.ndarray, first: np.ndarray, last: np.ndarray) -> np.ndarray:
    """__unguarded_partition(first + 1, last, pivot = first) of every range, in place; the cuts."""
    lengths = last - first
    seg: np.ndarray = np.repeat(np.arange(len(first)), lengths)
    pos = np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths) + np.repeat(first, lengths)
    pivot = key[perm[first]][seg]
    values = key[perm[pos]]
    left = (values >= pivot) & (pos > first[seg])        # where the left scan stops, ascending
    right = values <= pivot                               # where the right scan stops, from the end
    left_at, right_at = pos[left], pos[right][::-1]
    left_seg, right_seg = seg[left], seg[right][::-1]
    n_left = np.bincount(left_seg, minlength=len(first))
    n_right = np.bincount(right_seg, minlength=len(first))
    left_start = np.cumsum(n_left) - n_left
    # the right stops of range s sit in right_at (ranges in reverse order) from right_start[s]
    right_start = np.cumsum(n_right[::-1])[::-1] - n_right
    pairs = np.minimum(n_left, n_right)
    k = np.arange(int(pairs.sum())) - np.repeat(np.cumsum(pairs) - pairs, pairs)
    pair_seg: np.ndarray = np.repeat(np.arange(len(first)), pairs)
    lpos = left_at[left_start[pair_seg] + k]
    rpos = right_at[right_start[pair_seg] + k]
    crossing = lpos < rpos
    swaps = np.bincount(pair_seg[crossing], minlength=len(first))  # crossing is true, then false, per range
    keep_l, keep_r = lpos[crossing], rpos[crossing]
    moved = perm[keep_l].copy()
    perm[keep_l] = perm[keep_r]
    perm[keep_r] = moved
    # the cut: the left scan's stop after the last swap, or the last swapped right stop if sooner
    next_left = np.where(swaps < n_left, left_at[np.minimum(left_start + swaps, len(left_at) - 1)],
                         np.iinfo(np.int64).max)
    last_right = np.where(swaps > 0, right_at[np.minimum(right_start + swaps - 1, len(right_at) - 1)],
                          np.iinfo(np.int64).max)
    return np.minimum(next_left, last_right)


def _heap_sort(perm: np.ndarray, key: np.ndarray, first: int, last: int) -> None:
    """std::__partial_sort(first, last, last): make_heap then sort_heap (a rare fallback)."""
    view: List[int] = perm[first:last].tolist()
    keys = key

    def adjust(hole: int, length: int, value: int) -> None:
        top, child = hole, hole
        while child < (length - 1) // 2:
            child = 2 * (child + 1)
            if keys[view[child]] < keys[view[child - 1]]:
                child -= 1
            view[hole] = view[child]
            hole = child
        if (length & 1) == 0 and child == (length - 2) // 2:
            child = 2 * (child + 1)
            view[hole] = view[child - 1]
            hole = child - 1
        parent = (hole - 1) // 2
        while hole > top and keys[view[parent]] < keys[value]:
            view[hole] = view[parent]
            hole = parent
            parent = (hole - 1) // 2
        view[hole] = value

    length = len(view)
    if length >= 2:
        parent = (length - 2) // 2
        while True:
            adjust(parent, length, view[parent])
            if parent == 0:
                break
            parent -= 1
    end = length
    while end > 1:
        end -= 1
        value = view[end]
        view[end] = view[0]
        adjust(0, end, value)
    perm[first:last] = view


def cxx_sort_order(key: np.ndarray) -> np.ndarray:
    """The input positions of `key` (integers, in the order std::sort receives them) in the order
    std::sort(begin, end, a < b) leaves them."""
    n = len(key)
    perm = np.arange(n, dtype=np.int64)
    key = np.asarray(key, dtype=np.int64)
    if n > 1:
        first: np.ndarray = np.zeros(1, dtype=np.int64)
        last: np.ndarray = np.full(1, n, dtype=np.int64)
        depth: np.ndarray = np.full(1, 2 * (n.bit_length() - 1), dtype=np.int64)
        while len(first):
            big = last - first > THRESHOLD
            first, last, depth = first[big], last[big], depth[big]
            spent = depth == 0
            for lo, hi in zip(first[spent].tolist(), last[spent].tolist()):
                _heap_sort(perm, key, lo, hi)
            first, last, depth = first[~spent], last[~spent], depth[~spent] - 1
            if not len(first):
                break
            _median_to_first(perm, key, first, last)
            cut = _partition(perm, key, first, last)
            first, last, depth = np.concatenate([cut, first]), np.concatenate([last, cut]), np.concatenate([depth, depth])
    return perm[np.argsort(key[perm], kind="stable")]
