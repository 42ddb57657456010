"""Run an offline model (.om) the way ais_bench / ait / msit benchmark do (spec/collectors.md §5):
warm-up runs, timed loops, latency statistics and throughput, `*_summary.json`, and the three ways
of collecting alongside: `--profiler`, `--dump`, or a user's `--acl-json-path`.

    result = infer("resnet50_bs1.om", output="out", loop=10, profiler=True)
    print(render_summary(result))

The rules (§5.2, `plan_run`):
* `acl_json_path` wins: the file goes to acl.init as it is, and `profiler` / `dump` are ignored;
* otherwise `profiler` and `dump` exclude each other, and each needs `output`;
* with `profiler` and inputs, the warm-up count becomes 0.

`--profiler` (§5.3). When `msprof` is on PATH and none of the opt-out variables (`NO_MSPROF_ENV`) is
1, the inference is run again under msprof, with `--profiler=0 --warmup_count=0` appended and every
path made absolute (msprof runs the program from another directory), and msprof's exit status is
passed on. Otherwise `<output>/acl.json` turns profiling on for this process's acl.init, and the raw
collection is left in `<output>/profiler/` unparsed.

Output (§5.5): `<output>/<YYYY_MM_DD-HH_MM_SS>/` (or `<output>/<output_dirname>/`) and its sibling
`<...>_summary.json`; with several devices, `<run dir>/device<N>/` and `<run dir>/device<N>_summary.json`.
Devices run one after the other in this process.

The model runs through `get_acl`: the real pyACL when importable; without CANN only the emulator,
and only when asked (`emulate=True` or MSPROF_KIT_EMULATE_ACL=1). The emulator loads and "executes"
by sleeping, so its times are its sleeps; every result, line and file then says EMULATED.

`msprof-kit infer --model X.om ...` runs it from a shell (its options are parsed in
msprof_kit/cli.py); msprof re-runs it as `<python> -m msprof_kit infer ...`.
"""
from __future__ import annotations

import datetime
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from msprof_kit.errors import (AclError, ApplicationError, CollectorError, Diagnostics, InferOptionError,
                               MsprofFailed, PathNotFound, UnknownAclError, UnreadableFile)

from .acl_codes import code_name
from .acl_runtime import EMULATE_ENV, get_acl
from .emulator import ANNOUNCEMENT, MARKER
from .local import Listing, listing, new_collections
from .session import ACL_ERRORS

# --- what ais_bench does, as data (spec/collectors.md §5) ----------------------------------------
# the switches msprof gets after --output and --application, in this order (§5.3)
MSPROF_FLAGS: Tuple[str, ...] = (
    "--model-execution=on", "--sys-hardware-mem=on", "--sys-cpu-profiling=off", "--sys-profiling=off",
    "--sys-pid-profiling=off", "--dvpp-profiling=on", "--runtime-api=on", "--task-time=on", "--aicpu=on")
# appended to the re-run's own arguments: the re-run must not start msprof again, nor warm up
RERUN_OVERRIDES: Tuple[str, ...] = ("--profiler=0", "--warmup_count=0")
# set to 1, any of these keeps msprof out and selects acl.json mode: the old ais_bench's
# (misspelt) name, its README's spelling, ait's and msit's (§5.3)
NO_MSPROF_ENV: Tuple[str, ...] = ("GE_PROFILIGN_TO_STD_OUT", "GE_PROFILING_TO_STD_OUT", "AIT_NO_MSPROF_MODE",
                                  "MSIT_NO_MSPROF_MODE")
RERUN_COMMAND = ("-m", "msprof_kit", "infer")   # what msprof runs, after `<python>`: msprof-kit infer
RUN_DIR_FORMAT = "%Y_%m_%d-%H_%M_%S"           # the dated result folder (§5.5)
SUMMARY_SUFFIX = "_summary.json"
PURE_INFER_NAME = "pure_infer_data"            # output file stem when no input is given (zero data)
MAX_DEVICE_ID = 255
PROFILER_DIR, DUMP_DIR, ACL_JSON_NAME = "profiler", "dump", "acl.json"
DIR_MODE = 0o750
SUMMARY_HEADER = "-----------------Performance Summary------------------"
SUMMARY_FOOTER = "-" * 54

# run modes (plan_run)
PLAIN, ACL_JSON, PROFILER, DUMP = "plain", "acl_json", "profiler", "dump"

# pyACL constants used by the real-module path (acl_rt.h)
ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2
NPY_UBYTE = 2  # numpy's type number for uint8, as acl.util.ptr_to_numpy takes it

Runner = Callable[[Sequence[str], Mapping[str, str]], int]


# --- the rules (§5.2) ---------------------------------------------------------------------------
@dataclass(frozen=True)
class RunPlan:
    """What a run does once ais_bench's rules are applied. `mode` is PLAIN, ACL_JSON, PROFILER or
    DUMP; `warmup_count` the warm-up runs actually made; `notes` what the rules changed or ignored."""

    mode: str
    warmup_count: int
    notes: Tuple[str, ...] = ()


