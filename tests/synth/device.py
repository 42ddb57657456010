"""The device side of a collection: task logs (STARS soc log or HWTS log), PMU records (FFTS
context and block records or AI Core records) with their counters, and ts_track records."""
from __future__ import annotations

from typing import Dict, Optional, Tuple

import numpy as np

from msprof_kit.parsers import records

from .conventions import (
    FFTS_PLUS, FUNC_ACSQ_END, FUNC_ACSQ_START, FUNC_BLOCK_PMU, FUNC_CONTEXT_PMU, FUNC_FFTS_END,
    FUNC_FFTS_START, MODEL_ID, MODEL_STREAM, SQE_AI_CORE, SQE_AIV, STEP_MODEL_END, STEP_MODEL_START,
    SUBTASK_MIX_AIC, SUBTASK_MIX_AIV, TS_TAG_FLIP, TS_TAG_STEP, ChipProfile,
)
from .packing import bits, in_order, joined
from .plan import Ops, Timing, flips

#: counter / cycles range per event when a group is given (`metrics=`): every counter is nonzero,
#: icache misses stay below requests and 0x206 (L0C to L1) below 0x32 and 0x20c, which it is
#: subtracted from. Events not listed: 5% to 60%.
_GROUP_RANGE = {0x54: (0.01, 0.05), 0x206: (0.002, 0.02), 0x416: (0.2, 0.9), 0x417: (0.01, 0.05),
                0x49: (0.2, 0.9), 0x4a: (0.01, 0.1)}

#: Upper bound of counter/total_cycle per PMU event (0x55, icache misses, is drawn below 0x54).
_RATIO_CAP = {0x416: 0.9, 0x417: 0.05, 0x9: 0.5, 0x302: 0.6, 0xc: 0.9, 0x303: 0.4,
              0x8: 0.9, 0xa: 0.9, 0xb: 0.6, 0xd: 0.6, 0x54: 0.05, 0x55: 0.0}
_AIV_ZERO = {0xa, 0xb}  # an AI Vector Core has no cube / L1 pipe


