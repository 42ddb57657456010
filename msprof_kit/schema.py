"""The sqlite schema of the store, declared once.

The unified tables follow the reference's `msprof_{ts}.db` (outputs.md §8.3): same names,
columns, types and order, so `export db` can copy them as they are. Tables prefixed `KIT_`
are msprof-kit extensions for what that schema lacks; docs/store.md describes them.
"""
from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

Column = Tuple[str, str]  # (name, sqlite type, with " PRIMARY KEY" where the reference has it)

UNIFIED: Dict[str, Sequence[Column]] = {
    "STRING_IDS": [("id", "INTEGER PRIMARY KEY"), ("value", "TEXT")],
    "SESSION_TIME_INFO": [("startTimeNs", "INTEGER"), ("endTimeNs", "INTEGER")],
    "NPU_INFO": [("id", "INTEGER"), ("name", "TEXT")],
    "RANK_DEVICE_MAP": [("rankId", "INTEGER"), ("deviceId", "INTEGER")],
    "HOST_INFO": [("hostUid", "TEXT"), ("hostName", "TEXT")],
    "META_DATA": [("name", "TEXT"), ("value", "TEXT")],
    "TASK": [("startNs", "INTEGER"), ("endNs", "INTEGER"), ("deviceId", "INTEGER"), ("connectionId", "INTEGER"),
             ("globalTaskId", "INTEGER"), ("globalPid", "INTEGER"), ("taskType", "INTEGER"),
             ("contextId", "INTEGER"), ("streamId", "INTEGER"), ("taskId", "INTEGER"), ("modelId", "INTEGER")],
    "COMPUTE_TASK_INFO": [("name", "INTEGER"), ("globalTaskId", "INTEGER PRIMARY KEY"), ("blockNum", "INTEGER"),
                          ("mixBlockNum", "INTEGER"), ("taskType", "INTEGER"), ("opType", "INTEGER"),
                          ("inputFormats", "INTEGER"), ("inputDataTypes", "INTEGER"), ("inputShapes", "INTEGER"),
                          ("outputFormats", "INTEGER"), ("outputDataTypes", "INTEGER"),
                          ("outputShapes", "INTEGER"), ("attrInfo", "INTEGER"), ("opState", "INTEGER"),
                          ("hf32Eligible", "INTEGER"), ("gridDim", "INTEGER"), ("blockDim", "INTEGER")],
    "CANN_API": [("startNs", "INTEGER"), ("endNs", "INTEGER"), ("type", "INTEGER"), ("globalTid", "INTEGER"),
                 ("connectionId", "INTEGER PRIMARY KEY"), ("name", "INTEGER")],
    "TASK_PMU_INFO": [("globalTaskId", "INTEGER"), ("name", "INTEGER"), ("value", "NUMERIC")],
    "MEMCPY_INFO": [("globalTaskId", "NUMERIC"), ("size", "NUMERIC"), ("memcpyOperation", "NUMERIC")],
    "COMMUNICATION_OP": [("opName", "INTEGER"), ("startNs", "INTEGER"), ("endNs", "INTEGER"),
                         ("connectionId", "INTEGER"), ("groupName", "INTEGER"), ("opId", "INTEGER PRIMARY KEY"),
                         ("relay", "INTEGER"), ("retry", "INTEGER"), ("dataType", "INTEGER"), ("algType", "INTEGER"),
                         ("count", "NUMERIC"), ("opType", "INTEGER"), ("deviceId", "INTEGER"), ("rankSize", "INTEGER")],
    "COMMUNICATION_TASK_INFO": [("name", "INTEGER"), ("globalTaskId", "INTEGER"), ("taskType", "INTEGER"),
                                ("planeId", "INTEGER"), ("groupName", "INTEGER"), ("notifyId", "INTEGER"),
                                ("rdmaType", "INTEGER"), ("srcRank", "INTEGER"), ("dstRank", "INTEGER"),
                                ("transportType", "INTEGER"), ("size", "INTEGER"), ("dataType", "INTEGER"),
                                ("linkType", "INTEGER"), ("opId", "INTEGER"), ("isMaster", "INTEGER"),
                                ("bandwidth", "NUMERIC")],
    "AICORE_FREQ": [("deviceId", "INTEGER"), ("timestampNs", "NUMERIC"), ("freq", "INTEGER"), ("dieId", "NUMERIC")],
    "MSTX_EVENTS": [("startNs", "INTEGER"), ("endNs", "INTEGER"), ("eventType", "INTEGER"), ("rangeId", "INTEGER"),
                    ("category", "INTEGER"), ("message", "INTEGER"), ("globalTid", "INTEGER"),
                    ("endGlobalTid", "INTEGER"), ("domainId", "INTEGER"), ("connectionId", "INTEGER")],
    "OVERLAP_ANALYSIS": [("id", "INTEGER PRIMARY KEY"), ("deviceId", "INTEGER"), ("startNs", "NUMERIC"),
                         ("endNs", "NUMERIC"), ("type", "INTEGER")],
    "NPU_OP_MEM": [("operatorName", "INTEGER"), ("addr", "INTEGER"), ("type", "INTEGER"), ("size", "INTEGER"),
                   ("timestampNs", "INTEGER"), ("globalTid", "INTEGER"), ("totalAllocate", "NUMERIC"),
                   ("totalReserve", "NUMERIC"), ("component", "INTEGER"), ("deviceId", "INTEGER")],
    "NPU_MEM": [("type", "INTEGER"), ("ddr", "NUMERIC"), ("hbm", "NUMERIC"), ("timestampNs", "INTEGER"),
                ("deviceId", "INTEGER")],
    "NPU_MODULE_MEM": [("moduleId", "INTEGER"), ("timestampNs", "INTEGER"), ("totalReserved", "NUMERIC"),
                       ("deviceId", "INTEGER")],
    "ENUM_API_TYPE": [("id", "INTEGER PRIMARY KEY"), ("name", "TEXT")],
    "ENUM_HCCL_DATA_TYPE": [("id", "INTEGER PRIMARY KEY"), ("name", "TEXT")],
    "ENUM_HCCL_LINK_TYPE": [("id", "INTEGER PRIMARY KEY"), ("name", "TEXT")],
    "ENUM_HCCL_RDMA_TYPE": [("id", "INTEGER PRIMARY KEY"), ("name", "TEXT")],
    "ENUM_HCCL_TRANSPORT_TYPE": [("id", "INTEGER PRIMARY KEY"), ("name", "TEXT")],
    "ENUM_MEMCPY_OPERATION": [("id", "INTEGER PRIMARY KEY"), ("name", "TEXT")],
    "ENUM_MODULE": [("id", "INTEGER PRIMARY KEY"), ("name", "TEXT")],
    "ENUM_MSTX_EVENT_TYPE": [("id", "INTEGER PRIMARY KEY"), ("name", "TEXT")],
    "ENUM_OVERLAP_ANALYSIS_TYPE": [("id", "INTEGER PRIMARY KEY"), ("name", "TEXT")],
}

