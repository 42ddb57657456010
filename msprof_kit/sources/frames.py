"""The shared definitions of the sources room: the modern msprof column names every table comes
back with (outputs.md §4-§6), the header variants that map to them, the Tables and Trace that
hold one collection's frames, and the builders of the frames every kind of source makes alike.
Times are µs (float64), `Device_id` is text (`0`, `host`, or `N/A`), missing numbers are NaN."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Sequence

import numpy as np
import numpy.typing as npt
import pandas as pd

REPORTS = ("op_summary", "op_statistic", "api_statistic", "freq", "communication", "memory")

DEVICE = "Device_id"
OP_NAME = "Op Name"
OP_TYPE = "OP Type"
TASK_TYPE = "Task Type"
START = "Task Start Time(us)"
DURATION = "Task Duration(us)"
WAIT = "Task Wait Time(us)"
CORE_TYPE = "Core Type"
LEVEL = "Level"
API_NAME = "API Name"
FREQ_TIME = "Timestamp(us)"
FREQ_MHZ = "Frequency(MHz)"
FREQ_SOURCE = "Source"
NA = "N/A"
NA_TEXTS = ("N/A", "NA", "", "-", "nan", "NaN", "None", "null")

OP_STATISTIC_COLUMNS = (DEVICE, OP_TYPE, CORE_TYPE, "Count", "Total Time(us)", "Min Time(us)", "Avg Time(us)",
                        "Max Time(us)", "Ratio(%)")
API_STATISTIC_COLUMNS = (DEVICE, LEVEL, API_NAME, "Time(us)", "Count", "Avg(us)", "Min(us)", "Max(us)", "Variance")
FREQ_COLUMNS = (DEVICE, FREQ_TIME, FREQ_MHZ, FREQ_SOURCE)
TRANSPORT = "Transport"
WAIT_TIME = "Wait Time(us)"
WAIT_RATIO = "Wait Ratio"
# the communication report: per device and OP Type (communication_statistic's numbers, and the
# Notify_Wait time of the ops' master planes, as analyze's communication rule counts it)
COMMUNICATION_COLUMNS = (DEVICE, OP_TYPE, "Count", "Total Time(us)", "Avg Time(us)", "Max Time(us)", WAIT_TIME,
                         WAIT_RATIO)
# the bandwidth per transport of all communication ops of a device (analyze's "Total HCCL Operators")
BANDWIDTH_COLUMNS = (DEVICE, TRANSPORT, "Transit Size(MB)", "Transit Time(ms)", "Bandwidth(GB/s)")

# Header variants → the modern msprof name, per kind of table. The left sides are the names seen in
# exports (docs/show.md lists where each was found).
OP_VARIANTS: Dict[str, str] = {
    "Name": OP_NAME, "OP Name": OP_NAME, "kernel_name": OP_NAME,
    "Type": OP_TYPE, "Op Type": OP_TYPE, "kernel_type": TASK_TYPE,
    "Accelerator Core": TASK_TYPE,
    "Start Time(us)": START, "task_start(us)": START,
    "Duration(us)": DURATION, "task_time(us)": DURATION,
    "Wait Time(us)": WAIT,
    "Block Dim": "Block Num", "Mix Block Dim": "Mix Block Num",
    "Device ID": DEVICE, "Device Id": DEVICE, "device_id": DEVICE,
    "task_id": "Task ID", "stream_id": "Stream ID", "task_stop(us)": "Task End Time(us)",
}
STATISTIC_VARIANTS: Dict[str, str] = {"Op Type": OP_TYPE, "Device ID": DEVICE, "Device Id": DEVICE}
API_VARIANTS: Dict[str, str] = {"Device ID": DEVICE, "Device Id": DEVICE}
VARIANTS = {"op_summary": OP_VARIANTS, "task_time": OP_VARIANTS, "op_statistic": STATISTIC_VARIANTS,
            "api_statistic": API_VARIANTS, "communication_statistic": STATISTIC_VARIANTS}
# columns that hold text whatever their values look like (all others are numbers where they parse)
TEXT_COLUMNS = frozenset({DEVICE, OP_NAME, OP_TYPE, TASK_TYPE, "OP State", "HF32 Eligible", "Input Shapes",
                          "Input Data Types", "Input Formats", "Output Shapes", "Output Data Types",
                          "Output Formats", "Model Name", CORE_TYPE, LEVEL, API_NAME, FREQ_SOURCE, TRANSPORT})

# op_statistic, as msprof aggregates it (outputs.md §5): task types it leaves out
STATISTIC_EXCLUDED = ("COMMUNICATION", "HCCL_AI_CPU", "HCCL", "WRITE_BACK", "INVALID")
# unified DB API levels when the DB has no ENUM_API_TYPE (outputs.md §8.4)
API_LEVELS = {20000: "acl", 15000: "model", 10000: "node", 5500: "communication", 5000: "runtime"}

LOOKED_FOR = ("a raw PROF_xxx collection or its store (sqlite/msprof_kit.db); mindstudio_profiler_output/ "
              "CSVs (op_summary, op_statistic, api_statistic, task_time); ASCEND_PROFILER_OUTPUT/ CSVs "
              "(kernel_details, op_statistic, api_statistic); loose summary CSVs with those headers; "
              "msprof_*.db or ascend_pytorch_profiler*.db; or a timeline (msprof_*.json, task_time_*.json, "
              "trace_view.json)")
LOOKED_FOR_REPORT = {
    "op_summary": "a store or unified DB with TASK and COMPUTE_TASK_INFO, op_summary / kernel_details / task_time "
                  "CSVs, or a timeline with 'Ascend Hardware' events",
    "op_statistic": "a store, op_statistic CSVs, or operator rows with an OP Type to aggregate",
    "api_statistic": "a store or unified DB with CANN_API, or api_statistic CSVs",
    "freq": "a store or unified DB with AICORE_FREQ (or the AI Core frequency in info.json), or a timeline with "
            "'AI Core Freq' counters",
    "communication": "a store with COMMUNICATION_OP and COMMUNICATION_TASK_INFO, communication_statistic CSVs, "
                     "or op_summary rows of Task Type COMMUNICATION (with analyze/communication.json for the wait "
                     "times)",
    "memory": "a store with NPU_MEM or NPU_MODULE_MEM (a collection with npu_mem / npu_module_mem samples: "
              "--sys-hardware-mem=on)",
}


# Intervals (Trace): device tasks, host APIs, iterations

TRACE_PARTS = ("tasks", "apis", "iterations")
PART_NAMES = {"tasks": "device tasks", "apis": "host API calls", "iterations": "iterations"}
STREAM = "Stream ID"
THREAD = "Thread ID"
MODEL = "Model ID"
ITERATION = "Iteration ID"
ITER_START = "Iteration Start(us)"
ITER_END = "Iteration End(us)"
ITER_TIME = "Iteration Time(us)"
TASK_COLUMNS = (DEVICE, STREAM, TASK_TYPE, OP_NAME, OP_TYPE, START, DURATION)
API_COLUMNS = (DEVICE, THREAD, LEVEL, API_NAME, START, DURATION)
ITERATION_COLUMNS = (DEVICE, MODEL, ITERATION, ITER_START, ITER_END, ITER_TIME)
# APIs whose time is one model execution, end to end (ACL level, and the model level inside it)
MODEL_EXECUTE_APIS = ("aclmdlExecute", "aclmdlExecuteAsync", "aclmdlExecuteV2", "aclmdlExecuteAsyncV2",
                      "ModelExecute")
LOOKED_FOR_TRACE = {
    "tasks": "TASK in a store or unified DB, 'Ascend Hardware' events of a timeline, task_time CSVs, or op rows "
             "with a start time",
    "apis": "CANN_API in a store or unified DB, or 'CANN' events of a timeline (msprof_*.json, trace_view.json)",
    "iterations": "a step trace (store KIT_STEP_TRACE, DB STEP_TIME, 'Iteration N' or 'ProfilerStep#N' timeline "
                  "events, a step_trace CSV) or op rows with a Step Id",
}


@dataclass
class Tables:
    """The normalized tables of one collection (None: the collection has no such data).

    `op_rows`: one row per operator task (op_summary / kernel_details columns, PMU metrics
    included). `op_statistic`, `api_statistic`: as exported. `freq`: AI Core frequency, one row
    per record (`Source` 'recorded', or 'info.json' for the nominal frequency when none was
    recorded). `communication`: per device and OP Type, COMMUNICATION_COLUMNS. `comm_bandwidth`:
    per device and transport, BANDWIDTH_COLUMNS (not a report of its own: plot draws it). `sources`: report → the file or store each table came from. `raw_problem`: why
    the collection's raw data was not (or not wholly) used, when exported files stand in for it."""
    path: str
    op_rows: Optional[pd.DataFrame] = None
    op_statistic: Optional[pd.DataFrame] = None
    api_statistic: Optional[pd.DataFrame] = None
    freq: Optional[pd.DataFrame] = None
    communication: Optional[pd.DataFrame] = None
    comm_bandwidth: Optional[pd.DataFrame] = None
    memory: Optional[pd.DataFrame] = None          # sources/memory.py MEMORY_COLUMNS
    memory_series: Optional[pd.DataFrame] = None   # sources/memory.py SERIES_COLUMNS (plot draws it)
    sources: Dict[str, str] = field(default_factory=dict)
    raw_problem: Optional[str] = None

    def table(self, report: str) -> Optional[pd.DataFrame]:
        """The table behind a report name (REPORTS, or `comm_bandwidth`); op_summary is op_rows."""
        frame = {"op_summary": self.op_rows, "op_statistic": self.op_statistic,
                 "api_statistic": self.api_statistic, "freq": self.freq, "communication": self.communication,
                 "comm_bandwidth": self.comm_bandwidth, "memory": self.memory,
                 "memory_series": self.memory_series}[report]
        return frame if frame is not None and not frame.empty else None

    def set(self, report: str, frame: Optional[pd.DataFrame], source: str) -> None:
        if frame is None or frame.empty or self.table(report) is not None:
            return
        attr = "op_rows" if report == "op_summary" else report
        setattr(self, attr, frame.reset_index(drop=True))
        self.sources[report] = source

    def missing(self, reports: Iterable[str]) -> List[str]:
        return [r for r in reports if self.table(r) is None]


