"""Legacy `JOBxxx` collections (older CANN releases, SoC boards): record tables and the pure
decoders of the binary kinds (the text kinds are parsers/job_text.py's).

Binary record kinds, one table each (sizes checked when this module is imported):

| table              | file                                                         | bytes |
|--------------------|--------------------------------------------------------------|-------|
| `LEGACY_HWTS`      | `hwts.log.data.45.dev.profiler_default_tag.<dev>.slice_<k>`  | 64    |
| `TRAINING_TRACE`   | `training_trace.46.dev.profiler_default_tag.<dev>.slice_<k>` | 20    |
| `ACL_API`          | `AclModule.acl_<kind>.<dev>.slice_<k>`                       | 128   |
| `GE_TASK_DESC`     | `Framework.task_desc_info.<dev>.slice_<k>` (0x5A5A)          | 256   |
| `GE_TENSOR_DATA`   | `Framework.tensor_data_info.<dev>.slice_<k>` (0x5A5A)        | 256   |
| `GE_STEP_INFO`     | `Framework.step_info.<dev>.slice_<k>` (0x5A5A)               | 64    |
| `AICPU_PREPROCESS` | `DATA_PREPROCESS.AICPU.<dev>.slice_<k>` (0x5A5A)             | 128   |

Text kinds (job_text): `Framework.host.vm.{task_desc_info,graph_desc_info,point}` (one op or point a
line), `Framework.hash_dic` (`<id>:<name>` lines, parsers.host.parse_dictionary_lines) and the older
`DATA_PREPROCESS.dev.AICPU` (NUL-separated "Node:" / "Thread" lines).

Everything here is bytes in, columns out: no file IO, no logging. A problem that costs some
records comes back as an `Issue`; one that makes a stream unusable raises `RecordError` naming
the file, the byte offset in it and what was expected. Decoders take `complete`: whether the
stream's last slice has its `.done` marker. A partial record at the end of a complete stream is an
error; at the end of an unmarked one (a slice still being written) it is dropped with an issue.

Sources (facts only): MindInsight / MindSpore `profiler/parser/{hwts_log_parser, framework_parser,
framework_struct, aicpu_data_parser, step_trace_parser}.py`, the GE reporter header
`prof_common.h` (`MsprofGeProfTaskData`, `MsprofGeProfTensorData`, `MsprofGeProfStepData`,
`MsprofMixData`), ../shared/spec/device_formats.md §3.1 (HWTS) and host_formats.md §1.6 (AclModule).
"""
from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

import numpy as np

from . import records
from .job_text import AICPU_SEP, Tensor, parse_aicpu_text, render_tensors
from .stream import Columns, Issue, Piece, locate, split_lines


MAGIC = 0x5A5A  # GE reporter records, AclModule, binary DATA_PREPROCESS
TAG_TASK_DESC, TAG_TENSOR_DATA, TAG_STEP_INFO = 23, 24, 25  # MsprofDataTag
TAG_AICPU = 60
MIX_HASH = 0  # MsprofMixData.type of a hash_dic id; any other type (1) holds the text itself
TENSOR_SLOTS, TENSOR_DIMS = 5, 8


class RecordError(ValueError):
    """A stream that cannot be used: where (file, offset in it) and what was expected."""

    def __init__(self, path: str, offset: int, message: str) -> None:
        self.path = path
        self.offset = offset
        self.message = message
        super().__init__(f"{path}: offset {offset}: {message}")


# ------------------------------------------------------------------------------------------------
# Record tables

LEGACY_HWTS = records.checked(records.Record("hwts_log", [
    ("tag", "B", "bits 0-2 log type (0 task start, 1 task end, 2 block start, 3 block end, 4 block PMU), "
                 "bit 3 warn/overflow, bits 4-7 sequence counter"),
    ("task_type", "B", "task type of start/end logs (0 AI_CORE, 1 AI_CPU, 2 AI_VECTOR_CORE); core id of block logs"),
    ("magic", "H", "0x6BD3 on later chips; not checked (legacy logs leave it 0)"),
    ("block_id", "H", "block id of block logs"),
    ("task_id", "H", "task id (16 bits; wraps)"),
    ("syscnt", "Q", "device system counter ticks"),
    ("stream_id", "I", "stream id"),
    ("_pad", "44x", "reserved (block PMU payload for log type 4)"),
], size=64, bits={"tag": [("log_type", 3), ("warn", 1), ("cnt", 4)]}))

