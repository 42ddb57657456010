"""Clocks from the control files: the collection's start and end (start_info, end_info), the wall
clock offset, and the host's and each device's counter clocks (host_start.log, dev_start.log)."""
from __future__ import annotations

import json
import os
from fractions import Fraction
from typing import Dict, Optional, Sequence, Tuple

from ..errors import BadControlFile, Diagnostics, MissingControlFile
from ..layout import FREQ_TEXT, Collection, ResultDir
from ..timebase import Clock, device_clock, host_clock, wall_offset_ns

# control-file times (ns) and counters must stay below this (146 years of ns), so that a sum of two
# still fits the int64 ns of the store
NS_LIMIT = 1 << 62


def control_times(rds: Sequence[ResultDir]) -> Tuple[int, int]:
    """(start, end) in local ns: the first collectionTimeBegin of their start_info and the first
    collectionTimeEnd of their end_info (µs there); 0 where none has one."""
    start = end = 0
    for rd in rds:
        b = str(rd.start_info.get("collectionTimeBegin", "") or "")
        e = str(rd.end_info.get("collectionTimeEnd", "") or "")
        if b.isdigit() and not start and int(b) < NS_LIMIT // 1000:
            start = int(b) * 1000
        if e.isdigit() and not end and int(e) < NS_LIMIT // 1000:
            end = int(e) * 1000
    return start, end


def _start_info(rd: ResultDir, coll: Collection) -> Dict[str, object]:
    if rd.start_info.get("collectionTimeBegin") not in (None, ""):
        return rd.start_info
    for other in coll.result_dirs():
        if other.start_info.get("collectionTimeBegin") not in (None, ""):
            return other.start_info
    raise MissingControlFile("no start_info with collectionTimeBegin and clockMonotonicRaw; expected "
                             "start_info (host) or start_info.N (device) to place times on the wall clock",
                             path=rd.path)


def _control_int(value: int, name: str, path: str, unit: str = "ns", scale: int = 1, signed: bool = False) -> int:
    """`value` of control-file field `name` checked to be within +-NS_LIMIT ns (`scale` `unit`s
    making one ns; not negative unless `signed`)."""
    high = NS_LIMIT // scale
    low = -high if signed else 0
    if not low <= value < high:
        raise BadControlFile(f"{name} {value} is out of range; expected {unit} from {low} to below {high}", path=path)
    return value


def _in_range(clock: Clock, path: str) -> Clock:
    """`clock`, once its sync point is known to fit int64 ns."""
    if not -(1 << 63) <= clock.base_ns < (1 << 63):
        raise BadControlFile(f"the sync point falls at {clock.base_ns} ns, beyond 64 bits; expected "
                             f"cntvct_diff and clock_monotonic_raw to give a time within 64-bit ns", path=path)
    return clock


def wall_offset(rd: ResultDir, coll: Collection) -> int:
    """ns to add to CLOCK_MONOTONIC_RAW ns for ns since the Unix epoch (start_info's collectionTimeBegin
    - clockMonotonicRaw; another result dir's start_info when this one has none)."""
    info = _start_info(rd, coll)
    path = rd.files.get("start_info", rd.path)
    try:
        begin, mono = int(str(info["collectionTimeBegin"])), int(str(info.get("clockMonotonicRaw", 0)))
    except (KeyError, ValueError) as exc:
        raise MissingControlFile(f"start_info lacks a numeric collectionTimeBegin / clockMonotonicRaw ({exc})",
                                 path=path) from exc
    return wall_offset_ns(_control_int(begin, "collectionTimeBegin", path, "microseconds since the Unix epoch", 1000),
                          _control_int(mono, "clockMonotonicRaw", path))


def end_info_problem(rd: ResultDir) -> Optional[str]:
    """What keeps a result directory's end_info from giving the collection's end, or None."""
    if "end_info" not in rd.files:
        return f"{rd.path}: no end_info"
    value = rd.end_info.get("collectionTimeEnd")
    text = str(value if value is not None else "")
    if text.isdigit() and int(text) < NS_LIMIT // 1000:
        return None
    return f"{rd.files['end_info']}: collectionTimeEnd is {json.dumps(value)}, not µs since the Unix epoch"


def session_ns(coll: Collection) -> Tuple[int, int]:
    """(start, end) of the collection in local ns, from start_info / end_info."""
    start, end = control_times(coll.result_dirs())
    if start and not end:
        end = start + 30 * 60 * 10 ** 9  # the reference's default when end_info is absent
    return start, end