@dataclass
class Trace:
    """The intervals of one collection (None: the collection has no such data), times in µs on the
    collection's own clock (Unix time for msprof exports), float64.

    `tasks`: one row per device task, TASK_COLUMNS (communication and memcpy tasks included when
    the source has them; `OP Type` N/A where it does not say). `apis`: one row per host API call,
    API_COLUMNS (`Device_id` 'host'). `iterations`: one row per model iteration or profiler step,
    ITERATION_COLUMNS (`Model ID` NaN for profiler steps). `sources`: part → where it came from."""
    path: str
    tasks: Optional[pd.DataFrame] = None
    apis: Optional[pd.DataFrame] = None
    iterations: Optional[pd.DataFrame] = None
    sources: Dict[str, str] = field(default_factory=dict)
    raw_problem: Optional[str] = None  # as Tables.raw_problem

    def table(self, part: str) -> Optional[pd.DataFrame]:
        frame = {"tasks": self.tasks, "apis": self.apis, "iterations": self.iterations}[part]
        return frame if frame is not None and not frame.empty else None

    def set(self, part: str, frame: Optional[pd.DataFrame], source: str) -> None:
        if frame is None or frame.empty or self.table(part) is not None:
            return
        setattr(self, part, frame.reset_index(drop=True))
        self.sources[part] = source

    def missing(self, parts: Iterable[str]) -> List[str]:
        return [p for p in parts if self.table(p) is None]


