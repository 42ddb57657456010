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


HASH_BLOCK_BYTES = 4 << 20  # rows hashed together: a block that stays in the cache


def _row_hash(rows: np.ndarray, start: int = 0) -> np.ndarray:
    """A 64-bit hash of bytes `start:` of each row of a C-contiguous 2-D uint8 array whose width
    and `start` are multiples of 8 (vectorized, one pass per 8-byte column, no copy of `rows`)."""
    words = np.ascontiguousarray(rows).view("<u8")
    out = np.empty(len(rows), dtype=np.uint64)
    # a block of rows at a time, so that the passes over its columns read it from the cache (a pass
    # over all rows would read every row's cache line once per column)
    step = max(1, HASH_BLOCK_BYTES // max(1, rows.shape[1]))
    with np.errstate(over="ignore"):
        for lo in range(0, len(rows), step):
            block = words[lo:lo + step]
            h = np.full(len(block), 0xCBF29CE484222325, dtype=np.uint64)
            for j in range(start // 8, words.shape[1]):
                h ^= block[:, j]
                h *= np.uint64(0x100000001B3)
                h ^= h >> np.uint64(29)
            out[lo:lo + step] = h
    return out


def _distinct_rows(rows: np.ndarray, start: int = 0) -> Tuple[np.ndarray, np.ndarray]:
    """(index of one representative per distinct row, representative number of each row), rows
    compared on bytes `start:`."""
    _, first, inverse = np.unique(_row_hash(rows, start), return_index=True, return_inverse=True)
    inverse = inverse.ravel()
    rep = first[inverse]
    step = 1 << 16
    for lo in range(0, len(rows), step):  # a hash collision: fall back to exact comparison
        if not np.array_equal(rows[lo:lo + step, start:], rows[rep[lo:lo + step], start:]):
            void = np.ascontiguousarray(rows[:, start:]).view(np.dtype((np.void, rows.shape[1] - start))).ravel()
            _, first, inverse = np.unique(void, return_index=True, return_inverse=True)
            return first, inverse.ravel()
    return first, inverse


def _group_keys(*cols: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """(group number of each row by equal key columns, group sizes); hash-based, numbered by first sight."""
    import pandas as pd  # local: the decoders themselves need only numpy
    group = pd.DataFrame({f"k{i}": c for i, c in enumerate(cols)}).groupby(
        [f"k{i}" for i in range(len(cols))], sort=False).ngroup().to_numpy()
    return group, np.bincount(group)


#: one tensor's (shape, dtype, format) texts
TensorDesc = Tuple[str, str, str]
#: (inputs, outputs) of one tensor_info record's payload
Payload = Tuple[List[TensorDesc], List[TensorDesc]]


def _render_payload(row: np.ndarray) -> Payload:
    """(inputs, outputs) of one tensor record: each a list of (shape, dtype, format) texts."""
    ins: List[TensorDesc] = []
    outs: List[TensorDesc] = []
    for s in range(min(int(row["tensor_num"]), records.TENSOR_SLOT)):
        dims = row[f"t{s}_shape"]
        zero = np.flatnonzero(dims == 0)
        used = dims[: zero[0]] if len(zero) else dims
        part = (",".join(str(int(d)) for d in used), dtype_name(int(row[f"t{s}_dtype"])),
                format_name(int(row[f"t{s}_format"])))
        (ins if int(row[f"t{s}_type"]) == 0 else outs).append(part)
    return ins, outs


#: a row of the tensor text table: input shapes, dtypes, formats, output shapes, dtypes, formats
TensorText = Tuple[str, str, str, str, str, str]


def render_tensors(arr: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Tensor descriptions of tensor_info records `arr` (structured, TENSOR_INFO dtype).

    Records with the same (op_name, timestamp, thread_id) are one op's tensors split across
    records. Returns (group index per record, text row per group, text table) where each row of
    the (m, 6) object table holds input shapes, dtypes, formats, output shapes, dtypes, formats;
    shapes are `"d,d;d,d"` with the quotes, a zero dim ends a shape. Only distinct payloads are
    rendered and stored, so the cost follows the number of distinct tensor descriptions, not of
    records.
    """
    if len(arr) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.empty((0, 6), dtype=object)
    raw = np.ascontiguousarray(arr).view(np.uint8).reshape(len(arr), records.TENSOR_INFO.size)
    first, inverse = _distinct_rows(raw, start=32)  # the tensor payload follows a 32-byte header
    rendered = [_render_payload(arr[i]) for i in first]
    return _tensor_table(arr["op_name"], arr["timestamp"], arr["thread_id"], inverse, rendered)


def group_ops(op_name: np.ndarray, timestamp: np.ndarray, thread_id: np.ndarray, inverse: np.ndarray,
              rendered: List[Payload], rows: List[TensorText]) -> Tuple[np.ndarray, np.ndarray]:
    """Records (in stream order) grouped into ops by key, and each op's row of the text table
    `rows`: its payload's (`inverse`: each record's number in `rendered`, whose row it is) when
    the op has one record, else a joined row appended to `rows`. Returns (group number of each
    record, numbered by first sight; text row of each group)."""
    group, counts = _group_keys(op_name, timestamp, thread_id)
    single = counts[group] == 1
    text_row: np.ndarray = np.zeros(len(counts), dtype=np.int64)
    text_row[group[single]] = inverse[single]
    by_group: Dict[int, List[int]] = {}
    for i in np.flatnonzero(~single):  # only ops whose tensors span several records
        by_group.setdefault(int(group[i]), []).append(int(inverse[i]))
    for g, members in by_group.items():
        text_row[g] = len(rows)
        rows.append(_join([rendered[m] for m in members]))
    return group, text_row


def _tensor_table(op_name: np.ndarray, timestamp: np.ndarray, thread_id: np.ndarray, inverse: np.ndarray,
                  rendered: List[Payload]) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """render_tensors' result from each record's key and distinct-payload number (`inverse`, into
    `rendered`)."""
    rows = tensor_rows(rendered)
    group, text_row = group_ops(op_name, timestamp, thread_id, inverse, rendered, rows)
    table: np.ndarray = np.empty((len(rows), 6), dtype=object)
    table[:] = rows
    return group.astype(np.int64), text_row, table


class TensorPayloads:
    """The distinct payloads (bytes 32 on: the tensors) of tensor_info records seen so far, told
    apart by a hash (`known`, sorted) with a record of each (`reps`)."""

    def __init__(self) -> None:
        self.known = np.zeros(0, dtype=np.uint64)
        self.reps = np.zeros(0, dtype=records.TENSOR_INFO.dtype)

    def hashes(self, arr: np.ndarray) -> Optional[np.ndarray]:
        """The payload hash of each record of a chunk, its new payloads kept; None when two
        different payloads share a hash (the caller then compares them exactly: render_tensors)."""
        raw = np.ascontiguousarray(arr).view(np.uint8).reshape(len(arr), records.TENSOR_INFO.size)
        h = _row_hash(raw, start=32)
        uniq, idx = np.unique(h, return_index=True)
        known = self.known
        pos = np.searchsorted(known, uniq)
        new = (pos >= len(known)) | (known[np.clip(pos, 0, max(0, len(known) - 1))] != uniq) \
            if len(known) else np.ones(len(uniq), dtype=bool)
        if new.any():
            known = np.concatenate([known, uniq[new]])
            reps = np.concatenate([self.reps, arr[idx[new]]])
            order = np.argsort(known, kind="stable")
            self.known, self.reps = known[order], reps[order]
        rep_bytes = self.reps.view(np.uint8).reshape(len(self.reps), records.TENSOR_INFO.size)
        if not np.array_equal(raw[:, 32:], rep_bytes[np.searchsorted(self.known, h), 32:]):
            return None
        return h

    def rendered(self) -> List[Payload]:
        """(inputs, outputs) of each payload, in the order of `known`."""
        return [_render_payload(r) for r in self.reps]


def tensor_rows(rendered: List[Payload]) -> List[TensorText]:
    """The text table's row of each payload alone."""
    return [_join([r]) for r in rendered]


def _join(parts: List[Payload]) -> TensorText:
    ins = [t for p in parts for t in p[0]]
    outs = [t for p in parts for t in p[1]]
    return ('"' + ";".join(t[0] for t in ins) + '"', ";".join(t[1] for t in ins), ";".join(t[2] for t in ins),
            '"' + ";".join(t[0] for t in outs) + '"', ";".join(t[1] for t in outs), ";".join(t[2] for t in outs))
