"""What the ingest's steps share: the codes host and device records carry (API levels, the
invalid context, task type names) and the two helpers that make columns of them."""
from __future__ import annotations

from typing import Any, Dict, List, Tuple, Union

import numpy as np
import pandas as pd

Columns = Dict[str, np.ndarray]  # named columns of equal length (as parsers' and spill's Columns)
# a result directory's raw slices by (kind, group), each list in slice order (layout.data_files)
DataFiles = Dict[Tuple[str, str], List[str]]

INVALID_CTX = 4294967295
NO_MODEL = 4294967295
LEVEL_ACL, LEVEL_MODEL, LEVEL_NODE, LEVEL_HCCL = 20000, 15000, 10000, 5500
TREE_LEVELS = (LEVEL_HCCL, LEVEL_NODE, LEVEL_MODEL, LEVEL_ACL)  # deepest first
GE_TASK_TYPES = {0: "AI_CORE", 1: "AI_CPU", 2: "AI_VECTOR_CORE", 3: "WRITE_BACK", 4: "MIX_AIC", 5: "MIX_AIV",
                 6: "FFTS_PLUS", 7: "DSA_SQE", 8: "DVPP", 9: "COMMUNICATION", 10: "FUSION", 11: "INVALID",
                 256: "HCCL_AI_CPU"}
KERNEL_FALLBACK = {"KERNEL_AICORE": "AI_CORE", "KERNEL_AIVEC": "AI_VECTOR_CORE", "KERNEL_AICPU": "AI_CPU",
                   "KERNEL_MIX_AIC": "MIX_AIC", "KERNEL_MIX_AIV": "MIX_AIV", "KERNEL_SIMT": "AI_VECTOR_CORE"}
MIX_TYPES = ("KERNEL_MIX_AIC", "KERNEL_MIX_AIV")
# ACL API categories: the high 16 bits of an ACL API's type (the reference's `struct_type` of ACL APIs)
ACL_API_TAGS = {1: "ACL_OP", 2: "ACL_MODEL", 3: "ACL_RTS", 4: "ACL_OTHERS", 5: "ACL_NN", 6: "ACL_ASCENDC",
                7: "HOST_HCCL", 9: "ACL_DVPP", 10: "ACL_GRAPH", 11: "ACL_ATB"}
STEP_INFO_API = "step_info"  # a node-level API whose item id is a model id, not a hash
COMPUTE_HOST_TYPES = ("KERNEL_AICORE", "KERNEL_AIVEC", "FFTS_PLUS", "KERNEL_MIX_AIC", "KERNEL_MIX_AIV",
                      "PROFILING_ENABLE", "PROFILING_DISABLE")


def frame_of(cols: Dict[str, Any]) -> pd.DataFrame:
    """A frame over the arrays themselves: pandas would otherwise copy them into one 2-D block
    per dtype (a second copy of every column, for the time of the copy at least)."""
    return pd.DataFrame(cols, copy=False)


def text_array(shape: Union[int, Tuple[int, ...]], value: str) -> np.ndarray:
    """An object array filled with one shared str (np.full would make a new str per cell)."""
    out: np.ndarray = np.empty(shape, dtype=object)
    out.fill(value)
    return out
