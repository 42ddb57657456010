"""Synthetic raw msprof collections (PROF_xxx directories) for tests and benchmarks.

`write_collection` writes a consistent host + device collection for a 910B (STARS soc log +
FFTS PMU) or 310P (HWTS log + AI Core PMU) chip, following the conventions the golden inputs
were generated with (../../shared/golden/README.md, "Conventions shared by all inputs"):

* clock model: host `CLOCK_MONOTONIC_RAW` = 10^12 ns at the start of the collection, wall clock
  1700902984000000 us at that instant; host counter 100 MHz (ticks = monotonic ns / 10);
  device system counter 50 MHz on 910B (ticks = ns / 20 from `dev_start.log` cntvct
  50000000000 on device 0), 100 MHz on 310P (ticks = ns / 10 + 777000);
* host call shape of an eager op (one OS thread per device, strictly nested):
  ACL `aclnn<Type>` ⊃ node `launch` ⊃ runtime `KernelLaunch`, with `node_basic_info` and
  `tensor_info` stamped 1 us after the launch begins and `task_track` 10 ns after KernelLaunch
  begins; all of it `aging`;
* model ops: `aclmdlExecute` ⊃ a `ModelExecute` event pair (model id 1, request id = execution
  index 1, 2, ...) ⊃ node launches (`unaging` launch / node_basic_info / tensor_info /
  task_track; KernelLaunch stays `aging`), plus one `unaging` graph_id_map per thread;
* API records are stored in order of their end time (events: their timestamp), compact and
  additional records in timestamp order, device records in time order;
* optional (910B): MIX_AIC / MIX_AIV ops (`mix_fraction`), run as FFTS+ tasks with one context,
  a context PMU record from the main core and `block num x MIX_RATIO` block PMU records from the
  other core; and step-trace tags (`steps`): a ts_track MODEL_START / MODEL_END pair around each
  model execution, each taking a task id on the model stream;
* optional (`early_apis`): host API records before the collection start, some inside a ModelLoad.

Every record array is built column-wise with numpy (no per-record Python loop), so 10^6 tasks
take a few seconds. Record layouts come from `parsers.records` and are not re-declared here.

Run as a script to time the generator: `python3 tests/synth.py OUT_DIR [N] [--chip 310P]
[--model-fraction F] [--metrics GROUP] [--mix-fraction F] [--steps] [--early-apis K] [--seed S]`.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import struct
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

try:  # installed package layout
    from msprof_kit.parsers import records  # type: ignore[import-not-found]
except ImportError:  # source tree: tests/ next to parsers/
    _ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if _ROOT not in sys.path:
        sys.path.insert(0, _ROOT)
    from parsers import records  # type: ignore[no-redef]

__all__ = [
    "write_collection", "corrupt_magic", "truncate", "double_hash", "hash_ids",
    "HOST_MONO0_NS", "WALL0_US", "HOST_FREQ_MHZ", "FIRST_OP_NS", "OP_PERIOD_NS",
    "EAGER_STREAM", "MODEL_STREAM", "MODEL_ID", "MODEL_NAME", "OPS_PER_EXECUTION", "OP_TYPES",
]

# --------------------------------------------------------------------------------------------
# Clock model and fixed identities

HOST_MONO0_NS = 10 ** 12                 #: host CLOCK_MONOTONIC_RAW at collection start, ns
WALL0_US = 1700902984000000              #: wall clock at that instant, us since the epoch
HOST_FREQ_MHZ = 100                      #: host counter frequency, MHz (one tick = 10 ns)
HOST_TICK_NS = 1000 // HOST_FREQ_MHZ     #: 10 ns
HOST_CNTVCT0 = HOST_MONO0_NS // HOST_TICK_NS  #: host counter at collection start, ticks
FIRST_OP_NS = HOST_MONO0_NS + 10_000_000     #: slot start of the first op: 10 ms after start, ns
OP_PERIOD_NS = 50_000                    #: one op slot on the host thread, ns
DEVICE_OFFSET_NS = 17_320                #: extra shift of device d's host thread: d x this, ns
END_MARGIN_NS = 1_000_000                #: end_info lies this long after the last record, ns

EAGER_STREAM = 2                         #: stream of eager ops
MODEL_STREAM = 3                         #: stream of model ops
MODEL_ID = 1
MODEL_NAME = "synth_model"
OPS_PER_EXECUTION = 10                   #: model ops per aclmdlExecute (last one may hold fewer)
NAME_POOL = 10_000                       #: distinct op names per kind; larger runs reuse them
FIRST_THREAD_ID = 4012                   #: OS thread id of device 0's host thread (+d for device d)
OTHER_THREAD_OFFSET = 800                #: early_apis: another host thread, tid + this
EARLY_LAST_NS = 10_000                   #: early_apis: the last early op's slot begins this long before the start
MODEL_LOAD_NS = 200_000                  #: early_apis: length of the ModelLoad, ns
MODEL_LOAD_GAP_NS = 100_000              #: early_apis: from the ModelLoad's end to the first early op's slot, ns
PID = "4001"

# Host levels, types and type names (host_formats.md §2.1).
LEVEL_ACL, LEVEL_MODEL, LEVEL_NODE, LEVEL_RUNTIME = 20000, 15000, 10000, 5000
ACL_NN, ACL_MODEL = 5, 2
TYPE_ACLMDL_EXECUTE = (ACL_MODEL << 16) | 1
TYPE_MODEL_EXECUTE = 1                   # level 15000 event pair
TYPE_MODEL_LOAD = 2                      # level 15000 event pair (unaging)
TYPE_GRAPH_ID_MAP = 0                    # level 15000 additional
TYPE_NODE_BASIC_INFO, TYPE_TENSOR_INFO, TYPE_LAUNCH = 0, 1, 5   # level 10000
TYPE_TASK_TRACK, TYPE_KERNEL_LAUNCH = 802, 1001                  # level 5000
KERNEL_AICORE, KERNEL_AIVEC, FLIP_TASK = 0, 66, 98               # runtime task types
KERNEL_MIX_AIC, KERNEL_MIX_AIV = 108, 109
TYPE_STREAM_CREATE, TYPE_MODEL_BIND_STREAM = 1010, 1011         # level 5000 (early_apis only)
GE_AI_CORE, GE_AI_VECTOR_CORE, GE_MIX_AIC, GE_MIX_AIV = 0, 2, 4, 5  # node_basic_info task types
TYPE_CONTEXT_ID_INFO = 4                                         # level 10000 additional
SQE_AI_CORE, SQE_AIV = 0, 2                                      # STARS sqe types
FUNC_ACSQ_START, FUNC_ACSQ_END, FUNC_CONTEXT_PMU = 0, 1, 40
FUNC_FFTS_START, FUNC_FFTS_END, FUNC_BLOCK_PMU = 34, 35, 41       # FFTS+ subtask logs, block PMU
FFTS_PLUS = 4                                                    # ffts type of a MIX op's subtask
SUBTASK_MIX_AIC, SUBTASK_MIX_AIV = 6, 7                          # FFTS+ subtask types
MIX_RATIO = 2                                                    # secondary blocks per main block
TS_TAG_STEP, TS_TAG_FLIP = 10, 14
STEP_MODEL_START, STEP_MODEL_END = 0, 1                          # step-trace tag ids
FORMAT_ND, DTYPE_FLOAT16 = 2, 1

#: The op types drawn from, with the core they run on (0 AI Core, 1 AI Vector Core; every op is
#: an AI Core op on 310P). aclnn<Type> has ACL type (ACL_NN << 16) | (index + 1).
OP_TYPES: Tuple[Tuple[str, int], ...] = (
    ("MatMul", 0), ("Conv2D", 0), ("BatchMatMul", 0), ("MatMulV3", 0),
    ("Add", 1), ("Mul", 1), ("Cast", 1), ("Relu", 1),
    ("SoftmaxV2", 1), ("LayerNorm", 1), ("ReduceSum", 1), ("Transpose", 1),
)

#: MIX ops (910B only, with `mix_fraction`): (type, core) with core 2 MIX_AIC, 3 MIX_AIV. A MIX op's
#: main core reports a context PMU record, the other core one block PMU record per secondary block
#: (block num x MIX_RATIO of them).
MIX_OP_TYPES: Tuple[Tuple[str, int], ...] = (("FlashAttentionScore", 2), ("GroupedMatmul", 3))

EVENTS_PIPE = "0x8,0xa,0x9,0xb,0xc,0xd,0x54,0x55"
EVENTS_PIPE_EXCT = "0x416,0x417,0x9,0x302,0xc,0x303,0x54,0x55"

#: The event list the collector programs for each metric group (device_formats.md §4.3).
GROUP_EVENTS: Dict[str, str] = {
    "PipeUtilization": EVENTS_PIPE,
    "PipeUtilizationExct": EVENTS_PIPE_EXCT,
    "ArithmeticUtilization": "0x49,0x4a,0x4b,0x4c,0x4d,0x4e,0x4f",
    "Memory": "0x15,0x16,0x31,0x32,0xf,0x10,0x12,0x13",
    "MemoryL0": "0x1b,0x1c,0x21,0x22,0x27,0x28,0x29,0x2a",
    "ResourceConflictRatio": "0x64,0x65,0x66",
    "MemoryUB": "0x10,0x13,0x37,0x38,0x3d,0x3e,0x43,0x44",
    "L2Cache": "0x500,0x502,0x504,0x506,0x508,0x50a",
    "MemoryAccess": "0x32,0x3d,0x3e,0x206,0x20c,0x50c,0x50d,0x50e",
}
#: counter / cycles range per event when a group is given (`metrics=`): every counter is nonzero,
#: icache misses stay below requests and 0x206 (L0C to L1) below 0x32 and 0x20c, which it is
#: subtracted from. Events not listed: 5% to 60%.
_GROUP_RANGE = {0x54: (0.01, 0.05), 0x206: (0.002, 0.02), 0x416: (0.2, 0.9), 0x417: (0.01, 0.05),
                0x49: (0.2, 0.9), 0x4a: (0.01, 0.1)}

#: Upper bound of counter/total_cycle per PMU event (0x55, icache misses, is drawn below 0x54).
_RATIO_CAP = {0x416: 0.9, 0x417: 0.05, 0x9: 0.5, 0x302: 0.6, 0xc: 0.9, 0x303: 0.4,
              0x8: 0.9, 0xa: 0.9, 0xb: 0.6, 0xd: 0.6, 0x54: 0.05, 0x55: 0.0}
_AIV_ZERO = {0xa, 0xb}  # an AI Vector Core has no cube / L1 pipe


@dataclass(frozen=True)
class ChipProfile:
    """What differs between the chips the writer supports."""

    name: str
    platform_version: str
    hwts_frequency: str          #: info.json text, MHz
    hwts_mhz: int                #: device counter frequency, MHz
    aic_frequency: str           #: MHz, integer text
    ai_core_num: int
    aiv_num: int
    aic_metrics: str
    aic_events: str
    aiv_metrics: str
    aiv_events: str
    dev_cntvct0: int             #: device 0 counter at collection start, ticks
    stars: bool                  #: STARS soc log + FFTS PMU (else HWTS log + AI Core PMU)

    @property
    def tick_ns(self) -> int:
        return 1000 // self.hwts_mhz

    def dev_cntvct(self, device: int) -> int:
        """Device counter at collection start (dev_start.log.N cntvct), ticks."""
        return self.dev_cntvct0 if device == 0 else 123456789000 + (device - 1) * 10 ** 9


CHIPS: Dict[str, ChipProfile] = {
    "910B": ChipProfile("910B", "5", "50.000000", 50, "1800", 24, 48,
                        "PipeUtilizationExct", EVENTS_PIPE_EXCT, "PipeUtilization", EVENTS_PIPE,
                        HOST_MONO0_NS // 20, True),
    "310P": ChipProfile("310P", "4", "100", 100, "1000", 8, 7,
                        "PipeUtilization", EVENTS_PIPE, "PipeUtilization", EVENTS_PIPE,
                        HOST_MONO0_NS // 10 + 777000, False),
}

# --------------------------------------------------------------------------------------------
# Hash ids


def double_hash(text: str) -> int:
    """The collector's hash id of `text` (h0*29 + c, h1*131 + c over signed UTF-8 bytes)."""
    h0 = h1 = 0
    for byte in text.encode("utf-8"):
        c = byte - 256 if byte >= 128 else byte
        h0 = (h0 * 29 + c) & 0xFFFFFFFF
        h1 = (h1 * 131 + c) & 0xFFFFFFFF
    return (h0 << 32) | h1


