"""The iteration-export metric-group cases: one small 910B collection per PMU metric group, with a
model whose iterations hold AI_CORE, AI_VECTOR_CORE, MIX_AIC and MIX_AIV ops and step-trace tags,
written by tests/synth; and the reference's C++-install export of its model 1, iteration 2,
stored under tests/reference/iter_metrics_<group>/cpp_model1_iter2/.

Such an export runs the reference's Python path even on a C++ install, so its PMU columns follow
the Python rules (docs/exports.md, "Iteration exports: the Python path's metrics").
`generate` writes a case's input; tests/reference/refresh_iter_metric_refs.py ran the reference on
it (each case's MANIFEST.txt says how); tests/test_iteration_metrics.py exports and compares."""
from __future__ import annotations

import os
import sys
from typing import Dict

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)
import synth  # noqa: E402  (tests/ is not a package)

REFERENCE = os.path.join(HERE, "reference")
ITERATION = ("--model-id", "1", "--iteration-id", "2")
FOLDER = "cpp_model1_iter2"
#: the kinds stored and compared: the summaries (the timeline has no PMU values, and
#: tests/test_mixed_iteration.py compares an iteration's timeline)
KINDS = ("op_summary", "op_statistic", "api_statistic", "task_time", "step_trace")
#: an event list that is no group's (as tests/metric_cases.py's)
CUSTOM = "Custom:0x8,0x15,0x31,0x49,0x64,0x1b,0x54,0x55"

#: case name -> (metric group of both cores, seed)
CASES: Dict[str, tuple] = {
    "iter_metrics_PipeUtilization": ("PipeUtilization", 41),
    "iter_metrics_PipeUtilizationExct": ("PipeUtilizationExct", 42),
    "iter_metrics_ArithmeticUtilization": ("ArithmeticUtilization", 43),
    "iter_metrics_Memory": ("Memory", 44),
    "iter_metrics_MemoryL0": ("MemoryL0", 45),
    "iter_metrics_MemoryUB": ("MemoryUB", 46),
    "iter_metrics_ResourceConflictRatio": ("ResourceConflictRatio", 47),
    "iter_metrics_L2Cache": ("L2Cache", 48),
    "iter_metrics_MemoryAccess": ("MemoryAccess", 49),
    "iter_metrics_Custom": (CUSTOM, 50),
}


def keywords(name: str) -> Dict[str, object]:
    group, seed = CASES[name]
    return {"chip": "910B", "n_tasks": 40, "model_fraction": 0.75, "mix_fraction": 0.3, "steps": True,
            "metrics": group, "seed": seed}


def command(name: str) -> str:
    """The generator call, as MANIFEST.txt names it."""
    return "synth.write_collection(OUT, " + ", ".join(f"{k}={v!r}" for k, v in keywords(name).items()) + ")"


def generate(name: str, out_dir: str) -> str:
    """Write the case's raw collection below out_dir; returns its PROF directory."""
    os.makedirs(out_dir, exist_ok=True)
    return synth.write_collection(out_dir, **keywords(name))  # type: ignore[arg-type]  # Dict[str, object] keywords


#: A case whose PMU records leave the path where both rule sets agree (metrics.branch_rows): in
#: iteration 2, the context PMU record of task 16 has 0 cycles, and that of task 19 counts no
#: icache requests (event 0x54), its other counters and cycles as written.
BRANCHES = "iter_metrics_branches"
_BRANCH_BASE = "iter_metrics_PipeUtilization"
_NO_CYCLES, _NO_REQUESTS = 16, 19


def generate_branches(out_dir: str) -> str:
    """The PipeUtilization case's input with those two records changed in place."""
    import numpy as np
    from msprof_kit.parsers import records
    prof = generate(_BRANCH_BASE, out_dir)
    path = os.path.join(prof, "device_0", "data", "ffts_profile.data.0.slice_0")
    with open(path, "rb") as f:
        raw = bytearray(f.read())
    pmu = np.frombuffer(raw, dtype=records.FFTS_PMU.dtype)  # a view: the bytes between fields stay
    context = (pmu["head"] & 63) == 40  # context PMU records (func type 40) of the model stream
    slot = [int(e, 16) for e in synth.GROUP_EVENTS["PipeUtilization"].split(",")].index(0x54)
    for task, field in ((_NO_CYCLES, "total_cycle"), (_NO_REQUESTS, "pmu")):
        (at,) = np.flatnonzero(context & (pmu["stream_raw"] == synth.MODEL_STREAM) & (pmu["task_raw"] == task))
        if field == "total_cycle":
            pmu["total_cycle"][at] = 0
        else:
            pmu["pmu"][at, slot] = 0
    with open(path, "wb") as f:
        f.write(raw)
    return prof


def command_branches() -> str:
    return (f"{command(_BRANCH_BASE)}, then in device_0/data/ffts_profile.data.0.slice_0 the context PMU record "
            f"of stream {synth.MODEL_STREAM} task {_NO_CYCLES}: total_cycle = 0; of task {_NO_REQUESTS}: the counter of event "
            "0x54 = 0 (tests/iteration_metric_cases.py generate_branches)")


def stored(name: str) -> str:
    return os.path.join(REFERENCE, name, FOLDER)
