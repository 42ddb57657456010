"""parsers/msproftx.py: the 256-byte msproftx record and its messages (packed from the same spec)."""
from __future__ import annotations

import numpy as np

from msprof_kit.ingest.names import HashTable
from msprof_kit.parsers.msproftx import MSPROFTX, tx_columns
from msprof_kit.parsers.records import pack


def decode(*records: bytes) -> dict:
    arr = np.frombuffer(b"".join(records), dtype=MSPROFTX.dtype)
    return tx_columns(arr, np.arange(len(arr)) * MSPROFTX.size)


def test_layout_offsets() -> None:
    # formats_more.md §3.4
    assert MSPROFTX.size == 256
    assert [MSPROFTX.offset_of(n) for n in ("info_type", "seg_idx", "data_tag", "process_id", "event_type",
                                            "payload_value", "start_time", "mark_id", "message_type", "message")] == \
        [24, 26, 34, 36, 48, 56, 64, 80, 96, 100]


def test_messages_to_the_first_nul() -> None:
    full = "x" * 156                      # no NUL at all: the whole field
    cols = decode(pack(MSPROFTX, message=b"step_0\x00junk", start_time=5, end_time=9, event_type=2),
                  pack(MSPROFTX, message=full.encode()),
                  pack(MSPROFTX, message=b"bad \xff byte"),
                  pack(MSPROFTX, message=b"step_0"))
    assert cols["message"].tolist() == ["step_0", full, "bad \ufffd byte", "step_0"]
    assert cols["start_time"].tolist()[0] == 5 and cols["event_type"].tolist()[0] == 2
    assert cols["offset"].tolist() == [0, 256, 512, 768]


def test_mstx_pieces_joined_in_seg_order() -> None:
    """Pieces of two interleaved mstx ranges, out of order: joined by seg_idx, events in the order
    their mark id first appears, after the legacy events; the other fields from piece 0."""
    from msprof_kit.errors import Diagnostics
    from msprof_kit.ingest.msproftx import FIELDS, _events

    def mstx(mark: int, seg: int, text: str, start: int) -> bytes:
        return pack(MSPROFTX, info_type=1, seg_idx=seg, mark_id=mark, message=text.encode(), event_type=2,
                    start_time=start, end_time=start + 10, domain=7)

    cols = decode(mstx(9, 2, "c", 300), mstx(4, 1, "B", 200), mstx(9, 0, "a", 100), mstx(4, 0, "A", 201),
                  pack(MSPROFTX, info_type=0, message=b"legacy", event_type=0, start_time=50, end_time=50),
                  mstx(9, 1, "b", 101))
    diag = Diagnostics()
    events = _events({k: cols[k] for k in FIELDS}, HashTable.of({7: "default"}), "slice", diag)
    assert events["message"].tolist() == ["legacy", "abc", "AB"]
    assert events["start_time"].tolist() == [50, 100, 201]
    assert events["domain_text"].tolist() == ["", "default", "default"]
    assert diag.warnings == []