def plan_run(profiler: bool = False, dump: bool = False, acl_json_path: Optional[str] = None,
             output: Optional[str] = None, output_dirname: Optional[str] = None, has_inputs: bool = False,
             warmup_count: int = 1, loop: int = 1) -> RunPlan:
    """Apply §5.2 to the options (pure: nothing is read or written). InferOptionError for what the
    rules refuse."""
    if isinstance(loop, bool) or not isinstance(loop, int) or loop < 1:
        raise InferOptionError(f"--loop is {loop!r}; expected an integer > 0")
    if isinstance(warmup_count, bool) or not isinstance(warmup_count, int) or warmup_count < 0:
        raise InferOptionError(f"--warmup-count is {warmup_count!r}; expected an integer >= 0")
    if output_dirname is not None:
        if output is None:
            raise InferOptionError("--output-dirname needs --output (it names the result folder inside it)")
        parts = output_dirname.replace("\\", "/").split("/")
        if not output_dirname or os.path.isabs(output_dirname) or any(p in ("", ".", "..") for p in parts):
            raise InferOptionError(f"--output-dirname is {output_dirname!r}; expected a relative folder name "
                                   "inside --output, without '.', '..' or empty parts")
    if acl_json_path is not None:
        ignored = [name for name, on in (("--profiler", profiler), ("--dump", dump)) if on]
        notes = (f"--acl-json-path is given, so {' and '.join(ignored)} {'is' if len(ignored) == 1 else 'are'} "
                 f"ignored: {acl_json_path} goes to acl.init as it is",) if ignored else ()
        return RunPlan(ACL_JSON, warmup_count, notes)
    if profiler and dump:
        raise InferOptionError("--profiler and --dump cannot both be on: profiling and dumping exclude each "
                               "other (run twice)")
    if (profiler or dump) and output is None:
        raise InferOptionError(f"--{'profiler' if profiler else 'dump'} needs --output: its data is written "
                               f"into <output>/{PROFILER_DIR if profiler else DUMP_DIR}/")
    if profiler:
        if has_inputs and warmup_count != 0:
            return RunPlan(PROFILER, 0, (f"--profiler with --input: the warm-up count {warmup_count} becomes 0, "
                                         "so that the profile holds only the measured runs",))
        return RunPlan(PROFILER, warmup_count)
    return RunPlan(DUMP if dump else PLAIN, warmup_count)


def msprof_choice(environ: Mapping[str, str]) -> Tuple[Optional[str], str]:
    """(msprof's path, "") when --profiler should run under msprof: it is on environ's PATH and no
    NO_MSPROF_ENV variable is 1; else (None, why not)."""
    for name in NO_MSPROF_ENV:
        if environ.get(name, "").strip() == "1":
            return None, f"{name}=1 is set"
    found = shutil.which("msprof", path=environ.get("PATH", os.defpath))
    if found is None:
        return None, "msprof is not on PATH"
    return os.path.abspath(found), ""


def msprof_command(msprof: str, output: str, application: Sequence[str]) -> List[str]:
    """The msprof argv of §5.3: `--output=<output>/profiler`, the application as one quoted
    command line, then MSPROF_FLAGS. `output` and every path in `application` should be absolute."""
    return [msprof, f"--output={os.path.join(output, PROFILER_DIR)}", f"--application={shlex.join(application)}",
            *MSPROF_FLAGS]


def rerun_argv(options: Sequence[str], python: Optional[str] = None) -> List[str]:
    """The command msprof runs: `msprof-kit infer` under the same Python, the run's options, then
    RERUN_OVERRIDES (later options win)."""
    return [python or sys.executable, *RERUN_COMMAND, *options, *RERUN_OVERRIDES]


def generated_acl_json(mode: str, output: str, model: str) -> Dict[str, Any]:
    """The acl.json ais_bench writes into <output> (absolute): for PROFILER, profiling on into
    <output>/profiler with an empty aic_metrics and aicpu on (§5.3); for DUMP, a dump of every
    operator of the model (named after its file, without folder or extension) into <output>/dump (§5.4)."""
    if mode == PROFILER:
        return {"profiler": {"switch": "on", "output": os.path.join(output, PROFILER_DIR), "aicpu": "on",
                             "aic_metrics": ""}}
    if mode == DUMP:
        stem = os.path.splitext(os.path.basename(model))[0]
        return {"dump": {"dump_list": [{"model_name": stem}], "dump_mode": "all",
                         "dump_path": os.path.join(output, DUMP_DIR)}}
    raise ValueError(f"no generated acl.json for mode {mode!r}")


def acl_json_text(config: Mapping[str, Any]) -> str:
    """As ais_bench writes it: 4-space indent, sorted keys, no trailing newline."""
    return json.dumps(config, indent=4, sort_keys=True)


# --- statistics (§5.6) --------------------------------------------------------------------------
@dataclass(frozen=True)
class LatencyStats:
    """min, max, mean, median and the 99th percentile (numpy's linear interpolation) of a list of
    times in ms, and how many there were. An empty list gives zeros."""

    min: float
    max: float
    mean: float
    median: float
    p99: float
    count: int

    def as_json(self) -> Dict[str, Union[float, int]]:
        """The summary-file form, under ais_bench's key names."""
        return {"min": self.min, "max": self.max, "mean": self.mean, "median": self.median,
                "percentile(99%)": self.p99, "count": self.count}


def latency_stats(values: Sequence[float]) -> LatencyStats:
    """LatencyStats of `values` (ms)."""
    if len(values) == 0:
        return LatencyStats(0.0, 0.0, 0.0, 0.0, 0.0, 0)
    a = np.asarray(values, dtype=np.float64)
    return LatencyStats(float(a.min()), float(a.max()), float(a.mean()), float(np.median(a)),
                        float(np.percentile(a, 99)), int(a.size))


def throughput(batch: Union[int, float], mean_ms: float) -> float:
    """Inferences per second: 1000 * batch / mean NPU compute time (ms); 0 when the mean is 0."""
    return 0.0 if mean_ms == 0 else 1000.0 * batch / mean_ms


