"""Communication (HCCL) for `write_collection(hccl_ops=N, hccl_tasks_per_op=K)`: N all-reduce
collectives per device after its compute ops, each a node-level HCCL launch of K tasks
(formats_more.md §1.2-1.5).

Host, on the device's thread, collective j in its own slot S (HCCL_PERIOD_NS(K) apart, the first
one OP_PERIOD_NS after the last compute op's slot): an ACL `HcclAllReduce` API [S, node end +
3 us] (category HOST_HCCL) ⊃ a node-level launch `HcclAllreduce` (type 0x020001, item id the hash
of `hcom_allReduce_`) [S + 3 us, S + 7 us + K x 5 us] with a node_basic_info (GE task type HCCL,
op type HcomAllReduce) and an hccl_op_info (FP16, MESH-RING-NA-NA, group hccl_world_group) 1 us
after it begins ⊃ task i: a level-5500 API [S + 7 us + i x 5 us, +3 us] named `master` or
`slave`, an hccl_info 1 us and a task_track 2 us after it begins. Task i follows the 2-rank
all-reduce pattern HCCL_PATTERN[i % 11] (rank 0 of 2; the slave tasks on stream 6, plane 1, the
master tasks on stream 5, plane 0; ctxID 0xFFFFFFFF).

Device: each task an ACSQ start/end pair (sqe type 6 Notify_Record, 7 Notify_Wait, 11 Memcpy /
Reduce_Inline) starting 15 us after its task_track, 1..3.9 us long, so no two tasks of a stream
overlap. Task ids count 1, 2, ... per stream; past 65535 the host id holds (flip << 16) | low and
the flips are reported as the compute streams' are (host FLIP_TASK task_track 2 us before the
collective's slot, device ts_track tag 14 1 us before the task starts).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Tuple

import numpy as np

from msprof_kit.parsers import records

from .conventions import (
    DEVICE_OFFSET_NS, FIRST_OP_NS, FLIP_TASK, FUNC_ACSQ_END, FUNC_ACSQ_START, HOST_MONO0_NS, LEVEL_ACL, LEVEL_NODE, LEVEL_RUNTIME,
    OP_PERIOD_NS, TYPE_NODE_BASIC_INFO, TYPE_TASK_TRACK, ChipProfile, hash_ids,
)
from .device import flip_records
from .packing import Streams, apis, bits, compact
from .plan import Timing

LEVEL_HCCL = 5500
TYPE_HCCL_INFO = 0                                   #: level 5500 additional
TYPE_MASTER, TYPE_SLAVE = 0x010001, 0x010002         #: level 5500 APIs "master" / "slave"
TYPE_HCCL_OP_INFO = 10                               #: level 10000 compact
TYPE_NODE_HCCL = 0x020001                            #: level 10000 API of the HCCL node launch
HOST_HCCL = 7                                        #: ACL category of HCCL APIs
TYPE_ACL_HCCL = (HOST_HCCL << 16) | 1
GE_HCCL = 9                                          #: node_basic_info task type
RT_MEMCPY_ASYNC, RT_NOTIFY_WAIT, RT_NOTIFY_RECORD = 5, 14, 15
SQE_NOTIFY_RECORD, SQE_NOTIFY_WAIT, SQE_SDMA = 6, 7, 11
MASTER_STREAM, SLAVE_STREAM = 5, 6
FP16 = 3
LINK_ON_CHIP, LINK_HCCS = 0, 1
TRANSPORT_SDMA, TRANSPORT_LOCAL = 0, 2
RDMA_RESERVED, REDUCE_SUM, REDUCE_RESERVED = 255, 0, 255
U32_NONE = 0xFFFFFFFF

RAW_NAME, OP_TYPE, ACL_NAME, NODE_NAME = "hcom_allReduce_", "HcomAllReduce", "HcclAllReduce", "HcclAllreduce"
GROUP, ALG = "hccl_world_group", "MESH-RING-NA-NA"
CCL_TAG = f"{OP_TYPE}_{GROUP}_0"
TASK_NAMES = ("Notify_Record", "Notify_Wait", "Memcpy", "Reduce_Inline")
TASK_SLOT_NS = 5_000                                  #: one task's API slot

#: The 2-rank all-reduce of rank 0, one row per task: (name index into TASK_NAMES, slave, with the
#: peer (remote rank 1, HCCS) or local, SDMA size share (0, 1 half, 2 whole), stage).
HCCL_PATTERN: Tuple[Tuple[int, bool, bool, int, int], ...] = (
    (0, False, False, 0, 0), (1, True, False, 0, 0), (2, True, False, 1, 0), (0, True, False, 0, 0),
    (2, False, False, 1, 0), (0, False, True, 0, 0), (1, False, True, 0, 0), (3, False, True, 2, 1),
    (0, False, True, 0, 1), (1, False, True, 0, 1), (1, False, False, 0, 1),
)
_RT_TYPE = np.array([RT_NOTIFY_RECORD, RT_NOTIFY_WAIT, RT_MEMCPY_ASYNC, RT_MEMCPY_ASYNC], dtype=np.uint64)
_SQE = np.array([SQE_NOTIFY_RECORD, SQE_NOTIFY_WAIT, SQE_SDMA, SQE_SDMA], dtype=np.uint64)


def hccl_period_ns(k: int) -> int:
    """Host slot of one collective of k tasks: 7 us before the tasks, 8 us after them."""
    return 15_000 + k * TASK_SLOT_NS


@dataclass
class HcclPlan:
    """N collectives of K tasks on one device: the task arrays are op-major (task i of op j at j*K+i)."""

    n: int
    k: int
    slot: np.ndarray        #: collective slot starts, ns
    count: np.ndarray       #: element count of each collective
    api_begin: np.ndarray   #: level-5500 API begin of each task, ns
    pattern: np.ndarray     #: HCCL_PATTERN row of each task
    slave: np.ndarray
    stream: np.ndarray      #: u16
    seq: np.ndarray         #: task id counting 1, 2, ... per stream (u32, flip << 16 | low)
    dev_start: np.ndarray   #: device ticks since the collection start
    dev_end: np.ndarray

    @property
    def node_begin(self) -> np.ndarray:
        return self.slot + 3000

    @property
    def node_end(self) -> np.ndarray:
        return self.slot + 7000 + self.k * TASK_SLOT_NS

    @property
    def acl_end(self) -> np.ndarray:
        return self.node_end + 3000

    def flips(self) -> Tuple[np.ndarray, np.ndarray]:
        """Tasks that open a new batch on their stream, and their flip numbers."""
        first = np.flatnonzero((self.seq & 0xFFFF) == 0)
        return first, (self.seq[first] >> 16).astype(np.uint16)


def plan_hccl(n: int, k: int, n_compute: int, t: Timing, profile: ChipProfile,
              rng: np.random.Generator) -> HcclPlan:
    """The collectives of the device of `t`, in the slots after its n_compute compute ops'."""
    first_slot = FIRST_OP_NS + t.device * DEVICE_OFFSET_NS + n_compute * OP_PERIOD_NS
    slot = first_slot + np.arange(n, dtype=np.int64) * hccl_period_ns(k)
    count = rng.integers(1 << 10, 1 << 22, n).astype(np.uint64)
    i = np.tile(np.arange(k, dtype=np.int64), n)
    api_begin = np.repeat(slot + 7000, k) + i * TASK_SLOT_NS
    pattern = i % len(HCCL_PATTERN)
    slave = np.array([row[1] for row in HCCL_PATTERN])[pattern]
    stream = np.where(slave, SLAVE_STREAM, MASTER_STREAM).astype(np.uint16)
    seq = np.zeros(n * k, dtype=np.uint32)
    for value in (MASTER_STREAM, SLAVE_STREAM):
        mask = stream == value
        seq[mask] = np.arange(1, int(mask.sum()) + 1, dtype=np.uint32)
    tick = profile.tick_ns
    dev_start = -(-(api_begin + 2000 + 15_000 - HOST_MONO0_NS) // tick)
    dev_end = dev_start + rng.integers(1000 // tick, 3900 // tick + 1, n * k)
    return HcclPlan(n, k, slot, count, api_begin, pattern, slave, stream, seq, dev_start, dev_end)


def hccl_host(streams: Streams, plan: HcclPlan, t: Timing) -> None:
    """Add the host records of the collectives of `plan` (thread of `t`) to `streams`."""
    tid, n, k = t.thread_id, plan.n, plan.k
    ids = dict(zip(hccl_texts(), hash_ids(hccl_texts()).tolist()))
    streams.add("aging.api_event.data", *apis(n, LEVEL_ACL, TYPE_ACL_HCCL, tid, plan.slot, plan.acl_end))
    streams.add("aging.api_event.data", *apis(n, LEVEL_NODE, TYPE_NODE_HCCL, tid, plan.node_begin, plan.node_end,
                                              item_id=ids[RAW_NAME]))
    info_ts = plan.node_begin + 1000
    nbi = compact(records.NODE_BASIC_INFO, n, LEVEL_NODE, TYPE_NODE_BASIC_INFO, tid, 28, info_ts)
    nbi["op_name"] = ids[RAW_NAME]
    nbi["task_type"] = GE_HCCL
    nbi["op_type"] = ids[OP_TYPE]
    streams.add("aging.compact.node_basic_info", nbi, nbi["timestamp"])
    opi = compact(records.HCCL_OP_INFO, n, LEVEL_NODE, TYPE_HCCL_OP_INFO, tid, 26, info_ts)
    opi["data_type"] = FP16
    opi["alg_type"] = ids[ALG]
    opi["count"] = plan.count
    opi["group_name"] = ids[GROUP]
    streams.add("aging.compact.hccl_op_info", opi, opi["timestamp"])

    m = n * k
    api_type = np.where(plan.slave, TYPE_SLAVE, TYPE_MASTER).astype(np.uint32)
    streams.add("aging.api_event.data", *apis(m, LEVEL_HCCL, api_type, tid, plan.api_begin,
                                              plan.api_begin + 3000, item_id=ids[RAW_NAME]))
    rows = np.array(HCCL_PATTERN, dtype=np.int64)[plan.pattern]
    name, peer, share, stage = rows[:, 0], rows[:, 2].astype(bool), rows[:, 3], rows[:, 4]
    size = np.repeat(plan.count * np.uint64(2), k)   # FP16 bytes of the collective
    info = compact(records.HCCL_INFO, m, LEVEL_HCCL, TYPE_HCCL_INFO, tid, 120, plan.api_begin + 1000)
    info["item_id"] = hash_ids(list(TASK_NAMES))[name]
    info["ccl_tag"] = ids[CCL_TAG]
    info["group_name"] = ids[GROUP]
    info["local_rank"] = 0
    info["remote_rank"] = peer.astype(np.uint32)
    info["rank_size"] = 2
    info["work_flow_mode"] = 1
    info["plane_id"] = plan.slave.astype(np.uint32)
    info["ctx_id"] = U32_NONE
    info["notify_id"] = np.where(share == 0, 0x20000000 + 2 * plan.pattern, 0xFFFFFFFFFFFFFFFF).astype(np.uint64)
    info["stage"] = stage
    info["role"] = (share == 1).astype(np.uint32)
    info["duration_estimated"] = np.where(share > 0, 2.5, 0.0)
    info["src_addr"] = 0x12C0_0000_0000 + np.arange(m, dtype=np.uint64) % 4096 * np.uint64(0x10000)
    info["dst_addr"] = info["src_addr"] + np.uint64(0x8000_0000)
    info["data_size"] = np.where(share == 2, size, np.where(share == 1, size // np.uint64(2), 0))
    info["op_type"] = np.where(name == 3, REDUCE_SUM, REDUCE_RESERVED)
    info["data_type"] = FP16
    info["link_type"] = np.where(peer, LINK_HCCS, LINK_ON_CHIP)
    info["transport_type"] = np.where(peer | (share > 0), TRANSPORT_SDMA, TRANSPORT_LOCAL)
    info["rdma_type"] = RDMA_RESERVED
    streams.add("aging.additional.hccl_info", info, info["timestamp"])

    track = compact(records.TASK_TRACK, m, LEVEL_RUNTIME, TYPE_TASK_TRACK, tid, 40, plan.api_begin + 2000)
    track["device"] = t.device
    track["stream_id"] = plan.stream
    track["task_id"] = plan.seq
    track["task_type"] = _RT_TYPE[name]
    streams.add("aging.compact.task_track", track, track["timestamp"])

    flip_tasks, flip_num = plan.flips()
    if flip_tasks.size:   # before the collective's slot, outside every API
        flip = compact(records.TASK_TRACK, flip_tasks.size, LEVEL_RUNTIME, TYPE_TASK_TRACK, tid, 40,
                       plan.slot[flip_tasks // k] - 2000)
        flip["device"] = t.device
        flip["stream_id"] = plan.stream[flip_tasks]
        flip["task_id"] = flip_num.astype(np.uint32) << np.uint32(16)
        flip["task_type"] = FLIP_TASK
        streams.add("aging.compact.task_track", flip, flip["timestamp"])


def hccl_device(plan: HcclPlan, device: int, profile: ChipProfile) -> Dict[str, np.ndarray]:
    """The device records of the collectives: ACSQ start/end pairs and the flips' ts_track records."""
    m = plan.n * plan.k
    base = profile.dev_cntvct(device)
    start = (plan.dev_start + base).astype(np.uint64)
    end = (plan.dev_end + base).astype(np.uint64)
    name = np.array([row[0] for row in HCCL_PATTERN], dtype=np.int64)[plan.pattern]
    soc = np.zeros(2 * m, dtype=records.STARS_LOG.dtype)
    soc["head"] = bits(records.STARS_LOG, "head", func_type=np.tile(np.array([FUNC_ACSQ_START, FUNC_ACSQ_END]), m),
                       cnt=np.arange(2 * m) % 16, sqe_type=np.repeat(_SQE[name], 2))
    soc["magic"] = records.DEVICE_MAGIC
    soc["stream_raw"] = np.repeat(plan.stream, 2)
    soc["task_raw"] = np.repeat((plan.seq & 0xFFFF).astype(np.uint16), 2)
    soc["syscnt"][0::2] = start
    soc["syscnt"][1::2] = end
    out = {f"stars_soc.data.{device}": soc}
    flip_tasks, flip_num = plan.flips()
    if flip_tasks.size:
        out[f"ts_track.data.{device}"] = flip_records(plan.stream[flip_tasks], start[flip_tasks], flip_num,
                                                      profile.tick_ns)
    return out


def hccl_texts() -> List[str]:
    """The names the collectives' records hash (hash_dic lines)."""
    return [RAW_NAME, OP_TYPE, GROUP, ALG, CCL_TAG, *TASK_NAMES]


def hccl_type_lines() -> List[str]:
    """type_info_dic lines of the collectives' APIs, records and runtime task types."""
    return [f"{LEVEL_HCCL}_{TYPE_MASTER}:master", f"{LEVEL_HCCL}_{TYPE_SLAVE}:slave",
            f"{LEVEL_HCCL}_{TYPE_HCCL_INFO}:hccl_info", f"{LEVEL_NODE}_{TYPE_HCCL_OP_INFO}:hccl_op_info",
            f"{LEVEL_NODE}_{TYPE_NODE_HCCL}:{NODE_NAME}", f"{LEVEL_ACL}_{TYPE_ACL_HCCL}:{ACL_NAME}",
            f"{LEVEL_RUNTIME}_{RT_NOTIFY_WAIT}:NOTIFY_WAIT", f"{LEVEL_RUNTIME}_{RT_NOTIFY_RECORD}:NOTIFY_RECORD",
            f"{LEVEL_RUNTIME}_{RT_MEMCPY_ASYNC}:MEMCPY_ASYNC"]
