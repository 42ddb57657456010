"""The entry points: write_collection (a whole PROF folder from its options), with_metrics (a
chip profile with another metric group) and main (the script that times the writer)."""
from __future__ import annotations

import argparse
import dataclasses
import os
import time
from typing import Optional, Sequence

import numpy as np

from .control import write_control, write_text
from .conventions import (
    CHIPS, END_MARGIN_NS, double_hash, EVENTS_PIPE, FIRST_OP_NS, GROUP_EVENTS, HOST_MONO0_NS, ChipProfile,
)
from .device import device_records
from .hccl import hccl_device, hccl_host, hccl_texts, hccl_type_lines, plan_hccl
from .host import host_records, type_info_lines
from .memory import write_npu_mem
from .packing import in_order, joined, ticks_to_ns, write_stream
from .plan import moved_early, plan_ops, plan_timing


def _group_events(metrics: str) -> str:
    return metrics.split(":", 1)[1] if metrics.startswith("Custom:") else GROUP_EVENTS[metrics]


def with_metrics(profile: ChipProfile, metrics: str, events: Optional[str] = None,
                 aiv_metrics: Optional[str] = None) -> ChipProfile:
    """The chip's profile with another metric group for both cores, as the collector writes
    sample.json: the group's events from GROUP_EVENTS (or `events`; a "Custom:<list>" group
    defaults to its list); on 910B an AI Core PipeUtilizationExct keeps PipeUtilization on the
    AI Vector Core. `aiv_metrics`: another group (with its own events) for the AI Vector Core."""
    if events is None:
        events = _group_events(metrics)
    aiv_events = events
    if aiv_metrics is not None:
        aiv_events = _group_events(aiv_metrics)
    elif metrics == "PipeUtilizationExct" and profile.stars:
        aiv_metrics, aiv_events = "PipeUtilization", EVENTS_PIPE
    else:
        aiv_metrics = metrics
    return dataclasses.replace(profile, aic_metrics=metrics, aic_events=events, aiv_metrics=aiv_metrics,
                               aiv_events=aiv_events)