def missing_host_start(rd: ResultDir, freq: Fraction) -> str:
    """The warning for a host dir without host_start.log whose info.json gives a counter frequency.

    The reference's Python path (common_func/info_conf_reader.py `_check_monotonic_and_cnt`) then
    sets the host frequency to its default (1e9 Hz): host timestamps are read as ns, with no sync
    point, and only start_info's offset added. Its C++ path refuses the collection instead
    (docs/exports.md, "Deliberate differences")."""
    return (f"{os.path.join(rd.path, 'host_start.log')}: missing; as the reference does, host timestamps are taken "
            f"as CLOCK_MONOTONIC_RAW ns (its default host frequency, 1000 MHz, not CPU[0].Frequency {float(freq):g} "
            f"MHz; no sync point), placed on the wall clock by start_info (collectionTimeBegin - clockMonotonicRaw); "
            f"if they are counter ticks, host API times and durations are scaled by {float(freq) / 1000:g} and not "
            f"aligned with the device's")


def host_clock_of(rd: ResultDir, coll: Collection, diag: Diagnostics) -> Clock:
    """The host's clock: counter ticks through host_start.log and info.json's CPU frequency, or ns
    where those are missing (with a warning), placed on the wall clock by wall_offset."""
    offset = wall_offset(rd, coll)
    freq = rd.host_freq_mhz()
    if freq is None:
        problem = rd.host_freq_problem()
        if problem is not None:  # the reference's fallback (host_formats.md §3.1), said aloud
            diag.warn(f"{rd.files.get('info.json', rd.path)}: CPU[0].Frequency is {problem}; expected the host "
                      f"counter frequency in MHz ({FREQ_TEXT}), or \"\" when host timestamps are "
                      f"ns; host timestamps are read as ns, as the reference does, so host API times are wrong if "
                      f"they were counter ticks")
        return host_clock(None, 0, 0, 0, offset)
    if "host_start.log" not in rd.files:
        diag.warn(missing_host_start(rd, freq))
        return host_clock(None, 0, 0, 0, offset)
    hs = rd.host_start
    path = rd.files.get("host_start.log", rd.path)
    if "clock_monotonic_raw" not in hs or "cntvct" not in hs:
        raise MissingControlFile("host_start.log lacks clock_monotonic_raw / cntvct; expected both to convert "
                                 "host counter ticks", path=path)
    return _in_range(host_clock(freq, _control_int(hs["clock_monotonic_raw"], "clock_monotonic_raw", path),
                                _control_int(hs["cntvct"], "cntvct", path, "counter ticks"),
                                _control_int(hs.get("cntvct_diff", 0), "cntvct_diff", path, "counter ticks",
                                             signed=True), offset), path)


def device_clock_of(rd: ResultDir, coll: Collection) -> Clock:
    """A device's clock: system counter ticks (hwts_frequency) from its sync point (dev_start.log's
    cntvct at host_start.log's clock_monotonic_raw), placed on the wall clock by wall_offset."""
    offset = wall_offset(rd, coll)
    mhz = rd.hwts_mhz()
    if mhz <= 0:
        text = str(rd.device_info().get("hwts_frequency", "")).strip()
        raise MissingControlFile(f"DeviceInfo[0].hwts_frequency is {text!r}; expected the system counter "
                                 f"frequency in MHz ({FREQ_TEXT})",
                                 path=rd.files.get("info.json", rd.path))
    if "cntvct" not in rd.dev_start:
        raise MissingControlFile("no dev_start.log.N with cntvct; expected the device counter at the sync point",
                                 path=rd.files.get("dev_start.log", rd.path))
    hs_path = rd.files.get("host_start.log", rd.path)
    if "clock_monotonic_raw" not in rd.host_start:
        raise MissingControlFile("no host_start.log.N with clock_monotonic_raw; expected the host time at the "
                                 "sync point", path=hs_path)
    freq = rd.host_freq_mhz()
    host_mono = _control_int(rd.host_start["clock_monotonic_raw"], "clock_monotonic_raw", hs_path)
    if freq is not None and rd.host_start.get("cntvct_diff"):
        diff = _control_int(rd.host_start["cntvct_diff"], "cntvct_diff", hs_path, "counter ticks", signed=True)
        host_mono += round(Fraction(diff * 1000) / freq)
    dev_cnt = _control_int(rd.dev_start["cntvct"], "cntvct", rd.files.get("dev_start.log", rd.path), "counter ticks")
    return _in_range(device_clock(mhz, dev_cnt, host_mono, offset), hs_path)