# The unified tables' columns that hold STRING_IDS ids (TASK_PMU_INFO.name: the metric names).
STRING_ID_COLUMNS: Dict[str, Sequence[str]] = {
    "TASK": ("taskType",),
    "COMPUTE_TASK_INFO": ("name", "taskType", "opType", "inputFormats", "inputDataTypes", "inputShapes",
                          "outputFormats", "outputDataTypes", "outputShapes", "attrInfo", "opState", "hf32Eligible"),
    "CANN_API": ("name",),
    "TASK_PMU_INFO": ("name",),
    "COMMUNICATION_OP": ("opName", "groupName", "algType", "opType"),
    "COMMUNICATION_TASK_INFO": ("name", "taskType", "groupName"),
    "NPU_OP_MEM": ("operatorName", "type", "component"),
    "MSTX_EVENTS": ("message", "domainId"),
    "NPU_MEM": ("type",),
}

# msprof-kit extensions (docs/store.md).
EXTENSIONS: Dict[str, Sequence[Column]] = {
    # column-wise storage of the per-task extension tables (COLUMNAR below): one row per column,
    # `data` = the little-endian array bytes (strings as int32 codes into the JSON list `labels`)
    "KIT_COLUMNS": [("tableName", "TEXT"), ("name", "TEXT"), ("dtype", "TEXT"), ("data", "BLOB"),
                    ("labels", "TEXT")],
    # ts_track step trace records (tag 10)
    "KIT_STEP_TRACE": [("deviceId", "INTEGER"), ("timestampNs", "INTEGER"), ("indexId", "INTEGER"),
                       ("modelId", "INTEGER"), ("streamId", "INTEGER"), ("taskId", "INTEGER"), ("tagId", "INTEGER")],
    # model names from graph_id_map
    "KIT_MODEL": [("modelId", "INTEGER"), ("name", "TEXT")],
    # facts about the collection: chip, metric groups, clock parameters, source path ...
    "KIT_INFO": [("deviceId", "INTEGER"), ("name", "TEXT"), ("value", "TEXT")],
    # msproftx / mstx events (ingest/msproftx.py): one row per event, those before the collection
    # start included (MSTX_EVENTS keeps the C++ path's subset); the MSTX_EVENTS columns, then the
    # reporting processId, isMstx (1: an mstx event), markId (-1: legacy msproftx), and the legacy
    # payloadType, payloadValue (u64 bits as INTEGER) and messageType
    "KIT_MSTX": [("startNs", "INTEGER"), ("endNs", "INTEGER"), ("eventType", "INTEGER"), ("category", "INTEGER"),
                 ("message", "INTEGER"), ("globalTid", "INTEGER"), ("domainId", "INTEGER"),
                 ("connectionId", "INTEGER"), ("processId", "INTEGER"), ("isMstx", "INTEGER"), ("markId", "INTEGER"),
                 ("payloadType", "INTEGER"), ("payloadValue", "INTEGER"), ("messageType", "INTEGER")],
    # the tables of a store, written last: a store that lacks one of them is damaged (docs/store.md)
    "KIT_TABLES": [("name", "TEXT")],
    # what was dropped or guessed during import
    "KIT_WARNINGS": [("message", "TEXT")],
    # JOB collections: the key of each COMPUTE_TASK_INFO row (an op described by a legacy
    # Framework file need not have run, so TASK may hold no row with its globalTaskId)
    "KIT_COMPUTE_TASK": [("globalTaskId", "INTEGER"), ("deviceId", "INTEGER"), ("streamId", "INTEGER"),
                         ("taskId", "INTEGER"), ("batchId", "INTEGER"), ("modelId", "INTEGER")],
    # JOB collections: the op that records each step-trace point (tagId in KIT_STEP_TRACE's numbering)
    "KIT_STEP_POINT": [("deviceId", "INTEGER"), ("modelId", "INTEGER"), ("tagId", "INTEGER"), ("name", "TEXT")],
    # JOB collections: AI CPU kernel records (DATA_PREPROCESS); startNs/endNs from the records' µs
    # timestamps, ticks are the records' 10 ns counters (-1 when absent), task ids -1 in the text variant
    "KIT_AICPU": [("deviceId", "INTEGER"), ("streamId", "INTEGER"), ("taskId", "INTEGER"), ("name", "TEXT"),
                  ("startNs", "INTEGER"), ("endNs", "INTEGER"), ("runStartUs", "INTEGER"), ("runEndUs", "INTEGER"),
                  ("runStartTicks", "INTEGER"), ("runEndTicks", "INTEGER"), ("dispatchUs", "NUMERIC"),
                  ("totalUs", "NUMERIC")],
    # one row per COMMUNICATION_TASK_INFO row (same order): what the unified table lacks of an HCCL
    # task. groupHash: the raw group-name hash id as text (the analyze keys use it); hcclName: the
    # task name (Notify_Wait, Memcpy ...); the enum columns raw (-1: no hccl_info record); times in
    # local ns (startNs/endNs: the device task, hostNs: its task_track); durationEstimated in µs;
    # iteration: the reference's per-(stream, task, batch, context) count that ends the op name
    "KIT_HCCL_TASK": [("globalTaskId", "INTEGER"), ("opId", "INTEGER"), ("deviceId", "INTEGER"),
                      ("streamId", "INTEGER"), ("taskId", "INTEGER"), ("contextId", "INTEGER"),
                      ("batchId", "INTEGER"), ("startNs", "INTEGER"), ("endNs", "INTEGER"), ("hostNs", "INTEGER"),
                      ("threadId", "INTEGER"), ("modelId", "INTEGER"), ("connectionId", "INTEGER"),
                      ("hcclName", "TEXT"), ("groupHash", "TEXT"), ("planeId", "INTEGER"), ("isMaster", "INTEGER"),
                      ("durationEstimated", "REAL"), ("localRank", "INTEGER"), ("remoteRank", "INTEGER"),
                      ("rankSize", "INTEGER"), ("notifyId", "INTEGER"), ("stage", "INTEGER"), ("role", "INTEGER"),
                      ("workFlowMode", "INTEGER"), ("size", "INTEGER"), ("reduceOp", "INTEGER"),
                      ("dataType", "INTEGER"), ("linkType", "INTEGER"), ("transportType", "INTEGER"),
                      ("rdmaType", "INTEGER"), ("bandwidth", "REAL"), ("iteration", "INTEGER")],
    # one row per COMMUNICATION_OP row (opId): the op's raw name (hcom_allReduce_), its full name,
    # raw group hash, OP Type text (N/A without node_basic_info), the node launch (thread, begin and
    # end in local ns, connectionId), its first master task start (firstNs, = startNs of the op),
    # model id and the group counter k of the name; cppOrder: the op's place in the reference C++
    # path's op list (cxx_order.py)
    "KIT_HCCL_OP": [("opId", "INTEGER"), ("rawName", "TEXT"), ("opName", "TEXT"), ("groupHash", "TEXT"),
                    ("groupName", "TEXT"), ("opType", "TEXT"), ("algType", "TEXT"), ("deviceId", "INTEGER"),
                    ("threadId", "INTEGER"), ("modelId", "INTEGER"), ("connectionId", "INTEGER"),
                    ("launchBeginNs", "INTEGER"), ("launchEndNs", "INTEGER"), ("startNs", "INTEGER"),
                    ("endNs", "INTEGER"), ("relay", "INTEGER"), ("retry", "INTEGER"), ("dataType", "INTEGER"),
                    ("count", "INTEGER"), ("rankSize", "INTEGER"), ("groupIndex", "INTEGER"), ("cppOrder", "INTEGER")],
    # operator memory (ingest/memory_ops.py): every GE task memory record, early ones included
    # (memory_record.csv; NPU_OP_MEM leaves out those before the collection start, as the reference's C++)
    "KIT_MEMORY_RECORD": [("timestampNs", "INTEGER"), ("totalAllocate", "INTEGER"), ("totalReserve", "INTEGER"),
                          ("deviceId", "INTEGER")],
    # each allocation with the release that frees it (operator_memory.csv); name '' when hash_dic lacks
    # the op; an allocation never released has 0 in releaseNs, durationNs and the release totals
    "KIT_OPERATOR_MEMORY": [("name", "TEXT"), ("size", "INTEGER"), ("allocationNs", "INTEGER"),
                            ("releaseNs", "INTEGER"), ("durationNs", "INTEGER"),
                            ("allocationTotalAllocate", "INTEGER"), ("allocationTotalReserve", "INTEGER"),
                            ("releaseTotalAllocate", "INTEGER"), ("releaseTotalReserve", "INTEGER"),
                            ("deviceId", "INTEGER")],
    # static graphs' memory plans (static_op_mem.csv): op name ('TOTAL' for the graph), model name
    # ('0' for none), node indexes (4294967295: to the end), size in bytes
    "KIT_STATIC_OP_MEM": [("opName", "TEXT"), ("modelName", "TEXT"), ("graphId", "INTEGER"),
                          ("nodeIndexStart", "INTEGER"), ("nodeIndexEnd", "INTEGER"), ("size", "INTEGER")],
    # PROF collections: one row per AI CPU kernel run (aicpu.data AICPU_NODE records with both run
    # ticks), by start: its (stream, task id), run start/end in local ns, the compute, memcpy and
    # dispatch times in µs as recorded, the total (submit to after-run ticks) in ns, and the batch
    # and globalTaskId of the KERNEL_AICPU task it was matched with (-1: none)
    "KIT_AICPU_NODE": [("deviceId", "INTEGER"), ("streamId", "INTEGER"), ("taskId", "INTEGER"),
                       ("startNs", "INTEGER"), ("endNs", "INTEGER"), ("computeUs", "INTEGER"),
                       ("memcpyUs", "INTEGER"), ("dispatchUs", "INTEGER"), ("totalNs", "INTEGER"),
                       ("batchId", "INTEGER"), ("globalTaskId", "INTEGER")],
}

