"""Binary record kinds of a raw msprof collection, each declared once.

Every record kind is one `Record`: an ordered list of `(name, code, meaning)` rows.
From that list derive the numpy dtype (always little-endian), the size (checked
against the declared size when this module is imported), the field names and the
packing used by the synthetic writer in the tests.

Codes follow `struct`: B H I Q (unsigned 8..64 bit), b h i q (signed), d (double),
`Ns` (N raw bytes), `Nx` (N padding bytes, no field) and `kX` (an array of k X).
Bit fields are declared separately, LSB first, on an integer field.

Sources: ../shared/spec/host_formats.md §2 and device_formats.md §3-§6.
"""
from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Sequence, Tuple, Union

import numpy as np

Field = Tuple[str, str, str]
BitField = Tuple[str, int]

_CODE = re.compile(r"^(\d*)([BHIQbhiqdsx])$")
_NP = {"B": "u1", "H": "u2", "I": "u4", "Q": "u8", "b": "i1", "h": "i2", "i": "i4", "q": "i8", "d": "f8"}


@dataclass(frozen=True)
class Record:
    """One fixed-size binary record kind."""

    name: str
    fields: Sequence[Field]
    size: int
    bits: Mapping[str, Sequence[BitField]] = field(default_factory=dict)
    byte_order: str = "<"

    @property
    def fmt(self) -> str:
        """The `struct` format of the whole record, byte order first."""
        return self.byte_order + "".join(code for _, code, _ in self.fields)

    @property
    def dtype(self) -> np.dtype:
        """The numpy structured dtype of the record: its fields (padding left out) at their
        offsets, byte order `byte_order`, itemsize `size`."""
        names: List[str] = []
        formats: List[object] = []
        offsets: List[int] = []
        offset = 0
        for name, code, _ in self.fields:
            match = _CODE.match(code)
            if match is None:
                raise ValueError(f"{self.name}.{name}: {code!r} is not a field code (see the module docstring)")
            count_text, kind = match.groups()
            count = int(count_text) if count_text else 1
            if kind == "x":
                offset += count
                continue
            if kind == "s":
                fmt: object = f"S{count}"
                width = count
            else:
                base = self.byte_order + _NP[kind]
                fmt = (base, (count,)) if count_text else base
                width = np.dtype(base).itemsize * count
            names.append(name)
            formats.append(fmt)
            offsets.append(offset)
            offset += width
        return np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": self.size})

    @property
    def names(self) -> List[str]:
        """The field names in record order, padding left out."""
        return [name for name, code, _ in self.fields if not code.endswith("x")]

    def offset_of(self, name: str) -> int:
        """Byte offset of field `name` in the record."""
        return int(_fields(self.dtype)[name][1])


def _fields(dtype: np.dtype) -> Mapping[str, Union[Tuple[np.dtype, int], Tuple[np.dtype, int, Any]]]:
    """(dtype, byte offset[, title]) of each field of a structured dtype."""
    return dtype.fields or {}


def checked(record: Record) -> Record:
    """`record`, once its byte order is '<', its fields make its declared size and its bit fields fit
    their integer fields (an AssertionError otherwise, when the module declaring it is imported)."""
    if record.byte_order != "<":
        raise AssertionError(f"{record.name}: byte order must be '<'")
    computed = struct.calcsize(record.fmt)
    if computed != record.size:
        raise AssertionError(f"{record.name}: fields make {computed} bytes, declared {record.size}")
    for host, parts in record.bits.items():
        width = 8 * _fields(record.dtype)[host][0].itemsize
        if sum(n for _, n in parts) > width:
            raise AssertionError(f"{record.name}.{host}: bit fields exceed {width} bits")
    return record


def bit_field(record: Record, host: str, name: str, values: np.ndarray) -> np.ndarray:
    """Extract bit field `name` of integer field `host` from `values` (vectorized)."""
    shift = 0
    for part, width in record.bits[host]:
        if part == name:
            return (values >> shift) & ((1 << width) - 1)
        shift += width
    raise KeyError(f"{record.name}.{host} has no bit field {name}")


def pack_bits(record: Record, host: str, **parts: int) -> int:
    """Compose the integer value of `host` from its named bit fields (LSB first)."""
    value, shift = 0, 0
    for part, width in record.bits[host]:
        part_value = parts.pop(part, 0)
        if part_value >> width:
            raise ValueError(f"{record.name}.{host}.{part}={part_value} does not fit {width} bits")
        value |= part_value << shift
        shift += width
    if parts:
        raise KeyError(f"{record.name}.{host}: unknown bit fields {sorted(parts)}")
    return value


