"""Every record table: little-endian, declared size, and bytes packed from it decode to the same values."""
from __future__ import annotations

import struct

import numpy as np
import pytest

from msprof_kit.parsers import records


def test_all_specs_little_endian_and_sized():
    assert all(spec.fmt[0] == "<" for spec in records.REGISTRY.values())
    for spec in records.REGISTRY.values():
        assert struct.calcsize(spec.fmt) == spec.size == spec.dtype.itemsize, spec.name


@pytest.mark.parametrize("name", sorted(records.REGISTRY))
def test_round_trip(name: str):
    spec = records.REGISTRY[name]
    rng = np.random.default_rng(len(name))
    values = {}
    for field in spec.names:
        dt, _ = spec.dtype.fields[field][:2]
        if dt.kind == "S":
            values[field] = bytes(rng.integers(1, 255, dt.itemsize, dtype=np.uint8))
        elif dt.subdtype is not None:
            base, shape = dt.subdtype
            hi = min(np.iinfo(base).max, 2 ** 62)
            values[field] = rng.integers(0, hi, shape, dtype=np.int64).astype(base)
        else:
            hi = min(np.iinfo(dt).max, 2 ** 62)
            values[field] = int(rng.integers(0, hi))
    raw = records.pack(spec, **values)
    assert len(raw) == spec.size
    back = np.frombuffer(raw, dtype=spec.dtype)[0]
    for field, value in values.items():
        assert np.array_equal(back[field], value), field
    # the same bytes through struct, field by field, where a field is a plain scalar
    fields = struct.unpack(spec.fmt, raw)
    scalars = [n for n, c, _ in spec.fields if not c.endswith("x") and c[:-1] == ""]
    flat = iter(fields)
    decoded = {}
    for n, c, _ in spec.fields:
        if c.endswith("x"):
            continue
        count = int(c[:-1]) if c[:-1] else 1
        if c.endswith("s"):
            decoded[n] = next(flat)
        else:
            decoded[n] = [next(flat) for _ in range(count)] if c[:-1] else next(flat)
    for n in scalars:
        assert decoded[n] == values[n], n


def test_bit_fields_lsb_first():
    head = records.pack_bits(records.STARS_LOG, "head", func_type=35, cnt=9, sqe_type=11)
    assert head == 35 | (9 << 6) | (11 << 10)
    arr = np.array([head], dtype=np.uint16)
    assert records.bit_field(records.STARS_LOG, "head", "func_type", arr)[0] == 35
    assert records.bit_field(records.STARS_LOG, "head", "cnt", arr)[0] == 9
    assert records.bit_field(records.STARS_LOG, "head", "sqe_type", arr)[0] == 11
    with pytest.raises(ValueError):
        records.pack_bits(records.HWTS_LOG, "tag", log_type=8)


def test_known_offsets_match_the_spec():
    assert records.TASK_TRACK.offset_of("num_blocks") == 48
    assert records.TASK_TRACK.offset_of("kernel_name") == 40
    assert records.FFTS_PMU.offset_of("pmu") == 48 and records.FFTS_PMU.offset_of("end_syscnt") == 120
    assert records.AIC_PMU.offset_of("stream_id") == 96
    assert records.TENSOR_INFO.offset_of("t1_type") == 36 + 44
    assert records.MEMCPY_INFO.offset_of("direction") == 40
    assert records.LPM_FREQ.offset_of("f1_mhz") == 32


def test_spec_example_task_track_bytes():
    """host_formats.md §2.4 example record decodes to the documented values."""
    text = ("5a5a881322030000 3930000028000000 dc05000000000000 0000030007000000 "
            "0000000000000000 8877665544332211 0800400000000000 0000000000000000")
    rec = np.frombuffer(bytes.fromhex(text.replace(" ", "")), dtype=records.TASK_TRACK.dtype)[0]
    assert (rec["level"], rec["type"], rec["thread_id"], rec["data_len"]) == (5000, 802, 12345, 40)
    assert (rec["timestamp"], rec["stream_id"], rec["task_id"]) == (1500, 3, 7)
    assert (rec["kernel_name"], rec["num_blocks"], rec["args_size"]) == (0x1122334455667788, 8, 64)
