"""Host-side decoders (host/data): API/event records, compact and additional records, dictionaries.

Pure functions from records, bytes or lines already read to column arrays (dict of numpy arrays)
and a list of `Issue`s (the ingest reads the files: msprof_kit/ingest/streams.py). Timestamps stay
raw host ticks; clock conversion happens elsewhere.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import memory_ops, records
from .stream import Columns, Issue, Piece, TextLines, Validity, cap_names, decode_stream, locate, split_lines
from ..native_impl import TENSOR_WIDTH, TextTable, tensor_texts, text_table


KNOWN_LEVELS = np.array([30000, 25000, 20500, 20000, 15000, 10000, 6000, 5500, 5000, 4500, 4000, 3000])

COMPACT_KINDS: Dict[str, records.Record] = {
    "node_basic_info": records.NODE_BASIC_INFO,
    "node_attr_info": records.NODE_ATTR_INFO,
    "task_track": records.TASK_TRACK,
    "memcpy_info": records.MEMCPY_INFO,
    "hccl_op_info": records.HCCL_OP_INFO,
}
ADDITIONAL_KINDS: Dict[str, records.Record] = {
    "tensor_info": records.TENSOR_INFO,
    "context_id_info": records.CONTEXT_ID_INFO,
    "graph_id_map": records.GRAPH_ID_MAP,
    "fusion_op_info": records.FUSION_OP_INFO,
    "hccl_info": records.HCCL_INFO,
    "task_memory_info": memory_ops.TASK_MEMORY_INFO,
    "static_op_mem": memory_ops.STATIC_OP_MEM,
}


def _host_valid(arr: np.ndarray) -> np.ndarray:
    # thread 0 is the kernel's idle task, never a thread that reports; a time of 0 is no time
    ok = (arr["magic"] == records.HOST_MAGIC) & np.isin(arr["level"], KNOWN_LEVELS) & (arr["thread_id"] != 0)
    if "timestamp" in (arr.dtype.names or ()):  # compact and additional records
        ok &= arr["timestamp"] != 0
    return ok


#: the validity check of host records (API/event, compact and additional), and what it asks for
HOST_VALID: Tuple[Validity, str] = (
    _host_valid,
    f"without magic 0x{records.HOST_MAGIC:04X}, a known level, a thread id and (compact and additional records) a time")


def columns(arr: np.ndarray, names: Optional[Sequence[str]] = None) -> Columns:
    """Plain column arrays of a structured array (copies, so the source buffer can be freed): all
    its fields, or `names`."""
    return {name: np.ascontiguousarray(arr[name]) for name in (arr.dtype.names or () if names is None else names)}


def api_columns(arr: np.ndarray, offsets: np.ndarray, fields: Optional[Sequence[str]] = None) -> Columns:
    """The records' fields (only `fields` when given, then without `offset`) and `is_event`."""
    cols = columns(arr, fields)
    cols["is_event"] = arr["end"] == np.uint64(records.EVENT_FLAG)
    if fields is None:
        cols["offset"] = offsets
    return cols


def decode_api_event(buf: np.ndarray, pieces: Sequence[Piece]) -> Tuple[Columns, List[Issue]]:
    """API and event records (40 bytes). Adds `is_event` (end field all ones) and `offset`."""
    arr, offsets, issues = decode_stream(records.API_EVENT, buf, pieces, *HOST_VALID)
    return api_columns(arr, offsets), issues


def compact_columns(kind: str, arr: np.ndarray, offsets: np.ndarray) -> Columns:
    """The columns of compact (64-byte) or additional (256-byte) records of kind `kind` (the file
    tag), and their byte offsets."""
    cols = columns(arr)
    cols["offset"] = offsets
    if kind == "task_track":
        cols["device_id"] = cols["device"] & 0x0FFF
        cols["ratio"] = records.bit_field(records.TASK_TRACK, "sched", "ratio", cols["sched"])
    return cols


def record_of(kind: str) -> records.Record:
    """The record of a compact or additional kind (its file tag: 'task_track', 'tensor_info')."""
    return COMPACT_KINDS.get(kind) or ADDITIONAL_KINDS[kind]


def parse_dictionary(text: str, path: str, typed: bool) -> Tuple[Dict[str, str], List[Issue]]:
    """parse_dictionary_lines of a dictionary's text (`path` names it in the issues)."""
    raw = text.encode("utf-8", errors="surrogateescape")
    return parse_dictionary_lines(split_lines(raw, [Piece(path, 0, len(raw))]), typed)


