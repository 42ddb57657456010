"""Synthetic legacy `JOBxxx` collections (older CANN, SoC boards) for tests and the collectors.

`write_job(out_dir, n_tasks=...)` writes one JOB folder and returns its path. Every record is
packed from the record tables of `parsers.job` (nothing is re-declared here), column-wise with
numpy. `plan_job(...)` gives the same content as arrays, so a test can compare a store against
what was written.

The model of the data:
* one device; `iterations` runs of a static graph of `n_tasks // iterations` ops (the last
  iteration may run fewer); op k runs on stream 3 + k % 2 with task id `first_task_id + k // 2`
  (16 bits on the device: ids past 65535 wrap, and the op's full task id carries the wrap count
  in its high 16 bits); every 5th op is an AI CPU op, the others AI Core ops;
* task ids: `per_stream` (the above: each stream numbers its own tasks, so both streams use the
  same ids), `unique` (op k has `first_task_id + k`, one id per task on the device, as the
  2020-era runtime gave them), or `some_shared` (as `unique`, but op k with k % 4 == 1 takes the
  id of op k - 1, which runs on the other stream: those ids are on two streams);
* `hwts_stream_offset`: added to the stream ids the HWTS log and the training trace write (not
  the task descriptions, AI CPU records or AscendCL), as a 2020-era runtime wrote physical stream
  ids (519, ...) beside the descriptions' logical ones (3, ...);
* device counter at `hwts_mhz` (info.json `hwts_frequency`), starting at `T0_TICKS`; op k of
  iteration i starts at T0 + i * ITERATION_TICKS + k * OP_PERIOD_TICKS and lasts
  DURATION_TICKS + (k % 7) * 10 ticks; with no start_info the store keeps these times as
  ticks x 1000 / hwts_mhz ns;
* AscendCL: per iteration an `aclmdlExecute` (acl_model) around its tasks and an
  `aclrtMemcpy` (acl_rts) before them, host ns on the same clock; pid 4001, tid 4012;
* training trace per iteration: start (0) at the iteration's slot start, FP (1), a stream-5
  all-reduce pair (3, 4), BP (2), end (255) END_GAP_TICKS after its last task;
* Framework: `binary` (GE reporter task_desc_info / tensor_data_info / step_info, every 3rd op
  name through hash_dic) or `text` (host.vm task_desc_info / graph_desc_info / point);
* AI CPU: one binary DATA_PREPROCESS record per AI CPU op execution.

Layouts: `soc` = `JOBxxx/data/*` plus `JOBxxx/info.json.0` (what SoC boards write); `flat` = the
raw files directly in the JOB folder and no control file (MindInsight-era samples). Every slice
gets its `.done` marker unless `done=False`. The HWTS log is cut into two slices inside a record.

Run as a script: `python3 tests/synth_job.py OUT_DIR [N_TASKS]`.
"""
from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

import numpy as np

from msprof_kit.parsers import job
from synth import double_hash  # the hash_dic ids: the collector's DoubleHash

__all__ = ["write_job", "plan_job", "JobPlan", "T0_TICKS", "ITERATION_TICKS", "OP_PERIOD_TICKS", "PID", "TID"]

T0_TICKS = 1_000_000_000        #: device counter at the first iteration's start
ITERATION_TICKS = 5_000_000     #: one iteration
OP_PERIOD_TICKS = 20_000        #: one op slot
DURATION_TICKS = 12_000         #: base op duration (+ (k % 7) * 10)
END_GAP_TICKS = 5_000           #: the iteration-end point follows the iteration's last task by this
PID, TID = 4001, 4012
REDUCE_STREAM = 5
LEGACY_END = 255
MIX_STRING = 1  # MsprofMixData.type of a text held inline (the parser reads any type but MIX_HASH so)
OP_TYPES = ("Conv2D", "MatMul", "Add", "Cast", "Relu", "GetNext", "TransData")
GE_AI_CORE, GE_AI_CPU = 0, 1
VM_FORMAT_CODES = {"NCHW": 4, "ND": 3, "NC1HWC0": 7, "DEFAULT": 1}
VM_DTYPE_CODES = {"FLOAT16": 42, "FLOAT32": 43, "INT32": 34}          # binary reporter numbering
VM_DTYPE_CODES_2020 = {"FLOAT16": 39, "FLOAT32": 40, "INT32": 31}     # text reporter numbering