# Per-task extension tables kept column-wise in KIT_COLUMNS (docs/store.md): millions of rows that
# the exporters read whole, so one BLOB per column instead of one sqlite row per task.
COLUMNAR: Dict[str, Sequence[str]] = {
    # one entry per TASK row, in TASK order (taskRow = position)
    "KIT_TASK": ["taskRow", "globalTaskId", "batchId", "requestId", "deviceTaskType", "kernelName", "threadId",
                 "matched", "trackNs", "infoNs"],
    # one entry per CANN_API row: its connectionId, the reference's struct type ("Mode" in the
    # timeline) and item id text
    "KIT_API": ["connectionId", "mode", "itemId"],
    # PMU metrics per task execution: taskRow, globalTaskId, then one column per metric (names as in
    # TASK_PMU_INFO: aic_*/aiv_* on STARS chips, unprefixed on HWTS chips; times in ns)
    "KIT_TASK_PMU": ["taskRow", "globalTaskId"],
    # 910B family (KIT_TASK_PMU by the C++ rules): the task executions whose metrics by the Python
    # rules, which iteration exports print, differ; the columns KIT_INFO's pmu_iteration_columns lists
    "KIT_TASK_PMU_PY": ["taskRow", "globalTaskId"],
}

# Unified tables of integers also kept column-wise in KIT_COLUMNS, under their own name: the
# exporters read them whole, and decoding one BLOB per column is many times faster than fetching
# the rows from sqlite. The sqlite table stays the one `query` and `export db` use.
MIRRORED = ("TASK", "CANN_API", "COMPUTE_TASK_INFO", "OVERLAP_ANALYSIS")

