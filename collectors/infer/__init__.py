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

The parts, each importing only those above it: `plan` (the rules and the msprof command, pure),
`inputs` (checked options, samples), `stats` (latency statistics, results, the summary text),
`files` (the result folder), `device` (one device through pyACL), `run` (the entry point).
"""
from __future__ import annotations

from .inputs import Options, Sample, parse_devices, parse_inputs, read_input, samples_from_inputs
from .plan import (ACL_JSON, DUMP, PLAIN, PROFILER, RunPlan, acl_json_text, generated_acl_json, msprof_choice,
                   msprof_command, plan_run, rerun_argv)
from .run import Runner, infer, run_command
from .stats import DeviceResult, InferResult, LatencyStats, latency_stats, render_summary, throughput

__all__ = [
    "ACL_JSON", "DUMP", "DeviceResult", "InferResult", "LatencyStats", "Options", "PLAIN", "PROFILER", "RunPlan",
    "Runner", "Sample", "acl_json_text", "generated_acl_json", "infer", "latency_stats", "msprof_choice",
    "msprof_command", "parse_devices", "parse_inputs", "plan_run", "read_input", "render_summary", "rerun_argv",
    "run_command", "samples_from_inputs", "throughput",
]