def hash_ids(texts: Sequence[str]) -> np.ndarray:
    """`double_hash` of many strings at once (u64), looping over character positions only."""
    n = len(texts)
    if n == 0:
        return np.zeros(0, dtype=np.uint64)
    encoded = [t.encode("utf-8") for t in texts]
    lengths = np.fromiter((len(e) for e in encoded), dtype=np.int64, count=n)
    width = int(lengths.max())
    chars = np.zeros((n, max(width, 1)), dtype=np.int8)
    flat = np.frombuffer(b"".join(encoded), dtype=np.int8)
    rows = np.repeat(np.arange(n), lengths)
    cols = np.arange(flat.size) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    chars[rows, cols] = flat
    h0 = np.zeros(n, dtype=np.uint32)
    h1 = np.zeros(n, dtype=np.uint32)
    for pos in range(width):
        c = chars[:, pos].astype(np.int32).astype(np.uint32)  # sign-extended, mod 2^32
        live = pos < lengths
        h0 = np.where(live, h0 * np.uint32(29) + c, h0)
        h1 = np.where(live, h1 * np.uint32(131) + c, h1)
    return (h0.astype(np.uint64) << np.uint64(32)) | h1.astype(np.uint64)


# --------------------------------------------------------------------------------------------
# The op sequence (shared by all devices) and the per-device timing


@dataclass
class _Catalogue:
    """Names and hash ids used by a collection, written to hash_dic."""

    texts: List[str]
    ids: np.ndarray


@dataclass
class _Ops:
    """The op sequence run on every device (length n, in issue order)."""

    n: int
    model: np.ndarray        #: bool, op runs inside aclmdlExecute
    exec_index: np.ndarray   #: u32, model execution index (1-based), 0 for eager ops
    exec_first: np.ndarray   #: bool, first op of its execution
    exec_last: np.ndarray    #: bool, last op of its execution
    type_index: np.ndarray   #: index into OP_TYPES
    core: np.ndarray         #: 0 AI Core, 1 AI Vector Core, 2 MIX_AIC, 3 MIX_AIV
    name_id: np.ndarray      #: u64 hash of the op name
    type_id: np.ndarray      #: u64 hash of the op type
    kernel_id: np.ndarray    #: u64 hash of the kernel name
    block: np.ndarray        #: u16 block num
    mix_ratio: np.ndarray    #: u8 secondary blocks per block of a MIX op (0 otherwise)
    op_flag: np.ndarray      #: u32 (HF32 eligible)
    dims: np.ndarray         #: (n, 3) u32 tensor shape
    stream: np.ndarray       #: u16 stream id
    seq: np.ndarray          #: u32 1-based task sequence on its stream: (flip << 16) | task id
    catalogue: _Catalogue