# --- results ------------------------------------------------------------------------------------
@dataclass
class DeviceResult:
    """One device's run. The lists are ms per measured inference (warm-up runs excluded);
    h2d / d2h stay empty when nothing was copied (the emulator has no device memory).
    `filesinfo` maps the sample index to its input and output files."""

    device: int
    batch: Union[int, float]
    npu_compute_time_list: List[float] = field(default_factory=list)
    h2d_latency_list: List[float] = field(default_factory=list)
    d2h_latency_list: List[float] = field(default_factory=list)
    filesinfo: Dict[int, Dict[str, List[str]]] = field(default_factory=dict)
    out_dir: Optional[str] = None
    summary_path: Optional[str] = None

    @property
    def npu_compute_time(self) -> LatencyStats:
        return latency_stats(self.npu_compute_time_list)

    @property
    def h2d_latency(self) -> LatencyStats:
        return latency_stats(self.h2d_latency_list)

    @property
    def d2h_latency(self) -> LatencyStats:
        return latency_stats(self.d2h_latency_list)

    @property
    def throughput(self) -> float:
        return throughput(self.batch, self.npu_compute_time.mean)

    def summary_json(self, args: Sequence[str], emulated: bool) -> Dict[str, Any]:
        """The `*_summary.json` content: ais_bench's keys (§5.6), plus `device`, `batchsize` and
        `emulated`, which are msprof-kit's."""
        return {
            "filesinfo": {str(k): v for k, v in self.filesinfo.items()},
            "args": list(args),
            "NPU_compute_time": self.npu_compute_time.as_json(),
            "H2D_latency": self.h2d_latency.as_json(),
            "D2H_latency": self.d2h_latency.as_json(),
            "throughput": self.throughput,
            "npu_compute_time_list": list(self.npu_compute_time_list),
            "pid": os.getpid(),
            "device": self.device,
            "batchsize": self.batch,
            "emulated": emulated,
        }


@dataclass
class InferResult:
    """What `infer` did.

    `mode`: PLAIN, ACL_JSON, PROFILER or DUMP. `profiler_via`: "msprof" or "acl.json" for PROFILER
    (`why_not_msprof` says why acl.json). `devices`: one DeviceResult per device of this process
    (empty when msprof ran the inference: its summary files are in `summary_files`). `run_dir`: the
    dated (or named) result folder. `acl_json`: the file given to acl.init. `prof_dirs`: the new
    PROF_xxx directories. `msprof_command`: the argv msprof was started with. `args`: the options
    as the command line spells them."""

    mode: str
    emulated: bool
    devices: List[DeviceResult] = field(default_factory=list)
    output: Optional[str] = None
    run_dir: Optional[str] = None
    summary_files: List[str] = field(default_factory=list)
    acl_json: Optional[str] = None
    prof_dirs: List[str] = field(default_factory=list)
    profiler_via: Optional[str] = None
    why_not_msprof: str = ""
    msprof_command: Optional[List[str]] = None
    returncode: int = 0
    display_all: bool = False
    args: List[str] = field(default_factory=list)


def _stat_line(name: str, s: LatencyStats) -> str:
    return (f"[INFO] {name} (ms): min = {s.min}, max = {s.max}, mean = {s.mean}, median = {s.median}, "
            f"percentile(99%) = {s.p99}")


def _batch_text(batch: Union[int, float]) -> str:
    return str(int(batch)) if float(batch).is_integer() else str(batch)


def render_summary(result: InferResult) -> str:
    """The text to print after a run: ais_bench's performance summary per device (H2D and D2H only
    with display_all), then where things were written. Starts with an EMULATED line when the
    emulator ran the model."""
    lines: List[str] = []
    if result.emulated:
        lines.append(f"[WARNING] {ANNOUNCEMENT}; the times below are the emulator's sleeps, not a model's")
    if result.msprof_command is not None:
        lines.append(f"[INFO] msprof ran the inference: {shlex.join(result.msprof_command)}")
        lines.append(f"[INFO] msprof exit status: {result.returncode}")
    for dev in result.devices:
        if len(result.devices) > 1:
            lines.append(f"[INFO] device {dev.device}")
        lines.append(f"[INFO] {SUMMARY_HEADER}")
        if result.display_all:
            lines.append(_stat_line("H2D_latency", dev.h2d_latency))
        npu = dev.npu_compute_time
        lines.append(_stat_line("NPU_compute_time", npu))
        if result.display_all:
            lines.append(_stat_line("D2H_latency", dev.d2h_latency))
        lines.append(f"[INFO] throughput 1000*batchsize.mean({_batch_text(dev.batch)})/"
                     f"NPU_compute_time.mean({npu.mean}): {dev.throughput}")
        lines.append(f"[INFO] {SUMMARY_FOOTER}")
    if result.run_dir is not None:
        lines.append(f"[INFO] results: {result.run_dir}")
    for path in result.summary_files:
        lines.append(f"[INFO] summary: {path}")
    if result.mode == PROFILER and result.profiler_via == "acl.json" and result.emulated:
        # the emulator's PROF_xxx holds control files and empty data/ folders, no records: nothing
        # for `import` to parse, so no command is suggested (docs/collectors.md)
        lines.append(f"[INFO] profiling through {result.acl_json} ({result.why_not_msprof}); the emulator's "
                     "PROF_xxx is synthetic and holds no profiling records, so there is nothing to import")
    elif result.mode == PROFILER and result.profiler_via == "acl.json":
        lines.append(f"[INFO] profiling through {result.acl_json} ({result.why_not_msprof}); the raw data is "
                     "not parsed: `msprof-kit import -dir <PROF dir>` parses it")
    for path in result.prof_dirs:
        lines.append(f"[INFO] profiling data: {path}")
    if result.mode == DUMP and result.output is not None:
        lines.append(f"[INFO] dump data: {os.path.join(result.output, DUMP_DIR)} (through {result.acl_json})")
    return "\n".join(lines) + "\n"


# --- options ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Sample:
    """One inference's input: one file per model input (empty: zero data). `name` is the stem of
    the output files: the first input file's, or pure_infer_data."""

    name: str
    files: Tuple[str, ...] = ()


