"""msprof_tx (formats_more.md §3.4): one row per msproftx / mstx event of the host, from KIT_MSTX.

Both reference paths write this file with the Python exporter (viewer/msproftx_viewer.py and
msinterface/msprof_output_summary.py `_update_msproftx_host_data`), so it is the same for both
flavours: legacy msproftx rows print their category, payload and message type, mstx rows N/A there
and their domain instead; times are local µs with 3 decimals and a TAB; rows by start time (legacy
events before mstx ones at the same start). `Device_id` is `host` and the device columns N/A: the
device side of mstx (step-trace tags 11/12 matched by mark id) is not read."""
from __future__ import annotations

from typing import List, Optional

import numpy as np
import pandas as pd

from ...schema import ENUM_ROWS
from ..context import ExportContext
from .cells import NA
from .columns import Column, Table, coded, stamps
from .tasks import load_strings

COLUMNS = ("startNs", "endNs", "eventType", "category", "message", "globalTid", "domainId", "connectionId",
           "processId", "isMstx", "markId", "payloadType", "payloadValue", "messageType")


def load_tx(ctx: ExportContext) -> Optional[pd.DataFrame]:
    """KIT_MSTX in store order (legacy events, then mstx ones), with `messageText` and `domainText`
    from STRING_IDS; None when the store has no msproftx event."""
    if not ctx.has("KIT_MSTX"):
        return None
    rows = ctx.conn.execute(f"SELECT {', '.join(COLUMNS)} FROM KIT_MSTX ORDER BY rowid").fetchall()
    if not rows:
        return None
    frame = pd.DataFrame(rows, columns=list(COLUMNS))
    strings = load_strings(ctx)
    known = np.append(strings, NA)
    for column, text in (("message", "messageText"), ("domainId", "domainText")):
        ids = frame[column].to_numpy(np.int64)
        frame[text] = known[np.where((ids >= 0) & (ids < len(strings)), ids, len(strings))]
    return frame


def event_type_texts(codes: np.ndarray) -> np.ndarray:
    """The reference's event type names (ENUM_MSTX_EVENT_TYPE), "" for an unknown code."""
    names = dict(ENUM_ROWS["ENUM_MSTX_EVENT_TYPE"])
    table = np.array([names.get(i, "") for i in range(max(names) + 1)] + [""], dtype=object)
    codes = np.asarray(codes, dtype=np.int64)
    return table[np.where((codes >= 0) & (codes < len(table) - 1), codes, len(table) - 1)]


def msprof_tx_table(ctx: ExportContext) -> Optional[Table]:
    """The msprof_tx summary; None without msproftx events."""
    tx = load_tx(ctx)
    if tx is None:
        return None
    tx = tx.iloc[np.argsort(tx["startNs"].to_numpy(), kind="stable")]
    n = len(tx)
    mstx = tx["isMstx"].to_numpy() == 1

    def legacy(values: np.ndarray) -> np.ndarray:
        return np.where(mstx, NA, values.astype(str)).astype(object)

    tid = tx["globalTid"].to_numpy(np.int64) & 0xFFFFFFFF
    payload = tx["payloadValue"].to_numpy(np.int64).view(np.uint64)
    cols: List[Column] = [
        coded("Device_id", np.full(n, "host", dtype=object)),
        coded("pid", tx["processId"].to_numpy().astype(str), number=True),
        coded("tid", tid.astype(str), number=True),
        coded("category", legacy(tx["category"].to_numpy()), number=True),
        coded("event_type", event_type_texts(tx["eventType"].to_numpy())),
        coded("payload_type", legacy(tx["payloadType"].to_numpy()), number=True),
        coded("payload_value", legacy(payload), number=True),
        stamps("Start_time(us)", tx["startNs"].to_numpy()),
        stamps("End_time(us)", tx["endNs"].to_numpy()),
        coded("message_type", legacy(tx["messageType"].to_numpy()), number=True),
        coded("message", tx["messageText"].to_numpy()),
        coded("domain", np.where(mstx, tx["domainText"].to_numpy(), NA).astype(object)),
        coded("Device Start_time(us)", np.full(n, NA, dtype=object)),
        coded("Device End_time(us)", np.full(n, NA, dtype=object)),
    ]
    return Table(cols, n)
