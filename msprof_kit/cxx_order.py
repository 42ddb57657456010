"""Orders that the reference's C++ path leaves to libstdc++ (GCC 12): the iteration order of a
std::unordered_map<std::string, T> and the result of std::sort, ties included.

The op list.

communication_info_processor.cpp (FormatData) gathers the ops of one device in a
`std::unordered_map<std::string, CommunicationOpData>` keyed on `<op name>_<raw group hash>_<device>`,
inserting the keys in the order of the device's HCCL task rows, and then appends them to its op list
by iterating that map. The op list's order is the opId order of the reference's msprof.db and the
order in which op_summary hands the ops to its (unstable) sort, so it decides how op_summary orders
ops that start together (docs/exports.md, "Communication ops that start together").

The order of a libstdc++ (GCC 12) unordered_map is a fact of its implementation, reproduced here:
the key's hash is `std::_Hash_bytes(data, size, 0xc70f6907)` (a 64-bit Murmur variant); a node goes
to the front of its bucket, a node of an empty bucket to the front of the whole list; the table
starts with 13 buckets and, when an insertion would pass one element per bucket, rehashes into the
next count of BUCKET_COUNTS, walking the old list and linking each node the same way. Checked
against g++ on every rank of golden/910b_hccl_8ranks (tests/test_hccl_8ranks.py).

std::sort. The reference's C++ op_summary sorts its rows with std::sort (op_summary_assembler.cpp,
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

from typing import List, Optional, Sequence

import numpy as np

_MASK = (1 << 64) - 1
_MUL = (0xC6A4A793 << 32) + 0x5BD1E995
_SEED = 0xC70F6907
# libstdc++'s bucket counts as a map grows one insertion at a time (max load factor 1):
# _Prime_rehash_policy::_M_next_bkt(2 * count) from 13 on
BUCKET_COUNTS = (13, 29, 59, 127, 257, 541, 1109, 2357, 5087, 10273, 20753, 42043, 85229, 172933, 351061, 712697,
                 1447153, 2938679, 5967347, 12117689, 24607243, 49969847, 101473717, 206062531, 418451333,
                 849749479, 1725587117)
_NIL = -2     # the end of the list
_BEFORE = -1  # the list head (_M_before_begin)


def _shift_mix(value: int) -> int:
    return value ^ (value >> 47)


def cxx_string_hash(text: str) -> int:
    """std::hash<std::string> of libstdc++ on a 64-bit target (the UTF-8 bytes of `text`); one key
    at a time, the definition `cxx_string_hashes` vectorises."""
    data = text.encode("utf-8")
    size = len(data)
    aligned = size & ~7
    value = (_SEED ^ (size * _MUL)) & _MASK
    for at in range(0, aligned, 8):
        word = int.from_bytes(data[at:at + 8], "little")
        value ^= (_shift_mix((word * _MUL) & _MASK) * _MUL) & _MASK
        value = (value * _MUL) & _MASK
    if size & 7:
        value ^= int.from_bytes(data[aligned:], "little")
        value = (value * _MUL) & _MASK
    value = (_shift_mix(value) * _MUL) & _MASK
    return _shift_mix(value)


def cxx_string_hashes(texts: Sequence[str]) -> np.ndarray:
    """`cxx_string_hash` of each text (uint64), the keys of one byte length at a time with numpy
    (uint64 arithmetic wraps modulo 2**64, as the C++ does)."""
    data = [t.encode("utf-8") for t in texts]
    sizes = np.fromiter((len(d) for d in data), dtype=np.int64, count=len(data))
    out: np.ndarray = np.zeros(len(data), dtype=np.uint64)
    mul, shift = np.uint64(_MUL), np.uint64(47)
    with np.errstate(over="ignore"):
        for size in np.unique(sizes).tolist():
            rows = np.flatnonzero(sizes == size)
            raw = np.frombuffer(b"".join(data[i] for i in rows.tolist()), dtype=np.uint8)
            raw = raw.reshape(len(rows), size)
            aligned = size & ~7
            value: np.ndarray = np.full(len(rows), (_SEED ^ (size * _MUL)) & _MASK, dtype=np.uint64)
            if aligned:
                words = np.ascontiguousarray(raw[:, :aligned]).view("<u8").reshape(len(rows), aligned // 8)
                for col in range(aligned // 8):
                    word = words[:, col].astype(np.uint64) * mul
                    value ^= (word ^ (word >> shift)) * mul
                    value *= mul
            if size & 7:
                tail = np.zeros((len(rows), 8), dtype=np.uint8)
                tail[:, :size - aligned] = raw[:, aligned:]
                value ^= tail.view("<u8").reshape(len(rows)).astype(np.uint64)
                value *= mul
            value = (value ^ (value >> shift)) * mul
            out[rows] = value ^ (value >> shift)
    return out


def unordered_map_order(keys: Sequence[str]) -> List[int]:
    """The positions of `keys` (distinct, in insertion order) in the iteration order of a
    libstdc++ std::unordered_map<std::string, T> they were inserted into one by one.

    Computed per rehash rather than per insertion: a node goes to the front of its bucket's run
    of nodes, a node of an empty bucket (a new run) to the front of the list, and a rehash walks
    the list, linking each node the same way. So after the nodes arrive in some order (the list
    the rehash walks, then the insertions up to the next rehash) the list holds the buckets' runs
    latest-opened first, each run's nodes latest first: one sort per rehash."""
    n = len(keys)
    if not n:
        return []
    hashes = cxx_string_hashes(keys)
    arrived: np.ndarray = np.zeros(0, dtype=np.int64)  # the list, as the last rehash left it and insertions since
    grown = 0
    limit = 0
    while grown < len(BUCKET_COUNTS):
        count = BUCKET_COUNTS[grown]
        upto = min(n, count)  # the insertions before the next rehash
        # the rehash into `count` buckets walks the current list, then the nodes up to `upto` arrive
        arrived = np.concatenate([arrived, np.arange(limit, upto, dtype=np.int64)])
        limit = upto
        arrived = _relinked(arrived, (hashes[arrived] % np.uint64(count)).astype(np.int64))
        grown += 1
        if limit >= n:
            return arrived.tolist()
    return _unordered_map_order_loop(keys)