@dataclass(frozen=True)
class Options:
    """The checked options, paths absolute."""

    model: str
    inputs: Tuple[str, ...]
    output: Optional[str]
    output_dirname: Optional[str]
    loop: int
    warmup_count: int
    devices: Tuple[int, ...]
    batch: Optional[int]
    profiler: bool
    dump: bool
    acl_json_path: Optional[str]
    display_all: bool

    def argv(self) -> List[str]:
        """The options as the command line spells them (what a re-run is given)."""
        out = [f"--model={self.model}"]
        if self.inputs:
            out.append(f"--input={','.join(self.inputs)}")
        if self.output is not None:
            out.append(f"--output={self.output}")
        if self.output_dirname is not None:
            out.append(f"--output-dirname={self.output_dirname}")
        out += [f"--loop={self.loop}", f"--warmup-count={self.warmup_count}",
                f"--device={','.join(str(d) for d in self.devices)}"]
        if self.batch is not None:
            out.append(f"--batch={self.batch}")
        if self.acl_json_path is not None:
            out.append(f"--acl-json-path={self.acl_json_path}")
        if self.profiler:
            out.append("--profiler=1")
        if self.dump:
            out.append("--dump=1")
        if self.display_all:
            out.append("--display-all-summary=1")
        return out


def _absolute(path: str) -> str:
    return os.path.abspath(os.path.expanduser(path))


def parse_devices(devices: Union[int, str, Sequence[int]]) -> Tuple[int, ...]:
    """Device ids from 3, "0,1" or [0, 1]: each 0..255, none repeated."""
    if isinstance(devices, bool):
        raise InferOptionError(f"--device is {devices!r}; expected ids such as 0 or 0,1")
    if isinstance(devices, int):
        items: List[Any] = [devices]
    elif isinstance(devices, str):
        items = [d.strip() for d in devices.split(",")]
    else:
        items = list(devices)
    ids: List[int] = []
    for item in items:
        try:
            value = int(item)
        except (TypeError, ValueError):
            raise InferOptionError(f"--device {devices!r}: {item!r} is not a device id") from None
        if isinstance(item, bool) or not 0 <= value <= MAX_DEVICE_ID:
            raise InferOptionError(f"--device {devices!r}: {item!r} is outside 0..{MAX_DEVICE_ID}")
        ids.append(value)
    if not ids:
        raise InferOptionError("--device is empty; expected ids such as 0 or 0,1")
    if len(set(ids)) != len(ids):
        raise InferOptionError(f"--device {devices!r} repeats an id")
    return tuple(ids)


def parse_inputs(inputs: Union[str, Sequence[str], None]) -> Tuple[str, ...]:
    """Absolute input paths from "a.bin,b.bin" or a list; each must exist."""
    if inputs is None:
        return ()
    items = [str(item).strip() for item in (inputs.split(",") if isinstance(inputs, str) else inputs)]
    if not items or not all(items):
        raise InferOptionError(f"--input {inputs!r} holds an empty path")
    paths: List[str] = []
    for item in items:
        path = _absolute(item)
        if "," in path:
            raise InferOptionError("an input path holds a comma, which separates --input paths", path=path)
        if not os.path.exists(path):
            raise PathNotFound("no such input file or folder", path=path)
        paths.append(path)
    return tuple(paths)


def samples_from_inputs(inputs: Sequence[str]) -> List[Sample]:
    """The samples the inputs make (ais_bench's --input): no input gives one zero-data sample;
    files give one sample, one file per model input; folders give one model input each, and the
    i-th file (by name) of every folder makes sample i. Files and folders cannot be mixed."""
    if not inputs:
        return [Sample(PURE_INFER_NAME)]
    dirs = [os.path.isdir(p) for p in inputs]
    if all(not d for d in dirs):
        return [Sample(_stem(inputs[0]), tuple(inputs))]
    if not all(dirs):
        raise InferOptionError("--input mixes files and folders; give files (one per model input) or folders "
                               "(one per model input, one file per sample)")
    columns: List[List[str]] = []
    for folder in inputs:
        try:
            names = sorted(n for n in os.listdir(folder)
                           if not n.startswith(".") and os.path.isfile(os.path.join(folder, n)))
        except OSError as exc:
            raise UnreadableFile(f"cannot list the input folder: {exc.strerror or exc}", path=folder) from exc
        if not names:
            raise InferOptionError("the input folder holds no file", path=folder)
        columns.append([os.path.join(folder, n) for n in names])
    counts = {len(c) for c in columns}
    if len(counts) != 1:
        raise InferOptionError("the input folders hold different numbers of files ("
                               + ", ".join(f"{os.path.basename(f)}: {len(c)}" for f, c in zip(inputs, columns))
                               + "); each sample takes one file from every folder")
    return [Sample(_stem(row[0]), tuple(row)) for row in zip(*columns)]


def _stem(path: str) -> str:
    return os.path.splitext(os.path.basename(path))[0]


def read_input(path: str) -> bytes:
    """A sample file's bytes: the array data of a .npy file, any other file as it is."""
    try:
        if path.endswith(".npy"):
            return bytes(np.load(path, allow_pickle=False).tobytes())
        with open(path, "rb") as f:
            return f.read()
    except (OSError, ValueError) as exc:
        raise UnreadableFile(f"cannot read the input: {exc}", path=path) from exc


# --- running under msprof (§5.3) ----------------------------------------------------------------
def run_command(argv: Sequence[str], env: Mapping[str, str]) -> int:
    """The default runner: start argv without a shell, its output passed through; its exit status
    (negative: the signal that ended it)."""
    try:
        return subprocess.run(list(argv), env=dict(env), check=False).returncode
    except OSError as exc:
        raise ApplicationError(f"cannot start msprof: {exc.strerror or exc}", path=argv[0]) from exc


def _summary_files(output: str) -> List[str]:
    """The *_summary.json files in `output` and in its folders one level down (several devices)."""
    found: List[str] = []
    try:
        entries = sorted(os.scandir(output), key=lambda e: e.name)
    except OSError:
        return found
    for entry in entries:
        if entry.is_file() and entry.name.endswith(SUMMARY_SUFFIX):
            found.append(entry.path)
        elif entry.is_dir() and entry.name not in (PROFILER_DIR, DUMP_DIR):
            try:
                found += sorted(e.path for e in os.scandir(entry.path)
                                if e.is_file() and e.name.endswith(SUMMARY_SUFFIX))
            except OSError:
                continue
    return found


