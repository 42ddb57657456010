"""msproftx / mstx markers and ranges of the host (`additional.msproftx`, formats_more.md §3.4) into
KIT_MSTX (every event, with what the summaries and the timeline print) and MSTX_EVENTS (the unified
table, as the reference's C++ path fills it).

The rules are the reference's (msparser/msproftx/msproftx_parser.py, csrc/domain/data_process/
ai_task/msproftx_host_processor.cpp, application/database/db_assembler.cpp SaveMsprofTxData):

* legacy msproftx records (info type 0) are one event each, in stream order;
* mstx records (info type 1) sharing a mark id are one event: the message pieces joined in
  `seg_idx` order, the other fields from the first piece; events in the order their mark id first
  appears, after the legacy ones;
* MSTX_EVENTS: rangeId 0xFFFFFFFF, globalTid = (info.json pid << 32) | tid, the domain "" for legacy
  events (its hash_dic text, "invalid" when unknown, for mstx), category 0xFFFFFFFF for mstx,
  connectionId 4000000000 for legacy events and 4000000001 + mark id for mstx ones; the C++ path
  keeps only the events that start at or after the collection start (the Python exports keep all).

Bad input costs only itself, with a warning that counts it: records of an unknown info type are
dropped (the reference logs and drops them too); a range (push/pop or start/end) whose end time is
0 or before its start was never closed and is dropped (the reference would print a negative or
wrapped duration); an mstx message whose first piece (or a middle one) is missing is kept with the
pieces there are, as the reference keeps it."""
from __future__ import annotations

from typing import Dict, List, Tuple

import numpy as np
import pandas as pd
from numpy.dtypes import StringDType

from ..errors import Diagnostics, MsprofKitError
from ..layout import Collection, ResultDir, data_files
from ..parsers import host as host_parsers
from ..parsers.msproftx import INFO_LEGACY, INFO_MSTX, MSPROFTX, RANGE_TYPES, tx_columns
from ..parsers.stream import Columns
from .clocks import host_clock_of, session_ns
from .columns import frame_of
from .names import HashTable, group_paths
from .sink import TableSink
from .streams import RecordStream
from .tasks import StringPool

InfoRows = List[Tuple[int, str, str]]

NO_RANGE = 0xFFFFFFFF                  # MSTX_EVENTS.rangeId, and the category of mstx events
TX_CONNECTION = 4_000_000_000          # connectionId of legacy msproftx events
MSTX_CONNECTION = TX_CONNECTION + 1    # mstx: this plus the mark id
FIELDS = ("process_id", "tid", "category", "event_type", "payload_type", "payload_value", "start_time",
          "end_time", "mark_id", "domain", "message_type", "message", "info_type", "seg_idx", "offset")


def _read(rd: ResultDir, diag: Diagnostics) -> Tuple[Columns, str]:
    """All msproftx records of the host, unaging slices first, each kind's stream a chunk at a time;
    and where they are (for warnings). Empty columns when there are none."""
    files = data_files(rd, Diagnostics())  # (data_files' own warnings were given by the host's read)
    parts: List[Columns] = []
    where = ""
    for _, paths in group_paths(files, "msproftx"):
        where = where or paths[0]
        stream = RecordStream(MSPROFTX, paths, *host_parsers.HOST_VALID)
        for arr, offsets in stream.chunks():
            cols = tx_columns(arr, offsets)
            parts.append({k: cols[k] for k in FIELDS})
        diag.extend(stream.issues)
    if not parts:
        return {}, where
    return {k: np.concatenate([p[k] for p in parts]) for k in FIELDS}, where


