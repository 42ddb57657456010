"""Device memory samples (formats_more.md §2.1): `npu_mem.data` (Device) and `npu_mem.app` (APP)
samples of a device, one of each every `period_us`, written CHUNK samples at a time so that tens of
millions of samples cost one chunk of memory. Version 1.0 layout: the µs timestamp since the device
start (dev_start.log's clock_monotonic_raw, the collection start) in the u32 at offset 0 and the
u64 at offset 8."""
from __future__ import annotations

import os

import numpy as np

from msprof_kit.parsers.memory import NPU_MEM

CHUNK = 1 << 20          # samples built and written at a time
GIB = 1 << 30


def write_npu_mem(data_dir: str, device: int, samples: int, period_us: int = 1, seed: int = 0) -> int:
    """Write `samples` samples in all (half Device, half APP) to device `device`'s data folder;
    returns the last sample's µs."""
    rng = np.random.default_rng([seed, 7, device])
    per_kind = samples // 2
    for kind, event, base in (("data", 1, 2 * GIB), ("app", 0, GIB // 8)):
        path = os.path.join(data_dir, f"npu_mem.{kind}.{device}.slice_0")
        with open(path, "wb") as out:
            for lo in range(0, per_kind, CHUNK):
                n = min(CHUNK, per_kind - lo)
                arr = np.zeros(n, dtype=NPU_MEM.dtype)
                ts = (lo + np.arange(n, dtype=np.int64)) * period_us
                arr["timestamp_v1"] = ts & 0xFFFFFFFF
                arr["timestamp_v2"] = ts
                arr["event"] = event
                arr["ddr"] = 44 << 20
                arr["hbm"] = base + rng.integers(0, 64 << 20, n) // 4096 * 4096
                out.write(arr.tobytes())
    return max(0, per_kind - 1) * period_us