def pack(record: Record, **values: object) -> bytes:
    """Bytes of one record; fields not given are zero. Arrays take sequences."""
    arr = np.zeros(1, dtype=record.dtype)
    for name, value in values.items():
        if name not in (arr.dtype.names or ()):
            raise KeyError(f"{record.name} has no field {name}")
        arr[name][0] = value
    return arr.tobytes()


# --------------------------------------------------------------------------------------------
# Host records (host/data, host_formats.md §2). Magic 0x5A5A on every record.

HOST_MAGIC = 0x5A5A

_HOST_HEADER: List[Field] = [
    ("magic", "H", "0x5A5A"),
    ("level", "H", "reporting level: 20000 acl, 15000 model, 10000 node, 5000 runtime ..."),
    ("type", "I", "type within the level; names in type_info_dic '<level>_<type>'"),
    ("thread_id", "I", "OS thread id of the reporter"),
]

API_EVENT = checked(Record("api_event", [
    *_HOST_HEADER,
    ("reserve", "I", "request/index id for model-level records (Event: requestId), else 0"),
    ("begin", "Q", "begin time, host counter ticks (Event: its timestamp)"),
    ("end", "Q", "end time, host counter ticks; 0xFFFF_FFFF_FFFF_FFFF marks an Event"),
    ("item_id", "Q", "hash id of the op name (node level) or model id (model level), else 0"),
], size=40))

EVENT_FLAG = 0xFFFF_FFFF_FFFF_FFFF

COMPACT_HEADER: List[Field] = [
    *_HOST_HEADER,
    ("data_len", "I", "meaningful payload bytes"),
    ("timestamp", "Q", "host counter ticks"),
]

NODE_BASIC_INFO = checked(Record("node_basic_info", [
    *COMPACT_HEADER,
    ("op_name", "Q", "hash id of the op name"),
    ("task_type", "I", "GE task type: 0 AI_CORE, 1 AI_CPU, 2 AI_VECTOR_CORE, 4 MIX_AIC, 5 MIX_AIV ..."),
    ("op_type", "Q", "hash id of the op type"),
    ("block_dim", "I", "low 16 bits block num, high 16 bits mix ratio"),
    ("op_flag", "I", "non-zero: HF32 eligible"),
    ("op_state", "B", "overwritten by the analysis from the file class"),
    ("_pad", "11x", ""),
], size=64))

NODE_ATTR_INFO = checked(Record("node_attr_info", [
    *COMPACT_HEADER,
    ("op_name", "Q", "hash id of the op name"),
    ("attr_type", "I", "0 = OP_ATTR"),
    ("hash_id", "Q", "hash id of the attribute string"),
    ("_pad", "20x", ""),
], size=64))

TASK_TRACK = checked(Record("task_track", [
    *COMPACT_HEADER,
    ("device", "H", "bits 0-11 device id, bits 12-15 device type (0 NPU)"),
    ("stream_id", "H", "exposed stream id"),
    ("task_id", "I", "low 16 bits task id, high 16 bits batch (flip) id; full id on chip v6"),
    ("task_type", "Q", "runtime task type id, name via type_info_dic '5000_<id>'"),
    ("kernel_name", "Q", "hash id of the kernel name, 0 if none"),
    ("num_blocks", "H", "extInfo.kernelInfo: block count (only when data_len == 40)"),
    ("args_size", "H", "extInfo.kernelInfo: argument size"),
    ("sched", "B", "extInfo.kernelInfo: bits 0-2 mix ratio, bits 3-4 sched mode"),
    ("_pad", "11x", ""),
], size=64, bits={"sched": [("ratio", 3), ("sched_mode", 2), ("_rsv", 3)]}))

MEMCPY_INFO = checked(Record("memcpy_info", [
    *COMPACT_HEADER,
    ("data_size", "Q", "bytes copied"),
    ("max_size", "Q", "largest bytes per task"),
    ("direction", "H", "0 h2h, 1 h2d, 2 d2h, 3 d2d ..."),
    ("_pad", "22x", ""),
], size=64))

TENSOR_SLOT = 5
TENSOR_DIMS = 8