def _relinked(arrived: np.ndarray, bucket: np.ndarray) -> np.ndarray:
    """The list after nodes arrive in `arrived` order into buckets `bucket` (each linked at the front
    of its bucket's run, a new run at the front of the list)."""
    at = np.arange(len(arrived), dtype=np.int64)
    first: np.ndarray = np.full(int(bucket.max()) + 1 if len(bucket) else 0, len(arrived), dtype=np.int64)
    np.minimum.at(first, bucket, at)
    order = np.lexsort((-at, -first[bucket]))
    return arrived[order]


class _Table:
    """The node list and buckets of a libstdc++ unordered_map with unique keys."""

    def __init__(self, hashes: Sequence[int]) -> None:
        self.hashes = hashes
        self.nxt: List[int] = [_NIL] * len(hashes)
        self.head = _NIL
        self.count = 1
        self.buckets: List[Optional[int]] = [None]

    def _after(self, node: int) -> int:
        return self.head if node == _BEFORE else self.nxt[node]

    def _link_after(self, node: int, new: int) -> None:
        if node == _BEFORE:
            self.head = new
        else:
            self.nxt[node] = new

    def rehash(self, count: int) -> None:
        """_M_rehash_aux for unique keys."""
        buckets: List[Optional[int]] = [None] * count
        node, self.head, first_bucket = self.head, _NIL, 0
        while node != _NIL:
            following = self.nxt[node]
            bucket = self.hashes[node] % count
            before = buckets[bucket]
            if before is None:
                self.nxt[node] = self.head
                self.head = node
                buckets[bucket] = _BEFORE
                if self.nxt[node] != _NIL:
                    buckets[first_bucket] = node
                first_bucket = bucket
            else:
                self.nxt[node] = self._after(before)
                self._link_after(before, node)
            node = following
        self.buckets, self.count = buckets, count

    def insert(self, node: int) -> None:
        """_M_insert_bucket_begin of a new node (its key not in the table yet)."""
        bucket = self.hashes[node] % self.count
        before = self.buckets[bucket]
        if before is not None:
            self.nxt[node] = self._after(before)
            self._link_after(before, node)
            return
        self.nxt[node] = self.head
        self.head = node
        if self.nxt[node] != _NIL:
            self.buckets[self.hashes[self.nxt[node]] % self.count] = node
        self.buckets[bucket] = _BEFORE

    def order(self) -> List[int]:
        """The nodes in iteration order."""
        out: List[int] = []
        node = self.head
        while node != _NIL:
            out.append(node)
            node = self.nxt[node]
        return out


def _unordered_map_order_loop(keys: Sequence[str]) -> List[int]:
    """`unordered_map_order` one insertion at a time, as libstdc++ does it (the definition; used
    past the last bucket count and by the tests)."""
    table = _Table([cxx_string_hash(k) for k in keys])
    grown = 0
    for node in range(len(keys)):
        if node + 1 > (BUCKET_COUNTS[grown - 1] if grown else 0):   # _M_need_rehash: past the load limit
            if grown < len(BUCKET_COUNTS):
                table.rehash(BUCKET_COUNTS[grown])
                grown += 1
        table.insert(node)
    return table.order()


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
