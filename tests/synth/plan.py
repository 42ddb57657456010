"""The op sequence every device runs (types, names, streams, task ids, MIX ops) and each
device's timing of it (host slots, device ticks), early host calls moved before the start."""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Tuple

import numpy as np

from .conventions import (
    DEVICE_OFFSET_NS, EAGER_STREAM, EARLY_LAST_NS, FIRST_OP_NS, FIRST_THREAD_ID, HOST_MONO0_NS,
    HOST_TICK_NS, MIX_OP_TYPES, MIX_RATIO, MODEL_NAME, MODEL_STREAM, NAME_POOL, OP_PERIOD_NS, OP_TYPES,
    OPS_PER_EXECUTION, ChipProfile, double_hash, hash_ids,
)


@dataclass
class Catalogue:
    """Names and hash ids used by a collection, written to hash_dic."""

    texts: List[str]
    ids: np.ndarray


@dataclass
class Ops:
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
    catalogue: Catalogue


def plan_ops(n: int, profile: ChipProfile, model_fraction: float, rng: np.random.Generator,
             mix_fraction: float = 0.0, mix_rng: Optional[np.random.Generator] = None,
             steps: bool = False) -> Ops:
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

    return Ops(n=n, model=model, exec_index=exec_index, exec_first=exec_first, exec_last=exec_last,
               type_index=type_index, core=core, name_id=name_id,
               type_id=type_id, kernel_id=kernel_id, block=block, mix_ratio=mix_ratio,
               op_flag=op_flag, dims=dims, stream=stream, seq=seq,
               catalogue=Catalogue(texts, hash_ids(texts)))


@dataclass
class Timing:
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


def plan_timing(ops: Ops, device: int, profile: ChipProfile, rng: np.random.Generator) -> Timing:
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
    return Timing(device, FIRST_THREAD_ID + device, slot, launch_begin, kernel_begin, kernel_end,
                  launch_end, acl_end, dev_start.astype(np.int64), dev_end.astype(np.int64))


def early_slots(k: int) -> np.ndarray:
    """Host slot starts of the first `k` ops with `early_apis`: one OP_PERIOD_NS apart, the last
    EARLY_LAST_NS before the collection start (its ACL API and KernelLaunch straddle the start:
    they end at least 19 us after the slot begins), the others' calls all end before it, ns."""
    return HOST_MONO0_NS - EARLY_LAST_NS - (k - 1 - np.arange(k, dtype=np.int64)) * OP_PERIOD_NS


def moved_early(t: Timing, k: int) -> Timing:
    """`t` with the host calls of the first `k` ops moved to `early_slots` (every host time of an
    op shifted alike, so the call shape holds); their device tasks keep their times, after the start."""
    if k == 0:
        return t
    shift = np.zeros(len(t.slot), dtype=np.int64)
    shift[:k] = early_slots(k) - t.slot[:k]
    moved = {name: getattr(t, name) + shift
             for name in ("slot", "launch_begin", "kernel_begin", "kernel_end", "launch_end", "acl_end")}
    return Timing(t.device, t.thread_id, dev_start=t.dev_start, dev_end=t.dev_end, **moved)


def flips(ops: Ops) -> Tuple[np.ndarray, np.ndarray]:
    """Ops whose task is the first of a new batch on its stream, and their flip numbers."""
    first = np.flatnonzero((ops.seq & 0xFFFF) == 0)
    return first, (ops.seq[first] >> 16).astype(np.uint16)
