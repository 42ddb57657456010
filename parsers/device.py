"""Device-side decoders (device_N/data): task logs, PMU records, ts_track, frequency changes.

Pure functions from records or bytes already read to column arrays (and `Issue`s); the ingest
reads the files (msprof_kit/ingest/streams.py). Times stay raw device syscnt. device_formats.md §3
(logs), §4 (PMU), §5.3 (frequency), §6 (ts_track).
"""
from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

import numpy as np

from . import records
from .stream import Columns, Issue, Piece, Validity, decode_stream


ACSQ_START, ACSQ_END = 0, 1
FFTS_START, FFTS_END = 34, 35
CTX_PMU, BLOCK_PMU = 40, 41
FFTS_PLUS = 4

SQE_TYPES = {0: "AI_CORE", 1: "AI_CPU", 2: "AIV_SQE", 3: "PLACE_HOLDER_SQE", 4: "EVENT_RECORD_SQE",
             5: "EVENT_WAIT_SQE", 6: "NOTIFY_RECORD_SQE", 7: "NOTIFY_WAIT_SQE", 8: "WRITE_VALUE_SQE",
             9: "VQ6_SQE", 10: "TOF_SQE", 11: "SDMA_SQE", 12: "VPC_SQE", 13: "JPEGE_SQE", 14: "JPEGD_SQE",
             15: "DSA_SQE", 16: "ROCCE_SQE", 17: "PCIE_DMA_SQE", 18: "HOST_CPU_SQE", 19: "CDQM_SQE",
             20: "C_CORE_SQE"}
SUBTASK_TYPES = {0: "AIC", 1: "AIV", 3: "Notify Wait", 4: "Notify Record", 5: "Write Value", 6: "MIX_AIC",
                 7: "MIX_AIV", 8: "SDMA", 9: "Data Context", 10: "Invalidate Data Context",
                 11: "Writeback Data Context", 12: "AI_CPU", 13: "Load Context", 15: "DSA"}
HWTS_TASK_TYPES = {0: "AI_CORE", 1: "AI_CPU", 2: "AI_VECTOR_CORE"}