TENSOR_INFO = checked(Record("tensor_info", [
    *COMPACT_HEADER,
    ("op_name", "Q", "hash id of the op name"),
    ("tensor_num", "I", "tensors in this record (1..5)"),
    *[f for i in range(TENSOR_SLOT) for f in (
        (f"t{i}_type", "I", "0 input, 1 output"),
        (f"t{i}_format", "I", "GE format (low 8 bits), sub-format (bits 8-23)"),
        (f"t{i}_dtype", "I", "GE data type"),
        (f"t{i}_shape", f"{TENSOR_DIMS}I", "dims, ended by the first 0"),
    )],
], size=256))

CONTEXT_ID_INFO = checked(Record("context_id_info", [
    *COMPACT_HEADER,
    ("op_name", "Q", "hash id of the op name"),
    ("ctx_num", "I", "number of context ids used (<= 55)"),
    ("ctx_ids", "55I", "context ids"),
], size=256))

GRAPH_ID_MAP = checked(Record("graph_id_map", [
    *COMPACT_HEADER,
    ("model_name", "Q", "hash id of the model name"),
    ("graph_id", "I", "graph id"),
    ("model_id", "I", "model id"),
    ("_pad", "216x", ""),
], size=256))

FUSION_OP_INFO = checked(Record("fusion_op_info", [
    *COMPACT_HEADER,
    ("op_name", "Q", "hash id of the fused op name"),
    ("fusion_num", "I", "fused ops in this record (<= 8)"),
    ("input_mem", "Q", "bytes"),
    ("output_mem", "Q", "bytes"),
    ("weight_mem", "Q", "bytes"),
    ("workspace_mem", "Q", "bytes"),
    ("total_mem", "Q", "bytes"),
    ("fusion_ids", "8Q", "hash ids of the original op names"),
    ("_pad", "116x", ""),
], size=256))

HCCL_OP_INFO = checked(Record("hccl_op_info", [
    *COMPACT_HEADER,
    ("flags", "B", "bit 0 relay, bit 1 retry"),
    ("data_type", "B", "HCCL data type enum (0 INT8, 3 FP16, 4 FP32, 11 BFP16 ...)"),
    ("alg_type", "Q", "hash id of the algorithm text ('MESH-RING-NA-NA')"),
    ("count", "Q", "element count"),
    ("group_name", "Q", "hash id of the communication group name"),
    ("_pad", "14x", ""),
], size=64))

HCCL_INFO = checked(Record("hccl_info", [
    *COMPACT_HEADER,
    ("item_id", "Q", "hash id of the HCCL task name (Notify_Wait, Memcpy, RDMASend ...)"),
    ("ccl_tag", "Q", "hash id"),
    ("group_name", "Q", "hash id of the group name"),
    ("local_rank", "I", ""),
    ("remote_rank", "I", "0xFFFFFFFF: none"),
    ("rank_size", "I", ""),
    ("work_flow_mode", "I", ""),
    ("plane_id", "I", "plane of the group (timeline thread 'Plane k')"),
    ("ctx_id", "I", "context id, 0xFFFFFFFF for non-FFTS tasks"),
    ("notify_id", "Q", ""),
    ("stage", "I", ""),
    ("role", "I", "0 DST, 1 SRC"),
    ("duration_estimated", "d", "µs"),
    ("src_addr", "Q", ""),
    ("dst_addr", "Q", ""),
    ("data_size", "Q", "bytes"),
    ("op_type", "I", "reduce op: 0 SUM, 1 MUL, 2 MAX, 3 MIN, 255 reserved"),
    ("data_type", "I", "HCCL data type enum"),
    ("link_type", "I", "0 ON_CHIP, 1 HCCS, 2 PCIE, 3 ROCE, 4 SIO ..."),
    ("transport_type", "I", "0 SDMA, 1 RDMA, 2 LOCAL"),
    ("rdma_type", "I", "0 RDMA_SEND_NOTIFY, 1 RDMA_SEND_PAYLOAD, 255 reserved"),
    ("_reserve", "4x", ""),
    ("_pad", "112x", ""),
], size=256))

# --------------------------------------------------------------------------------------------
# Device records (device_N/data, device_formats.md §3-§6).

DEVICE_MAGIC = 0x6BD3

HWTS_LOG = checked(Record("hwts_log", [
    ("tag", "B", "bits 0-2 log type (0 start, 1 end), bits 4-7 sequence counter"),
    ("task_type", "B", "task type of the log"),
    ("magic", "H", "0x6BD3 (not checked by the reference)"),
    ("_rsv", "2x", ""),
    ("task_id", "H", "task id"),
    ("syscnt", "Q", "device system counter ticks"),
    ("stream_id", "I", "stream id (kept modulo 2048)"),
    ("_pad", "44x", ""),
], size=64, bits={"tag": [("log_type", 3), ("_rsv", 1), ("cnt", 4)]}))

