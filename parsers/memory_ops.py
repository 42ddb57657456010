"""Host records of operator memory (formats_more.md §2.3-§2.4): the GE task memory reports
(`additional.task_memory_info`, one allocation or release of one op's memory) and the static graph
memory plan (`additional.static_op_mem`, one op of a static graph, or the graph's total). Both are
256-byte additional records behind the usual 24-byte host header; decoded by the host decoders
(parsers.host.ADDITIONAL_KINDS), whose validity check applies to them too."""
from __future__ import annotations

from .records import COMPACT_HEADER, Record, checked

TASK_MEMORY_INFO = checked(Record("task_memory_info", [
    *COMPACT_HEADER,  # level 10000, type 6 (MSPROF_REPORT_NODE_TASK_MEMORY_TYPE)
    ("addr", "Q", "device address of the block"),
    ("size", "q", "bytes: > 0 an allocation, < 0 a release"),
    ("node_id", "Q", "hash id of the op name (hash_dic)"),
    ("total_allocate", "Q", "bytes allocated by GE on the device after this record"),
    ("total_reserve", "Q", "bytes reserved by GE on the device after this record"),
    ("device_id", "I", "device id (exported as 'NPU:<id>')"),
    ("device_type", "I", "device type"),
    ("_pad", "184x", ""),
], size=256))

STATIC_OP_MEM = checked(Record("static_op_mem", [
    *COMPACT_HEADER,  # level 10000, type 11
    ("op_mem_size", "q", "bytes the op's memory plan holds"),
    ("op_name", "Q", "hash id of the op name (hash_dic); 0: the graph's total"),
    ("life_start", "Q", "node index where the memory starts to be used"),
    ("life_end", "Q", "node index where it stops (4294967294 means to the end, shown 4294967295)"),
    ("total_alloc_mem", "Q", "bytes of the whole static graph"),
    ("dyn_op_name", "Q", "hash id of the dynamic root op (the model), 0: none"),
    ("graph_id", "I", "graph id"),
    ("_pad", "180x", ""),
], size=256))