def _under_msprof(opts: Options, msprof: str, emulated: bool, emulate: Optional[bool], runner: Runner,
                  diag: Diagnostics) -> InferResult:
    assert opts.output is not None
    env = dict(os.environ)
    if emulate is not None:
        env[EMULATE_ENV] = "1" if emulate else "0"
    application = rerun_argv(opts.argv())
    spaced = [a for a in application if any(c.isspace() for c in a)]
    if spaced:
        diag.warn(f"{spaced[0]!r} holds white space; it is quoted in --application, but msprof versions that "
                  "split the command line on spaces would cut it")
    prof_root = os.path.join(opts.output, PROFILER_DIR)
    _makedirs(prof_root)
    before: Dict[str, Listing] = {prof_root: listing(prof_root)}
    summaries_before = set(_summary_files(opts.output))
    command = msprof_command(msprof, opts.output, application)
    status = runner(command, env)
    prof_dirs = new_collections(before)
    summaries = [p for p in _summary_files(opts.output) if p not in summaries_before]
    if status != 0:
        how = f"was killed by signal {-status}" if status < 0 else f"exited with status {status}"
        left = f"; it left {', '.join(prof_dirs)}" if prof_dirs else ""
        raise MsprofFailed(f"msprof {how} while running the inference{left}", status, path=msprof)
    if not prof_dirs:
        diag.warn(f"msprof ran but no new PROF_xxx directory appeared in {prof_root}")
    return InferResult(mode=PROFILER, emulated=emulated, output=opts.output, summary_files=summaries,
                       prof_dirs=prof_dirs, profiler_via="msprof", msprof_command=command, returncode=status,
                       display_all=opts.display_all, args=["msprof-kit", "infer", *opts.argv()])


# --- running here -------------------------------------------------------------------------------
def _makedirs(path: str) -> None:
    try:
        os.makedirs(path, mode=DIR_MODE, exist_ok=True)
    except OSError as exc:
        raise CollectorError(f"cannot create the folder: {exc.strerror or exc}", path=path) from exc