def stars_ids(stream_raw: np.ndarray, task_raw: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Stream and task ids of STARS records without stream expansion (device_formats.md §3.2)."""
    s: np.ndarray = stream_raw.astype(np.int64)
    t: np.ndarray = task_raw.astype(np.int64)
    flag_a = (s & 0x1000) != 0
    flag_b = ~flag_a & ((s & 0x2000) != 0)
    stream = np.where(flag_b, (t & 0x0FFF) % 2048, s % 2048)
    task = np.where(flag_a, (t & 0x1FFF) | (s & 0xE000), np.where(flag_b, (s & 0x0FFF) | (t & 0xF000), t))
    return stream, task


def _stars_valid(arr: np.ndarray) -> np.ndarray:
    return arr["magic"] == records.DEVICE_MAGIC


#: the validity check of STARS soc log records, and what it asks for
STARS_VALID: Tuple[Validity, str] = (_stars_valid, f"without magic 0x{records.DEVICE_MAGIC:04X}")


def stars_columns(arr: np.ndarray, offsets: np.ndarray) -> Tuple[Columns, Columns]:
    """STARS soc log records (64 bytes): (ACSQ task logs, FFTS+ subtask logs), each with the
    records' byte offsets."""
    func = records.bit_field(records.STARS_LOG, "head", "func_type", arr["head"])
    sqe = records.bit_field(records.STARS_LOG, "head", "sqe_type", arr["head"])
    stream, task = stars_ids(arr["stream_raw"], arr["task_raw"])
    acsq = np.isin(func, (ACSQ_START, ACSQ_END))
    ffts = np.isin(func, (FFTS_START, FFTS_END))
    acsq_cols: Columns = {
        "is_start": func[acsq] == ACSQ_START, "sqe_type": sqe[acsq].astype(np.uint8),
        "stream_id": stream[acsq], "task_id": task[acsq], "syscnt": arr["syscnt"][acsq].astype(np.int64),
        "acc_id": (arr["word18"][acsq] & 0x3F).astype(np.uint8), "offset": offsets[acsq],
    }
    ffts_cols: Columns = {
        "is_start": func[ffts] == FFTS_START, "sqe_type": sqe[ffts].astype(np.uint8),
        "stream_id": stream[ffts], "task_id": task[ffts], "syscnt": arr["syscnt"][ffts].astype(np.int64),
        "subtask_type": (arr["word16"][ffts] & 0xFF).astype(np.uint8),
        "subtask_id": arr["word18"][ffts].astype(np.int64),
        "ffts_type": (arr["word20"][ffts] >> 13).astype(np.uint8),
        "thread_id": arr["thread_id"][ffts], "offset": offsets[ffts],
    }
    return acsq_cols, ffts_cols


def _ffts_valid(arr: np.ndarray) -> np.ndarray:
    return np.isin(records.bit_field(records.FFTS_PMU, "head", "func_type", arr["head"]), (CTX_PMU, BLOCK_PMU))


#: the validity check of FFTS PMU records, and what it asks for
FFTS_VALID: Tuple[Validity, str] = (
    _ffts_valid, f"with a func type other than {CTX_PMU} (context PMU) or {BLOCK_PMU} (block PMU)")


def ffts_columns(arr: np.ndarray, offsets: np.ndarray) -> Tuple[Columns, Columns, Columns]:
    """FFTS PMU records (128 bytes): (context PMU records, block PMU records, {"overflow": count
    of context records dropped}). Context records with the overflow flag (bit 10 of word 16) are
    dropped, as the reference does; overflow_issues reports them."""
    func = records.bit_field(records.FFTS_PMU, "head", "func_type", arr["head"])
    stream, task = stars_ids(arr["stream_raw"], arr["task_raw"])
    overflow = (arr["word16"] & 0x400) != 0
    out = []
    dropped = 0
    for wanted in (CTX_PMU, BLOCK_PMU):
        m = func == wanted
        if wanted == CTX_PMU:
            dropped = int(np.count_nonzero(m & overflow))
            m &= ~overflow
        out.append({
            "stream_id": stream[m], "task_id": task[m],
            "subtask_type": (arr["word16"][m] & 0xFF).astype(np.uint8),
            "subtask_id": arr["subtask_id"][m].astype(np.int64),
            "ffts_type": (arr["word20"][m] >> 13).astype(np.uint8),
            "core_type": (arr["word20"][m] & 1).astype(np.uint8),
            "total_cycle": arr["total_cycle"][m].astype(np.int64),
            "pmu": arr["pmu"][m].astype(np.int64),
            "start_syscnt": arr["start_syscnt"][m].astype(np.int64),
            "end_syscnt": arr["end_syscnt"][m].astype(np.int64),
            "offset": offsets[m],
        })
    return out[0], out[1], {"overflow": np.array([dropped], dtype=np.int64)}


def overflow_issues(issues: List[Issue], dropped: int, pieces: Sequence[Piece]) -> List[Issue]:
    """A stream's issues, and one more when `dropped` context records had the overflow flag."""
    if dropped and pieces:
        issues.append(Issue(pieces[0].path, 0, f"{dropped} context PMU records have the counter-overflow flag; "
                                               f"dropped"))
    return issues


def _hwts_valid(arr: np.ndarray) -> np.ndarray:
    log_type = records.bit_field(records.HWTS_LOG, "tag", "log_type", arr["tag"])
    return (arr["magic"] == records.DEVICE_MAGIC) | (log_type <= 3)


#: the validity check of HWTS log records, and what it asks for
HWTS_VALID: Tuple[Validity, str] = (_hwts_valid, "with a log type above 3")


def hwts_columns(arr: np.ndarray, offsets: np.ndarray) -> Columns:
    """HWTS task logs (64-byte records): the start (log type 0) and end (1) records, with their
    byte offsets; the other log types are left out."""
    log_type = records.bit_field(records.HWTS_LOG, "tag", "log_type", arr["tag"])
    m = log_type <= 1
    return {
        "is_start": log_type[m] == 0, "task_type": arr["task_type"][m].astype(np.int64),
        "stream_id": (arr["stream_id"][m] % 2048).astype(np.int64), "task_id": arr["task_id"][m].astype(np.int64),
        "syscnt": arr["syscnt"][m].astype(np.int64), "offset": offsets[m],
    }


def aic_pmu_columns(arr: np.ndarray, offsets: np.ndarray) -> Columns:
    """AI Core / AI Vector Core task PMU of HWTS chips (128-byte records, no timestamp), with the
    records' byte offsets."""
    return {
        "stream_id": (arr["stream_id"] % 2048).astype(np.int64), "task_id": arr["task_id"].astype(np.int64),
        "total_cycle": arr["total_cycle"].astype(np.int64), "pmu": arr["pmu"].astype(np.int64), "offset": offsets,
    }


TS_STEP, TS_MEMCPY, TS_TASK_TYPE, TS_OLD_FLIP, TS_FLIP, TS_BLOCK_NUM = 10, 11, 12, 13, 14, 15


def decode_ts_track(buf: np.ndarray, pieces: Sequence[Piece]) -> Tuple[Dict[str, Columns], List[Issue]]:
    """ts_track (40-byte records), split by tag: 'step' (10), 'flip' (14), 'block_num' (15)."""
    arr, offsets, issues = decode_stream(
        records.TS_TRACK, buf, pieces,
        lambda a: np.isin(a["tag"], (TS_STEP, TS_MEMCPY, TS_TASK_TYPE, TS_OLD_FLIP, TS_FLIP, TS_BLOCK_NUM)),
        "with an unknown tag (expected 10 to 15)")
    out: Dict[str, Columns] = {}
    step = arr[arr["tag"] == TS_STEP]
    out["step"] = {
        "syscnt": step["syscnt"].astype(np.int64), "index_id": step["p16"].astype(np.int64),
        "model_id": step["p24"].astype(np.int64), "stream_id": (step["p32"] % 2048).astype(np.int64),
        "task_id": step["p34"].astype(np.int64), "tag_id": step["p36"].astype(np.int64),
    }
    flip = arr[arr["tag"] == TS_FLIP]
    p16 = flip["p16"]
    out["flip"] = {
        "syscnt": flip["syscnt"].astype(np.int64), "stream_id": (p16 & 0xFFFF).astype(np.int64),
        "flip_num": ((p16 >> 16) & 0xFFFF).astype(np.int64), "task_id": ((p16 >> 48) & 0xFFFF).astype(np.int64),
    }
    block = arr[arr["tag"] == TS_BLOCK_NUM]
    b16 = block["p16"]
    stream, task = stars_ids((b16 & 0xFFFF).astype(np.int64), ((b16 >> 16) & 0xFFFF).astype(np.int64))
    out["block_num"] = {"syscnt": block["syscnt"].astype(np.int64), "stream_id": stream, "task_id": task,
                        "block_num": ((b16 >> 32) & 0xFFFFFFFF).astype(np.int64)}
    return out, issues


def decode_lpm_freq(buf: np.ndarray, pieces: Sequence[Piece]) -> Tuple[Columns, List[Issue]]:
    """AI Core frequency changes (888-byte records): (syscnt, MHz) in record order. A record must
    count 1 to 55 points (its slots), the first at a counter above 0; others are dropped (the check
    also finds the alignment of a stream cut short)."""
    arr, _, issues = decode_stream(
        records.LPM_FREQ, buf, pieces,
        lambda a: (a["count"] >= 1) & (a["count"] <= records.FREQ_SLOTS) & (a["f0_syscnt"] > 0),
        f"without 1 to {records.FREQ_SLOTS} change points (count) or with its first at counter 0")
    if len(arr) == 0:
        return {"syscnt": np.zeros(0, np.int64), "mhz": np.zeros(0, np.int64)}, issues
    sys_cols = np.stack([arr[f"f{i}_syscnt"] for i in range(records.FREQ_SLOTS)], axis=1).astype(np.int64)
    mhz_cols = np.stack([arr[f"f{i}_mhz"] for i in range(records.FREQ_SLOTS)], axis=1).astype(np.int64)
    used = np.arange(records.FREQ_SLOTS)[None, :] < np.minimum(arr["count"], records.FREQ_SLOTS)[:, None]
    return {"syscnt": sys_cols[used], "mhz": mhz_cols[used]}, issues


def pairing_order(keys: Sequence[np.ndarray], time: np.ndarray, is_start: np.ndarray,
                  last: Sequence[np.ndarray] = ()) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The records in pairing order (by key, then time, starts first at equal times, then `last`,
    then as given): (that order, whether each record in it is followed by one of its key, whether
    each is a start followed by an end of its key, i.e. a pair)."""
    order = np.lexsort((*reversed(list(last)), ~is_start, time, *reversed(list(keys))))
    same_key: np.ndarray = np.ones(max(len(time) - 1, 0), dtype=bool)
    for k in keys:
        ks = k[order]
        same_key &= ks[1:] == ks[:-1]
    st = is_start[order]
    return order, same_key, st[:-1] & ~st[1:] & same_key


def pair_start_end(keys: Sequence[np.ndarray], time: np.ndarray,
                   is_start: np.ndarray) -> Tuple[np.ndarray, np.ndarray, int, int]:
    """Pair start and end records of the same key in time order.

    A start pairs with the end that follows it before the key's next start; a start followed
    by another start lost its end, an end without a start before it lost its start.
    Returns (start indices, end indices, orphan starts, orphan ends).
    """
    n = len(time)
    if n == 0:
        empty: np.ndarray = np.zeros(0, dtype=np.int64)
        return empty, empty, 0, 0
    order, _, pair = pairing_order(keys, time, is_start)
    starts = order[:-1][pair]
    ends = order[1:][pair]
    paired = len(starts)
    n_start = int(np.count_nonzero(is_start))
    return starts, ends, n_start - paired, (n - n_start) - paired