def _events(c: Columns, hashes: HashTable, where: str, diag: Diagnostics) -> pd.DataFrame:
    """One row per event (legacy first, then mstx), the mstx pieces joined; bad records dropped
    with a warning."""
    info = c["info_type"]
    unknown = ~np.isin(info, (INFO_LEGACY, INFO_MSTX))
    if unknown.any():
        diag.warn(f"{where}: {int(unknown.sum())} msproftx records have an unknown info type "
                  f"({', '.join(str(v) for v in np.unique(info[unknown])[:5].tolist())}; expected 0 msproftx or "
                  f"1 mstx); they are dropped")
    frame = frame_of({k: c[k] for k in FIELDS})
    legacy = frame[info == INFO_LEGACY]
    mstx = frame[info == INFO_MSTX]
    if len(mstx):
        # pieces by mark id (in first-seen order), then seg_idx, then stream order
        mark_code = pd.factorize(mstx["mark_id"].to_numpy(np.uint64))[0]
        seg = mstx["seg_idx"].to_numpy(np.int64)
        ordered = np.lexsort((np.arange(len(mstx)), seg, mark_code))
        mstx, mark_code, seg = mstx.iloc[ordered], mark_code[ordered], seg[ordered]
        new_mark = np.r_[True, mark_code[1:] != mark_code[:-1]]
        starts = np.flatnonzero(new_mark)
        counts = np.diff(np.r_[starts, len(seg)])
        distinct = np.add.reduceat((new_mark | np.r_[True, seg[1:] != seg[:-1]]).astype(np.int64), starts)
        no_first = seg[starts] != 0
        lost = no_first | (seg[starts + counts - 1] + 1 != distinct)
        if lost.any():
            diag.warn(f"{where}: {int(lost.sum())} mstx messages lack pieces ({int(no_first.sum())} of them their "
                      f"first piece, seg_idx 0); they are kept with the pieces there are, and the other fields of "
                      f"their lowest piece")
        pieces = mstx["message"].to_numpy(object).astype(StringDType())
        joined = pieces[starts]
        for j in range(1, int(counts.max())):  # (a loop over the pieces of the longest message)
            more = counts > j
            joined[more] = np.strings.add(joined[more], pieces[starts[more] + j])
        mstx = mstx.iloc[starts].assign(message=joined.astype(object))
        codes, uniq = pd.factorize(mstx["domain"].to_numpy(np.uint64))
        texts = hashes.lookup(uniq)
        texts[np.equal(texts, None)] = "invalid"
        mstx["domain_text"] = texts[codes]
    legacy = legacy.assign(domain_text="")
    events = pd.concat([legacy, mstx], ignore_index=True)
    is_range = np.isin(events["event_type"].to_numpy(), RANGE_TYPES)
    start, end = events["start_time"].to_numpy(np.uint64), events["end_time"].to_numpy(np.uint64)
    open_range = is_range & ((end == 0) | (end < start))
    if open_range.any():
        is_mstx = events["info_type"].to_numpy() == INFO_MSTX
        diag.warn(f"{where}: {int(open_range.sum())} msproftx ranges were never closed (push without pop or start "
                  f"without end: end time 0 or before the start; {int((open_range & is_mstx).sum())} of them mstx); "
                  f"they are dropped")
        events = events[~open_range].reset_index(drop=True)
    return events


def write_msproftx(rd: ResultDir, coll: Collection, hashes: HashTable, strings: StringPool, put: TableSink,
                   diag: Diagnostics) -> InfoRows:
    """KIT_MSTX and MSTX_EVENTS of the host's msproftx records (nothing without any); returns the
    KIT_INFO rows the timeline needs then (the host's pid_name, its process name)."""
    cols, where = _read(rd, diag)
    if not cols or not len(cols["info_type"]):
        return []
    try:
        clock = host_clock_of(rd, coll, Diagnostics())  # (its warnings were given by the host's read)
    except MsprofKitError as exc:
        diag.warn(f"{where}: msproftx records are dropped: the host clock cannot convert their times ({exc})")
        return []
    events = _events(cols, hashes, where, diag)
    if not len(events):
        return []
    pid_text = str(rd.info.get("pid", "0"))
    pid = int(pid_text) if pid_text.isdigit() else 0
    is_mstx = events["info_type"].to_numpy() == INFO_MSTX
    mark = events["mark_id"].to_numpy(np.uint64).astype(np.int64)
    # STRING_IDS: each event's message, then its domain, as the C++ writer numbers them
    pair = np.column_stack([events["message"].to_numpy(object), events["domain_text"].to_numpy(object)]).ravel()
    ids = strings.ids_of(pair).reshape(-1, 2)
    kit = frame_of({
        "startNs": clock.to_ns(events["start_time"].to_numpy(np.uint64)),
        "endNs": clock.to_ns(events["end_time"].to_numpy(np.uint64)),
        "eventType": events["event_type"].to_numpy(np.int64),
        "category": np.where(is_mstx, NO_RANGE, events["category"].to_numpy(np.int64)),
        "message": ids[:, 0], "globalTid": (np.int64(pid) << 32) | events["tid"].to_numpy(np.int64),
        "domainId": ids[:, 1], "connectionId": np.where(is_mstx, MSTX_CONNECTION + mark, TX_CONNECTION),
        "processId": events["process_id"].to_numpy(np.int64), "isMstx": is_mstx.astype(np.int64),
        "markId": np.where(is_mstx, mark, -1), "payloadType": events["payload_type"].to_numpy(np.int64),
        # (u64 payload values above 2^63 keep their bits as a negative INTEGER)
        "payloadValue": events["payload_value"].to_numpy(np.uint64).view(np.int64),
        "messageType": events["message_type"].to_numpy(np.int64)})
    put("KIT_MSTX", kit)
    start = session_ns(coll)[0]
    kept = kit[kit["startNs"].to_numpy() >= start]  # the C++ path's filter (FilterDataByStartTime)
    put("MSTX_EVENTS", frame_of({
        "startNs": kept["startNs"].to_numpy(), "endNs": kept["endNs"].to_numpy(),
        "eventType": kept["eventType"].to_numpy(), "rangeId": np.full(len(kept), NO_RANGE, dtype=np.int64),
        "category": kept["category"].to_numpy(), "message": kept["message"].to_numpy(),
        "globalTid": kept["globalTid"].to_numpy(), "endGlobalTid": kept["globalTid"].to_numpy(),
        "domainId": kept["domainId"].to_numpy(), "connectionId": kept["connectionId"].to_numpy()}))
    return [(rd.device_id, "pid_name", str(rd.info.get("pid_name", "")))]
