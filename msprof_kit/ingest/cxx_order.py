"""The order in which the reference's C++ path lists a device's communication ops.

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
against g++ on every rank of golden/910b_hccl_8ranks (tests/test_hccl_8ranks.py)."""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import numpy as np
import pandas as pd

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
    """std::hash<std::string> of libstdc++ on a 64-bit target (the UTF-8 bytes of `text`)."""
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


def unordered_map_order(keys: Sequence[str]) -> List[int]:
    """The positions of `keys` (distinct, in insertion order) in the iteration order of a
    libstdc++ std::unordered_map<std::string, T> they were inserted into one by one."""
    table = _Table([cxx_string_hash(k) for k in keys])
    grown = 0
    for node in range(len(keys)):
        if node + 1 > (BUCKET_COUNTS[grown - 1] if grown else 0):   # _M_need_rehash: past the load limit
            if grown < len(BUCKET_COUNTS):
                table.rehash(BUCKET_COUNTS[grown])
                grown += 1
        table.insert(node)
    return table.order()


def reference_op_order(keys: np.ndarray, task_order: np.ndarray, devices: np.ndarray) -> Dict[str, int]:
    """Each op key's place in the reference's op list: per device (ascending), the iteration order
    of the map its keys went into in the order of the device's task rows (`keys` and `devices`: one
    per task; `task_order`: the tasks' row order, the HCCL task table's)."""
    frame = pd.DataFrame({"key": keys, "device": devices}).iloc[np.argsort(task_order, kind="stable")]
    out: Dict[str, int] = {}
    for _device, of_device in frame.groupby("device", sort=True):
        firsts = [str(k) for k in pd.unique(of_device["key"].to_numpy()).tolist()]
        for node in unordered_map_order(firsts):
            out[firsts[node]] = len(out)
    return out