TRAINING_TRACE = records.checked(records.Record("training_trace", [
    ("tag_id", "Q", "0 or > 255 iteration start (the job id), 1 FP start, 2 BP end, 255 iteration end, "
                    "3-254 all-reduce start/end points"),
    ("task_id", "H", "task that recorded the point"),
    ("stream_id", "H", "stream of that task"),
    ("syscnt", "Q", "device system counter ticks"),
], size=20))

ACL_API = records.checked(records.Record("acl_api", [
    ("magic", "H", "0x5A5A"),
    ("data_tag", "H", "0"),
    ("api_type", "I", "API category"),
    ("start", "Q", "call start, host ns"),
    ("end", "Q", "call end, host ns"),
    ("pid", "I", "process id"),
    ("tid", "I", "thread id"),
    ("name", "64s", "API name, NUL padded"),
    ("_rsv", "32x", "4 reserved u64"),
], size=128))

_MIX = "type 0: hash_dic id in the first 8 bytes; type 1: the text, NUL padded"

GE_TASK_DESC = records.checked(records.Record("ge_task_desc", [
    ("magic", "H", "0x5A5A"),
    ("data_tag", "H", "23"),
    ("task_type", "I", "0 AI_CORE, 1 AI_CPU, 2 AI_VECTOR_CORE, 10 HCCL, 11 RTS, 1000 unknown"),
    ("op_name_kind", "B", "MixData type of op_name"),
    ("_rsv0", "7x", ""),
    ("op_name", "120s", _MIX),
    ("op_type_kind", "B", "MixData type of op_type"),
    ("_rsv1", "7x", ""),
    ("op_type", "56s", _MIX),
    ("cur_iter", "Q", "iteration number"),
    ("timestamp", "Q", "host time of the report"),
    ("shape_type", "I", "0 static, 1 dynamic"),
    ("block_dims", "I", "block dim"),
    ("model_id", "I", "model (graph) id"),
    ("stream_id", "I", "stream id"),
    ("task_id", "I", "task id"),
    ("thread_id", "I", "reporting thread"),
    ("_rsv2", "16x", ""),
], size=256))

GE_TENSOR_DATA = records.checked(records.Record("ge_tensor_data", [
    ("magic", "H", "0x5A5A"),
    ("data_tag", "H", "24"),
    ("model_id", "I", "model (graph) id"),
    ("cur_iter", "Q", "iteration number"),
    ("stream_id", "I", "stream id"),
    ("task_id", "I", "task id"),
    ("tensor_num", "B", "tensors in this record (1..5); an op's tensors may span records"),
    ("_rsv0", "3x", ""),
    *[f for i in range(TENSOR_SLOTS) for f in (
        (f"t{i}_type", "I", "0 input, 1 output"),
        (f"t{i}_format", "I", "MindSpore format (+200 when reported through msprof)"),
        (f"t{i}_dtype", "I", "MindSpore data type (+200 when reported through msprof)"),
        (f"t{i}_shape", f"{TENSOR_DIMS}I", "dims; zero dims are not dims"),
    )],
    ("_rsv1", "8x", ""),
], size=256))

GE_STEP_INFO = records.checked(records.Record("ge_step_info", [
    ("magic", "H", "0x5A5A"),
    ("data_tag", "H", "25"),
    ("model_id", "I", "model (graph) id"),
    ("stream_id", "I", "stream of the point's task"),
    ("task_id", "I", "the point's task"),
    ("timestamp", "Q", "host time of the report"),
    ("cur_iter", "Q", "iteration number"),
    ("thread_id", "I", "reporting thread"),
    ("tag", "B", "step-trace tag the task records (2 FP start, 3 BP end, 4 iteration end ...)"),
    ("_rsv", "27x", ""),
], size=64))

