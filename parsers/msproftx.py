"""msproftx / mstx host records (`additional.msproftx`, 256 bytes; formats_more.md §3.4): markers and
ranges of the legacy msproftx API (info type 0) and of mstx (info type 1, whose message may be split
over several records with the same mark id, numbered by `seg_idx`).

Pure functions from records already read to column arrays; times stay host counter ticks."""
from __future__ import annotations

from typing import Dict

import numpy as np
import pandas as pd

from .records import Record, checked
from .stream import Columns

MSPROFTX = checked(Record("msproftx", [
    ("magic", "H", "0x5A5A"),
    ("level", "H", "reporting level (20500 for msproftx; not checked by the reference)"),
    ("type", "I", "type within the level"),
    ("thread_id", "I", "OS thread id of the reporter"),
    ("data_len", "I", "meaningful payload bytes"),
    ("timestamp", "Q", "host counter ticks of the report"),
    ("info_type", "H", "0 legacy msproftx, 1 mstx (msproftx_parser.py:49-50)"),
    ("seg_idx", "H", "mstx: index of this record's piece of the message, from 0"),
    ("_rsv", "6x", "(u32, u16) not used"),
    ("data_tag", "H", ""),
    ("process_id", "I", "pid of the reporting process"),
    ("tid", "I", "tid of the reporting thread"),
    ("category", "I", "legacy msproftx category"),
    ("event_type", "I", "0 marker, 1 push/pop, 2 start/end, 3 marker_ex"),
    ("payload_type", "i", "legacy msproftx payload type"),
    ("payload_value", "Q", "legacy msproftx payload value"),
    ("start_time", "Q", "host counter ticks"),
    ("end_time", "Q", "host counter ticks; 0 when the range was never closed"),
    ("mark_id", "Q", "mstx: the range's id (its records share it)"),
    ("domain", "Q", "mstx: hash id of the domain name (hash_dic)"),
    ("message_type", "i", "legacy msproftx message type"),
    ("message", "156s", "NUL-terminated UTF-8 (an mstx piece of the message)"),
], size=256))

INFO_LEGACY, INFO_MSTX = 0, 1
#: the event types (ENUM_MSTX_EVENT_TYPE), and those that span a range from a start to an end
EVENT_TYPES: Dict[int, str] = {0: "marker", 1: "push/pop", 2: "start/end", 3: "marker_ex"}
RANGE_TYPES = (1, 2)


def messages(arr: np.ndarray) -> np.ndarray:
    """The `message` of each msproftx record up to its first NUL, decoded as UTF-8 (bad bytes
    replaced; each distinct message once): an object array of str."""
    width = MSPROFTX.dtype["message"].itemsize
    at = MSPROFTX.offset_of("message")
    whole = np.ascontiguousarray(arr).view(np.uint8).reshape(len(arr), MSPROFTX.size)
    cut = whole[:, at:at + width].copy()
    nul = cut == 0
    first = np.where(nul.any(axis=1), nul.argmax(axis=1), width)
    cut[np.arange(width, dtype=np.int16) >= first[:, None]] = 0
    text = np.ascontiguousarray(cut).view(f"S{width}").ravel()  # (an S array drops the trailing NULs)
    codes, uniq = pd.factorize(text)
    decoded = np.char.decode(np.asarray(uniq, dtype=f"S{width}"), "utf-8", errors="replace").astype(object)
    return decoded[codes] if len(decoded) else np.zeros(0, dtype=object)


def tx_columns(arr: np.ndarray, offsets: np.ndarray) -> Columns:
    """The columns of a chunk of msproftx records (fields as declared, `message` decoded) and
    their byte offsets in the stream."""
    cols: Columns = {name: np.ascontiguousarray(arr[name]) for name in (arr.dtype.names or ()) if name != "message"}
    cols["message"] = messages(arr)
    cols["offset"] = offsets
    return cols