def _numeric(values: pd.Series) -> Optional[pd.Series]:
    """The column as float64 when every cell is a number or a missing-value text, else None."""
    if values.dtype.kind in "iufb":
        return values.astype(np.float64)
    cells: pd.Series = values.astype(str)
    text: pd.Series = cells.str.strip()
    numbers: pd.Series = pd.to_numeric(text, errors="coerce")
    if (numbers.isna() & ~text.isin(NA_TEXTS)).any():
        return None
    return numbers.astype(np.float64)


def normalize(frame: pd.DataFrame, kind: str) -> pd.DataFrame:
    """A summary frame (all cells text, as read from a CSV) with the modern header names, a text
    Device_id (N/A when absent), and number columns as float64 (N/A → NaN)."""
    variants = VARIANTS.get(kind, {})
    names: List[str] = []
    keep: List[int] = []
    for i, raw in enumerate(frame.columns):
        name = variants.get(str(raw).strip().lstrip("\ufeff"), str(raw).strip().lstrip("\ufeff"))
        if name in names or name.startswith("Unnamed:"):
            continue  # a second variant of a column already taken, or a trailing empty field
        names.append(name)
        keep.append(i)
    out = frame.iloc[:, keep].copy()
    out.columns = names
    if DEVICE not in out.columns:
        out.insert(0, DEVICE, NA)
    for name in out.columns:
        if name in TEXT_COLUMNS:
            out[name] = out[name].astype(str).str.strip() if name == DEVICE else out[name].astype(str)
            continue
        numbers = _numeric(out[name])
        if numbers is not None:
            out[name] = numbers
    return out.reset_index(drop=True)