@dataclass
class JobPlan:
    """What a synthetic JOB holds: its ops, their executions, API calls, step points, AI CPU records."""

    device: int
    hwts_mhz: int
    # ops (static graph), in description order
    op_name: List[str]
    op_type: List[str]
    op_stream: np.ndarray
    op_full_task: np.ndarray          #: (wrap count << 16) | 16-bit task id
    op_block: np.ndarray
    op_ge_type: np.ndarray            #: 0 AI_CORE, 1 AI_CPU
    op_model: int
    op_inputs: List[List[tuple]]      #: per op: (shape tuple, dtype name, format name)
    op_outputs: List[List[tuple]]
    # executions (device tasks), in start order
    task_op: np.ndarray               #: op index of each execution
    task_iteration: np.ndarray        #: 1-based
    task_start: np.ndarray            #: ticks
    task_end: np.ndarray
    # AscendCL calls
    api_name: List[str]
    api_sub: List[str]
    api_type: np.ndarray
    api_start: np.ndarray             #: host ns
    api_end: np.ndarray
    # training trace records, in file order
    step_tag: np.ndarray
    step_stream: np.ndarray
    step_task: np.ndarray
    step_syscnt: np.ndarray
    hashed: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))  #: op name via hash_dic
    hwts_stream_offset: int = 0       #: added to stream ids in the HWTS log and training trace

    def tick_ns(self, ticks: np.ndarray) -> np.ndarray:
        return np.asarray(ticks, dtype=np.int64) * 1000 // self.hwts_mhz

    def expected_texts(self, k: int) -> tuple:
        """The six tensor texts the store should hold for op k."""
        def side(ts: Sequence[tuple]) -> tuple:
            if not ts:
                return "N/A", "N/A", "N/A"
            return ('"' + ";".join(",".join(str(d) for d in t[0]) for t in ts) + '"',
                    ";".join(t[1] for t in ts), ";".join(t[2] for t in ts))
        return side(self.op_inputs[k]) + side(self.op_outputs[k])


TASK_IDS = ("per_stream", "unique", "some_shared")