AICPU_PREPROCESS = records.checked(records.Record("aicpu_preprocess", [
    ("magic", "H", "0x5A5A"),
    ("data_tag", "H", "60"),
    ("stream_id", "H", "stream id"),
    ("task_id", "H", "task id"),
    ("run_start", "Q", "kernel run start, us"),
    ("run_start_ticks", "Q", "kernel run start, 10 ns counter ticks"),
    ("compute_start", "Q", "us"),
    ("memcpy_start", "Q", "us"),
    ("memcpy_end", "Q", "us"),
    ("run_end", "Q", "kernel run end, us"),
    ("run_end_ticks", "Q", "kernel run end, 10 ns counter ticks"),
    ("thread", "I", "AI CPU thread"),
    ("device", "I", "device id"),
    ("submit_tick", "Q", "ticks"),
    ("schedule_tick", "Q", "ticks"),
    ("tick_before_run", "Q", "ticks"),
    ("tick_after_run", "Q", "ticks"),
    ("kernel_type", "I", "kernel type"),
    ("dispatch_time", "I", "dispatch time, us"),
    ("total_time", "I", "total time, us"),
    ("ffts_thread_id", "H", "FFTS thread"),
    ("version", "B", "record version"),
    ("_pad", "9x", ""),
], size=128))

REGISTRY: Dict[str, records.Record] = {r.name: r for r in (
    LEGACY_HWTS, TRAINING_TRACE, ACL_API, GE_TASK_DESC, GE_TENSOR_DATA, GE_STEP_INFO, AICPU_PREPROCESS)}

# Enumerations the texts are rendered with.
HWTS_TASK_TYPES = {0: "AI_CORE", 1: "AI_CPU", 2: "AI_VECTOR_CORE"}
GE_TASK_TYPES = {0: "AI_CORE", 1: "AI_CPU", 2: "AI_VECTOR_CORE", 10: "HCCL", 11: "RTS", 1000: "UNKNOWN"}
# ... and by the binary reporter (Framework.tensor_data_info), after removing the +200 offset
VM_DTYPES = {30: "BOOL", 31: "INT", 32: "INT8", 33: "INT16", 34: "INT32", 35: "INT64", 36: "UINT", 37: "UINT8",
             38: "UINT16", 39: "UINT32", 40: "UINT64", 41: "FLOAT", 42: "FLOAT16", 43: "FLOAT32", 44: "FLOAT64",
             45: "COMPLEX"}
VM_FORMATS = {0: "UNKNOWN", 1: "DEFAULT", 2: "NC1KHKWHWC0", 3: "ND", 4: "NCHW", 5: "NHWC", 6: "HWCN", 7: "NC1HWC0",
              8: "FRAC_Z", 9: "C1HWNCOC0", 10: "FRAC_NZ", 11: "NC1HWC0_C04", 12: "FRACTAL_Z_C04", 13: "NDHWC",
              14: "FRACTAL_ZN_LSTM", 15: "FRACTAL_ZN_RNN", 16: "ND_RNN_BIAS", 17: "NDC1HWC0", 18: "NCDHW",
              19: "FRACTAL_Z_3D", 20: "DHWNC", 21: "DHWCN"}
MSPROF_OFFSET = 200  # tensor formats and types reported through msprof are MindSpore's + 200

# Step-trace tags: the training trace's own numbering -> the store's (device_formats.md §6.1)
LEGACY_END_TAG = 255
STORE_MODEL_START, STORE_FP_START, STORE_BP_END, STORE_ITER_END, STORE_REDUCE_BASE = 0, 2, 3, 4, 10000


# ------------------------------------------------------------------------------------------------
# Shared helpers

def whole_records(record: records.Record, buf: np.ndarray, pieces: Sequence[Piece],
                  complete: bool) -> Tuple[np.ndarray, np.ndarray, List[Issue]]:
    """`buf` (the concatenated slices) as records from offset 0, with their stream offsets.

    A trailing partial record raises RecordError when the stream is marked complete, else it is
    dropped with an issue."""
    issues: List[Issue] = []
    count, tail = divmod(len(buf), record.size)
    if tail:
        path, off = locate(pieces, count * record.size)
        text = f"truncated {record.name} record: {tail} of {record.size} bytes"
        if complete:
            raise RecordError(path, off, f"{text}; expected whole {record.size}-byte records (the slice has its "
                                         f".done marker, so it should be complete)")
        issues.append(Issue(path, off, f"{text}; dropped (the slice has no .done marker: it may be incomplete)"))
    arr = buf[: count * record.size].view(record.dtype)
    return arr, np.arange(count, dtype=np.int64) * record.size, issues


