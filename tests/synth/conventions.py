"""The conventions every synthetic collection follows (the golden inputs' own, see the package
docstring): clock model, fixed identities, host levels and types, op types, metric groups and their
events, the chip profiles; and the collector's hash ids of names."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Sequence, Tuple

import numpy as np

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