def plan_job(n_tasks: int = 40, *, device: int = 0, iterations: int = 2, hwts_mhz: int = 100,
             first_task_id: int = 1, model_id: int = 0, seed: int = 0, task_ids: str = "per_stream",
             hwts_stream_offset: int = 0) -> JobPlan:
    """The content `write_job` writes with the same arguments."""
    if n_tasks < 1 or iterations < 1:
        raise ValueError("n_tasks and iterations must be positive")
    if task_ids not in TASK_IDS:
        raise ValueError(f"task_ids is one of {TASK_IDS}")
    n_ops = -(-n_tasks // iterations)
    if n_ops * OP_PERIOD_TICKS >= ITERATION_TICKS - 100_000:
        raise ValueError(f"{n_ops} ops do not fit one iteration; use more iterations")
    rng = np.random.default_rng(seed)
    k = np.arange(n_ops)
    stream = 3 + k % 2
    if task_ids == "per_stream":
        full = first_task_id + k // 2  # past 65535 the high 16 bits count the wraps
    else:
        full = first_task_id + np.where((k % 4 == 1) & (task_ids == "some_shared"), k - 1, k)
    ge_type = np.where(k % 5 == 4, GE_AI_CPU, GE_AI_CORE)
    op_type = [OP_TYPES[int(i) % len(OP_TYPES)] for i in k]
    names = [f"Default/network-Net/layer{int(i) // 4}/{t}-op{int(i)}" for i, t in zip(k, op_type)]
    block = np.where(ge_type == GE_AI_CPU, 1, 1 + rng.integers(0, 32, n_ops))
    ins, outs = [], []
    for i in range(n_ops):
        dims = (int(rng.integers(1, 9)), int(rng.integers(1, 65)))
        fmt = ("NCHW", "ND", "NC1HWC0")[i % 3]
        ins.append([(dims, "FLOAT16", fmt)] + ([((dims[1],), "FLOAT32", "ND")] if i % 2 else []))
        outs.append([(dims, "FLOAT16" if i % 4 else "INT32", fmt)])
    # executions
    per_iter = [min(n_ops, n_tasks - it * n_ops) for it in range(iterations)]
    task_op = np.concatenate([np.arange(m) for m in per_iter if m > 0])
    task_it = np.concatenate([np.full(m, it + 1) for it, m in enumerate(per_iter) if m > 0])
    start = T0_TICKS + (task_it - 1) * ITERATION_TICKS + task_op * OP_PERIOD_TICKS
    end = start + DURATION_TICKS + (task_op % 7) * 10
    # per iteration: its first and last execution (executions are in iteration order)
    its = np.unique(task_it)
    first = np.searchsorted(task_it, its, side="left")
    last = np.searchsorted(task_it, its, side="right") - 1
    m = len(its)
    lo = start[first] * 1000 // hwts_mhz
    hi = end[last] * 1000 // hwts_mhz
    # AscendCL calls: a memcpy before, a model execute around each iteration's tasks (host ns)
    api_name = ["aclrtMemcpy", "aclmdlExecute"] * m
    api_sub = ["acl_rts", "acl_model"] * m
    api_type = np.tile([3, 2], m)
    api_s = np.stack([lo - 40_000, lo - 20_000], axis=1).ravel()
    api_e = np.stack([lo - 30_000, hi + 20_000], axis=1).ravel()
    # training trace: start, FP, reduce pair, BP, end per iteration
    base = T0_TICKS + (its - 1) * ITERATION_TICKS
    fp_op, bp_op = task_op[first], task_op[last]
    zero = np.zeros(m, dtype=np.int64)
    points = [  # (tag, stream, task, syscnt) columns, one row per iteration
        (zero, zero, zero, base),
        (zero + 1, stream[fp_op], full[fp_op] & 0xFFFF, start[first] + 1),
        (zero + 3, zero + REDUCE_STREAM, zero + 1, start[first] + 100),
        (zero + 4, zero + REDUCE_STREAM, zero + 2, end[last] - 100),
        (zero + 2, stream[bp_op], full[bp_op] & 0xFFFF, end[last] - 1),
        (zero + LEGACY_END, zero, zero, end[last] + END_GAP_TICKS)]
    tags, st, tk, sc = (np.stack([p[j] for p in points], axis=1).ravel() for j in range(4))
    return JobPlan(
        device=device, hwts_mhz=hwts_mhz, op_name=names, op_type=op_type, op_stream=stream.astype(np.int64),
        op_full_task=full.astype(np.int64), op_block=block.astype(np.int64), op_ge_type=ge_type.astype(np.int64),
        op_model=model_id, op_inputs=ins, op_outputs=outs, task_op=task_op.astype(np.int64),
        task_iteration=task_it.astype(np.int64), task_start=start.astype(np.int64), task_end=end.astype(np.int64),
        api_name=api_name, api_sub=api_sub, api_type=api_type.astype(np.int64), api_start=api_s.astype(np.int64),
        api_end=api_e.astype(np.int64), step_tag=tags.astype(np.int64), step_stream=st.astype(np.int64),
        step_task=tk.astype(np.int64), step_syscnt=sc.astype(np.int64),
        hashed=(k % 3 == 2), hwts_stream_offset=hwts_stream_offset)


# ------------------------------------------------------------------------------------------------
# Packing


def _compose(record, host: str, **parts: np.ndarray) -> np.ndarray:
    """Values of integer field `host` from its named bit fields (LSB first, as the table declares)."""
    value = np.zeros(len(next(iter(parts.values()))), dtype=np.uint64)
    shift = 0
    for name, width in record.bits[host]:
        part = np.asarray(parts.pop(name, 0), dtype=np.uint64)
        if (part >> np.uint64(width)).any():
            raise ValueError(f"{record.name}.{host}.{name} does not fit {width} bits")
        value |= part << np.uint64(shift)
        shift += width
    if parts:
        raise KeyError(f"{record.name}.{host}: unknown bit fields {sorted(parts)}")
    return value


def _hwts(plan: JobPlan) -> np.ndarray:
    """Start and end records of every execution in time order, plus a block-PMU log (type 4) after
    every 8th start, which readers skip."""
    n = len(plan.task_op)
    ops = plan.task_op
    low = plan.op_full_task[ops] & 0xFFFF
    kind = np.concatenate([np.zeros(n), np.ones(n), np.full((n + 7) // 8, 4)]).astype(np.int64)
    who = np.concatenate([np.arange(n), np.arange(n), np.arange(0, n, 8)])
    when = np.concatenate([plan.task_start, plan.task_end, plan.task_start[::8] + 5])
    order = np.lexsort((kind, when))
    kind, who, when = kind[order], who[order], when[order]
    arr = np.zeros(len(order), dtype=job.LEGACY_HWTS.dtype)
    arr["tag"] = _compose(job.LEGACY_HWTS, "tag", log_type=kind, cnt=np.arange(len(order)) % 16)
    arr["task_type"] = plan.op_ge_type[ops[who]]
    arr["task_id"] = low[who]
    arr["syscnt"] = when
    arr["stream_id"] = plan.op_stream[ops[who]] + plan.hwts_stream_offset
    arr["block_id"] = np.where(kind == 4, 1, 0)
    return arr


def _mix(arr: np.ndarray, kind_field: str, field: str, texts: Sequence[str], hashed: np.ndarray) -> None:
    arr[kind_field] = np.where(hashed, job.MIX_HASH, MIX_STRING)
    width = arr.dtype.fields[field][0].itemsize
    values = [double_hash(t).to_bytes(8, "little") if h else t.encode("utf-8")[:width] for t, h in zip(texts, hashed)]
    arr[field] = np.array(values, dtype=f"S{width}")


def _task_desc(plan: JobPlan) -> np.ndarray:
    n = len(plan.op_name)
    arr = np.zeros(n, dtype=job.GE_TASK_DESC.dtype)
    arr["magic"] = job.MAGIC
    arr["data_tag"] = job.TAG_TASK_DESC
    arr["task_type"] = plan.op_ge_type
    _mix(arr, "op_name_kind", "op_name", plan.op_name, plan.hashed)
    _mix(arr, "op_type_kind", "op_type", plan.op_type, np.zeros(n, dtype=bool))
    arr["block_dims"] = plan.op_block
    arr["model_id"] = plan.op_model
    arr["stream_id"] = plan.op_stream
    arr["task_id"] = plan.op_full_task
    arr["thread_id"] = TID
    return arr


def _tensor_data(plan: JobPlan) -> np.ndarray:
    """One record per op, or two when it has more than two tensors (the output goes second),
    with formats and types offset by 200 on odd ops (as msprof reports them)."""
    rows = []
    for k in range(len(plan.op_name)):
        tensors = [(0, t) for t in plan.op_inputs[k]] + [(1, t) for t in plan.op_outputs[k]]
        parts = [tensors] if len(tensors) <= 2 else [tensors[:-1], tensors[-1:]]
        for part in parts:
            rows.append((k, part))
    arr = np.zeros(len(rows), dtype=job.GE_TENSOR_DATA.dtype)
    arr["magic"] = job.MAGIC
    arr["data_tag"] = job.TAG_TENSOR_DATA
    arr["model_id"] = plan.op_model
    for r, (k, part) in enumerate(rows):  # a few hundred records at most
        arr["stream_id"][r] = plan.op_stream[k]
        arr["task_id"][r] = plan.op_full_task[k]
        arr["tensor_num"][r] = len(part)
        bump = job.MSPROF_OFFSET if k % 2 else 0
        for s, (io, (dims, dtype, fmt)) in enumerate(part):
            arr[f"t{s}_type"][r] = io
            arr[f"t{s}_format"][r] = VM_FORMAT_CODES[fmt] + bump
            arr[f"t{s}_dtype"][r] = VM_DTYPE_CODES[dtype] + bump
            arr[f"t{s}_shape"][r, : len(dims)] = dims
    return arr


def _step_info(plan: JobPlan) -> np.ndarray:
    """The FP op records tag 2, the BP op tag 3 (store numbering)."""
    fp, bp = plan.step_tag == 1, plan.step_tag == 2
    arr = np.zeros(2, dtype=job.GE_STEP_INFO.dtype)
    arr["magic"] = job.MAGIC
    arr["data_tag"] = job.TAG_STEP_INFO
    arr["model_id"] = plan.op_model
    arr["stream_id"] = [plan.step_stream[fp][0], plan.step_stream[bp][0]]
    arr["task_id"] = [plan.step_task[fp][0], plan.step_task[bp][0]]
    arr["tag"] = [job.STORE_FP_START, job.STORE_BP_END]
    arr["thread_id"] = TID
    return arr


def _acl(plan: JobPlan, sub: str) -> np.ndarray:
    mine = np.flatnonzero(np.array(plan.api_sub, dtype=object) == sub)
    arr = np.zeros(len(mine), dtype=job.ACL_API.dtype)
    arr["magic"] = job.MAGIC
    arr["api_type"] = plan.api_type[mine]
    arr["start"] = plan.api_start[mine]
    arr["end"] = plan.api_end[mine]
    arr["pid"] = PID
    arr["tid"] = TID
    arr["name"] = np.array(plan.api_name, dtype="S64")[mine]
    return arr


def _training_trace(plan: JobPlan) -> np.ndarray:
    arr = np.zeros(len(plan.step_tag), dtype=job.TRAINING_TRACE.dtype)
    arr["tag_id"] = plan.step_tag
    arr["stream_id"] = np.where(plan.step_stream != 0, plan.step_stream + plan.hwts_stream_offset, 0)
    arr["task_id"] = plan.step_task
    arr["syscnt"] = plan.step_syscnt
    return arr


def _aicpu(plan: JobPlan) -> np.ndarray:
    """One record per AI CPU execution: µs times on the 10 ns counter (ticks / 100)."""
    cpu = np.flatnonzero(plan.op_ge_type[plan.task_op] == GE_AI_CPU)
    ops = plan.task_op[cpu]
    start_ticks = plan.tick_ns(plan.task_start[cpu]) // 10
    end_ticks = plan.tick_ns(plan.task_end[cpu]) // 10
    arr = np.zeros(len(cpu), dtype=job.AICPU_PREPROCESS.dtype)
    arr["magic"] = job.MAGIC
    arr["data_tag"] = job.TAG_AICPU
    arr["stream_id"] = plan.op_stream[ops]
    arr["task_id"] = plan.op_full_task[ops] & 0xFFFF
    arr["run_start"] = start_ticks // 100
    arr["run_start_ticks"] = start_ticks
    arr["run_end"] = end_ticks // 100
    arr["run_end_ticks"] = end_ticks
    arr["device"] = plan.device
    arr["dispatch_time"] = 3 + ops % 5
    arr["total_time"] = (end_ticks - start_ticks) // 100 + 5
    return arr


def _graph_desc_lines(plan: JobPlan) -> List[str]:
    out = []
    for k, name in enumerate(plan.op_name):
        parts = [f"op_name:{name}", f"op_type:{plan.op_type[k]}"]
        for side, tensors in (("input", plan.op_inputs[k]), ("output", plan.op_outputs[k])):
            for i, (dims, dtype, fmt) in enumerate(tensors):
                parts += [f"{side}_id:{i}", f"{side}_format:{fmt}", f"{side}_data_type:{VM_DTYPE_CODES_2020[dtype]}",
                          f'{side}_shape:"{",".join(str(d) for d in dims)}"']
        out.append(" ".join(parts))
    return out


# ------------------------------------------------------------------------------------------------
# Writing


def _write(folder: str, name: str, data: bytes, done: bool) -> str:
    path = os.path.join(folder, name)
    with open(path, "wb") as f:
        f.write(data)
    if done:
        open(path + ".done", "wb").close()
    return path


def _info_json(plan: JobPlan, platform_version: Optional[str]) -> Dict[str, object]:
    info: Dict[str, object] = {
        "jobInfo": "NA", "devices": str(plan.device), "pid": str(PID), "hostname": "board",
        "DeviceInfo": [{"id": plan.device, "hwts_frequency": str(plan.hwts_mhz), "aic_frequency": "1000",
                        "ai_core_num": 2}]}
    if platform_version is not None:
        info["platform_version"] = platform_version
    return info


def write_job(out_dir: str, n_tasks: int = 40, *, device: int = 0, iterations: int = 2, hwts_mhz: int = 100,
              first_task_id: int = 1, model_id: int = 0, framework: str = "binary", layout: str = "soc",
              done: bool = True, platform_version: Optional[str] = None, job_name: str = "JOB000001SYNTH",
              seed: int = 0, task_ids: str = "per_stream", hwts_stream_offset: int = 0) -> str:
    """Write a synthetic JOB folder under `out_dir` (created if needed); returns its path."""
    if framework not in ("binary", "text") or layout not in ("soc", "flat"):
        raise ValueError("framework is 'binary' or 'text'; layout is 'soc' or 'flat'")
    plan = plan_job(n_tasks, device=device, iterations=iterations, hwts_mhz=hwts_mhz, first_task_id=first_task_id,
                    model_id=model_id, seed=seed, task_ids=task_ids, hwts_stream_offset=hwts_stream_offset)
    job_dir = os.path.join(out_dir, job_name)
    data = os.path.join(job_dir, "data") if layout == "soc" else job_dir
    os.makedirs(data, exist_ok=True)
    d = plan.device
    hwts = _hwts(plan).tobytes()
    cut = (len(hwts) // 2 // job.LEGACY_HWTS.size) * job.LEGACY_HWTS.size + 24  # inside a record
    stem = f"hwts.log.data.45.dev.profiler_default_tag.{d}"
    _write(data, f"{stem}.slice_0", hwts[:cut], done)
    _write(data, f"{stem}.slice_1", hwts[cut:], done)
    _write(data, f"training_trace.46.dev.profiler_default_tag.{d}.slice_0", _training_trace(plan).tobytes(), done)
    for sub in sorted(set(plan.api_sub)):
        _write(data, f"AclModule.{sub}.{d}.slice_0", _acl(plan, sub).tobytes(), done)
    if (plan.op_ge_type[plan.task_op] == GE_AI_CPU).any():
        _write(data, f"DATA_PREPROCESS.AICPU.{d}.slice_0", _aicpu(plan).tobytes(), done)
    if framework == "binary":
        _write(data, f"Framework.task_desc_info.{d}.slice_0", _task_desc(plan).tobytes(), done)
        _write(data, f"Framework.tensor_data_info.{d}.slice_0", _tensor_data(plan).tobytes(), done)
        _write(data, f"Framework.step_info.{d}.slice_0", _step_info(plan).tobytes(), done)
        lines = [f"{double_hash(n)}:{n}" for n, h in zip(plan.op_name, plan.hashed) if h]
        _write(data, f"Framework.hash_dic.{d}.slice_0", ("\n".join(lines) + "\n").encode(), done)
    else:
        tasks = [f"{n} {b} {t} {s}" for n, b, t, s in
                 zip(plan.op_name, plan.op_block.tolist(), plan.op_full_task.tolist(), plan.op_stream.tolist())]
        _write(data, f"Framework.host.vm.task_desc_info.{d}.slice_0", ("\n".join(tasks) + "\n").encode(), done)
        _write(data, f"Framework.host.vm.graph_desc_info.{d}.slice_0",
               ("\n".join(_graph_desc_lines(plan)) + "\n").encode(), done)
        fp = int(np.flatnonzero(plan.step_tag == 1)[0])
        bp = int(np.flatnonzero(plan.step_tag == 2)[0])
        points = [f"1 {plan.op_name[int(plan.task_op[_task_at(plan, fp)])]}",
                  f"2 {plan.op_name[int(plan.task_op[_task_at(plan, bp)])]}"]
        _write(data, f"Framework.host.vm.point.{d}.slice_0", ("\n".join(points) + "\n").encode(), done)
    if layout == "soc":
        with open(os.path.join(job_dir, f"info.json.{d}"), "w", encoding="utf-8") as f:
            json.dump(_info_json(plan, platform_version), f)
    return job_dir


def _task_at(plan: JobPlan, step_row: int) -> int:
    """The first execution whose (stream, task) recorded training-trace row `step_row`."""
    ops = plan.task_op
    hit = (plan.op_stream[ops] == plan.step_stream[step_row]) & \
        ((plan.op_full_task[ops] & 0xFFFF) == plan.step_task[step_row])
    return int(np.flatnonzero(hit)[0])


def _main(argv: Optional[Sequence[str]] = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        raise SystemExit("usage: synth_job.py OUT_DIR [N_TASKS]")
    path = write_job(args[0], int(args[1]) if len(args) > 1 else 40)
    print(path)


if __name__ == "__main__":
    _main()