def _keep(arr: np.ndarray, offsets: np.ndarray, ok: np.ndarray, pieces: Sequence[Piece], what: str,
          issues: List[Issue]) -> Tuple[np.ndarray, np.ndarray]:
    """Records passing `ok`; the others are reported once (first offset and count) and dropped."""
    bad = np.flatnonzero(~ok)
    if len(bad):
        path, off = locate(pieces, int(offsets[bad[0]]))
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        issues.append(Issue(path, off, f"{what}{more}; dropped"))
        return arr[ok], offsets[ok]
    return arr, offsets


def first_copies(arr: np.ndarray) -> np.ndarray:
    """True for each record whose bytes no earlier record of `arr` has (a structured array)."""
    keep: np.ndarray = np.zeros(len(arr), dtype=bool)
    if len(arr):
        raw = np.ascontiguousarray(arr).view(np.dtype((np.void, arr.dtype.itemsize)))
        keep[np.unique(raw, return_index=True)[1]] = True
    return keep


def _texts(raw: np.ndarray) -> np.ndarray:
    """NUL-padded byte strings (a numpy 'S' array) as str, decoded once per distinct value."""
    if len(raw) == 0:
        return np.zeros(0, dtype=object)
    uniq, inverse = np.unique(raw, return_inverse=True)
    decoded = np.array([u.split(b"\0", 1)[0].decode("utf-8", errors="replace") for u in uniq.tolist()],
                       dtype=object)
    return decoded[inverse.ravel()]


def _u64_at(arr: np.ndarray, field: str) -> np.ndarray:
    """The first 8 bytes of a byte-string field, as little-endian u64 (MixData hash ids)."""
    raw = np.ascontiguousarray(arr[field]).view(np.uint8).reshape(len(arr), -1)[:, :8]
    return np.ascontiguousarray(raw).view("<u8").ravel()


# ------------------------------------------------------------------------------------------------
# Device task logs

def decode_hwts(buf: np.ndarray, pieces: Sequence[Piece], complete: bool) -> Tuple[Columns, List[Issue]]:
    """Task start (log type 0) and end (1) records of a legacy HWTS log. Block logs (2-4) are
    skipped; log types 5-7 do not exist and are reported."""
    arr, offsets, issues = whole_records(LEGACY_HWTS, buf, pieces, complete)
    log_type = records.bit_field(LEGACY_HWTS, "tag", "log_type", arr["tag"])
    arr, offsets = _keep(arr, offsets, log_type <= 4, pieces,
                         "hwts_log record with log type above 4 (expected 0-4)", issues)
    log_type = records.bit_field(LEGACY_HWTS, "tag", "log_type", arr["tag"])
    m = log_type <= 1
    return {
        "is_start": log_type[m] == 0, "task_type": arr["task_type"][m].astype(np.int64),
        "stream_id": arr["stream_id"][m].astype(np.int64), "task_id": arr["task_id"][m].astype(np.int64),
        "syscnt": arr["syscnt"][m].astype(np.int64), "offset": offsets[m],
    }, issues


# ------------------------------------------------------------------------------------------------
# Step trace

def _tag_list(words: np.ndarray) -> str:
    tags = [w * 64 + b for w in range(len(words)) for b in range(64) if (int(words[w]) >> b) & 1]
    return ", ".join(str(t) for t in tags)


