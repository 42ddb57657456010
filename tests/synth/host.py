"""The host side of a collection: API, compact and additional records of every host thread, and
the type_info dictionary's lines."""
from __future__ import annotations

from typing import List, Sequence

import numpy as np

from msprof_kit.parsers import records

from .conventions import (
    ACL_NN, DTYPE_FLOAT16, FLIP_TASK, FORMAT_ND, GE_AI_CORE, GE_AI_VECTOR_CORE, GE_MIX_AIC,
    GE_MIX_AIV, KERNEL_AICORE, KERNEL_AIVEC, KERNEL_MIX_AIC, KERNEL_MIX_AIV, LEVEL_ACL, LEVEL_MODEL,
    LEVEL_NODE, LEVEL_RUNTIME, MIX_OP_TYPES, MODEL_ID, MODEL_LOAD_GAP_NS, MODEL_LOAD_NS, MODEL_NAME,
    OP_TYPES, OTHER_THREAD_OFFSET, TYPE_ACLMDL_EXECUTE, TYPE_CONTEXT_ID_INFO, TYPE_GRAPH_ID_MAP,
    TYPE_KERNEL_LAUNCH, TYPE_LAUNCH, TYPE_MODEL_BIND_STREAM, TYPE_MODEL_EXECUTE, TYPE_MODEL_LOAD,
    TYPE_NODE_BASIC_INFO, TYPE_STREAM_CREATE, TYPE_TASK_TRACK, TYPE_TENSOR_INFO, double_hash,
)
from .packing import Streams, apis, bits, compact
from .plan import Ops, Timing, early_slots, flips


def _early_apis(streams: "Streams", t: Timing, k: int) -> None:
    """The host APIs `early_apis` adds before the collection start on the thread of `t` (times in
    ns from the first early op's slot S): a ModelLoad event pair [S - 300 us, S - 100 us] (model
    MODEL_ID, request 0, unaging) holding a runtime StreamCreate [+20 us, +30 us of its begin];
    a runtime ModelBindStream that begins 20 us before the ModelLoad ends and ends 30 us after;
    and on another thread (tid + OTHER_THREAD_OFFSET) a StreamCreate inside the ModelLoad's span."""
    tid = t.thread_id
    load_end = int(early_slots(k)[0]) - MODEL_LOAD_GAP_NS
    load_begin = load_end - MODEL_LOAD_NS
    for when in (load_begin, load_end):
        streams.add("unaging.api_event.data", *apis(1, LEVEL_MODEL, TYPE_MODEL_LOAD, tid, np.array([when]), None,
                                                    item_id=MODEL_ID))
    runtime = ((tid, TYPE_STREAM_CREATE, load_begin + 20_000, load_begin + 30_000),
               (tid, TYPE_MODEL_BIND_STREAM, load_end - 20_000, load_end + 30_000),
               (tid + OTHER_THREAD_OFFSET, TYPE_STREAM_CREATE, load_begin + 50_000, load_begin + 60_000))
    for thread, type_, begin, end in runtime:
        streams.add("aging.api_event.data", *apis(1, LEVEL_RUNTIME, type_, thread, np.array([begin]),
                                                  np.array([end])))