ALL_TABLES: Dict[str, Sequence[Column]] = {**UNIFIED, **EXTENSIONS}

# indexes by table, created as soon as their table is written (the writer thread builds them while
# the import computes the next tables)
INDEXES: Dict[str, List[str]] = {
    "TASK": ["CREATE INDEX TaskIndex ON TASK (startNs,globalTaskId)"],
    "COMMUNICATION_TASK_INFO": ["CREATE INDEX CommunicationTaskIndex ON COMMUNICATION_TASK_INFO (globalTaskId)"],
}
# The store's indexes: TaskIndex is the unified DB's alone (made when the DB is written); nothing
# reads the store's TASK by time, and building it is a serial 0.3 s at the end of a 1M-task import.
STORE_INDEXES: Dict[str, List[str]] = {t: sql for t, sql in INDEXES.items() if t != "TASK"}


def create_sql(table: str, columns: Sequence[Column]) -> str:
    """The CREATE statement in the reference's spelling (`", "` between columns)."""
    return f"CREATE TABLE {table} (" + ", ".join(f"{n} {t}" for n, t in columns) + ")"


def insert_sql(table: str, columns: Sequence[Column]) -> str:
    """The INSERT statement of a whole row, one `?` a column."""
    return f"INSERT INTO {table} VALUES (" + ",".join("?" * len(columns)) + ")"


