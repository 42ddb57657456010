"""The pyACL vocabulary msprof-kit needs: return codes, data-type bits and AI Core metric groups,
with the small translations between names and values. Plain data: it imports no collector, so the
acl.json checks (acljson.py), the emulator (emulator/), `get_acl` (acl_runtime.py), the session
and the inference runner all take their codes from here.

Sources (spec/collectors.md): the codes are `acl_base.h` (§1.3), the bits and the metrics enum
`acl_prof.h` (§1.2).
"""
from __future__ import annotations

from typing import Dict, List, Tuple, Union

from msprof_kit.errors import BadOption

# --- return codes (acl_base.h) ------------------------------------------------------------------
ACL_SUCCESS = 0
ACL_ERROR_INVALID_PARAM = 100000
ACL_ERROR_UNINITIALIZE = 100001
ACL_ERROR_REPEAT_INITIALIZE = 100002
ACL_ERROR_INVALID_FILE = 100003
ACL_ERROR_PARSE_FILE = 100006
ACL_ERROR_INVALID_PROFILING_CONFIG = 100010
ACL_ERROR_INVALID_MODEL_ID = 100011
ACL_ERROR_REPEAT_FINALIZE = 100037
ACL_ERROR_PROF_ALREADY_RUN = 100042
ACL_ERROR_PROF_NOT_RUN = 100043
ACL_ERROR_PROF_REPEAT_SUBSCRIBE = 148046
ACL_ERROR_PROF_API_CONFLICT = 148047
ACL_ERROR_INVALID_DEVICE = 200002
ACL_ERROR_FEATURE_UNSUPPORTED = 200006
ACL_ERROR_PROF_MODULES_UNSUPPORTED = 200007
ACL_ERROR_STORAGE_OVER_LIMIT = 300000
ACL_ERROR_INTERNAL_ERROR = 500000
ACL_ERROR_PROFILING_FAILURE = 500005
# not an aclError: the profiling collector's own failure value, which the msproftx calls return
PROFILING_FAILED = -1

ACL_CODE_NAMES: Dict[int, str] = {
    ACL_SUCCESS: "ACL_SUCCESS",
    ACL_ERROR_INVALID_PARAM: "ACL_ERROR_INVALID_PARAM",
    ACL_ERROR_UNINITIALIZE: "ACL_ERROR_UNINITIALIZE",
    ACL_ERROR_REPEAT_INITIALIZE: "ACL_ERROR_REPEAT_INITIALIZE",
    ACL_ERROR_INVALID_FILE: "ACL_ERROR_INVALID_FILE",
    ACL_ERROR_PARSE_FILE: "ACL_ERROR_PARSE_FILE",
    ACL_ERROR_INVALID_PROFILING_CONFIG: "ACL_ERROR_INVALID_PROFILING_CONFIG",
    ACL_ERROR_INVALID_MODEL_ID: "ACL_ERROR_INVALID_MODEL_ID",
    ACL_ERROR_REPEAT_FINALIZE: "ACL_ERROR_REPEAT_FINALIZE",
    ACL_ERROR_PROF_ALREADY_RUN: "ACL_ERROR_PROF_ALREADY_RUN",
    ACL_ERROR_PROF_NOT_RUN: "ACL_ERROR_PROF_NOT_RUN",
    ACL_ERROR_PROF_REPEAT_SUBSCRIBE: "ACL_ERROR_PROF_REPEAT_SUBSCRIBE",
    ACL_ERROR_PROF_API_CONFLICT: "ACL_ERROR_PROF_API_CONFLICT",
    ACL_ERROR_INVALID_DEVICE: "ACL_ERROR_INVALID_DEVICE",
    ACL_ERROR_FEATURE_UNSUPPORTED: "ACL_ERROR_FEATURE_UNSUPPORTED",
    ACL_ERROR_PROF_MODULES_UNSUPPORTED: "ACL_ERROR_PROF_MODULES_UNSUPPORTED",
    ACL_ERROR_STORAGE_OVER_LIMIT: "ACL_ERROR_STORAGE_OVER_LIMIT",
    ACL_ERROR_INTERNAL_ERROR: "ACL_ERROR_INTERNAL_ERROR",
    ACL_ERROR_PROFILING_FAILURE: "ACL_ERROR_PROFILING_FAILURE",
    PROFILING_FAILED: "PROFILING_FAILED",
}


