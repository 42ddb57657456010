"""Record arrays from the record tables of msprof_kit.parsers.records: bit fields, host time
stamps, API and compact record headers, per-file streams merged in time order, slice files."""
from __future__ import annotations

import os
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from msprof_kit.parsers import records

from .conventions import HOST_TICK_NS

#: The record kinds a stream may hold: the registry's and the communication records (not in it).
KINDS = (*records.REGISTRY.values(), records.HCCL_OP_INFO, records.HCCL_INFO)


def bits(record: records.Record, host: str, **parts: Union[int, np.ndarray]) -> np.ndarray:
    """Vectorized `records.pack_bits`: compose field `host` from its bit fields (LSB first)."""
    value: np.ndarray = np.zeros(1, dtype=np.uint64)
    shift = 0
    for part, width in record.bits[host]:
        if part in parts:
            v = np.asarray(parts.pop(part)).astype(np.uint64)
            if np.any(v >> np.uint64(width)):
                raise ValueError(f"{record.name}.{host}.{part} does not fit {width} bits")
            value = value | (v << np.uint64(shift))
        shift += width
    if parts:
        raise KeyError(f"{record.name}.{host}: unknown bit fields {sorted(parts)}")
    fields = record.dtype.fields
    assert fields is not None  # a record's dtype is structured
    return value.astype(fields[host][0])


def host_ticks(ns: np.ndarray) -> np.ndarray:
    return (np.asarray(ns, dtype=np.int64) // HOST_TICK_NS).astype(np.uint64)


def ticks_to_ns(arr: np.ndarray) -> np.ndarray:
    """A copy of host records with their time stamps (begin, end, timestamp) as ns instead of
    counter ticks (an event's end flag is kept)."""
    out = arr.copy()
    for name in ("begin", "end", "timestamp"):
        if out.dtype.names and name in out.dtype.names:
            keep = out[name] == records.EVENT_FLAG if name == "end" else np.zeros(len(out), dtype=bool)
            out[name] = np.where(keep, out[name], out[name] * np.uint64(HOST_TICK_NS))
    return out


def _host_header(record: records.Record, n: int, level: int, type_: Union[int, np.ndarray], tid: int) -> np.ndarray:
    """`n` host records of kind `record`, zeros but for the header every host record begins with."""
    a = np.zeros(n, dtype=record.dtype)
    a["magic"] = records.HOST_MAGIC
    a["level"] = level
    a["type"] = type_
    a["thread_id"] = tid
    return a


def apis(n: int, level: int, type_: Union[int, np.ndarray], tid: int, begin_ns: np.ndarray,
         end_ns: Optional[np.ndarray], item_id: Union[int, np.ndarray] = 0,
         reserve: Union[int, np.ndarray] = 0) -> Tuple[np.ndarray, np.ndarray]:
    """API records (or events when `end_ns` is None) and their file-order keys (host ticks)."""
    a = _host_header(records.API_EVENT, n, level, type_, tid)
    a["reserve"] = reserve
    a["begin"] = host_ticks(begin_ns)
    a["end"] = records.EVENT_FLAG if end_ns is None else host_ticks(end_ns)
    a["item_id"] = item_id
    return a, (a["begin"] if end_ns is None else a["end"])


def compact(record: records.Record, n: int, level: int, type_: int, tid: int, data_len: int,
            ts_ns: np.ndarray) -> np.ndarray:
    """Compact/additional records with their common header filled."""
    a = _host_header(record, n, level, type_, tid)
    a["data_len"] = data_len
    a["timestamp"] = host_ticks(ts_ns)
    return a


class Streams:
    """Record arrays collected per output file, merged in key order when written."""

    def __init__(self) -> None:
        self.parts: Dict[str, List[Tuple[np.ndarray, np.ndarray]]] = {}

    def add(self, name: str, arr: np.ndarray, key: np.ndarray) -> None:
        if len(arr):
            self.parts.setdefault(name, []).append((arr, np.asarray(key)))

    def merged(self) -> Dict[str, np.ndarray]:
        out: Dict[str, np.ndarray] = {}
        for name, parts in self.parts.items():
            if len(parts) == 1:
                arr, key = parts[0]
                out[name] = arr if np.all(key[1:] >= key[:-1]) else in_order(arr, key)
                continue
            if any(p[0].dtype != parts[0][0].dtype for p in parts):
                raise TypeError(f"{name}: mixed record kinds")
            arr = joined([p[0] for p in parts])
            key = np.concatenate([p[1].astype(np.uint64) for p in parts])
            out[name] = in_order(arr, key)
        return out


def joined(parts: Sequence[np.ndarray]) -> np.ndarray:
    """Record arrays of one kind, one after the other. Not np.concatenate: it would drop the
    padding of the declared record dtype; and the padding bytes are zeros (np.empty left them
    as whatever the memory held, so files with merged records differed from run to run)."""
    out = np.zeros(sum(len(p) for p in parts), dtype=parts[0].dtype)
    pos = 0
    for part in parts:
        out[pos:pos + len(part)] = part
        pos += len(part)
    return out


def in_order(arr: np.ndarray, key: np.ndarray) -> np.ndarray:
    """Records in `key` order (stable), their padding bytes zeros (fancy indexing leaves a
    structured dtype's padding uninitialised)."""
    return joined([arr[np.argsort(key, kind="stable")]])


def write_stream(data_dir: str, stem: str, arr: np.ndarray, slices: int, straddle: bool,
                 rng: np.random.Generator) -> List[str]:
    """Write `arr` as `<stem>.slice_0..` cut into `slices` pieces; returns the file names.

    With `straddle` the cuts fall at arbitrary byte positions (inside records where the stream
    allows it); otherwise on record boundaries, as the collector writes host slices.
    """
    if not any(arr.dtype == r.dtype and arr.dtype.itemsize == r.size for r in KINDS):
        raise TypeError(f"{stem}: not an array of a declared record kind")
    raw = np.ascontiguousarray(arr).view(np.uint8).reshape(-1)
    total, size = raw.size, arr.dtype.itemsize
    if total == 0:
        return []
    if slices <= 1 or total == 0:
        cuts: List[int] = []
    elif straddle:
        wanted = [k * total // slices for k in range(1, slices)]
        cuts = [(c // size) * size + int(rng.integers(1, size)) for c in wanted]
    else:
        cuts = [(k * len(arr) // slices) * size for k in range(1, slices)]
    bounds = [0] + sorted({c for c in cuts if 0 < c < total}) + [total]
    names = []
    for k, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:])):
        name = f"{stem}.slice_{k}"
        with open(os.path.join(data_dir, name), "wb") as f:
            f.write(memoryview(raw[lo:hi]))
        names.append(name)
    return names