# Fixed rows of the reference's enum and metadata tables (outputs.md §8.4).
ENUM_ROWS: Dict[str, List[Tuple[int, str]]] = {
    "ENUM_API_TYPE": [(5000, "runtime"), (5500, "communication"), (10000, "node"), (15000, "model"), (20000, "acl")],
    "ENUM_HCCL_DATA_TYPE": [(0, "INT8"), (1, "INT16"), (2, "INT32"), (3, "FP16"), (4, "FP32"), (5, "INT64"),
                            (6, "UINT64"), (7, "UINT8"), (8, "UINT16"), (9, "UINT32"), (10, "FP64"), (11, "BFP16"),
                            (12, "INT128"), (14, "HIF8"), (15, "FP8E4M3"), (16, "FP8E5M2"), (17, "FP8E8M0"),
                            (255, "RESERVED"), (65534, "N/A"), (65535, "INVALID_TYPE")],
    "ENUM_HCCL_LINK_TYPE": [(0, "ON_CHIP"), (1, "HCCS"), (2, "PCIE"), (3, "ROCE"), (4, "SIO"), (5, "HCCS_SW"),
                            (6, "STANDARD_ROCE"), (7, "UB"), (8, "UBoE"), (255, "RESERVED"), (65534, "N/A"),
                            (65535, "INVALID_TYPE")],
    "ENUM_HCCL_RDMA_TYPE": [(0, "RDMA_SEND_NOTIFY"), (1, "RDMA_SEND_PAYLOAD"), (255, "RESERVED"), (65534, "N/A"),
                            (65535, "INVALID_TYPE")],
    "ENUM_HCCL_TRANSPORT_TYPE": [(0, "SDMA"), (1, "RDMA"), (2, "LOCAL"), (3, "UB"), (4, "ROCE"), (255, "RESERVED"),
                                 (65534, "N/A"), (65535, "INVALID_TYPE")],
    "ENUM_MEMCPY_OPERATION": [(0, "host to host"), (1, "host to device"), (2, "device to host"),
                              (3, "device to device"), (4, "managed memory"), (5, "addr device to device"),
                              (6, "host to device ex"), (7, "device to host ex"), (65535, "other")],
    "ENUM_MSTX_EVENT_TYPE": [(0, "marker"), (1, "push/pop"), (2, "start/end"), (3, "marker_ex")],
    "ENUM_OVERLAP_ANALYSIS_TYPE": [(0, "COMPUTE"), (1, "COMMUNICATION"), (2, "COMM_NOT_OVERLAP_COMP"), (3, "FREE"),
                                   (65535, "RESERVE")],
}
_MODULE_IDS = list(range(0, 12)) + list(range(22, 26)) + list(range(27, 46)) + list(range(47, 59)) \
    + list(range(60, 78))
_MODULE_NAMES = ("SLOG IDEDD SCC HCCL FMK CCU DVPP RUNTIME CCE HDC DRV NET DEVMM KERNEL LIBMEDIA CCECPU ROS HCCP "
                 "ROCE TEFUSION PROFILING DP APP TS TSDUMP AICPU LP TDT FE MD MB ME IMU IMP GE CAMERA ASCENDCL "
                 "TEEOS ISP SIS HSM DSS PROCMGR BBOX AIVECTOR TBE FV TUNE HSS FFTS OP UDF HICAID TSYNC AUDIO TPRT "
                 "ASCENDCKERNEL ASYS ATRACE RTC SYSMONITOR AMP ADETECT MBUFF CUSTOM").split()
assert len(_MODULE_IDS) == len(_MODULE_NAMES) == 65
ENUM_ROWS["ENUM_MODULE"] = list(zip(_MODULE_IDS, _MODULE_NAMES))

META_ROWS: List[Tuple[str, str]] = [("SCHEMA_VERSION_MICRO", "0"), ("SCHEMA_VERSION_MINOR", "2"),
                                    ("SCHEMA_VERSION_MAJOR", "1"), ("SCHEMA_VERSION", "1.2.0")]