def host_records(ops: Ops, timings: Sequence[Timing], tensors: bool, early: int = 0) -> Streams:
    streams = Streams()
    eager = np.flatnonzero(~ops.model)
    model = np.flatnonzero(ops.model)
    first = np.flatnonzero(ops.exec_first)
    last = np.flatnonzero(ops.exec_last)
    flip_ops, flip_num = flips(ops)
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
        streams.add("aging.api_event.data", *apis(ops.n, LEVEL_RUNTIME, TYPE_KERNEL_LAUNCH, tid,
                                                  t.kernel_begin, t.kernel_end))
        for idx, cls in ((eager, "aging"), (model, "unaging")):
            streams.add(f"{cls}.api_event.data", *apis(idx.size, LEVEL_NODE, TYPE_LAUNCH, tid,
                                                       t.launch_begin[idx], t.launch_end[idx],
                                                       item_id=ops.name_id[idx]))
        streams.add("aging.api_event.data", *apis(eager.size, LEVEL_ACL, aclnn_type[eager], tid,
                                                  t.slot[eager], t.acl_end[eager]))
        if first.size:
            execution = ops.exec_index[first]
            streams.add("aging.api_event.data", *apis(first.size, LEVEL_ACL, TYPE_ACLMDL_EXECUTE, tid,
                                                      t.slot[first] + 1000, t.launch_end[last] + 2000))
            for when in (t.slot[first] + 2000, t.launch_end[last] + 1000):
                streams.add("aging.api_event.data", *apis(first.size, LEVEL_MODEL, TYPE_MODEL_EXECUTE,
                                                          tid, when, None, item_id=MODEL_ID,
                                                          reserve=execution))
            gim = compact(records.GRAPH_ID_MAP, 1, LEVEL_MODEL, TYPE_GRAPH_ID_MAP, tid, 16,
                          t.slot[first[:1]] + 2500)
            gim["model_name"] = double_hash(MODEL_NAME)
            gim["graph_id"] = 0xFFFFFFFF
            gim["model_id"] = MODEL_ID
            streams.add("unaging.additional.graph_id_map", gim, gim["timestamp"])

        for idx, cls in ((eager, "aging"), (model, "unaging")):
            nbi = compact(records.NODE_BASIC_INFO, idx.size, LEVEL_NODE, TYPE_NODE_BASIC_INFO, tid, 28,
                          t.info_ts[idx])
            nbi["op_name"] = ops.name_id[idx]
            nbi["task_type"] = ge_type[idx]
            nbi["op_type"] = ops.type_id[idx]
            nbi["block_dim"] = block_dim[idx]
            nbi["op_flag"] = ops.op_flag[idx]
            streams.add(f"{cls}.compact.node_basic_info", nbi, nbi["timestamp"])

            track = compact(records.TASK_TRACK, idx.size, LEVEL_RUNTIME, TYPE_TASK_TRACK, tid, 40,
                            t.track_ts[idx])
            track["device"] = t.device
            track["stream_id"] = ops.stream[idx]
            track["task_id"] = ops.seq[idx]
            track["task_type"] = rt_type[idx]
            track["kernel_name"] = ops.kernel_id[idx]
            track["num_blocks"] = ops.block[idx]
            track["sched"] = bits(records.TASK_TRACK, "sched", ratio=ops.mix_ratio[idx])
            streams.add(f"{cls}.compact.task_track", track, track["timestamp"])

            mix = idx[ops.core[idx] >= 2]
            if mix.size:
                cii = compact(records.CONTEXT_ID_INFO, mix.size, LEVEL_NODE, TYPE_CONTEXT_ID_INFO, tid, 12 + 4,
                              t.info_ts[mix])
                cii["op_name"] = ops.name_id[mix]
                cii["ctx_num"] = 1
                streams.add(f"{cls}.additional.context_id_info", cii, cii["timestamp"])

            if tensors:
                ti = compact(records.TENSOR_INFO, idx.size, LEVEL_NODE, TYPE_TENSOR_INFO, tid, 56 + 44,
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
            flip = compact(records.TASK_TRACK, flip_ops.size, LEVEL_RUNTIME, TYPE_TASK_TRACK, tid, 40,
                           t.slot[flip_ops] - 1000)
            flip["device"] = t.device
            flip["stream_id"] = ops.stream[flip_ops]
            flip["task_id"] = flip_num.astype(np.uint32) << np.uint32(16)
            flip["task_type"] = FLIP_TASK
            streams.add("aging.compact.task_track", flip, flip["timestamp"])
    return streams


def type_info_lines(ops: Ops, early: bool = False) -> List[str]:
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