AIC_PMU = checked(Record("aic_pmu", [
    ("tag", "B", "bits 4-7 sequence counter"),
    ("_rsv0", "1x", ""),
    ("magic", "H", "0x6BD3 (not checked)"),
    ("_rsv1", "2x", ""),
    ("task_id", "H", "task id"),
    ("_rsv2", "8x", ""),
    ("total_cycle", "Q", "task cycles"),
    ("_rsv3", "8x", ""),
    ("pmu", "8Q", "counters, in the order of sample.json ai_core_profiling_events"),
    ("stream_id", "I", "stream id (modulo 2048)"),
    ("_pad", "28x", ""),
], size=128, bits={"tag": [("_low", 4), ("cnt", 4)]}))

_STARS_HEADER: List[Field] = [
    ("head", "H", "bits 0-5 func type, 6-9 sequence counter, 10-15 sqe type"),
    ("magic", "H", "0x6BD3"),
    ("stream_raw", "H", "raw stream field (decoded with the task field)"),
    ("task_raw", "H", "raw task field"),
]
_STARS_BITS: Dict[str, Sequence[BitField]] = {"head": [("func_type", 6), ("cnt", 4), ("sqe_type", 6)]}

STARS_LOG = checked(Record("stars_log", [
    *_STARS_HEADER,
    ("syscnt", "Q", "device system counter ticks"),
    ("word16", "H", "ACSQ: reserved; FFTS: bits 0-7 subtask type"),
    ("word18", "H", "ACSQ: bits 0-5 acc id; FFTS: subtask (context) id"),
    ("word20", "H", "FFTS: bits 13-15 ffts type"),
    ("thread_id", "H", "FFTS: thread id"),
    ("_pad", "40x", ""),
], size=64, bits=_STARS_BITS))

FFTS_PMU = checked(Record("ffts_pmu", [
    *_STARS_HEADER,
    ("_rsv0", "8x", ""),
    ("word16", "H", "bits 0-7 subtask type, bit 10 overflow flag"),
    ("subtask_id", "H", "context id"),
    ("word20", "H", "context PMU: bits 13-15 ffts type; block PMU: byte 20 bit 0 core type, byte 21 bits 5-7 ffts type"),
    ("thread_id", "H", "thread id"),
    ("_rsv1", "4x", ""),
    ("sub_block_id", "H", "block PMU: sub block id"),
    ("block_id", "H", "block PMU: block id"),
    ("total_cycle", "Q", "cycles"),
    ("ov_cycle", "Q", "overflow cycles"),
    ("pmu", "8Q", "counters, in the order of the sample.json event list"),
    ("start_syscnt", "Q", "device system counter ticks"),
    ("end_syscnt", "Q", "device system counter ticks"),
], size=128, bits=_STARS_BITS))

TS_TRACK = checked(Record("ts_track", [
    ("mode", "B", "0 host, 1 device"),
    ("tag", "B", "10 step trace, 11 memcpy, 12 task type, 14 task flip, 15 block num"),
    ("buf_size", "H", "40"),
    ("_rsv", "4x", ""),
    ("syscnt", "Q", "device system counter ticks"),
    ("p16", "Q", "step trace: index id; others: u16 stream, u16 task/flip, ..."),
    ("p24", "Q", "step trace: model id"),
    ("p32", "H", "step trace: stream id"),
    ("p34", "H", "step trace: task id"),
    ("p36", "H", "step trace: tag id"),
    ("p38", "H", "reserved"),
], size=40))

FREQ_SLOTS = 55

LPM_FREQ = checked(Record("lpm_freq", [
    ("count", "I", "valid entries (<= 55)"),
    ("_rsv", "4x", ""),
    *[f for i in range(FREQ_SLOTS) for f in (
        (f"f{i}_syscnt", "Q", "device ticks of the change"),
        (f"f{i}_mhz", "I", "new AI Core frequency, MHz"),
        (f"_f{i}_rsv", "4x", ""),
    )],
], size=888))

REGISTRY: Dict[str, Record] = {r.name: r for r in (
    API_EVENT, NODE_BASIC_INFO, NODE_ATTR_INFO, TASK_TRACK, MEMCPY_INFO, TENSOR_INFO,
    CONTEXT_ID_INFO, GRAPH_ID_MAP, FUSION_OP_INFO, HWTS_LOG, AIC_PMU, STARS_LOG, FFTS_PMU,
    TS_TRACK, LPM_FREQ,
)}