def code_name(code: int) -> str:
    """'ACL_ERROR_PROF_NOT_RUN 100043' for a known code, 'unknown code 123' otherwise."""
    name = ACL_CODE_NAMES.get(code)
    return f"{name} {code}" if name else f"unknown code {code}"


# --- data_type_config bits (acl_prof.h), name -> value -----------------------------------------
DATA_TYPE_BITS: Dict[str, int] = {
    "acl_api": 0x0001,
    "task_time": 0x0002,
    "aicore_metrics": 0x0004,
    "aicpu": 0x0008,
    "l2cache": 0x0010,
    "hccl_trace": 0x0020,
    "training_trace": 0x0040,
    "msproftx": 0x0080,
    "runtime_api": 0x0100,
    "ge_api_l0": 0x0200,
    "task_time_l0": 0x0800,
    "task_memory": 0x1000,
    "task_time_l2": 0x2000,
    "op_attr": 0x4000,
    "task_time_l3": 0x8000,
    "ge_api_l1": 0x01000000,
    "api_stats": 0x400000000,
}
ACL_PROF_ACL_API = DATA_TYPE_BITS["acl_api"]
ACL_PROF_TASK_TIME = DATA_TYPE_BITS["task_time"]
ACL_PROF_AICORE_METRICS = DATA_TYPE_BITS["aicore_metrics"]
ACL_PROF_AICPU = DATA_TYPE_BITS["aicpu"]
ACL_PROF_MSPROFTX = DATA_TYPE_BITS["msproftx"]
# every bit the collector knows; any other bit is ACL_ERROR_PROF_MODULES_UNSUPPORTED at start
KNOWN_DATA_TYPE_MASK = 0
for _bit in DATA_TYPE_BITS.values():
    KNOWN_DATA_TYPE_MASK |= _bit

# --- aclprofAicoreMetrics: enum value -> the metric-group name acl.json and msprof use ----------
AICORE_METRICS: Dict[int, str] = {
    0: "ArithmeticUtilization",
    1: "PipeUtilization",
    2: "Memory",
    3: "MemoryL0",
    4: "ResourceConflictRatio",
    5: "MemoryUB",
    6: "L2Cache",
    7: "PipelineExecuteUtilization",
    8: "MemoryAccess",
}
ACL_AICORE_NONE = 0xFF
AICORE_METRIC_NAMES: Tuple[str, ...] = tuple(AICORE_METRICS.values())
MAX_DEVICES = 64  # MSVP_MAX_DEV_NUM: the host is pseudo-device 64


def data_type_config(names: Union[int, str, List[str], Tuple[str, ...]]) -> int:
    """The OR of the named bits: an int is returned unchanged; 'acl_api,task_time' or a list of
    names (case-insensitive, with or without the ACL_PROF_ prefix) is translated."""
    if isinstance(names, int):
        return names
    items = names.split(",") if isinstance(names, str) else list(names)
    value = 0
    for raw in items:
        key = raw.strip().lower()
        if key.startswith("acl_prof_"):
            key = key[len("acl_prof_"):]
        if key not in DATA_TYPE_BITS:
            raise BadOption(f"unknown profiling data type {raw.strip()!r}; expected some of "
                            + ", ".join(DATA_TYPE_BITS))
        value |= DATA_TYPE_BITS[key]
    return value


def aicore_metrics_value(metrics: Union[int, str, None]) -> int:
    """The aclprofAicoreMetrics value of a metric-group name ('PipeUtilization'), of an enum int,
    or ACL_AICORE_NONE for None / 'none'."""
    if metrics is None:
        return ACL_AICORE_NONE
    if isinstance(metrics, int):
        return metrics
    if metrics.lower() == "none":
        return ACL_AICORE_NONE
    for value, name in AICORE_METRICS.items():
        if name.lower() == metrics.lower():
            return value
    raise BadOption(f"unknown AI Core metric group {metrics!r}; expected one of "
                    + ", ".join(AICORE_METRIC_NAMES) + " or none")