def _plan_ops(n: int, profile: ChipProfile, model_fraction: float, rng: np.random.Generator,
              mix_fraction: float = 0.0, mix_rng: Optional[np.random.Generator] = None,
              steps: bool = False) -> _Ops:
    """The op sequence. With `steps`, each model execution's ops leave a task id free before and
    after them for the step-trace tasks."""
    groups = -(-n // OPS_PER_EXECUTION)
    n_model_groups = min(groups, int(round(model_fraction * n / OPS_PER_EXECUTION)))
    if model_fraction > 0 and n > 0 and n_model_groups == 0:
        n_model_groups = 1
    group = np.arange(n) // OPS_PER_EXECUTION
    chosen = np.zeros(groups, dtype=bool)
    chosen[rng.choice(groups, size=n_model_groups, replace=False)] = True
    model = chosen[group] if n else np.zeros(0, dtype=bool)
    exec_of_group = np.cumsum(chosen).astype(np.uint32)
    exec_index = np.where(model, exec_of_group[group] if n else 0, 0).astype(np.uint32)
    in_group = np.arange(n) % OPS_PER_EXECUTION
    exec_first = model & (in_group == 0)
    exec_last = model & ((in_group == OPS_PER_EXECUTION - 1) | (np.arange(n) == n - 1))

    # Name pools: pool entry j has a fixed type, shape, block num and flag; ops reuse the
    # entries cyclically once a kind has more than NAME_POOL ops.
    texts: List[str] = [MODEL_NAME]
    type_names = [t for t, _ in OP_TYPES]
    kernel_names = [f"{t}_{double_hash(t) & 0xFFFFFFFF:08x}_high_performance" for t in type_names]
    texts += type_names + kernel_names
    type_ids = hash_ids(type_names)
    kernel_ids = hash_ids(kernel_names)
    core_of_type = np.array([c for _, c in OP_TYPES], dtype=np.uint8)
    if not profile.stars:
        core_of_type[:] = 0

    type_index = np.zeros(n, dtype=np.int64)
    name_id = np.zeros(n, dtype=np.uint64)
    block = np.zeros(n, dtype=np.uint16)
    op_flag = np.zeros(n, dtype=np.uint32)
    dims = np.zeros((n, 3), dtype=np.uint32)
    for kind in (False, True):
        where = np.flatnonzero(model == kind)
        if where.size == 0:
            continue
        size = min(where.size, NAME_POOL)
        pool_type = rng.integers(0, len(OP_TYPES), size)
        fmt = "model/layer_{1}/{0}_{2}" if kind else "{0}_{2}"
        names = [fmt.format(type_names[t], j // 12, j) for j, t in enumerate(pool_type.tolist())]
        texts += names
        pool_name = hash_ids(names)
        pool_core = core_of_type[pool_type]
        cores = np.where(pool_core == 0, profile.ai_core_num, profile.aiv_num)
        pool_block = rng.integers(1, cores + 1).astype(np.uint16)
        pool_flag = (rng.random(size) < 0.05).astype(np.uint32)
        pool_dims = (2 ** rng.integers(0, 12, (size, 3))).astype(np.uint32)
        j = np.arange(where.size) % size
        type_index[where] = pool_type[j]
        name_id[where] = pool_name[j]
        block[where] = pool_block[j]
        op_flag[where] = pool_flag[j]
        dims[where] = pool_dims[j]

    stream = np.where(model, MODEL_STREAM, EAGER_STREAM).astype(np.uint16)
    seq = np.zeros(n, dtype=np.uint32)
    for value in (EAGER_STREAM, MODEL_STREAM):
        mask = stream == value
        seq[mask] = np.arange(1, int(mask.sum()) + 1, dtype=np.uint32)
    if steps:  # MODEL_START takes the id before an execution's ops, MODEL_END the one after
        seq[model] += (2 * exec_index[model] - 1).astype(np.uint32)

    core = core_of_type[type_index]
    mix_ratio = np.zeros(n, dtype=np.uint8)
    type_id, kernel_id = type_ids[type_index], kernel_ids[type_index]
    if mix_fraction > 0 and profile.stars and n:
        # Some ops become MIX ops, drawn from their own generator (the rest of the plan is unchanged);
        # MIX_AIC and MIX_AIV alternate in op order, at least one of each when n allows.
        assert mix_rng is not None
        count = min(n, max(2, int(round(mix_fraction * n))))
        mixed = np.sort(mix_rng.choice(n, size=count, replace=False))
        kind = np.arange(count) % len(MIX_OP_TYPES)
        mix_types = [t for t, _ in MIX_OP_TYPES]
        mix_kernels = [f"{t}_{double_hash(t) & 0xFFFFFFFF:08x}_mix" for t in mix_types]
        names = [f"{mix_types[k]}_{j}" for j, k in enumerate(kind.tolist())]
        texts += mix_types + mix_kernels + names
        type_index[mixed] = len(OP_TYPES) + kind
        core[mixed] = np.array([c for _, c in MIX_OP_TYPES], dtype=np.uint8)[kind]
        name_id[mixed] = hash_ids(names)
        type_id[mixed] = hash_ids(mix_types)[kind]
        kernel_id[mixed] = hash_ids(mix_kernels)[kind]
        block[mixed] = mix_rng.integers(4, 25, count).astype(np.uint16)
        mix_ratio[mixed] = MIX_RATIO

    return _Ops(n=n, model=model, exec_index=exec_index, exec_first=exec_first, exec_last=exec_last,
                type_index=type_index, core=core, name_id=name_id,
                type_id=type_id, kernel_id=kernel_id, block=block, mix_ratio=mix_ratio,
                op_flag=op_flag, dims=dims, stream=stream, seq=seq,
                catalogue=_Catalogue(texts, hash_ids(texts)))


@dataclass
class _Timing:
    """One device's timing of the op sequence. Host times in ns, device times in device ticks."""

    device: int
    thread_id: int
    slot: np.ndarray         #: slot start (ACL API begin of an eager op), ns
    launch_begin: np.ndarray
    kernel_begin: np.ndarray  #: KernelLaunch begin, ns
    kernel_end: np.ndarray
    launch_end: np.ndarray
    acl_end: np.ndarray       #: ACL API end of an eager op, ns
    dev_start: np.ndarray     #: device counter ticks since collection start (add dev_cntvct)
    dev_end: np.ndarray

    @property
    def info_ts(self) -> np.ndarray:
        """node_basic_info / tensor_info time stamp: 1 us after the launch begins, ns."""
        return self.launch_begin + 1000

    @property
    def track_ts(self) -> np.ndarray:
        """task_track time stamp: 10 ns after KernelLaunch begins, ns."""
        return self.kernel_begin + 10


def _plan_timing(ops: _Ops, device: int, profile: ChipProfile, rng: np.random.Generator) -> _Timing:
    """Lay the ops out one per OP_PERIOD_NS slot; all spans fit in their slot, so the host
    calls are strictly nested and sequential and device tasks never overlap."""
    n = ops.n
    slot = FIRST_OP_NS + device * DEVICE_OFFSET_NS + np.arange(n, dtype=np.int64) * OP_PERIOD_NS
    launch_begin = slot + 3000
    kernel_begin = slot + 8000
    kernel_end = kernel_begin + rng.integers(400, 2001, n) * HOST_TICK_NS      # 4..20 us
    launch_end = kernel_end + 3000
    acl_end = launch_end + 4000                                                   # <= slot + 35 us
    tick = profile.tick_ns
    latency = rng.integers(2000, 6001, n)                                          # ns after task_track
    dev_start = -(-(kernel_begin + 10 + latency - HOST_MONO0_NS) // tick)          # ceil to ticks
    dev_end = dev_start + rng.integers(1000 // tick, 30000 // tick + 1, n)         # 1..30 us
    return _Timing(device, FIRST_THREAD_ID + device, slot, launch_begin, kernel_begin, kernel_end,
                   launch_end, acl_end, dev_start.astype(np.int64), dev_end.astype(np.int64))


def _early_slots(k: int) -> np.ndarray:
    """Host slot starts of the first `k` ops with `early_apis`: one OP_PERIOD_NS apart, the last
    EARLY_LAST_NS before the collection start (its ACL API and KernelLaunch straddle the start:
    they end at least 19 us after the slot begins), the others' calls all end before it, ns."""
    return HOST_MONO0_NS - EARLY_LAST_NS - (k - 1 - np.arange(k, dtype=np.int64)) * OP_PERIOD_NS


def _moved_early(t: _Timing, k: int) -> _Timing:
    """`t` with the host calls of the first `k` ops moved to `_early_slots` (every host time of an
    op shifted alike, so the call shape holds); their device tasks keep their times, after the start."""
    if k == 0:
        return t
    shift = np.zeros(len(t.slot), dtype=np.int64)
    shift[:k] = _early_slots(k) - t.slot[:k]
    moved = {name: getattr(t, name) + shift
             for name in ("slot", "launch_begin", "kernel_begin", "kernel_end", "launch_end", "acl_end")}
    return _Timing(t.device, t.thread_id, dev_start=t.dev_start, dev_end=t.dev_end, **moved)


def _early_apis(streams: "_Streams", t: _Timing, k: int) -> None:
    """The host APIs `early_apis` adds before the collection start on the thread of `t` (times in
    ns from the first early op's slot S): a ModelLoad event pair [S - 300 us, S - 100 us] (model
    MODEL_ID, request 0, unaging) holding a runtime StreamCreate [+20 us, +30 us of its begin];
    a runtime ModelBindStream that begins 20 us before the ModelLoad ends and ends 30 us after;
    and on another thread (tid + OTHER_THREAD_OFFSET) a StreamCreate inside the ModelLoad's span."""
    tid = t.thread_id
    load_end = int(_early_slots(k)[0]) - MODEL_LOAD_GAP_NS
    load_begin = load_end - MODEL_LOAD_NS
    for when in (load_begin, load_end):
        streams.add("unaging.api_event.data", *_apis(1, LEVEL_MODEL, TYPE_MODEL_LOAD, tid, np.array([when]), None,
                                                     item_id=MODEL_ID))
    runtime = ((tid, TYPE_STREAM_CREATE, load_begin + 20_000, load_begin + 30_000),
               (tid, TYPE_MODEL_BIND_STREAM, load_end - 20_000, load_end + 30_000),
               (tid + OTHER_THREAD_OFFSET, TYPE_STREAM_CREATE, load_begin + 50_000, load_begin + 60_000))
    for thread, type_, begin, end in runtime:
        streams.add("aging.api_event.data", *_apis(1, LEVEL_RUNTIME, type_, thread, np.array([begin]),
                                                   np.array([end])))


def _flips(ops: _Ops) -> Tuple[np.ndarray, np.ndarray]:
    """Ops whose task is the first of a new batch on its stream, and their flip numbers."""
    first = np.flatnonzero((ops.seq & 0xFFFF) == 0)
    return first, (ops.seq[first] >> 16).astype(np.uint16)


# --------------------------------------------------------------------------------------------
# Record building helpers


def _bits(record: records.Record, host: str, **parts: Union[int, np.ndarray]) -> np.ndarray:
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
    return value.astype(record.dtype.fields[host][0])  # type: ignore[index]


def _host_ticks(ns: np.ndarray) -> np.ndarray:
    return (np.asarray(ns, dtype=np.int64) // HOST_TICK_NS).astype(np.uint64)


def _ticks_to_ns(arr: np.ndarray) -> np.ndarray:
    """A copy of host records with their time stamps (begin, end, timestamp) as ns instead of
    counter ticks (an event's end flag is kept)."""
    out = arr.copy()
    for name in ("begin", "end", "timestamp"):
        if out.dtype.names and name in out.dtype.names:
            keep = out[name] == records.EVENT_FLAG if name == "end" else np.zeros(len(out), dtype=bool)
            out[name] = np.where(keep, out[name], out[name] * np.uint64(HOST_TICK_NS))
    return out


def _apis(n: int, level: int, type_: Union[int, np.ndarray], tid: int, begin_ns: np.ndarray,
          end_ns: Optional[np.ndarray], item_id: Union[int, np.ndarray] = 0,
          reserve: Union[int, np.ndarray] = 0) -> Tuple[np.ndarray, np.ndarray]:
    """API records (or events when `end_ns` is None) and their file-order keys (host ticks)."""
    a = np.zeros(n, dtype=records.API_EVENT.dtype)
    a["magic"] = records.HOST_MAGIC
    a["level"] = level
    a["type"] = type_
    a["thread_id"] = tid
    a["reserve"] = reserve
    a["begin"] = _host_ticks(begin_ns)
    a["end"] = records.EVENT_FLAG if end_ns is None else _host_ticks(end_ns)
    a["item_id"] = item_id
    return a, (a["begin"] if end_ns is None else a["end"])


def _compact(record: records.Record, n: int, level: int, type_: int, tid: int, data_len: int,
             ts_ns: np.ndarray) -> np.ndarray:
    """Compact/additional records with their common header filled."""
    a = np.zeros(n, dtype=record.dtype)
    a["magic"] = records.HOST_MAGIC
    a["level"] = level
    a["type"] = type_
    a["thread_id"] = tid
    a["data_len"] = data_len
    a["timestamp"] = _host_ticks(ts_ns)
    return a


class _Streams:
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
                out[name] = arr if np.all(key[1:] >= key[:-1]) else _sorted(arr, key)
                continue
            if any(p[0].dtype != parts[0][0].dtype for p in parts):
                raise TypeError(f"{name}: mixed record kinds")
            arr = _joined([p[0] for p in parts])
            key = np.concatenate([p[1].astype(np.uint64) for p in parts])
            out[name] = _sorted(arr, key)
        return out


def _joined(parts: Sequence[np.ndarray]) -> np.ndarray:
    """Record arrays of one kind, one after the other. Not np.concatenate: it would drop the
    padding of the declared record dtype; and the padding bytes are zeros (np.empty left them
    as whatever the memory held, so files with merged records differed from run to run)."""
    out = np.zeros(sum(len(p) for p in parts), dtype=parts[0].dtype)
    pos = 0
    for part in parts:
        out[pos:pos + len(part)] = part
        pos += len(part)
    return out


def _sorted(arr: np.ndarray, key: np.ndarray) -> np.ndarray:
    """Records in `key` order (stable), their padding bytes zeros (fancy indexing leaves a
    structured dtype's padding uninitialised)."""
    return _joined([arr[np.argsort(key, kind="stable")]])


def _write_stream(data_dir: str, stem: str, arr: np.ndarray, slices: int, straddle: bool,
                  rng: np.random.Generator) -> List[str]:
    """Write `arr` as `<stem>.slice_0..` cut into `slices` pieces; returns the file names.

    With `straddle` the cuts fall at arbitrary byte positions (inside records where the stream
    allows it); otherwise on record boundaries, as the collector writes host slices.
    """
    if not any(arr.dtype == r.dtype and arr.dtype.itemsize == r.size for r in records.REGISTRY.values()):
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


# --------------------------------------------------------------------------------------------
# Host side


def _host_records(ops: _Ops, timings: Sequence[_Timing], tensors: bool, early: int = 0) -> _Streams:
    streams = _Streams()
    eager = np.flatnonzero(~ops.model)
    model = np.flatnonzero(ops.model)
    first = np.flatnonzero(ops.exec_first)
    last = np.flatnonzero(ops.exec_last)
    flip_ops, flip_num = _flips(ops)
    aclnn_type = (ACL_NN << 16) | (ops.type_index + 1)
    ge_type = np.array([GE_AI_CORE, GE_AI_VECTOR_CORE, GE_MIX_AIC, GE_MIX_AIV], dtype=np.uint32)[ops.core]
    rt_type = np.array([KERNEL_AICORE, KERNEL_AIVEC, KERNEL_MIX_AIC, KERNEL_MIX_AIV], dtype=np.uint64)[ops.core]
    block_dim = ops.block.astype(np.uint32) | (ops.mix_ratio.astype(np.uint32) << np.uint32(16))

    for t in timings:
        tid = t.thread_id
        if early:
            _early_apis(streams, t, early)
        # API records: KernelLaunch for every op; launch + aclnn for eager ops; model ops'
        # launches unaging inside aclmdlExecute ⊃ ModelExecute event pair.
        streams.add("aging.api_event.data", *_apis(ops.n, LEVEL_RUNTIME, TYPE_KERNEL_LAUNCH, tid,
                                                   t.kernel_begin, t.kernel_end))
        for idx, cls in ((eager, "aging"), (model, "unaging")):
            streams.add(f"{cls}.api_event.data", *_apis(idx.size, LEVEL_NODE, TYPE_LAUNCH, tid,
                                                        t.launch_begin[idx], t.launch_end[idx],
                                                        item_id=ops.name_id[idx]))
        streams.add("aging.api_event.data", *_apis(eager.size, LEVEL_ACL, aclnn_type[eager], tid,
                                                   t.slot[eager], t.acl_end[eager]))
        if first.size:
            execution = ops.exec_index[first]
            streams.add("aging.api_event.data", *_apis(first.size, LEVEL_ACL, TYPE_ACLMDL_EXECUTE, tid,
                                                       t.slot[first] + 1000, t.launch_end[last] + 2000))
            for when in (t.slot[first] + 2000, t.launch_end[last] + 1000):
                streams.add("aging.api_event.data", *_apis(first.size, LEVEL_MODEL, TYPE_MODEL_EXECUTE,
                                                           tid, when, None, item_id=MODEL_ID,
                                                           reserve=execution))
            gim = _compact(records.GRAPH_ID_MAP, 1, LEVEL_MODEL, TYPE_GRAPH_ID_MAP, tid, 16,
                           t.slot[first[:1]] + 2500)
            gim["model_name"] = double_hash(MODEL_NAME)
            gim["graph_id"] = 0xFFFFFFFF
            gim["model_id"] = MODEL_ID
            streams.add("unaging.additional.graph_id_map", gim, gim["timestamp"])

        for idx, cls in ((eager, "aging"), (model, "unaging")):
            nbi = _compact(records.NODE_BASIC_INFO, idx.size, LEVEL_NODE, TYPE_NODE_BASIC_INFO, tid, 28,
                           t.info_ts[idx])
            nbi["op_name"] = ops.name_id[idx]
            nbi["task_type"] = ge_type[idx]
            nbi["op_type"] = ops.type_id[idx]
            nbi["block_dim"] = block_dim[idx]
            nbi["op_flag"] = ops.op_flag[idx]
            streams.add(f"{cls}.compact.node_basic_info", nbi, nbi["timestamp"])

            track = _compact(records.TASK_TRACK, idx.size, LEVEL_RUNTIME, TYPE_TASK_TRACK, tid, 40,
                             t.track_ts[idx])
            track["device"] = t.device
            track["stream_id"] = ops.stream[idx]
            track["task_id"] = ops.seq[idx]
            track["task_type"] = rt_type[idx]
            track["kernel_name"] = ops.kernel_id[idx]
            track["num_blocks"] = ops.block[idx]
            track["sched"] = _bits(records.TASK_TRACK, "sched", ratio=ops.mix_ratio[idx])
            streams.add(f"{cls}.compact.task_track", track, track["timestamp"])

            mix = idx[ops.core[idx] >= 2]
            if mix.size:
                cii = _compact(records.CONTEXT_ID_INFO, mix.size, LEVEL_NODE, TYPE_CONTEXT_ID_INFO, tid, 12 + 4,
                               t.info_ts[mix])
                cii["op_name"] = ops.name_id[mix]
                cii["ctx_num"] = 1
                streams.add(f"{cls}.additional.context_id_info", cii, cii["timestamp"])

            if tensors:
                ti = _compact(records.TENSOR_INFO, idx.size, LEVEL_NODE, TYPE_TENSOR_INFO, tid, 56 + 44,
                              t.info_ts[idx])
                ti["op_name"] = ops.name_id[idx]
                ti["tensor_num"] = 2
                for slot_no, io in ((0, 0), (1, 1)):
                    ti[f"t{slot_no}_type"] = io
                    ti[f"t{slot_no}_format"] = FORMAT_ND
                    ti[f"t{slot_no}_dtype"] = DTYPE_FLOAT16
                    ti[f"t{slot_no}_shape"][:, :3] = ops.dims[idx]
                streams.add(f"{cls}.additional.tensor_info", ti, ti["timestamp"])

        if flip_ops.size:
            # A FLIP_TASK before the first task of each new batch, outside the op's own APIs.
            flip = _compact(records.TASK_TRACK, flip_ops.size, LEVEL_RUNTIME, TYPE_TASK_TRACK, tid, 40,
                            t.slot[flip_ops] - 1000)
            flip["device"] = t.device
            flip["stream_id"] = ops.stream[flip_ops]
            flip["task_id"] = flip_num.astype(np.uint32) << np.uint32(16)
            flip["task_type"] = FLIP_TASK
            streams.add("aging.compact.task_track", flip, flip["timestamp"])
    return streams


def _type_info_lines(ops: _Ops, early: bool = False) -> List[str]:
    used = sorted(set(ops.type_index.tolist()))
    lines = [f"{LEVEL_RUNTIME}_{KERNEL_AICORE}:KERNEL_AICORE", f"{LEVEL_RUNTIME}_{KERNEL_AIVEC}:KERNEL_AIVEC",
             f"{LEVEL_RUNTIME}_{FLIP_TASK}:FLIP_TASK", f"{LEVEL_RUNTIME}_{TYPE_TASK_TRACK}:task_track",
             f"{LEVEL_RUNTIME}_{TYPE_KERNEL_LAUNCH}:KernelLaunch",
             f"{LEVEL_NODE}_{TYPE_NODE_BASIC_INFO}:node_basic_info",
             f"{LEVEL_NODE}_{TYPE_TENSOR_INFO}:tensor_info", f"{LEVEL_NODE}_{TYPE_LAUNCH}:launch",
             f"{LEVEL_MODEL}_{TYPE_GRAPH_ID_MAP}:graph_id_map",
             f"{LEVEL_MODEL}_{TYPE_MODEL_EXECUTE}:ModelExecute",
             f"{LEVEL_ACL}_{TYPE_ACLMDL_EXECUTE}:aclmdlExecute"]
    types = OP_TYPES + MIX_OP_TYPES
    lines += [f"{LEVEL_ACL}_{(ACL_NN << 16) | (k + 1)}:aclnn{types[k][0]}" for k in used]
    if (ops.core >= 2).any():
        lines += [f"{LEVEL_RUNTIME}_{KERNEL_MIX_AIC}:KERNEL_MIX_AIC",
                  f"{LEVEL_RUNTIME}_{KERNEL_MIX_AIV}:KERNEL_MIX_AIV",
                  f"{LEVEL_NODE}_{TYPE_CONTEXT_ID_INFO}:context_id_info"]
    if early:
        lines += [f"{LEVEL_MODEL}_{TYPE_MODEL_LOAD}:ModelLoad", f"{LEVEL_RUNTIME}_{TYPE_STREAM_CREATE}:StreamCreate",
                  f"{LEVEL_RUNTIME}_{TYPE_MODEL_BIND_STREAM}:ModelBindStream"]
    return lines


# --------------------------------------------------------------------------------------------
# Device side


def _device_records(ops: _Ops, t: _Timing, profile: ChipProfile, pmu: bool,
                    rng: np.random.Generator, group_rng: Optional[np.random.Generator] = None,
                    steps: bool = False) -> Dict[str, np.ndarray]:
    """Device streams of one device, keyed by file stem (without `.slice_k`). `group_rng` (a
    metric group was given, or MIX ops): counters from `_group_counters`, and the MIX ops' block
    records. `steps`: MODEL_START / MODEL_END ts_track records around each model execution."""
    n, d = ops.n, t.device
    base = profile.dev_cntvct(d)
    start = (t.dev_start + base).astype(np.uint64)
    end = (t.dev_end + base).astype(np.uint64)
    task = (ops.seq & 0xFFFF).astype(np.uint16)
    out: Dict[str, np.ndarray] = {}

    main_aic = (ops.core == 0) | (ops.core == 2)
    mix = ops.core >= 2
    if profile.stars:
        soc = np.zeros(2 * n, dtype=records.STARS_LOG.dtype)
        # ACSQ start/end of a plain task, FFTS+ subtask start/end of a MIX op's subtask 0
        func = np.where(np.repeat(mix, 2), np.tile(np.array([FUNC_FFTS_START, FUNC_FFTS_END]), n),
                        np.tile(np.array([FUNC_ACSQ_START, FUNC_ACSQ_END]), n)).astype(np.uint64)
        sqe = np.repeat(np.where(main_aic, SQE_AI_CORE, SQE_AIV), 2)
        soc["head"] = _bits(records.STARS_LOG, "head", func_type=func, cnt=np.arange(2 * n) % 16, sqe_type=sqe)
        soc["magic"] = records.DEVICE_MAGIC
        soc["stream_raw"] = np.repeat(ops.stream, 2)
        soc["task_raw"] = np.repeat(task, 2)
        soc["syscnt"][0::2] = start
        soc["syscnt"][1::2] = end
        subtask = np.where(ops.core == 2, SUBTASK_MIX_AIC, SUBTASK_MIX_AIV).astype(np.uint16)
        soc["word16"] = np.repeat(np.where(mix, subtask, 0), 2)
        soc["word20"] = np.repeat(np.where(mix, FFTS_PLUS << 13, 0), 2)
        out[f"stars_soc.data.{d}"] = soc
    else:
        hwts = np.zeros(2 * n, dtype=records.HWTS_LOG.dtype)
        hwts["tag"] = _bits(records.HWTS_LOG, "tag", log_type=np.tile(np.array([0, 1]), n),
                            cnt=np.arange(2 * n) % 16)
        hwts["task_type"] = 0
        hwts["magic"] = records.DEVICE_MAGIC
        hwts["task_id"] = np.repeat(task, 2)
        hwts["syscnt"][0::2] = start
        hwts["syscnt"][1::2] = end
        hwts["stream_id"] = np.repeat(ops.stream, 2)
        out[f"hwts.data.{d}"] = hwts

    if pmu:
        if group_rng is None:
            cycles, counters = _pmu_counters(ops, t, profile, rng)
        else:
            cycles, counters = _group_counters(ops, t, profile, main_aic, group_rng)
        if profile.stars:
            ffts = np.zeros(n, dtype=records.FFTS_PMU.dtype)
            ffts["magic"] = records.DEVICE_MAGIC
            ffts["stream_raw"] = ops.stream
            ffts["task_raw"] = task
            # subtask type 0 AIC / 1 AIV and ffts type 0 AIC only / 1 AIV only; MIX: 6 / 7 and FFTS+
            ffts["word16"] = np.where(mix, subtask, ops.core)
            ffts["word20"] = np.where(mix, FFTS_PLUS, ops.core).astype(np.uint16) << 13
            ffts["total_cycle"] = cycles
            ffts["pmu"] = counters
            ffts["start_syscnt"] = start
            ffts["end_syscnt"] = end
            if mix.any():
                assert group_rng is not None
                both = _joined([_block_records(ops, t, profile, main_aic, start, end, task, group_rng), ffts])
                ffts = _sorted(both, both["end_syscnt"])
            ffts["head"] = _bits(records.FFTS_PMU, "head", func_type=np.where(
                ffts["head"] == FUNC_BLOCK_PMU, FUNC_BLOCK_PMU, FUNC_CONTEXT_PMU).astype(np.uint64),
                cnt=np.arange(len(ffts)) % 16)
            out[f"ffts_profile.data.{d}"] = ffts
        else:
            aic = np.zeros(n, dtype=records.AIC_PMU.dtype)
            aic["tag"] = _bits(records.AIC_PMU, "tag", cnt=np.arange(n) % 16)
            aic["magic"] = records.DEVICE_MAGIC
            aic["task_id"] = task
            aic["total_cycle"] = cycles
            aic["pmu"] = counters
            aic["stream_id"] = ops.stream
            out[f"aicore.data.{d}"] = aic

    flip_ops, flip_num = _flips(ops)
    tracks = []
    if flip_ops.size:
        ts = np.zeros(flip_ops.size, dtype=records.TS_TRACK.dtype)
        ts["mode"] = 1
        ts["tag"] = TS_TAG_FLIP
        ts["buf_size"] = records.TS_TRACK.size
        ts["syscnt"] = start[flip_ops] - np.uint64(1000 // profile.tick_ns)
        # bytes 16..23: u16 stream, u16 flip number, u16 reserved, u16 task id (0)
        ts["p16"] = ops.stream[flip_ops].astype(np.uint64) | (flip_num.astype(np.uint64) << np.uint64(16))
        tracks.append(ts)
    first, last = np.flatnonzero(ops.exec_first), np.flatnonzero(ops.exec_last)
    if steps and first.size:
        # MODEL_START 1 us before an execution's first task starts, MODEL_END 1 us after its last ends
        us = np.uint64(1000 // profile.tick_ns)
        step = np.zeros(2 * first.size, dtype=records.TS_TRACK.dtype)
        step["mode"] = 1
        step["tag"] = TS_TAG_STEP
        step["buf_size"] = records.TS_TRACK.size
        step["syscnt"][0::2] = start[first] - us
        step["syscnt"][1::2] = end[last] + us
        step["p16"] = np.repeat(ops.exec_index[first], 2)
        step["p24"] = MODEL_ID
        step["p32"] = MODEL_STREAM
        step["p34"][0::2] = (ops.seq[first] - 1) & 0xFFFF
        step["p34"][1::2] = (ops.seq[last] + 1) & 0xFFFF
        step["p36"] = np.tile(np.array([STEP_MODEL_START, STEP_MODEL_END]), first.size)
        tracks.append(step)
    if len(tracks) == 1:
        out[f"ts_track.data.{d}"] = tracks[0]
    elif tracks:
        both = _joined(tracks)
        out[f"ts_track.data.{d}"] = _sorted(both, both["syscnt"])
    return out


def _pmu_counters(ops: _Ops, t: _Timing, profile: ChipProfile,
                  rng: np.random.Generator) -> Tuple[np.ndarray, np.ndarray]:
    """total_cycle and the 8 counters of each task: cycles ~ busy fraction x duration x frequency
    x blocks, each counter = cycles x a ratio below its cap (icache misses below requests)."""
    n = ops.n
    dur_us = (t.dev_end - t.dev_start) * profile.tick_ns / 1000.0
    busy = rng.uniform(0.4, 0.95, n)
    cycles = np.floor(dur_us * int(profile.aic_frequency) * ops.block * busy).astype(np.uint64)
    caps = np.zeros((n, 8))
    miss_col: Dict[int, Tuple[int, int]] = {}
    for core, events in ((0, profile.aic_events), (1, profile.aiv_events)):
        ids = [int(e, 16) for e in events.split(",")]
        row = np.array([0.0 if core == 1 and e in _AIV_ZERO else _RATIO_CAP.get(e, 0.5) for e in ids])
        caps[ops.core == core] = row
        if 0x54 in ids and 0x55 in ids:
            miss_col[core] = (ids.index(0x54), ids.index(0x55))
    ratios = rng.random((n, 8)) * caps
    for core, (req, miss) in miss_col.items():
        sel = ops.core == core
        ratios[sel, miss] = ratios[sel, req] * rng.uniform(0.0, 0.5, int(sel.sum()))
    counters = np.floor(cycles[:, None] * ratios).astype(np.uint64)
    return cycles, counters


def _event_counters(cycles: np.ndarray, events: str, rng: np.random.Generator) -> np.ndarray:
    """(n, 8) counters for one event list: counter = cycles x a fraction in the event's range
    (`_GROUP_RANGE`), at least 1 where cycles are; icache misses (0x55) a fraction of requests."""
    ids = [int(e, 16) for e in events.split(",")][:8]
    n = len(cycles)
    frac = np.zeros((n, 8))
    for i, e in enumerate(ids):
        lo, hi = _GROUP_RANGE.get(e, (0.05, 0.6))
        frac[:, i] = rng.uniform(lo, hi, n)
    if 0x54 in ids and 0x55 in ids:
        frac[:, ids.index(0x55)] = frac[:, ids.index(0x54)] * rng.uniform(0.1, 0.5, n)
    counters = np.floor(cycles.astype(np.float64)[:, None] * frac).astype(np.uint64)
    counters[:, :len(ids)] = np.maximum(counters[:, :len(ids)], (cycles > 0).astype(np.uint64)[:, None])
    return counters


def _group_counters(ops: _Ops, t: _Timing, profile: ChipProfile, main_aic: np.ndarray,
                    rng: np.random.Generator) -> Tuple[np.ndarray, np.ndarray]:
    """total_cycle and counters of each task's (main core's) record when a metric group is given:
    cycles ~ busy fraction x duration x frequency x blocks; counters per `_event_counters` of the
    core's event list (AI Core: ai_core_profiling_events, AI Vector Core: aiv_profiling_events)."""
    dur_us = (t.dev_end - t.dev_start) * profile.tick_ns / 1000.0
    busy = rng.uniform(0.4, 0.95, ops.n)
    cycles = np.floor(dur_us * int(profile.aic_frequency) * ops.block * busy).astype(np.uint64)
    counters = np.zeros((ops.n, 8), dtype=np.uint64)
    for is_aic, events in ((True, profile.aic_events), (False, profile.aiv_events)):
        sel = main_aic == is_aic
        counters[sel] = _event_counters(cycles[sel], events, rng)
    return cycles, counters


def _block_records(ops: _Ops, t: _Timing, profile: ChipProfile, main_aic: np.ndarray, start: np.ndarray,
                   end: np.ndarray, task: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Block PMU records of the MIX ops' secondary core (block num x mix ratio of them per op),
    each ending inside its task, with the other core's event list (device_formats.md §4.2)."""
    mix = np.flatnonzero(ops.core >= 2)
    per_op = ops.block[mix].astype(np.int64) * ops.mix_ratio[mix]
    op = np.repeat(mix, per_op)
    k = np.arange(len(op)) - np.repeat(np.cumsum(per_op) - per_op, per_op)   # block index within its op
    blk = np.zeros(len(op), dtype=records.FFTS_PMU.dtype)
    blk["head"] = FUNC_BLOCK_PMU   # the func type alone for now: the caller fills the header bits
    blk["magic"] = records.DEVICE_MAGIC
    blk["stream_raw"] = ops.stream[op]
    blk["task_raw"] = task[op]
    blk["word16"] = np.where(ops.core[op] == 2, SUBTASK_MIX_AIC, SUBTASK_MIX_AIV)
    # byte 20: bit 0 core type (1 AIV: the secondary core of MIX_AIC), bits 1-7 core id; byte 21
    # bits 5-7: ffts type
    core_type = main_aic[op].astype(np.uint16)
    blk["word20"] = core_type | ((k % 48).astype(np.uint16) << 1) | np.uint16(FFTS_PLUS << 13)
    blk["block_id"] = k
    blk["start_syscnt"] = start[op] + np.uint64(1)
    blk["end_syscnt"] = np.maximum(end[op] - (per_op[np.searchsorted(mix, op)] - k).astype(np.uint64),
                                   start[op] + np.uint64(2))
    dur_us = (blk["end_syscnt"] - blk["start_syscnt"]).astype(np.float64) * profile.tick_ns / 1000.0
    cycles = np.floor(dur_us * int(profile.aic_frequency) * rng.uniform(0.5, 0.95, len(op))).astype(np.uint64)
    blk["total_cycle"] = cycles
    counters = np.zeros((len(op), 8), dtype=np.uint64)
    for is_aic, events in ((True, profile.aic_events), (False, profile.aiv_events)):
        sel = ~main_aic[op] == is_aic   # the secondary core is the other one
        counters[sel] = _event_counters(cycles[sel], events, rng)
    blk["pmu"] = counters
    return blk


# --------------------------------------------------------------------------------------------
# Control files


def _wall_text(mono_ns: int) -> Tuple[str, str]:
    """(collectionTime us text, collectionDate text, UTC) of a host monotonic time in ns."""
    us = WALL0_US + (mono_ns - HOST_MONO0_NS) // 1000
    date = datetime.fromtimestamp(us // 10 ** 6, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    return str(us), f"{date}.{us % 10 ** 6:06d}"


def _info_json(profile: ChipProfile, device: Optional[int]) -> Dict[str, object]:
    info: Dict[str, object] = {
        "jobInfo": "NA", "hostname": "localhost", "OS": "Linux", "hwtype": "aarch64", "pid": PID,
        "pid_name": "python3", "platform_version": profile.platform_version, "drvVersion": 467732,
        "version": "1.0", "cannVersion": "8.0.0", "rank_id": -1,
        "CPU": [{"Id": 0, "Name": "HiSilicon", "Frequency": f"{HOST_FREQ_MHZ:.6f}", "Logical_CPU_Count": 4,
                 "Type": "TaishanV110"}],
        "cpuCores": 4, "sysClockFreq": 100, "cpuNums": 4, "memoryTotal": 16000000, "netCardNums": 0,
        "netCard": [], "upTime": "1000", "devices": "64" if device is None else str(device), "DeviceInfo": [],
    }
    if device is not None:
        info["DeviceInfo"] = [{
            "id": device, "env_type": 3, "ctrl_cpu_id": "ARMv8_Cortex_A55", "ctrl_cpu_core_num": 1,
            "ctrl_cpu_endian_little": 1, "ts_cpu_core_num": 1, "ai_cpu_core_num": 6,
            "ai_core_num": profile.ai_core_num, "ai_cpu_core_id": 1, "ai_core_id": 0, "aicpu_occupy_bitmap": 126,
            "ctrl_cpu": "0", "ai_cpu": "1,2,3,4,5,6", "aiv_num": profile.aiv_num,
            "hwts_frequency": profile.hwts_frequency, "aic_frequency": profile.aic_frequency,
            "aiv_frequency": profile.aic_frequency,
        }]
    return info


def _sample_json(profile: ChipProfile, device: Optional[int]) -> Dict[str, object]:
    return {
        "devices": "64" if device is None else str(device), "jobId": "NA", "result_dir": "", "profLevel": "l1",
        "taskTime": "l1", "ascendcl": "on", "runtime_api": "on", "task_trace": "on", "ts_timeline": "on",
        "hwts_log": "on", "ai_core_profiling": "on", "ai_core_profiling_mode": "task-based",
        "ai_core_metrics": profile.aic_metrics, "aiv_profiling": "on", "aiv_profiling_mode": "task-based",
        "aiv_metrics": profile.aiv_metrics, "ai_core_profiling_events": profile.aic_events,
        "aiv_profiling_events": profile.aiv_events, "llc_profiling": "", "instr_profiling_freq": 1000,
        "aicore_sampling_interval": 10, "aiv_sampling_interval": 10,
    }


def _write_text(path: str, text: str) -> None:
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)


def _write_control(result_dir: str, profile: ChipProfile, device: Optional[int], end_ns: int) -> None:
    suffix = "" if device is None else f".{device}"
    begin_us, begin_date = _wall_text(HOST_MONO0_NS)
    end_us, end_date = _wall_text(end_ns)
    start_info = {"collectionDateBegin": begin_date, "collectionDateEnd": "", "collectionTimeBegin": begin_us,
                  "collectionTimeEnd": "", "clockMonotonicRaw": str(HOST_MONO0_NS)}
    end_info = {"collectionDateBegin": "", "collectionDateEnd": end_date, "collectionTimeBegin": "",
                "collectionTimeEnd": end_us, "clockMonotonicRaw": str(end_ns)}
    realtime = f"clock_realtime: {WALL0_US * 1000}\n"
    host_start = (f"[{'Host' if device is None else f'Device{device}'}]\n{realtime}"
                  f"clock_monotonic_raw: {HOST_MONO0_NS}\ncntvct: {HOST_CNTVCT0}\ncntvct_diff: 0\n")
    _write_text(os.path.join(result_dir, f"info.json{suffix}"), json.dumps(_info_json(profile, device)))
    _write_text(os.path.join(result_dir, "sample.json"), json.dumps(_sample_json(profile, device)))
    _write_text(os.path.join(result_dir, f"start_info{suffix}"), json.dumps(start_info))
    _write_text(os.path.join(result_dir, f"end_info{suffix}"), json.dumps(end_info))
    _write_text(os.path.join(result_dir, f"host_start.log{suffix}"), host_start)
    if device is not None:
        _write_text(os.path.join(result_dir, f"dev_start.log{suffix}"),
                    f"{realtime}clock_monotonic_raw: {HOST_MONO0_NS}\ncntvct: {profile.dev_cntvct(device)}\n")


# --------------------------------------------------------------------------------------------
# Entry points


def _group_events(metrics: str) -> str:
    return metrics.split(":", 1)[1] if metrics.startswith("Custom:") else GROUP_EVENTS[metrics]


def with_metrics(profile: ChipProfile, metrics: str, events: Optional[str] = None,
                 aiv_metrics: Optional[str] = None) -> ChipProfile:
    """The chip's profile with another metric group for both cores, as the collector writes
    sample.json: the group's events from GROUP_EVENTS (or `events`; a "Custom:<list>" group
    defaults to its list); on 910B an AI Core PipeUtilizationExct keeps PipeUtilization on the
    AI Vector Core. `aiv_metrics`: another group (with its own events) for the AI Vector Core."""
    if events is None:
        events = _group_events(metrics)
    aiv_events = events
    if aiv_metrics is not None:
        aiv_events = _group_events(aiv_metrics)
    elif metrics == "PipeUtilizationExct" and profile.stars:
        aiv_metrics, aiv_events = "PipeUtilization", EVENTS_PIPE
    else:
        aiv_metrics = metrics
    return dataclasses.replace(profile, aic_metrics=metrics, aic_events=events, aiv_metrics=aiv_metrics,
                               aiv_events=aiv_events)


def write_collection(out_dir: str, *, chip: str = "910B", n_tasks: int = 40, devices: int = 1,
                     pmu: bool = True, tensors: bool = True, model_fraction: float = 0.0, seed: int = 0,
                     slices: int = 1, name: Optional[str] = None, straddle: bool = True,
                     metrics: Optional[str] = None, events: Optional[str] = None,
                     aiv_metrics: Optional[str] = None, mix_fraction: float = 0.0, steps: bool = False,
                     host_ns: bool = False, host_start: bool = True, early_apis: int = 0) -> str:
    """Write a synthetic raw collection under `out_dir`; return the PROF directory's path.

    chip:           "910B" (platform 5: stars_soc + ffts_profile, 50 MHz device counter,
                    PipeUtilizationExct / PipeUtilization) or "310P" (platform 4: hwts + aicore,
                    100 MHz device counter, PipeUtilization both).
    n_tasks:        compute tasks (= ops) per device; each device runs the same op sequence.
                    Eager ops run on stream 2, model ops on stream 3, task ids 1, 2, ... per
                    stream; past 65535 the host task id holds (flip << 16) | (id & 0xFFFF), the
                    device records the low 16 bits, and flips are reported (host FLIP_TASK
                    task_track, device ts_track tag 14).
    devices:        number of devices `device_0..`; device d is driven by host thread 4012 + d.
    pmu:            write the PMU stream (ffts_profile: one context record per task; aicore:
                    one record per task, end-time order).
    tensors:        write tensor_info (one input and one output ND FLOAT16 tensor per op).
    model_fraction: about this fraction of the ops runs inside aclmdlExecute of model 1, in
                    whole executions of OPS_PER_EXECUTION ops (at least one execution if > 0).
    seed:           seeds every random choice (op types, durations, counters, slice cuts);
                    the same arguments give byte-identical files.
    slices:         split every binary stream into this many `*.slice_k` files (text
                    dictionaries stay in slice_0).
    straddle:       cut slices at arbitrary byte positions, inside records (default); False
                    cuts on record boundaries.
    name:           directory name; default `PROF_000001_20231125090304544_<8 letters A-R>`.
    metrics:        a metric group (GROUP_EVENTS' keys, or "Custom:0x8,0x9,..."): sample.json names
                    it and its events (`with_metrics`), and every counter of the group's events is
                    nonzero (`_event_counters`); default: the chip's pipe groups, as before.
    events:         with `metrics`, an explicit event list instead of the group's.
    aiv_metrics:    with `metrics`, another group (and its events) for the AI Vector Core.
    mix_fraction:   910B only: about this fraction of the ops (at least 2) become MIX_AIC / MIX_AIV
                    ops, alternately in op order: GE task type 4 / 5, KERNEL_MIX_AIC / _AIV, block
                    num 4..24 with mix ratio MIX_RATIO, one context_id_info (context 0); on the
                    device FFTS+ subtask logs instead of ACSQ logs, a context PMU record of subtask
                    type MIX_AIC / MIX_AIV from the main core and block num x MIX_RATIO block PMU
                    records from the other core. Counters are drawn as with `metrics` (every one
                    nonzero), of the chip's own groups when `metrics` is not given.
    steps:          step-trace tags: ts_track MODEL_START / MODEL_END (model 1, index = execution
                    index) 1 us before and after each execution's device tasks; each takes a task
                    id on the model stream, before and after the execution's ops.
    host_ns:        host time stamps are CLOCK_MONOTONIC_RAW ns instead of 100 MHz counter ticks
                    (info.json still gives CPU[0].Frequency 100 MHz, as it does on some hosts).
    host_start:     write host/host_start.log (False: none, as some real 910B collections have).
    early_apis:     k > 0: host API records before the collection start (start_info's
                    clockMonotonicRaw / collectionTimeBegin; host_start.log keeps its sync point).
                    The host calls of the first k ops (all eager) move before it, one slot apart,
                    the last slot beginning EARLY_LAST_NS (10 us) before the start: its ACL API,
                    launch and KernelLaunch straddle the start, the other ops' calls end before it;
                    their device tasks keep their times. Before them, on each host thread: a
                    ModelLoad event pair (level 15000 type 2, model MODEL_ID, unaging) of 200 us
                    ending 100 us before the first early slot, holding a runtime StreamCreate; a
                    runtime ModelBindStream beginning inside the ModelLoad and ending after it; and
                    a StreamCreate of another thread (tid + 800) inside the ModelLoad's span.

    Times: op i of device d occupies the host slot starting at FIRST_OP_NS + d x 17.32 us +
    i x OP_PERIOD_NS (50 us); host time stamps are multiples of 10 ns, device times multiples
    of the device tick (20 ns on 910B, 10 ns on 310P); end_info is 1 ms after the last record.
    """
    key = chip.upper()
    if key not in CHIPS:
        raise ValueError(f"chip must be one of {sorted(CHIPS)}, not {chip!r}")
    if n_tasks < 0 or devices < 1 or slices < 1 or not 0.0 <= model_fraction <= 1.0:
        raise ValueError("need n_tasks >= 0, devices >= 1, slices >= 1 and 0 <= model_fraction <= 1")
    profile = CHIPS[key]
    if not 0.0 <= mix_fraction <= 1.0 or (mix_fraction > 0 and not profile.stars):
        raise ValueError("mix_fraction is a fraction, and MIX ops need a 910B chip")
    if metrics is not None:
        profile = with_metrics(profile, metrics, events, aiv_metrics)
    elif events is not None or aiv_metrics is not None:
        raise ValueError("events and aiv_metrics need a metric group (metrics=...)")
    rng = np.random.default_rng(seed)
    letters = "".join(chr(ord("A") + int(k)) for k in rng.integers(0, 18, 8))
    prof = os.path.join(out_dir, name or f"PROF_000001_20231125090304544_{letters}")
    cut_rng = np.random.default_rng([seed, 1])  # slice cuts never disturb the data's randomness

    ops = _plan_ops(n_tasks, profile, model_fraction, rng, mix_fraction, np.random.default_rng([seed, 4]), steps)
    timings = [_plan_timing(ops, d, profile, np.random.default_rng([seed, 2, d])) for d in range(devices)]
    if early_apis < 0 or early_apis > ops.n or ops.model[:early_apis].any():
        raise ValueError("early_apis counts the first ops, which must all be eager ops")
    host_timings = [_moved_early(t, early_apis) for t in timings]

    host_data = os.path.join(prof, "host", "data")
    os.makedirs(host_data)
    for stem, arr in sorted(_host_records(ops, host_timings, tensors, early_apis).merged().items()):
        if host_ns:
            arr = _ticks_to_ns(arr)
        _write_stream(host_data, stem, arr, slices, straddle, cut_rng)
    cat = ops.catalogue
    _write_text(os.path.join(host_data, "unaging.additional.hash_dic.slice_0"),
                "".join(f"{i}:{s}\n" for i, s in zip(cat.ids.tolist(), cat.texts)))
    _write_text(os.path.join(host_data, "unaging.additional.type_info_dic.slice_0"),
                "".join(f"{line}\n" for line in _type_info_lines(ops, early_apis > 0)))

    last_ns = FIRST_OP_NS
    for t in timings:
        if ops.n:
            last_ns = max(last_ns, int(t.acl_end.max()), int(t.launch_end.max()) + 2000,
                          HOST_MONO0_NS + int(t.dev_end.max()) * profile.tick_ns)
        dev_data = os.path.join(prof, f"device_{t.device}", "data")
        os.makedirs(dev_data)
        grouped = metrics is not None or mix_fraction > 0
        group_rng = np.random.default_rng([seed, 5, t.device]) if grouped else None
        streams = _device_records(ops, t, profile, pmu, np.random.default_rng([seed, 3, t.device]), group_rng,
                                  steps)
        for stem, arr in sorted(streams.items()):
            _write_stream(dev_data, stem, arr, slices, straddle, cut_rng)
    end_ns = last_ns + END_MARGIN_NS
    _write_control(os.path.join(prof, "host"), profile, None, end_ns)
    if not host_start:
        os.remove(os.path.join(prof, "host", "host_start.log"))
    for t in timings:
        _write_control(os.path.join(prof, f"device_{t.device}"), profile, t.device, end_ns)
    return prof


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


def _main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description="Write a synthetic collection and time it.")
    parser.add_argument("out_dir")
    parser.add_argument("n_tasks", nargs="?", type=int, default=1_000_000)
    parser.add_argument("--chip", default="910B", choices=sorted(CHIPS))
    parser.add_argument("--devices", type=int, default=1)
    parser.add_argument("--model-fraction", type=float, default=0.0)
    parser.add_argument("--slices", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-pmu", action="store_true")
    parser.add_argument("--no-tensors", action="store_true")
    parser.add_argument("--metrics", default=None, help="metric group, or Custom:<event list>")
    parser.add_argument("--events", default=None, help="with --metrics: an explicit event list")
    parser.add_argument("--mix-fraction", type=float, default=0.0, help="910B: fraction of MIX ops")
    parser.add_argument("--steps", action="store_true", help="MODEL_START / MODEL_END step-trace tags")
    parser.add_argument("--early-apis", type=int, default=0, help="the first K eager ops' APIs before the start")
    parser.add_argument("--name", default=None, help="PROF directory name")
    args = parser.parse_args(argv)
    os.makedirs(args.out_dir, exist_ok=True)
    began = time.perf_counter()
    path = write_collection(args.out_dir, chip=args.chip, n_tasks=args.n_tasks, devices=args.devices,
                            pmu=not args.no_pmu, tensors=not args.no_tensors,
                            model_fraction=args.model_fraction, seed=args.seed, slices=args.slices,
                            metrics=args.metrics, events=args.events, mix_fraction=args.mix_fraction,
                            steps=args.steps, early_apis=args.early_apis, name=args.name)
    seconds = time.perf_counter() - began
    size = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(path) for f in fs)
    print(f"{path}: {args.n_tasks} tasks x {args.devices} device(s), {size / 2 ** 20:.1f} MiB "
          f"in {seconds:.2f} s")


if __name__ == "__main__":
    _main()
