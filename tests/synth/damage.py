"""Damage to a written collection, for the tests of bad input: a broken magic number, a cut-off
file. Use on a copy, never on shared data."""
from __future__ import annotations

import os
import struct


def corrupt_magic(path: str, record_index: int, record_size: int, offset_in_record: int = 2,
                  value: int = 0x6BD4) -> int:
    """Overwrite the u16 at byte `record_index * record_size + offset_in_record` of `path`
    (little-endian) with `value`; return the value it held. Use on a copy, never on shared data."""
    offset = record_index * record_size + offset_in_record
    if offset < 0 or offset + 2 > os.path.getsize(path):
        raise ValueError(f"{path}: offset {offset} is outside the file")
    with open(path, "r+b") as f:
        f.seek(offset)
        (old,) = struct.unpack("<H", f.read(2))
        f.seek(offset)
        f.write(struct.pack("<H", value))
    return int(old)


def truncate(path: str, n_bytes: int) -> int:
    """Drop the last `n_bytes` bytes of `path`; return the new size in bytes."""
    size = os.path.getsize(path)
    if not 0 <= n_bytes <= size:
        raise ValueError(f"{path}: cannot drop {n_bytes} of {size} bytes")
    os.truncate(path, size - n_bytes)
    return size - n_bytes