def write_collection(out_dir: str, *, chip: str = "910B", n_tasks: int = 40, devices: int = 1,
                     pmu: bool = True, tensors: bool = True, model_fraction: float = 0.0, seed: int = 0,
                     slices: int = 1, name: Optional[str] = None, straddle: bool = True,
                     metrics: Optional[str] = None, events: Optional[str] = None,
                     aiv_metrics: Optional[str] = None, mix_fraction: float = 0.0, steps: bool = False,
                     host_ns: bool = False, host_start: bool = True, early_apis: int = 0,
                     hccl_ops: int = 0, hccl_tasks_per_op: int = 11, hccl_devices: int = 0,
                     npu_mem_samples: int = 0) -> str:
    """Write a synthetic raw collection under `out_dir`; return the PROF directory's path.

    chip:           "910B" (platform 5: stars_soc + ffts_profile, 50 MHz device counter,
                    PipeUtilizationExct / PipeUtilization) or "310P" (platform 4: hwts + aicore,
                    100 MHz device counter, PipeUtilization both).
    n_tasks:        compute tasks (= ops) per device; each device runs the same op sequence.
                    Eager ops run on stream 2, model ops on stream 3, task ids 1, 2, ... per
                    stream; past 65535 the host task id holds (flip << 16) | (id & 0xFFFF), the
                    device records the low 16 bits, and flips are reported (host FLIP_TASK
                    task_track, device ts_track tag 14).
    devices:        number of devices `device_0..`; device d is driven by host thread 4012 + d.
    pmu:            write the PMU stream (ffts_profile: one context record per task; aicore:
                    one record per task, end-time order).
    tensors:        write tensor_info (one input and one output ND FLOAT16 tensor per op).
    model_fraction: about this fraction of the ops runs inside aclmdlExecute of model 1, in
                    whole executions of OPS_PER_EXECUTION ops (at least one execution if > 0).
    seed:           seeds every random choice (op types, durations, counters, slice cuts);
                    the same arguments give byte-identical files.
    slices:         split every binary stream into this many `*.slice_k` files (text
                    dictionaries stay in slice_0).
    straddle:       cut slices at arbitrary byte positions, inside records (default); False
                    cuts on record boundaries.
    name:           directory name; default `PROF_000001_20231125090304544_<8 letters A-R>`.
    metrics:        a metric group (GROUP_EVENTS' keys, or "Custom:0x8,0x9,..."): sample.json names
                    it and its events (`with_metrics`), and every counter of the group's events is
                    nonzero (`_event_counters`); default: the chip's pipe groups, as before.
    events:         with `metrics`, an explicit event list instead of the group's.
    aiv_metrics:    with `metrics`, another group (and its events) for the AI Vector Core.
    mix_fraction:   910B only: about this fraction of the ops (at least 2) become MIX_AIC / MIX_AIV
                    ops, alternately in op order: GE task type 4 / 5, KERNEL_MIX_AIC / _AIV, block
                    num 4..24 with mix ratio MIX_RATIO, one context_id_info (context 0); on the
                    device FFTS+ subtask logs instead of ACSQ logs, a context PMU record of subtask
                    type MIX_AIC / MIX_AIV from the main core and block num x MIX_RATIO block PMU
                    records from the other core. Counters are drawn as with `metrics` (every one
                    nonzero), of the chip's own groups when `metrics` is not given.
    steps:          step-trace tags: ts_track MODEL_START / MODEL_END (model 1, index = execution
                    index) 1 us before and after each execution's device tasks; each takes a task
                    id on the model stream, before and after the execution's ops.
    host_ns:        host time stamps are CLOCK_MONOTONIC_RAW ns instead of 100 MHz counter ticks
                    (info.json still gives CPU[0].Frequency 100 MHz, as it does on some hosts).
    host_start:     write host/host_start.log (False: none, as some real 910B collections have).
    early_apis:     k > 0: host API records before the collection start (start_info's
                    clockMonotonicRaw / collectionTimeBegin; host_start.log keeps its sync point).
                    The host calls of the first k ops (all eager) move before it, one slot apart,
                    the last slot beginning EARLY_LAST_NS (10 us) before the start: its ACL API,
                    launch and KernelLaunch straddle the start, the other ops' calls end before it;
                    their device tasks keep their times. Before them, on each host thread: a
                    ModelLoad event pair (level 15000 type 2, model MODEL_ID, unaging) of 200 us
                    ending 100 us before the first early slot, holding a runtime StreamCreate; a
                    runtime ModelBindStream beginning inside the ModelLoad and ending after it; and
                    a StreamCreate of another thread (tid + 800) inside the ModelLoad's span.
    hccl_ops:       910B only: this many all-reduce collectives per device after its compute ops
                    (tests/synth/hccl.py): per collective an ACL HcclAllReduce ⊃ a node-level HCCL
                    launch (node_basic_info task type HCCL, hccl_op_info) ⊃ `hccl_tasks_per_op`
                    level-5500 master / slave APIs, each with one hccl_info and one task_track; on
                    the device one ACSQ start/end pair per task on streams 5 (master) and 6 (slave).
    hccl_tasks_per_op: tasks per collective (default 11: one whole 2-rank all-reduce, 3 of them slave).
    hccl_devices:   k > 0: only the first k devices run the collectives (default 0: every device).
    npu_mem_samples: this many npu_mem samples per device (tests/synth/memory.py: half Device, half
                    APP, one of each per µs from the collection start), written a chunk at a time.

    Times: op i of device d occupies the host slot starting at FIRST_OP_NS + d x 17.32 us +
    i x OP_PERIOD_NS (50 us); host time stamps are multiples of 10 ns, device times multiples
    of the device tick (20 ns on 910B, 10 ns on 310P); end_info is 1 ms after the last record.
    """
    key = chip.upper()
    if key not in CHIPS:
        raise ValueError(f"chip must be one of {sorted(CHIPS)}, not {chip!r}")
    if n_tasks < 0 or devices < 1 or slices < 1 or not 0.0 <= model_fraction <= 1.0:
        raise ValueError("need n_tasks >= 0, devices >= 1, slices >= 1 and 0 <= model_fraction <= 1")
    profile = CHIPS[key]
    if not 0.0 <= mix_fraction <= 1.0 or (mix_fraction > 0 and not profile.stars):
        raise ValueError("mix_fraction is a fraction, and MIX ops need a 910B chip")
    if metrics is not None:
        profile = with_metrics(profile, metrics, events, aiv_metrics)
    elif events is not None or aiv_metrics is not None:
        raise ValueError("events and aiv_metrics need a metric group (metrics=...)")
    rng = np.random.default_rng(seed)
    letters = "".join(chr(ord("A") + int(k)) for k in rng.integers(0, 18, 8))
    prof = os.path.join(out_dir, name or f"PROF_000001_20231125090304544_{letters}")
    cut_rng = np.random.default_rng([seed, 1])  # slice cuts never disturb the data's randomness

    ops = plan_ops(n_tasks, profile, model_fraction, rng, mix_fraction, np.random.default_rng([seed, 4]), steps)
    timings = [plan_timing(ops, d, profile, np.random.default_rng([seed, 2, d])) for d in range(devices)]
    if early_apis < 0 or early_apis > ops.n or ops.model[:early_apis].any():
        raise ValueError("early_apis counts the first ops, which must all be eager ops")
    host_timings = [moved_early(t, early_apis) for t in timings]
    if hccl_ops < 0 or hccl_tasks_per_op < 1 or (hccl_ops and not profile.stars):
        raise ValueError("hccl_ops >= 0 collectives of hccl_tasks_per_op >= 1 tasks, on a 910B chip")
    hccl = [plan_hccl(hccl_ops, hccl_tasks_per_op, ops.n, t, profile, np.random.default_rng([seed, 6, t.device]))
            for t in timings[:hccl_devices or devices]] if hccl_ops else []

    host_data = os.path.join(prof, "host", "data")
    os.makedirs(host_data)
    host_streams = host_records(ops, host_timings, tensors, early_apis)
    for plan, t in zip(hccl, timings):
        hccl_host(host_streams, plan, t)
    for stem, arr in sorted(host_streams.merged().items()):
        if host_ns:
            arr = ticks_to_ns(arr)
        write_stream(host_data, stem, arr, slices, straddle, cut_rng)
    cat = ops.catalogue
    write_text(os.path.join(host_data, "unaging.additional.hash_dic.slice_0"),
               "".join(f"{i}:{s}\n" for i, s in zip(cat.ids.tolist(), cat.texts))
               + "".join(f"{double_hash(s)}:{s}\n" for s in (hccl_texts() if hccl else [])))
    write_text(os.path.join(host_data, "unaging.additional.type_info_dic.slice_0"),
               "".join(f"{line}\n" for line in type_info_lines(ops, early_apis > 0) + (hccl_type_lines() if hccl else [])))

    last_ns = FIRST_OP_NS
    for t in timings:
        if ops.n:
            last_ns = max(last_ns, int(t.acl_end.max()), int(t.launch_end.max()) + 2000,
                          HOST_MONO0_NS + int(t.dev_end.max()) * profile.tick_ns)
        dev_data = os.path.join(prof, f"device_{t.device}", "data")
        os.makedirs(dev_data)
        grouped = metrics is not None or mix_fraction > 0
        group_rng = np.random.default_rng([seed, 5, t.device]) if grouped else None
        streams = device_records(ops, t, profile, pmu, np.random.default_rng([seed, 3, t.device]), group_rng,
                                 steps)
        if t.device < len(hccl):
            plan = hccl[t.device]
            last_ns = max(last_ns, int(plan.acl_end.max()), HOST_MONO0_NS + int(plan.dev_end.max()) * profile.tick_ns)
            for stem, arr in hccl_device(plan, t.device, profile).items():
                both = joined([streams[stem], arr]) if stem in streams else arr
                streams[stem] = in_order(both, both["syscnt"])
        for stem, arr in sorted(streams.items()):
            write_stream(dev_data, stem, arr, slices, straddle, cut_rng)
        if npu_mem_samples:
            last_us = write_npu_mem(dev_data, t.device, npu_mem_samples, seed=seed)
            last_ns = max(last_ns, HOST_MONO0_NS + last_us * 1000)
    end_ns = last_ns + END_MARGIN_NS
    write_control(os.path.join(prof, "host"), profile, None, end_ns)
    if not host_start:
        os.remove(os.path.join(prof, "host", "host_start.log"))
    for t in timings:
        write_control(os.path.join(prof, f"device_{t.device}"), profile, t.device, end_ns)
    return prof


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description="Write a synthetic collection and time it.")
    parser.add_argument("out_dir")
    parser.add_argument("n_tasks", nargs="?", type=int, default=1_000_000)
    parser.add_argument("--chip", default="910B", choices=sorted(CHIPS))
    parser.add_argument("--devices", type=int, default=1)
    parser.add_argument("--model-fraction", type=float, default=0.0)
    parser.add_argument("--slices", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-pmu", action="store_true")
    parser.add_argument("--no-tensors", action="store_true")
    parser.add_argument("--metrics", default=None, help="metric group, or Custom:<event list>")
    parser.add_argument("--events", default=None, help="with --metrics: an explicit event list")
    parser.add_argument("--mix-fraction", type=float, default=0.0, help="910B: fraction of MIX ops")
    parser.add_argument("--steps", action="store_true", help="MODEL_START / MODEL_END step-trace tags")
    parser.add_argument("--early-apis", type=int, default=0, help="the first K eager ops' APIs before the start")
    parser.add_argument("--hccl-ops", type=int, default=0, help="910B: all-reduce collectives per device")
    parser.add_argument("--hccl-tasks-per-op", type=int, default=11, help="HCCL tasks per collective")
    parser.add_argument("--name", default=None, help="PROF directory name")
    args = parser.parse_args(argv)
    os.makedirs(args.out_dir, exist_ok=True)
    began = time.perf_counter()
    path = write_collection(args.out_dir, chip=args.chip, n_tasks=args.n_tasks, devices=args.devices,
                            pmu=not args.no_pmu, tensors=not args.no_tensors,
                            model_fraction=args.model_fraction, seed=args.seed, slices=args.slices,
                            metrics=args.metrics, events=args.events, mix_fraction=args.mix_fraction,
                            steps=args.steps, early_apis=args.early_apis, name=args.name,
                            hccl_ops=args.hccl_ops, hccl_tasks_per_op=args.hccl_tasks_per_op)
    seconds = time.perf_counter() - began
    size = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(path) for f in fs)
    print(f"{path}: {args.n_tasks} tasks x {args.devices} device(s), {size / 2 ** 20:.1f} MiB "
          f"in {seconds:.2f} s")