def decode_training_trace(buf: np.ndarray, pieces: Sequence[Piece],
                          complete: bool) -> Tuple[Columns, List[Issue]]:
    """Step-trace points of the complete iterations (an iteration ends with tag 255), with their
    iteration number (from 1). Raises RecordError when the stream contradicts itself: a second job
    id (iteration start tag), or an iteration whose set of points differs from the earlier ones
    (every iteration of a training graph records the same points; a change means lost records or
    two runs in one file)."""
    arr, offsets, issues = whole_records(TRAINING_TRACE, buf, pieces, complete)
    tag = arr["tag_id"].astype(np.uint64)
    is_start = (tag == 0) | (tag > LEGACY_END_TAG)
    is_end = tag == LEGACY_END_TAG
    starts = np.flatnonzero(is_start)
    if len(starts):
        other = starts[tag[starts] != tag[starts[0]]]
        if len(other):
            path, off = locate(pieces, int(offsets[other[0]]))
            raise RecordError(path, off, f"iteration start tag {int(tag[other[0]])} differs from the first one "
                                         f"({int(tag[starts[0]])}); expected one job id in a training trace")
    iteration = np.cumsum(is_end) - is_end  # iterations ended before each record
    done = int(np.count_nonzero(is_end))
    open_tail = iteration >= done
    if open_tail.any():
        first = int(np.flatnonzero(open_tail)[0])
        path, off = locate(pieces, int(offsets[first]))
        issues.append(Issue(path, off, f"{int(open_tail.sum())} step-trace records after the last iteration end "
                                       f"(tag 255) belong to an unfinished iteration; dropped"))
    if done:
        points = ~is_start & ~open_tail
        words = np.zeros((done, 4), dtype=np.uint64)
        small = np.minimum(tag[points], LEGACY_END_TAG).astype(np.int64)
        np.bitwise_or.at(words, (iteration[points], small // 64),
                         np.left_shift(np.uint64(1), (small % 64).astype(np.uint64)))
        differs = (words != words[0]).any(axis=1)
        if differs.any():
            k = int(np.argmax(differs))
            first = int(np.flatnonzero(iteration == k)[0])
            path, off = locate(pieces, int(offsets[first]))
            raise RecordError(path, off, f"iteration {k + 1} records the step-trace points {{{_tag_list(words[k])}}} "
                                         f"besides its start; "
                                         f"expected {{{_tag_list(words[0])}}} as in iterations 1-{k} (every "
                                         f"iteration of a training trace records the same points)")
    keep = ~open_tail
    return {
        "tag": tag[keep].astype(np.int64), "task_id": arr["task_id"][keep].astype(np.int64),
        "stream_id": arr["stream_id"][keep].astype(np.int64), "syscnt": arr["syscnt"][keep].astype(np.int64),
        "iteration": iteration[keep].astype(np.int64) + 1, "offset": offsets[keep],
    }, issues


def store_step_tags(tag: np.ndarray) -> np.ndarray:
    """Training-trace tags in the store's numbering: iteration start -> 0 (MODEL_START), 1 FP ->
    2, 2 BP -> 3, 255 iteration end -> 4 (ITER_END: it also opens the next iteration, as the
    legacy trace counts the gap before an iteration's start as part of it), an all-reduce point t
    -> 10000 + t."""
    tag = np.asarray(tag, dtype=np.int64)
    out: np.ndarray = STORE_REDUCE_BASE + tag
    out = np.where((tag == 0) | (tag > LEGACY_END_TAG), STORE_MODEL_START, out)
    out = np.where(tag == 1, STORE_FP_START, out)
    out = np.where(tag == 2, STORE_BP_END, out)
    return np.where(tag == LEGACY_END_TAG, STORE_ITER_END, out)


# ------------------------------------------------------------------------------------------------
# AscendCL calls

def decode_acl(buf: np.ndarray, pieces: Sequence[Piece], complete: bool) -> Tuple[Columns, List[Issue]]:
    """AclModule records: one AscendCL call each."""
    arr, offsets, issues = whole_records(ACL_API, buf, pieces, complete)
    arr, offsets = _keep(arr, offsets, arr["magic"] == MAGIC, pieces,
                         f"acl_api record without magic 0x{MAGIC:04X}", issues)
    arr, offsets = _keep(arr, offsets, first_copies(arr), pieces,
                         "acl_api record repeating an earlier one byte for byte (one call cannot be recorded "
                         "twice: a duplicated write)", issues)
    return {
        "api_type": arr["api_type"].astype(np.int64), "start": arr["start"].astype(np.int64),
        "end": arr["end"].astype(np.int64), "pid": arr["pid"].astype(np.int64), "tid": arr["tid"].astype(np.int64),
        "name": _texts(arr["name"]), "offset": offsets,
    }, issues


# ------------------------------------------------------------------------------------------------
# Framework (op descriptions)

def _mix_texts(arr: np.ndarray, kind: str, field: str, hashes: Dict[str, str], pieces: Sequence[Piece],
               offsets: np.ndarray, issues: List[Issue]) -> np.ndarray:
    """MixData texts: inline strings, or hash ids looked up in hash_dic (the id's decimal text
    when the dictionary lacks it, reported)."""
    out = _texts(arr[field])
    hashed = np.flatnonzero(arr[kind] == MIX_HASH)
    if len(hashed):
        ids = _u64_at(arr[hashed], field)
        uniq, inverse = np.unique(ids, return_inverse=True)
        names = [hashes.get(str(int(u))) for u in uniq.tolist()]
        missing = [i for i, n in enumerate(names) if n is None]
        if missing:
            first = hashed[np.flatnonzero(inverse.ravel() == missing[0])[0]]
            path, off = locate(pieces, int(offsets[first]))
            issues.append(Issue(path, off, f"{len(missing)} {field} hash ids are not in Framework.hash_dic "
                                           f"(first: {int(uniq[missing[0]])}); kept as the decimal id"))
        texts = np.array([n if n is not None else str(int(u)) for n, u in zip(names, uniq.tolist())], dtype=object)
        out[hashed] = texts[inverse.ravel()]
    return out


def decode_task_desc(buf: np.ndarray, pieces: Sequence[Piece], complete: bool,
                     hashes: Dict[str, str]) -> Tuple[Columns, List[Issue]]:
    """Binary task descriptions: one op (its task on a stream) per record."""
    arr, offsets, issues = whole_records(GE_TASK_DESC, buf, pieces, complete)
    arr, offsets = _keep(arr, offsets, (arr["magic"] == MAGIC) & (arr["data_tag"] == TAG_TASK_DESC), pieces,
                         f"ge_task_desc record without magic 0x{MAGIC:04X} and data tag {TAG_TASK_DESC}", issues)
    return {
        "op_name": _mix_texts(arr, "op_name_kind", "op_name", hashes, pieces, offsets, issues),
        "op_type": _mix_texts(arr, "op_type_kind", "op_type", hashes, pieces, offsets, issues),
        "task_type": arr["task_type"].astype(np.int64), "cur_iter": arr["cur_iter"].astype(np.int64),
        "shape_type": arr["shape_type"].astype(np.int64), "block_dim": arr["block_dims"].astype(np.int64),
        "model_id": arr["model_id"].astype(np.int64), "stream_id": arr["stream_id"].astype(np.int64),
        "task_id": arr["task_id"].astype(np.int64), "offset": offsets,
    }, issues


def task_op_names(cols: Columns) -> Dict[str, str]:
    """'<stream>_<task>' -> full op name of decoded task descriptions (a later record wins), the
    key MindSpore's parsers use."""
    return {f"{s}_{t}": str(n) for s, t, n in zip(cols["stream_id"].tolist(), cols["task_id"].tolist(),
                                                  cols["op_name"].tolist())}


def _vm_name(value: int, table: Dict[int, str]) -> str:
    value = value - MSPROF_OFFSET if value >= MSPROF_OFFSET else value
    return table.get(value, str(value))


def decode_tensor_data(buf: np.ndarray, pieces: Sequence[Piece], complete: bool) -> Tuple[Columns, List[Issue]]:
    """Binary tensor descriptions, one row per op (model, stream, task) with the six texts. An
    op's tensors may span records; only its first iteration's records are used."""
    arr, offsets, issues = whole_records(GE_TENSOR_DATA, buf, pieces, complete)
    arr, offsets = _keep(arr, offsets, (arr["magic"] == MAGIC) & (arr["data_tag"] == TAG_TENSOR_DATA), pieces,
                         f"ge_tensor_data record without magic 0x{MAGIC:04X} and data tag {TAG_TENSOR_DATA}", issues)
    ops: Dict[Tuple[int, int, int], Tuple[int, List[Tensor], List[Tensor]]] = {}
    for i in range(len(arr)):  # op descriptions: one record or two per op, not a hot path
        rec = arr[i]
        key = (int(rec["model_id"]), int(rec["stream_id"]), int(rec["task_id"]))
        it = int(rec["cur_iter"])
        if key not in ops:
            ops[key] = (it, [], [])
        first, ins, outs = ops[key]
        if it != first:
            continue
        for s in range(min(int(rec["tensor_num"]), TENSOR_SLOTS)):
            dims = rec[f"t{s}_shape"]
            shape = ",".join(str(int(d)) for d in dims[dims != 0])
            t = (shape, _vm_name(int(rec[f"t{s}_dtype"]), VM_DTYPES), _vm_name(int(rec[f"t{s}_format"]), VM_FORMATS))
            (ins if int(rec[f"t{s}_type"]) == 0 else outs).append(t)
    keys = list(ops)
    texts = [render_tensors(ops[k][1], ops[k][2]) for k in keys]
    out: Columns = {
        "model_id": np.array([k[0] for k in keys], dtype=np.int64),
        "stream_id": np.array([k[1] for k in keys], dtype=np.int64),
        "task_id": np.array([k[2] for k in keys], dtype=np.int64)}
    for j, name in enumerate(("in_shapes", "in_dtypes", "in_formats", "out_shapes", "out_dtypes", "out_formats")):
        out[name] = np.array([t[j] for t in texts], dtype=object)
    return out, issues


def decode_step_info(buf: np.ndarray, pieces: Sequence[Piece], complete: bool) -> Tuple[Columns, List[Issue]]:
    """Binary step-info records: which task records which step-trace tag."""
    arr, offsets, issues = whole_records(GE_STEP_INFO, buf, pieces, complete)
    arr, offsets = _keep(arr, offsets, (arr["magic"] == MAGIC) & (arr["data_tag"] == TAG_STEP_INFO), pieces,
                         f"ge_step_info record without magic 0x{MAGIC:04X} and data tag {TAG_STEP_INFO}", issues)
    return {
        "model_id": arr["model_id"].astype(np.int64), "stream_id": arr["stream_id"].astype(np.int64),
        "task_id": arr["task_id"].astype(np.int64), "tag": arr["tag"].astype(np.int64), "offset": offsets,
    }, issues


# ------------------------------------------------------------------------------------------------
# AI CPU (DATA_PREPROCESS)

def is_binary_aicpu(buf: np.ndarray) -> bool:
    """Whether a DATA_PREPROCESS stream holds binary records (it starts with magic 0x5A5A), not text."""
    return len(buf) >= 2 and int(buf[0]) == 0x5A and int(buf[1]) == 0x5A


def decode_aicpu(buf: np.ndarray, pieces: Sequence[Piece], complete: bool) -> Tuple[Columns, List[Issue]]:
    """AI CPU kernel records, binary (0x5A5A) or text. Columns: stream_id, task_id (-1 in the
    text variant), name (the text variant's node name, '' in the binary one), run_start_us,
    run_end_us, start_ticks, end_ticks (10 ns ticks; -1 when the text lacks them),
    dispatch_us, total_us, offset."""
    if is_binary_aicpu(buf):
        arr, offsets, issues = whole_records(AICPU_PREPROCESS, buf, pieces, complete)
        arr, offsets = _keep(arr, offsets, (arr["magic"] == MAGIC) & (arr["data_tag"] == TAG_AICPU), pieces,
                             f"aicpu_preprocess record without magic 0x{MAGIC:04X} and data tag {TAG_AICPU}", issues)
        n = len(arr)
        return {
            "stream_id": arr["stream_id"].astype(np.int64), "task_id": arr["task_id"].astype(np.int64),
            "name": np.full(n, "", dtype=object), "run_start_us": arr["run_start"].astype(np.int64),
            "run_end_us": arr["run_end"].astype(np.int64), "start_ticks": arr["run_start_ticks"].astype(np.int64),
            "end_ticks": arr["run_end_ticks"].astype(np.int64),
            "dispatch_us": arr["dispatch_time"].astype(np.float64), "total_us": arr["total_time"].astype(np.float64),
            "offset": offsets,
        }, issues
    return parse_aicpu_text(split_lines(buf, pieces, AICPU_SEP))