def device_records(ops: Ops, t: Timing, profile: ChipProfile, pmu: bool,
                   rng: np.random.Generator, group_rng: Optional[np.random.Generator] = None,
                   steps: bool = False) -> Dict[str, np.ndarray]:
    """Device streams of one device, keyed by file stem (without `.slice_k`). `group_rng` (a
    metric group was given, or MIX ops): counters from `_group_counters`, and the MIX ops' block
    records. `steps`: MODEL_START / MODEL_END ts_track records around each model execution."""
    n, d = ops.n, t.device
    base = profile.dev_cntvct(d)
    start = (t.dev_start + base).astype(np.uint64)
    end = (t.dev_end + base).astype(np.uint64)
    task = (ops.seq & 0xFFFF).astype(np.uint16)
    out: Dict[str, np.ndarray] = {}

    main_aic = (ops.core == 0) | (ops.core == 2)
    mix = ops.core >= 2
    if profile.stars:
        soc = np.zeros(2 * n, dtype=records.STARS_LOG.dtype)
        # ACSQ start/end of a plain task, FFTS+ subtask start/end of a MIX op's subtask 0
        func = np.where(np.repeat(mix, 2), np.tile(np.array([FUNC_FFTS_START, FUNC_FFTS_END]), n),
                        np.tile(np.array([FUNC_ACSQ_START, FUNC_ACSQ_END]), n)).astype(np.uint64)
        sqe = np.repeat(np.where(main_aic, SQE_AI_CORE, SQE_AIV), 2)
        soc["head"] = bits(records.STARS_LOG, "head", func_type=func, cnt=np.arange(2 * n) % 16, sqe_type=sqe)
        soc["magic"] = records.DEVICE_MAGIC
        soc["stream_raw"] = np.repeat(ops.stream, 2)
        soc["task_raw"] = np.repeat(task, 2)
        soc["syscnt"][0::2] = start
        soc["syscnt"][1::2] = end
        subtask = np.where(ops.core == 2, SUBTASK_MIX_AIC, SUBTASK_MIX_AIV).astype(np.uint16)
        soc["word16"] = np.repeat(np.where(mix, subtask, 0), 2)
        soc["word20"] = np.repeat(np.where(mix, FFTS_PLUS << 13, 0), 2)
        out[f"stars_soc.data.{d}"] = soc
    else:
        hwts = np.zeros(2 * n, dtype=records.HWTS_LOG.dtype)
        hwts["tag"] = bits(records.HWTS_LOG, "tag", log_type=np.tile(np.array([0, 1]), n),
                           cnt=np.arange(2 * n) % 16)
        hwts["task_type"] = 0
        hwts["magic"] = records.DEVICE_MAGIC
        hwts["task_id"] = np.repeat(task, 2)
        hwts["syscnt"][0::2] = start
        hwts["syscnt"][1::2] = end
        hwts["stream_id"] = np.repeat(ops.stream, 2)
        out[f"hwts.data.{d}"] = hwts

    if pmu:
        if group_rng is None:
            cycles, counters = _pmu_counters(ops, t, profile, rng)
        else:
            cycles, counters = _group_counters(ops, t, profile, main_aic, group_rng)
        if profile.stars:
            ffts = np.zeros(n, dtype=records.FFTS_PMU.dtype)
            ffts["magic"] = records.DEVICE_MAGIC
            ffts["stream_raw"] = ops.stream
            ffts["task_raw"] = task
            # subtask type 0 AIC / 1 AIV and ffts type 0 AIC only / 1 AIV only; MIX: 6 / 7 and FFTS+
            ffts["word16"] = np.where(mix, subtask, ops.core)
            ffts["word20"] = np.where(mix, FFTS_PLUS, ops.core).astype(np.uint16) << 13
            ffts["total_cycle"] = cycles
            ffts["pmu"] = counters
            ffts["start_syscnt"] = start
            ffts["end_syscnt"] = end
            if mix.any():
                assert group_rng is not None
                both = joined([_block_records(ops, t, profile, main_aic, start, end, task, group_rng), ffts])
                ffts = in_order(both, both["end_syscnt"])
            ffts["head"] = bits(records.FFTS_PMU, "head", func_type=np.where(
                ffts["head"] == FUNC_BLOCK_PMU, FUNC_BLOCK_PMU, FUNC_CONTEXT_PMU).astype(np.uint64),
                cnt=np.arange(len(ffts)) % 16)
            out[f"ffts_profile.data.{d}"] = ffts
        else:
            aic = np.zeros(n, dtype=records.AIC_PMU.dtype)
            aic["tag"] = bits(records.AIC_PMU, "tag", cnt=np.arange(n) % 16)
            aic["magic"] = records.DEVICE_MAGIC
            aic["task_id"] = task
            aic["total_cycle"] = cycles
            aic["pmu"] = counters
            aic["stream_id"] = ops.stream
            out[f"aicore.data.{d}"] = aic

    flip_ops, flip_num = flips(ops)
    tracks = []
    if flip_ops.size:
        tracks.append(flip_records(ops.stream[flip_ops], start[flip_ops], flip_num, profile.tick_ns))
    first, last = np.flatnonzero(ops.exec_first), np.flatnonzero(ops.exec_last)
    if steps and first.size:
        # MODEL_START 1 us before an execution's first task starts, MODEL_END 1 us after its last ends
        us = np.uint64(1000 // profile.tick_ns)
        step = np.zeros(2 * first.size, dtype=records.TS_TRACK.dtype)
        step["mode"] = 1
        step["tag"] = TS_TAG_STEP
        step["buf_size"] = records.TS_TRACK.size
        step["syscnt"][0::2] = start[first] - us
        step["syscnt"][1::2] = end[last] + us
        step["p16"] = np.repeat(ops.exec_index[first], 2)
        step["p24"] = MODEL_ID
        step["p32"] = MODEL_STREAM
        step["p34"][0::2] = (ops.seq[first] - 1) & 0xFFFF
        step["p34"][1::2] = (ops.seq[last] + 1) & 0xFFFF
        step["p36"] = np.tile(np.array([STEP_MODEL_START, STEP_MODEL_END]), first.size)
        tracks.append(step)
    if len(tracks) == 1:
        out[f"ts_track.data.{d}"] = tracks[0]
    elif tracks:
        both = joined(tracks)
        out[f"ts_track.data.{d}"] = in_order(both, both["syscnt"])
    return out


def _pmu_counters(ops: Ops, t: Timing, profile: ChipProfile,
                  rng: np.random.Generator) -> Tuple[np.ndarray, np.ndarray]:
    """total_cycle and the 8 counters of each task: cycles ~ busy fraction x duration x frequency
    x blocks, each counter = cycles x a ratio below its cap (icache misses below requests)."""
    n = ops.n
    dur_us = (t.dev_end - t.dev_start) * profile.tick_ns / 1000.0
    busy = rng.uniform(0.4, 0.95, n)
    cycles = np.floor(dur_us * int(profile.aic_frequency) * ops.block * busy).astype(np.uint64)
    caps = np.zeros((n, 8))
    miss_col: Dict[int, Tuple[int, int]] = {}
    for core, events in ((0, profile.aic_events), (1, profile.aiv_events)):
        ids = [int(e, 16) for e in events.split(",")]
        row = np.array([0.0 if core == 1 and e in _AIV_ZERO else _RATIO_CAP.get(e, 0.5) for e in ids])
        caps[ops.core == core] = row
        if 0x54 in ids and 0x55 in ids:
            miss_col[core] = (ids.index(0x54), ids.index(0x55))
    ratios = rng.random((n, 8)) * caps
    for core, (req, miss) in miss_col.items():
        sel = ops.core == core
        ratios[sel, miss] = ratios[sel, req] * rng.uniform(0.0, 0.5, int(sel.sum()))
    counters = np.floor(cycles[:, None] * ratios).astype(np.uint64)
    return cycles, counters


def _event_counters(cycles: np.ndarray, events: str, rng: np.random.Generator) -> np.ndarray:
    """(n, 8) counters for one event list: counter = cycles x a fraction in the event's range
    (`_GROUP_RANGE`), at least 1 where cycles are; icache misses (0x55) a fraction of requests."""
    ids = [int(e, 16) for e in events.split(",")][:8]
    n = len(cycles)
    frac = np.zeros((n, 8))
    for i, e in enumerate(ids):
        lo, hi = _GROUP_RANGE.get(e, (0.05, 0.6))
        frac[:, i] = rng.uniform(lo, hi, n)
    if 0x54 in ids and 0x55 in ids:
        frac[:, ids.index(0x55)] = frac[:, ids.index(0x54)] * rng.uniform(0.1, 0.5, n)
    counters = np.floor(cycles.astype(np.float64)[:, None] * frac).astype(np.uint64)
    counters[:, :len(ids)] = np.maximum(counters[:, :len(ids)], (cycles > 0).astype(np.uint64)[:, None])
    return counters


def _group_counters(ops: Ops, t: Timing, profile: ChipProfile, main_aic: np.ndarray,
                    rng: np.random.Generator) -> Tuple[np.ndarray, np.ndarray]:
    """total_cycle and counters of each task's (main core's) record when a metric group is given:
    cycles ~ busy fraction x duration x frequency x blocks; counters per `_event_counters` of the
    core's event list (AI Core: ai_core_profiling_events, AI Vector Core: aiv_profiling_events)."""
    dur_us = (t.dev_end - t.dev_start) * profile.tick_ns / 1000.0
    busy = rng.uniform(0.4, 0.95, ops.n)
    cycles = np.floor(dur_us * int(profile.aic_frequency) * ops.block * busy).astype(np.uint64)
    counters = np.zeros((ops.n, 8), dtype=np.uint64)
    for is_aic, events in ((True, profile.aic_events), (False, profile.aiv_events)):
        sel = main_aic == is_aic
        counters[sel] = _event_counters(cycles[sel], events, rng)
    return cycles, counters


def _block_records(ops: Ops, t: Timing, profile: ChipProfile, main_aic: np.ndarray, start: np.ndarray,
                   end: np.ndarray, task: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Block PMU records of the MIX ops' secondary core (block num x mix ratio of them per op),
    each ending inside its task, with the other core's event list (device_formats.md §4.2)."""
    mix = np.flatnonzero(ops.core >= 2)
    per_op = ops.block[mix].astype(np.int64) * ops.mix_ratio[mix]
    op = np.repeat(mix, per_op)
    k = np.arange(len(op)) - np.repeat(np.cumsum(per_op) - per_op, per_op)   # block index within its op
    blk = np.zeros(len(op), dtype=records.FFTS_PMU.dtype)
    blk["head"] = FUNC_BLOCK_PMU   # the func type alone for now: the caller fills the header bits
    blk["magic"] = records.DEVICE_MAGIC
    blk["stream_raw"] = ops.stream[op]
    blk["task_raw"] = task[op]
    blk["word16"] = np.where(ops.core[op] == 2, SUBTASK_MIX_AIC, SUBTASK_MIX_AIV)
    # byte 20: bit 0 core type (1 AIV: the secondary core of MIX_AIC), bits 1-7 core id; byte 21
    # bits 5-7: ffts type
    core_type = main_aic[op].astype(np.uint16)
    blk["word20"] = core_type | ((k % 48).astype(np.uint16) << 1) | np.uint16(FFTS_PLUS << 13)
    blk["block_id"] = k
    blk["start_syscnt"] = start[op] + np.uint64(1)
    blk["end_syscnt"] = np.maximum(end[op] - (per_op[np.searchsorted(mix, op)] - k).astype(np.uint64),
                                   start[op] + np.uint64(2))
    dur_us = (blk["end_syscnt"] - blk["start_syscnt"]).astype(np.float64) * profile.tick_ns / 1000.0
    cycles = np.floor(dur_us * int(profile.aic_frequency) * rng.uniform(0.5, 0.95, len(op))).astype(np.uint64)
    blk["total_cycle"] = cycles
    counters = np.zeros((len(op), 8), dtype=np.uint64)
    for is_aic, events in ((True, profile.aic_events), (False, profile.aiv_events)):
        sel = ~main_aic[op] == is_aic   # the secondary core is the other one
        counters[sel] = _event_counters(cycles[sel], events, rng)
    blk["pmu"] = counters
    return blk


def flip_records(stream: np.ndarray, start: np.ndarray, flip_num: np.ndarray, tick_ns: int) -> np.ndarray:
    """ts_track flip records of the tasks starting at `start` (device ticks) on `stream`, each 1 us
    before its task: bytes 16..23 hold u16 stream, u16 flip number, u16 reserved, u16 task id (0)."""
    ts = np.zeros(len(start), dtype=records.TS_TRACK.dtype)
    ts["mode"] = 1
    ts["tag"] = TS_TAG_FLIP
    ts["buf_size"] = records.TS_TRACK.size
    ts["syscnt"] = start - np.uint64(1000 // tick_ns)
    ts["p16"] = stream.astype(np.uint64) | (flip_num.astype(np.uint64) << np.uint64(16))
    return ts
