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
* optional (`early_apis`): host API records before the collection start, some inside a ModelLoad;
* optional (910B, `hccl_ops`): all-reduce collectives after the compute ops, each a node-level HCCL
  launch of level-5500 master / slave task APIs with hccl_info and task_track, ACSQ pairs on the
  device's streams 5 and 6 (hccl.py).

Every record array is built column-wise with numpy (no per-record Python loop), so 10^6 tasks
take a few seconds. Record layouts come from `msprof_kit.parsers.records` and are not re-declared here.

The package: conventions (clock model, ids, types, chips, hash ids), plan (the op sequence and
each device's timing), packing (record arrays and slice files), host and device (the records of
each side), control (the control files), collection (write_collection, with_metrics, the script),
damage (corrupt_magic, truncate), hccl (the communication option). This module re-exports their public names: `synth.X` as before.

Run as a script to time the generator: `PYTHONPATH=tests python3 -m synth OUT_DIR [N] [--chip 310P]
[--model-fraction F] [--metrics GROUP] [--mix-fraction F] [--steps] [--early-apis K] [--seed S]
[--hccl-ops N [--hccl-tasks-per-op K]]`.
"""
from __future__ import annotations

from .collection import with_metrics, write_collection
from .conventions import (
    HOST_MONO0_NS, WALL0_US, HOST_FREQ_MHZ, HOST_TICK_NS, HOST_CNTVCT0, FIRST_OP_NS, OP_PERIOD_NS,
    DEVICE_OFFSET_NS, END_MARGIN_NS, EAGER_STREAM, MODEL_STREAM, MODEL_ID, MODEL_NAME,
    OPS_PER_EXECUTION, NAME_POOL, FIRST_THREAD_ID, OTHER_THREAD_OFFSET, EARLY_LAST_NS,
    MODEL_LOAD_NS, MODEL_LOAD_GAP_NS, PID, LEVEL_ACL, LEVEL_MODEL, LEVEL_NODE, LEVEL_RUNTIME,
    ACL_NN, ACL_MODEL, TYPE_ACLMDL_EXECUTE, TYPE_MODEL_EXECUTE, TYPE_MODEL_LOAD, TYPE_GRAPH_ID_MAP,
    TYPE_NODE_BASIC_INFO, TYPE_TENSOR_INFO, TYPE_LAUNCH, TYPE_TASK_TRACK, TYPE_KERNEL_LAUNCH,
    KERNEL_AICORE, KERNEL_AIVEC, FLIP_TASK, KERNEL_MIX_AIC, KERNEL_MIX_AIV, TYPE_STREAM_CREATE,
    TYPE_MODEL_BIND_STREAM, GE_AI_CORE, GE_AI_VECTOR_CORE, GE_MIX_AIC, GE_MIX_AIV,
    TYPE_CONTEXT_ID_INFO, SQE_AI_CORE, SQE_AIV, FUNC_ACSQ_START, FUNC_ACSQ_END, FUNC_CONTEXT_PMU,
    FUNC_FFTS_START, FUNC_FFTS_END, FUNC_BLOCK_PMU, FFTS_PLUS, SUBTASK_MIX_AIC, SUBTASK_MIX_AIV,
    MIX_RATIO, TS_TAG_STEP, TS_TAG_FLIP, STEP_MODEL_START, STEP_MODEL_END, FORMAT_ND, DTYPE_FLOAT16,
    OP_TYPES, MIX_OP_TYPES, EVENTS_PIPE, EVENTS_PIPE_EXCT, GROUP_EVENTS, ChipProfile, CHIPS,
    double_hash, hash_ids,
)
from .damage import corrupt_magic, truncate

__all__ = [
    "HOST_MONO0_NS", "WALL0_US", "HOST_FREQ_MHZ", "HOST_TICK_NS", "HOST_CNTVCT0", "FIRST_OP_NS",
    "OP_PERIOD_NS", "DEVICE_OFFSET_NS", "END_MARGIN_NS", "EAGER_STREAM", "MODEL_STREAM", "MODEL_ID",
    "MODEL_NAME", "OPS_PER_EXECUTION", "NAME_POOL", "FIRST_THREAD_ID", "OTHER_THREAD_OFFSET",
    "EARLY_LAST_NS", "MODEL_LOAD_NS", "MODEL_LOAD_GAP_NS", "PID", "LEVEL_ACL", "LEVEL_MODEL",
    "LEVEL_NODE", "LEVEL_RUNTIME", "ACL_NN", "ACL_MODEL", "TYPE_ACLMDL_EXECUTE",
    "TYPE_MODEL_EXECUTE", "TYPE_MODEL_LOAD", "TYPE_GRAPH_ID_MAP", "TYPE_NODE_BASIC_INFO",
    "TYPE_TENSOR_INFO", "TYPE_LAUNCH", "TYPE_TASK_TRACK", "TYPE_KERNEL_LAUNCH", "KERNEL_AICORE",
    "KERNEL_AIVEC", "FLIP_TASK", "KERNEL_MIX_AIC", "KERNEL_MIX_AIV", "TYPE_STREAM_CREATE",
    "TYPE_MODEL_BIND_STREAM", "GE_AI_CORE", "GE_AI_VECTOR_CORE", "GE_MIX_AIC", "GE_MIX_AIV",
    "TYPE_CONTEXT_ID_INFO", "SQE_AI_CORE", "SQE_AIV", "FUNC_ACSQ_START", "FUNC_ACSQ_END",
    "FUNC_CONTEXT_PMU", "FUNC_FFTS_START", "FUNC_FFTS_END", "FUNC_BLOCK_PMU", "FFTS_PLUS",
    "SUBTASK_MIX_AIC", "SUBTASK_MIX_AIV", "MIX_RATIO", "TS_TAG_STEP", "TS_TAG_FLIP",
    "STEP_MODEL_START", "STEP_MODEL_END", "FORMAT_ND", "DTYPE_FLOAT16", "OP_TYPES", "MIX_OP_TYPES",
    "EVENTS_PIPE", "EVENTS_PIPE_EXCT", "GROUP_EVENTS", "ChipProfile", "CHIPS", "double_hash",
    "hash_ids", "with_metrics", "write_collection", "corrupt_magic", "truncate",
]
