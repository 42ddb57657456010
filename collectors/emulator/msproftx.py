"""msproftx of the emulator (§1.1, §1.4 rule 9): stamps work only between start and stop of a config
with the MSPROFTX bit; otherwise create_stamp gives 0 and the other calls -1; push/pop pair per
thread, range_start returns (range_id, ret). Each call is a function over the emulator's State."""
from __future__ import annotations

import threading
from typing import Any, Dict, Optional, Tuple

from ..acl_codes import ACL_ERROR_INVALID_PARAM, ACL_PROF_MSPROFTX, ACL_SUCCESS, PROFILING_FAILED
from .state import HANDLE_BASE, Collection, State, monotonic_raw_ns
from .tree import write_event


def _tx_collection(s: State) -> Optional[Collection]:
    for coll in s.started.values():
        if coll.data_types & ACL_PROF_MSPROFTX:
            return coll
    return None


def create_stamp(s: State) -> int:
    """acl.prof.create_stamp: a new stamp handle, or 0 when no running collection records msproftx."""
    if _tx_collection(s) is None:
        return 0
    s.next_handle += 1
    stamp = HANDLE_BASE + 0x40 * s.next_handle + 0x8
    s.stamps[stamp] = ""
    return stamp


def destroy_stamp(s: State, stamp: Any) -> None:
    """acl.prof.destroy_stamp: forget a stamp handle."""
    s.stamps.pop(stamp, None)
    return None


def set_message(s: State, stamp: Any, msg: Any, msg_len: Any) -> int:
    """acl.prof.set_stamp_trace_message: give a stamp its message (checked as the runtime checks it)."""
    if _tx_collection(s) is None:
        return PROFILING_FAILED
    if stamp not in s.stamps or not isinstance(msg, str) or not isinstance(msg_len, int):
        return ACL_ERROR_INVALID_PARAM
    raw = msg.encode("utf-8")
    if not 0 < msg_len <= len(raw):
        return ACL_ERROR_INVALID_PARAM  # [INFER]
    s.stamps[stamp] = raw[:msg_len].decode("utf-8", errors="replace")
    return ACL_SUCCESS


def _tx_event(s: State, kind: str, stamp: Optional[int], **extra: Any) -> int:
    coll = _tx_collection(s)
    if coll is None:
        return PROFILING_FAILED
    if stamp is not None and stamp not in s.stamps:
        return PROFILING_FAILED
    record: Dict[str, Any] = {"kind": kind, "ts_ns": monotonic_raw_ns(), "tid": threading.get_ident()}
    if stamp is not None:
        record["message"] = s.stamps[stamp]
    record.update(extra)
    write_event(coll, record)
    return ACL_SUCCESS


def mark(s: State, stamp: Any) -> int:
    """acl.prof.mark: record an instant marker from the stamp."""
    return _tx_event(s, "mark", stamp)


def push(s: State, stamp: Any) -> int:
    """acl.prof.push: record a push from the stamp and remember it on this thread's stack."""
    ret = _tx_event(s, "push", stamp)
    if ret == ACL_SUCCESS:
        s.pushed.setdefault(threading.get_ident(), []).append(stamp)
    return ret


def pop(s: State) -> int:
    """acl.prof.pop: record a pop of this thread's latest push."""
    stack = s.pushed.get(threading.get_ident())
    if _tx_collection(s) is None or not stack:
        return PROFILING_FAILED
    stamp = stack.pop()
    msg = s.stamps.get(stamp, "")
    coll = _tx_collection(s)
    assert coll is not None
    write_event(coll, {"kind": "pop", "ts_ns": monotonic_raw_ns(), "tid": threading.get_ident(),
                       "message": msg})
    return ACL_SUCCESS


def range_start(s: State, stamp: Any) -> Tuple[int, int]:
    """acl.prof.range_start: record the start of a range; returns the status and the range id."""
    range_id = s.next_range
    ret = _tx_event(s, "range_start", stamp, range_id=range_id)
    if ret != ACL_SUCCESS:
        return 0, ret
    s.next_range += 1
    s.ranges[range_id] = stamp
    return range_id, ACL_SUCCESS


def range_stop(s: State, range_id: Any) -> int:
    """acl.prof.range_stop: record the end of a started range."""
    if range_id not in s.ranges:
        return PROFILING_FAILED
    ret = _tx_event(s, "range_stop", None, range_id=range_id)
    if ret == ACL_SUCCESS:
        del s.ranges[range_id]
    return ret