def freq_frame(device: Sequence[object], ts_us: Sequence[float], mhz: Sequence[float], source: str) -> pd.DataFrame:
    """AI Core frequency points as a frame sorted by device and time, duplicates dropped."""
    frame = pd.DataFrame({DEVICE: [str(d) for d in device], FREQ_TIME: np.asarray(ts_us, dtype=np.float64),
                          FREQ_MHZ: np.asarray(mhz, dtype=np.float64), FREQ_SOURCE: source})
    frame = frame.drop_duplicates()
    return frame.sort_values([DEVICE, FREQ_TIME], kind="stable").reset_index(drop=True)


def lookup_strings(ids: np.ndarray, strings: Dict[int, str]) -> np.ndarray:
    """STRING_IDS values of an id array, N/A for unknown ids (vectorized)."""
    if not strings:
        return np.full(len(ids), NA, dtype=object)
    table = pd.Series(strings, dtype=object)
    return table.reindex(pd.Index(np.asarray(ids, dtype=np.int64))).fillna(NA).to_numpy(dtype=object)


def task_frame(device: np.ndarray, stream: np.ndarray, task_type: np.ndarray, name: np.ndarray,
               op_type: np.ndarray, start_ns: np.ndarray, end_ns: np.ndarray) -> pd.DataFrame:
    """Device tasks as the normalised task frame (times in us), sorted by start."""
    start = np.asarray(start_ns, dtype=np.int64)
    frame = pd.DataFrame({
        DEVICE: pd.Series(device).astype(str).to_numpy(), STREAM: np.asarray(stream, dtype=np.float64),
        TASK_TYPE: task_type, OP_NAME: name, OP_TYPE: op_type, START: start.astype(np.float64) / 1000,
        DURATION: (np.asarray(end_ns, dtype=np.int64) - start).astype(np.float64) / 1000})
    return frame.sort_values(START, kind="stable")


def api_frame(thread: np.ndarray, level: np.ndarray, name: np.ndarray, start_ns: np.ndarray,
              end_ns: np.ndarray) -> pd.DataFrame:
    """Host APIs as the normalised API frame (times in us), sorted by start."""
    start = np.asarray(start_ns, dtype=np.int64)
    frame = pd.DataFrame({
        DEVICE: "host", THREAD: np.asarray(thread, dtype=np.float64), LEVEL: level, API_NAME: name,
        START: start.astype(np.float64) / 1000,
        DURATION: (np.asarray(end_ns, dtype=np.int64) - start).astype(np.float64) / 1000})
    return frame.sort_values(START, kind="stable")


def iteration_frame(device: "npt.ArrayLike", model: "npt.ArrayLike", index: "npt.ArrayLike",
                    start_us: "npt.ArrayLike", end_us: "npt.ArrayLike",
                     time_us: Optional["npt.ArrayLike"] = None) -> pd.DataFrame:
    """Iterations; `time_us` is their length when the source has it more exactly than end - start
    (µs since the epoch as float64 are 0.25 µs apart)."""
    start = np.asarray(start_us, dtype=np.float64)
    end = np.asarray(end_us, dtype=np.float64)
    span = end - start if time_us is None else np.asarray(time_us, dtype=np.float64)
    frame = pd.DataFrame({DEVICE: pd.Series(np.asarray(device, dtype=object)).astype(str).to_numpy(),
                          MODEL: np.asarray(model, dtype=np.float64),
                          ITERATION: np.asarray(index, dtype=np.float64), ITER_START: start, ITER_END: end,
                          ITER_TIME: span})
    return frame.sort_values([ITER_START, DEVICE], kind="stable")


def to_float(value: object) -> float:
    """A cell's number, or NaN when it holds none (N/A, empty)."""
    try:
        return float(str(value).strip())
    except (TypeError, ValueError):
        return float("nan")


def device_in_path(path: str) -> str:
    """The device id a `device_N` folder in `path` names, or N/A."""
    m = re.search(r"(?:^|[\\/])device_(\d+)(?:[\\/]|$)", path)
    return m.group(1) if m else NA


def device_of_label(label: str, fallback: str) -> str:
    """The device id of a timeline process label such as `NPU 0`, or `fallback`."""
    m = re.fullmatch(r"NPU\s*(\d+)", label.strip())
    return m.group(1) if m else fallback