def _write_file(path: str, data: Union[str, bytes], mode: int = 0o640) -> None:
    """Write through a temp file and a rename, so that a reader never sees half a file."""
    folder = os.path.dirname(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", dir=folder)
    except OSError as exc:
        raise CollectorError(f"cannot write: {exc.strerror or exc}", path=path) from exc
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except OSError as exc:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise CollectorError(f"cannot write: {exc.strerror or exc}", path=path) from exc


def _write_generated_acl_json(path: str, config: Mapping[str, Any]) -> None:
    """Write <output>/acl.json; an existing one is replaced only when it holds nothing but the
    profiler or dump sections (one written by an earlier run), never a user's other settings."""
    if os.path.exists(path):
        try:
            with open(path, "rb") as f:
                old = json.loads(f.read().decode("utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            old = None
        if not isinstance(old, dict) or set(old) - {"profiler", "dump"}:
            raise InferOptionError("an acl.json with other settings is in the way of the one this run writes; "
                                   "move it, or pass it with --acl-json-path", path=path)
    _write_file(path, acl_json_text(config))


def _make_run_dir(output: str, output_dirname: Optional[str], now: datetime.datetime) -> Tuple[str, bool]:
    """(<output>/<output_dirname>, whether it was made) (reused, as ais_bench does), or a new
    <output>/<date> (local time); a date folder that exists already gets _1, _2, ... so that a run
    never writes into another's."""
    if output_dirname is not None:
        path = os.path.join(output, output_dirname)
        existed = os.path.isdir(path)
        _makedirs(path)
        return path, not existed
    base = os.path.join(output, now.strftime(RUN_DIR_FORMAT))
    for n in range(1000):
        path = base if n == 0 else f"{base}_{n}"
        try:
            os.mkdir(path, DIR_MODE)
            return path, True
        except FileExistsError:
            continue
        except OSError as exc:
            raise CollectorError(f"cannot create the result folder: {exc.strerror or exc}", path=path) from exc
    raise CollectorError("1000 result folders of this second exist already", path=base)


def _remove_empty_tree(path: str) -> None:
    """Remove `path` when it holds only empty folders (what a failed run created and left unused)."""
    for root, dirs, files in os.walk(path, topdown=False):
        if files or os.listdir(root):
            return
        os.rmdir(root)


def _profiler_output_of(acl_json_path: str) -> Optional[str]:
    """Where a user's acl.json sends profiling data: its profiler output (absolute, from the cwd),
    when the switch is on and an output is given; else None. A file that cannot be read or parsed
    gives None here; acl.init reports it."""
    try:
        with open(acl_json_path, "rb") as f:
            config = json.loads(f.read().decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    section = config.get("profiler") if isinstance(config, dict) else None
    if not isinstance(section, dict) or section.get("switch") != "on" or not section.get("output"):
        return None
    return _absolute(str(section["output"]))


class _Undo:
    """The clean-up calls of what was opened, made last-opened first. Every call is attempted; the
    failures are returned, never dropped."""

    def __init__(self) -> None:
        self.steps: List[Tuple[str, Callable[..., Any], Tuple[Any, ...]]] = []

    def push(self, call: str, fn: Callable[..., Any], *args: Any) -> None:
        self.steps.append((call, fn, args))

    def mark(self) -> int:
        return len(self.steps)

    def unwind(self, to: int = 0) -> List[BaseException]:
        failures: List[BaseException] = []
        while len(self.steps) > to:
            call, fn, args = self.steps.pop()
            try:
                ret = fn(*args)
                if ret is not None:
                    check(call, ret)
            except Exception as exc:  # collected and reported by the caller
                failures.append(exc)
        return failures


def _report_cleanup(failures: List[BaseException], original: Optional[BaseException], diag: Diagnostics) -> None:
    """With an `original` error: each failure becomes a warning and a note on it. Without: the
    first failure is raised after the others became warnings."""
    if original is not None:
        for failure in failures:
            diag.warn(f"clean-up after the error also failed: {failure}")
            add_note = getattr(original, "add_note", None)  # Python 3.11+
            if add_note is not None:
                add_note(f"clean-up also failed: {failure}")
        return
    for extra in failures[1:]:
        diag.warn(f"clean-up also failed: {extra}")
    if failures:
        raise failures[0]


def check(call: str, ret: Any, about: str = "") -> None:
    """Raise the named AclError of a non-zero `ret` (session.ACL_ERRORS gives the class), saying
    `about` what (the device, the model); the meanings there are about acl.prof, so they are not
    repeated for these calls."""
    if isinstance(ret, bool) or not isinstance(ret, int):
        raise AclError(f"{call} returned {ret!r}, not an ACL code", call=call, code=0)
    if ret != 0:
        cls = ACL_ERRORS[ret][0] if ret in ACL_ERRORS else UnknownAclError
        where = f" ({about})" if about else ""
        raise cls(f"{call} returned {code_name(ret)}{where}; the CANN log (~/ascend/log) tells more",
                  call=call, code=ret)


def _null_check(call: str, handle: Any) -> Any:
    if not handle:
        raise AclError(f"{call} returned NULL", call=call, code=0)
    return handle


class _EmulatedIo:
    """The emulator's model has no inputs, outputs or device memory: execute is given no datasets,
    nothing is copied (so no H2D / D2H times) and no output file is written."""

    def __init__(self, acl: Any, model_id: int) -> None:
        self.acl = acl
        self.model_id = model_id

    def batch(self) -> Optional[int]:
        return None

    def prepare(self, samples: Sequence[Sample]) -> None:
        return None

    def load(self, sample: Sample) -> Optional[float]:
        return None

    def execute(self) -> float:
        begin = time.perf_counter()
        check("acl.mdl.execute", self.acl.mdl.execute(self.model_id, None, None))
        return (time.perf_counter() - begin) * 1000.0

    def fetch(self) -> Tuple[Optional[List[bytes]], Optional[float]]:
        return None, None


class _AclIo:
    """Input and output buffers of one loaded model on the current device, through the real pyACL
    (model description, device buffers, datasets, host buffers for the outputs). This path needs
    CANN, which is not available here (spec §6): it is checked only against a recording stand-in."""

    def __init__(self, acl: Any, model_id: int, undo: _Undo) -> None:
        self.acl = acl
        self.model_id = model_id
        self.desc = _null_check("acl.mdl.create_desc", acl.mdl.create_desc())
        undo.push("acl.mdl.destroy_desc", acl.mdl.destroy_desc, self.desc)
        check("acl.mdl.get_desc", acl.mdl.get_desc(self.desc, model_id))
        self.input_sizes = [int(acl.mdl.get_input_size_by_index(self.desc, i))
                            for i in range(int(acl.mdl.get_num_inputs(self.desc)))]
        self.output_sizes = [int(acl.mdl.get_output_size_by_index(self.desc, i))
                             for i in range(int(acl.mdl.get_num_outputs(self.desc)))]
        self.inputs, self.input_ptrs = self._dataset(self.input_sizes, undo)
        self.outputs, self.output_ptrs = self._dataset(self.output_sizes, undo)
        self.host_ptrs: List[Any] = []
        for size in self.output_sizes:
            ptr, ret = acl.rt.malloc_host(size)
            check("acl.rt.malloc_host", ret)
            undo.push("acl.rt.free_host", acl.rt.free_host, ptr)
            self.host_ptrs.append(ptr)
        self.data: Dict[Sample, List[bytes]] = {}

    def _dataset(self, sizes: Sequence[int], undo: _Undo) -> Tuple[Any, List[Any]]:
        acl = self.acl
        dataset = _null_check("acl.mdl.create_dataset", acl.mdl.create_dataset())
        undo.push("acl.mdl.destroy_dataset", acl.mdl.destroy_dataset, dataset)
        ptrs: List[Any] = []
        for size in sizes:
            ptr, ret = acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
            check("acl.rt.malloc", ret)
            undo.push("acl.rt.free", acl.rt.free, ptr)
            buffer = _null_check("acl.create_data_buffer", acl.create_data_buffer(ptr, size))
            undo.push("acl.destroy_data_buffer", acl.destroy_data_buffer, buffer)
            _, ret = acl.mdl.add_dataset_buffer(dataset, buffer)
            check("acl.mdl.add_dataset_buffer", ret)
            ptrs.append(ptr)
        return dataset, ptrs

    def batch(self) -> Optional[int]:
        """Dim 0 of input 0 when the model states it (> 0); None for a dynamic or missing dim."""
        if not self.input_sizes:
            return None
        dims, ret = self.acl.mdl.get_input_dims(self.desc, 0)
        shape = dims.get("dims") if ret == 0 and isinstance(dims, dict) else None
        return int(shape[0]) if shape and int(shape[0]) > 0 else None

    def prepare(self, samples: Sequence[Sample]) -> None:
        """Read every sample and check it against the model's inputs (count and byte sizes)."""
        for sample in samples:
            if not sample.files:
                self.data[sample] = [bytes(size) for size in self.input_sizes]
                continue
            if len(sample.files) != len(self.input_sizes):
                raise InferOptionError(f"the model has {len(self.input_sizes)} input(s) but --input gives "
                                       f"{len(sample.files)} per sample ({', '.join(sample.files)})")
            data = [read_input(p) for p in sample.files]
            for path, blob, size in zip(sample.files, data, self.input_sizes):
                if len(blob) != size:
                    raise InferOptionError(f"the input holds {len(blob)} bytes; the model's input takes {size}",
                                           path=path)
            self.data[sample] = data

    def _host_ptr(self, blob: bytes) -> Any:
        util = self.acl.util
        if hasattr(util, "bytes_to_ptr"):       # CANN 6 and later
            return util.bytes_to_ptr(blob)
        return util.numpy_to_ptr(np.frombuffer(blob, dtype=np.uint8))

    def load(self, sample: Sample) -> Optional[float]:
        """Copy the sample to the device; the time taken (ms)."""
        begin = time.perf_counter()
        for ptr, size, blob in zip(self.input_ptrs, self.input_sizes, self.data[sample]):
            check("acl.rt.memcpy", self.acl.rt.memcpy(ptr, size, self._host_ptr(blob), len(blob),
                                                      ACL_MEMCPY_HOST_TO_DEVICE))
        return (time.perf_counter() - begin) * 1000.0

    def execute(self) -> float:
        begin = time.perf_counter()
        check("acl.mdl.execute", self.acl.mdl.execute(self.model_id, self.inputs, self.outputs))
        return (time.perf_counter() - begin) * 1000.0

    def fetch(self) -> Tuple[Optional[List[bytes]], Optional[float]]:
        """Copy the outputs back to the host; (their bytes, the copy time in ms)."""
        begin = time.perf_counter()
        for host, ptr, size in zip(self.host_ptrs, self.output_ptrs, self.output_sizes):
            check("acl.rt.memcpy", self.acl.rt.memcpy(host, size, ptr, size, ACL_MEMCPY_DEVICE_TO_HOST))
        elapsed = (time.perf_counter() - begin) * 1000.0
        util = self.acl.util
        if hasattr(util, "ptr_to_bytes"):       # CANN 6 and later
            blobs = [bytes(util.ptr_to_bytes(h, s)) for h, s in zip(self.host_ptrs, self.output_sizes)]
        else:
            blobs = [util.ptr_to_numpy(h, (s,), NPY_UBYTE).tobytes() for h, s in zip(self.host_ptrs, self.output_sizes)]
        return blobs, elapsed


def _run_device(acl: Any, emulated: bool, device: int, opts: Options, plan: RunPlan, samples: Sequence[Sample],
                out_dir: Optional[str], undo: _Undo, diag: Diagnostics) -> DeviceResult:
    """Open the device, load the model, warm up, run every sample `loop` times, save the last
    outputs of each sample, close in reverse order."""
    mark = undo.mark()
    check("acl.rt.set_device", acl.rt.set_device(device), f"device {device}")
    undo.push("acl.rt.reset_device", acl.rt.reset_device, device)
    context, ret = acl.rt.create_context(device)
    check("acl.rt.create_context", ret, f"device {device}")
    undo.push("acl.rt.destroy_context", acl.rt.destroy_context, context)
    model_id, ret = acl.mdl.load_from_file(opts.model)
    check("acl.mdl.load_from_file", ret, f"model {opts.model}")
    undo.push("acl.mdl.unload", acl.mdl.unload, model_id)
    io: Union[_EmulatedIo, _AclIo] = _EmulatedIo(acl, model_id) if emulated else _AclIo(acl, model_id, undo)
    io.prepare(samples)
    batch: Union[int, float] = opts.batch if opts.batch is not None else (io.batch() or 1)
    for _ in range(plan.warmup_count):
        io.load(samples[0])
        io.execute()
        io.fetch()
    result = DeviceResult(device=device, batch=batch, out_dir=out_dir)
    for index, sample in enumerate(samples):
        blobs: Optional[List[bytes]] = None
        for _ in range(opts.loop):
            h2d = io.load(sample)
            if h2d is not None:
                result.h2d_latency_list.append(h2d)
            result.npu_compute_time_list.append(io.execute())
            blobs, d2h = io.fetch()
            if d2h is not None:
                result.d2h_latency_list.append(d2h)
        outfiles: List[str] = []
        if blobs is not None and out_dir is not None:
            for i, blob in enumerate(blobs):
                path = os.path.join(out_dir, f"{sample.name}_{i}.bin")
                _write_file(path, blob)
                outfiles.append(path)
        result.filesinfo[index] = {"infiles": list(sample.files), "outfiles": outfiles}
    _report_cleanup(undo.unwind(mark), None, diag)
    return result


def _run_here(acl: Any, emulated: bool, opts: Options, plan: RunPlan, why_not_msprof: str,
              diag: Diagnostics) -> InferResult:
    samples = samples_from_inputs(opts.inputs)
    result = InferResult(mode=plan.mode, emulated=emulated, output=opts.output, display_all=opts.display_all,
                         args=["msprof-kit", "infer", *opts.argv()])
    if plan.mode == PROFILER:
        result.profiler_via, result.why_not_msprof = "acl.json", why_not_msprof
    created = False
    if opts.output is not None:
        _makedirs(opts.output)
        result.run_dir, created = _make_run_dir(opts.output, opts.output_dirname, datetime.datetime.now())
    try:
        _run_in(result, acl, emulated, opts, plan, samples, diag)
    except BaseException:
        if created and result.run_dir is not None:
            _remove_empty_tree(result.run_dir)
        raise
    return result


def _run_in(result: InferResult, acl: Any, emulated: bool, opts: Options, plan: RunPlan, samples: Sequence[Sample],
            diag: Diagnostics) -> None:
    """Write the run's acl.json when it needs one, run every device, write the summaries."""
    prof_root: Optional[str] = None
    if opts.output is not None and plan.mode in (PROFILER, DUMP):
        folder = os.path.join(opts.output, PROFILER_DIR if plan.mode == PROFILER else DUMP_DIR)
        _makedirs(folder)
        result.acl_json = os.path.join(opts.output, ACL_JSON_NAME)
        _write_generated_acl_json(result.acl_json, generated_acl_json(plan.mode, opts.output, opts.model))
        prof_root = folder if plan.mode == PROFILER else None
    if plan.mode == ACL_JSON:
        assert opts.acl_json_path is not None
        result.acl_json = opts.acl_json_path
        prof_root = _profiler_output_of(opts.acl_json_path)
    before: Dict[str, Listing] = {prof_root: listing(prof_root)} if prof_root else {}
    if plan.mode == DUMP and emulated:
        diag.warn("the emulator writes no dump data: the dump folder stays empty")
    result.devices = _run_devices(acl, emulated, opts, plan, samples, result.acl_json, result.run_dir, diag)
    result.prof_dirs = new_collections(before)
    if prof_root is not None and not result.prof_dirs:
        diag.warn(f"profiling was on but no new PROF_xxx directory appeared in {prof_root}")
    if result.run_dir is None:
        return
    if emulated:
        _write_file(os.path.join(result.run_dir, MARKER),
                    f"{ANNOUNCEMENT}.\nThe model was not run: the times in the summary are the emulator's "
                    "sleeps, and there are no output files.\n")
    for dev in result.devices:
        if len(result.devices) == 1:
            dev.summary_path = result.run_dir + SUMMARY_SUFFIX
        else:
            dev.summary_path = os.path.join(result.run_dir, f"device{dev.device}{SUMMARY_SUFFIX}")
        _write_file(dev.summary_path, json.dumps(dev.summary_json(result.args, emulated), indent=4) + "\n")
        result.summary_files.append(dev.summary_path)


def _run_devices(acl: Any, emulated: bool, opts: Options, plan: RunPlan, samples: Sequence[Sample],
                 config: Optional[str], run_dir: Optional[str], diag: Diagnostics) -> List[DeviceResult]:
    """acl.init (with `config`, the run's acl.json, if any), each device in turn, acl.finalize; on
    any error what was opened is closed before the error goes on."""
    undo = _Undo()
    results: List[DeviceResult] = []
    try:
        check("acl.init", acl.init(config) if config else acl.init())
        undo.push("acl.finalize", acl.finalize)
        for device in opts.devices:
            out_dir = run_dir
            if run_dir is not None and len(opts.devices) > 1:
                out_dir = os.path.join(run_dir, f"device{device}")
                _makedirs(out_dir)
            results.append(_run_device(acl, emulated, device, opts, plan, samples, out_dir, undo, diag))
    except BaseException as exc:
        _report_cleanup(undo.unwind(), exc, diag)
        raise
    _report_cleanup(undo.unwind(), None, diag)
    return results


# --- the entry point ----------------------------------------------------------------------------
def infer(model: str, inputs: Union[str, Sequence[str], None] = None, output: Optional[str] = None, loop: int = 1,
          warmup_count: int = 1, devices: Union[int, str, Sequence[int]] = (0,), batch: Optional[int] = None,
          profiler: bool = False, dump: bool = False, acl_json_path: Optional[str] = None,
          emulate: Optional[bool] = None, diag: Optional[Diagnostics] = None, runner: Optional[Runner] = None,
          output_dirname: Optional[str] = None, display_all: bool = False) -> InferResult:
    """Run `model` (an .om file) with ais_bench's options and rules (module docstring).

    `inputs`: files or folders, "a,b" or a list (none: zero data). `output`: the results root
    (none: nothing is written). `loop`: measured runs per sample (> 0); `warmup_count`: unmeasured
    runs first (>= 0). `devices`: 0, "0,1" or [0, 1], run one after the other. `batch`: for the
    throughput (default: dim 0 of input 0, or 1). `profiler` / `dump` / `acl_json_path`: §5.2.
    `emulate`: as get_acl. `runner(argv, env) -> status` starts msprof (default: a subprocess).
    `output_dirname`: a fixed result folder instead of the date. `display_all`: also print H2D/D2H.

    Raises InferOptionError for refused options, PathNotFound for a missing model or input,
    PyAclNotAvailable without pyACL (and without the emulator being asked for), the named AclError
    of a failing acl call, and MsprofFailed (carrying msprof's exit status) when msprof fails."""
    diag = diag if diag is not None else Diagnostics()
    input_paths = parse_inputs(inputs)
    plan = plan_run(profiler=bool(profiler), dump=bool(dump), acl_json_path=acl_json_path, output=output,
                    output_dirname=output_dirname, has_inputs=bool(input_paths), warmup_count=warmup_count,
                    loop=loop)
    if batch is not None and (isinstance(batch, bool) or not isinstance(batch, int) or batch < 1):
        raise InferOptionError(f"--batch is {batch!r}; expected an integer > 0")
    model_path = _absolute(model)
    if not os.path.isfile(model_path):
        raise PathNotFound("no such model file", path=model_path)
    json_path = _absolute(acl_json_path) if acl_json_path is not None else None
    if json_path is not None and not os.path.isfile(json_path):
        raise PathNotFound("no such acl.json file", path=json_path)
    opts = Options(model=model_path, inputs=input_paths, output=_absolute(output) if output is not None else None,
                   output_dirname=output_dirname, loop=loop, warmup_count=warmup_count,
                   devices=parse_devices(devices), batch=batch, profiler=bool(profiler), dump=bool(dump),
                   acl_json_path=json_path, display_all=bool(display_all))
    for note in plan.notes:
        diag.warn(note)
    why_not = ""
    if plan.mode == PROFILER:
        msprof, why_not = msprof_choice(os.environ)
        if msprof is not None:
            # fail here, not inside msprof, when the re-run could not find pyACL either
            _, emulated = get_acl(emulate, diag)
            return _under_msprof(opts, msprof, emulated, emulate, runner or run_command, diag)
    acl, emulated = get_acl(emulate, diag)
    return _run_here(acl, emulated, opts, plan, why_not, diag)