def parse_dictionary_lines(text: TextLines, typed: bool) -> Tuple[Dict[str, str], List[Issue]]:
    """hash_dic (`<id>:<string>`) or type_info_dic (`<level>_<type>:<name>`) lines.

    Splits at the first ':'; the last definition of a key wins. Malformed lines are reported.
    Keys are kept as text: `'12345'` or `'5000_802'`. A line longer than the line cap keeps its
    first bytes, a string longer than NAME_CAP characters its first NAME_CAP (each reported).
    """
    keys: List[str] = []
    values: List[str] = []
    where: List[int] = []
    issues = text.cut_issues(kept=True)
    for offset, line in text.lines:
        body = line.decode("utf-8", errors="replace").rstrip("\r")
        if body:
            key, sep, value = body.partition(":")
            ok = bool(sep) and (_is_type_key(key) if typed else key.isdigit())
            if ok:
                keys.append(key)
                values.append(value)
                where.append(offset)
            else:
                shape = "'<level>_<type>:<name>'" if typed else "'<decimal id>:<string>'"
                path, at = locate(text.pieces, offset)
                issues.append(Issue(path, at, f"dictionary line {body[:60]!r} is not {shape}; ignored"))
    values, capped = cap_names(values, where, text.pieces, "names")
    return dict(zip(keys, values)), issues + capped


def _is_type_key(key: str) -> bool:
    level, sep, kind = key.partition("_")
    return bool(sep) and level.isdigit() and kind.isdigit()


# GE enums used to render tensor descriptions (ge::Format, ge::DataType).
GE_FORMATS: Dict[int, str] = {
    0: "NCHW", 1: "NHWC", 2: "ND", 3: "NC1HWC0", 4: "FRACTAL_Z", 5: "NC1C0HWPAD", 6: "NHWC1C0",
    7: "FSR_NCHW", 8: "FRACTAL_DECONV", 9: "C1HWNC0", 10: "FRACTAL_DECONV_TRANSPOSE",
    11: "FRACTAL_DECONV_SP_STRIDE_TRANS", 12: "NC1HWC0_C04", 13: "FRACTAL_Z_C04", 14: "CHWN",
    15: "FRACTAL_DECONV_SP_STRIDE8_TRANS", 16: "HWCN", 17: "NC1KHKWHWC0", 18: "BN_WEIGHT",
    19: "FILTER_HWCK", 20: "HASHTABLE_LOOKUP_LOOKUPS", 21: "HASHTABLE_LOOKUP_KEYS",
    22: "HASHTABLE_LOOKUP_VALUE", 23: "HASHTABLE_LOOKUP_OUTPUT", 24: "HASHTABLE_LOOKUP_HITS",
    25: "C1HWNCoC0", 26: "MD", 27: "NDHWC", 28: "FRACTAL_ZZ", 29: "FRACTAL_NZ", 30: "NCDHW",
    31: "DHWCN", 32: "NDC1HWC0", 33: "FRACTAL_Z_3D", 34: "CN", 35: "NC", 36: "DHWNC",
    37: "FRACTAL_Z_3D_TRANSPOSE", 38: "FRACTAL_ZN_LSTM", 39: "FRACTAL_Z_G", 40: "RESERVED",
    41: "ALL", 42: "NULL", 43: "ND_RNN_BIAS", 44: "FRACTAL_ZN_RNN", 45: "END",
    47: "NCL", 48: "FRACTAL_Z_WINO", 49: "C1HWC0", 50: "FRACTAL_NZ_C0_16", 51: "FRACTAL_NZ_C0_32", 52: "FRACTAL_NZ_C0_2",
    53: "FRACTAL_NZ_C0_4", 54: "FRACTAL_NZ_C0_8",
}
GE_DTYPES: Dict[int, str] = {
    0: "FLOAT", 1: "FLOAT16", 2: "INT8", 3: "INT32", 4: "UINT8", 6: "INT16", 7: "UINT16",
    8: "UINT32", 9: "INT64", 10: "UINT64", 11: "DOUBLE", 12: "BOOL", 13: "STRING",
    14: "DUAL_SUB_INT8", 15: "DUAL_SUB_UINT8", 16: "COMPLEX64", 17: "COMPLEX128", 18: "QINT8",
    19: "QINT16", 20: "QINT32", 21: "QUINT8", 22: "QUINT16", 23: "RESOURCE", 24: "STRING_REF",
    25: "DUAL", 26: "DT_VARIANT", 27: "DT_BF16", 28: "DT_UNDEFINED", 29: "DT_INT4", 30: "DT_UINT1",
    31: "DT_INT2", 32: "DT_UINT2", 33: "DT_COMPLEX32", 34: "DT_HIFLOAT8", 35: "DT_FLOAT8_E5M2",
    36: "DT_FLOAT8_E4M3FN", 37: "DT_FLOAT8_E8M0", 38: "DT_FLOAT6_E3M2", 39: "DT_FLOAT6_E2M3",
    40: "DT_FLOAT4_E2M1", 41: "DT_FLOAT4_E1M2",
}
UNDEFINED = 0xFFFFFFFF


def format_name(value: int) -> str:
    """A ge::Format code's name: its low byte's name, with ':<sub-format>' when bits 8-23 hold one."""
    if value == UNDEFINED:
        return "UNDEFINED"
    base, sub = value & 0xFF, (value >> 8) & 0xFFFF
    name = GE_FORMATS.get(base, str(base))
    return f"{name}:{sub}" if sub > 0 else name


def dtype_name(value: int) -> str:
    """A ge::DataType code's name (the decimal code when unknown)."""
    if value == UNDEFINED:
        return "UNDEFINED"
    return GE_DTYPES.get(value, str(value))


def _name_table(names: Dict[int, str]) -> TextTable:
    """The names of codes 0 .. max as a TextTable, empty for a code without one (printed in decimal)."""
    return text_table(names.get(code, "") for code in range(max(names) + 1))


GE_DTYPE_TABLE = _name_table(GE_DTYPES)
GE_FORMAT_TABLE = _name_table(GE_FORMATS)
TENSOR_PAYLOAD = 32  # a tensor_info record's tensors (tensor_num on) follow its header and op name
assert records.TENSOR_INFO.size - TENSOR_PAYLOAD == TENSOR_WIDTH
TENSOR_COLUMNS = 6  # input shapes, dtypes, formats, output shapes, dtypes, formats


def tensor_payload(arr: np.ndarray) -> np.ndarray:
    """The (n, TENSOR_WIDTH) uint8 bytes of tensor_info records `arr` from tensor_num on."""
    raw = np.ascontiguousarray(arr).view(np.uint8).reshape(len(arr), records.TENSOR_INFO.size)
    return raw[:, TENSOR_PAYLOAD:]


def group_ops(op_name: np.ndarray, timestamp: np.ndarray, thread_id: np.ndarray
              ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Records (in stream order) grouped into ops by (op_name, timestamp, thread_id): (group number
    of each record, numbered by first sight; the records op after op, each op's in stream order;
    where each op starts among them, and the end)."""
    if len(op_name) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(1, dtype=np.int64)
    import pandas as pd  # local: the decoders themselves need only numpy
    group = pd.DataFrame({"o": op_name, "t": timestamp, "h": thread_id}).groupby(
        ["o", "t", "h"], sort=False).ngroup().to_numpy().astype(np.int64)
    order = np.argsort(group, kind="stable")
    starts: np.ndarray = np.zeros(int(group.max()) + 2, dtype=np.int64)
    np.cumsum(np.bincount(group), out=starts[1:])
    return group, order, starts


def render_ops(payload: np.ndarray, order: np.ndarray, starts: np.ndarray) -> Tuple[TextTable, np.ndarray]:
    """The six texts of each op (records `order[starts[g]:starts[g + 1]]` of `payload`, as
    tensor_payload gives them): input shapes, dtypes, formats, output shapes, dtypes, formats, as
    the reference prints them (shapes `"d,d;d,d"` with the quotes, a zero dim ends a shape; an
    empty text reads N/A). Text 6g + c is op g's column c; with their uint64 FNV-1a hashes."""
    return tensor_texts(payload, order, starts, GE_DTYPE_TABLE, GE_FORMAT_TABLE)


def render_tensors(arr: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """(op number of each of tensor_info records `arr`, numbered by first sight; the (m, 6) object
    array of the ops' texts, as render_ops gives them). Records with the same (op_name,
    timestamp, thread_id) are one op's, its tensors split across records."""
    group, order, starts = group_ops(arr["op_name"], arr["timestamp"], arr["thread_id"])
    table, _ = render_ops(tensor_payload(arr), order, starts)
    texts: np.ndarray = np.empty((len(starts) - 1, TENSOR_COLUMNS), dtype=object)
    if len(texts):
        texts.ravel()[:] = table.texts()
    return group, texts
