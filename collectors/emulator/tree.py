"""The synthetic PROF tree the emulator writes (§1.5): the PROF_xxx name, the EMULATED marker, the
control files real in shape only (info.json, sample.json, start_info, end_info), an empty data/,
and the emulator's own events file. Nothing here pretends to be real device data."""
from __future__ import annotations

import datetime
import json
import os
import random
import time
from typing import Any, Dict, Tuple

from ..acl_codes import AICORE_METRICS, DATA_TYPE_BITS
from .state import ANNOUNCEMENT, EVENTS, MARKER, SAMPLE_SWITCHES, Collection, monotonic_raw_ns


def prof_name(index: int, rng: random.Random) -> str:
    """`PROF_<6-digit index>_<YYYYmmddHHMMSSfff>_<8-digit pid><8 letters A-R>`."""
    now = datetime.datetime.now()
    stamp = now.strftime("%Y%m%d%H%M%S") + f"{now.microsecond // 1000:03d}"
    letters = "".join(rng.choice("ABCDEFGHIJKLMNOPQR") for _ in range(8))
    return f"PROF_{index:06d}_{stamp}_{os.getpid() % 10**8:08d}{letters}"


def open_collection(path: str, devices: Tuple[int, ...], data_types: int, handle: int, metrics: int, source: str,
                    owner: str) -> Collection:
    """Write the PROF tree at `path` as a start makes it (`source`: the call, `owner`: the emulator's
    repr, both named in the marker file)."""
    os.makedirs(path)
    with open(os.path.join(path, MARKER), "w", encoding="utf-8") as f:
        f.write(f"{ANNOUNCEMENT}.\nWritten by {source} in process {os.getpid()} ({owner}).\n"
                "The control files are real in shape only; data/ holds no device data.\n")
    sample: Dict[str, object] = {"data_type_config": f"0x{data_types:x}"}
    sample.update({key: ("on" if data_types & DATA_TYPE_BITS[bit] else "off") for key, bit in SAMPLE_SWITCHES})
    sample["ai_core_metrics"] = AICORE_METRICS.get(metrics, "")
    begin = _time_info(begin=True)
    for sub, suffix, dev in [("host", "", "64")] + [(f"device_{d}", f".{d}", str(d)) for d in devices]:
        folder = os.path.join(path, sub)
        os.makedirs(os.path.join(folder, "data"))
        _write_json(os.path.join(folder, f"info.json{suffix}"),
                    {"emulated": True, "jobInfo": "NA", "pid": str(os.getpid()), "devices": dev,
                     "DeviceInfo": []})
        _write_json(os.path.join(folder, "sample.json"), {"emulated": True, "devices": dev, **sample})
        _write_json(os.path.join(folder, f"start_info{suffix}"), begin)
    return Collection(path, devices, data_types, handle)


def close_collection(coll: Collection) -> None:
    """Write the end_info files of a collection at its stop (once)."""
    if coll.closed:
        return
    end = _time_info(begin=False)
    for sub, suffix in [("host", "")] + [(f"device_{d}", f".{d}") for d in coll.devices]:
        _write_json(os.path.join(coll.path, sub, f"end_info{suffix}"), end)
    coll.closed = True


def write_event(coll: Collection, record: Dict[str, Any]) -> None:
    """Append one event (a JSON object) to the collection's host/data/emulated_events.jsonl."""
    with open(os.path.join(coll.path, "host", "data", EVENTS), "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")


def _time_info(begin: bool) -> Dict[str, str]:
    """start_info / end_info fields (§1.5): local date, µs since the epoch, CLOCK_MONOTONIC_RAW ns."""
    now_us = time.time_ns() // 1000
    date = datetime.datetime.fromtimestamp(now_us / 1e6).strftime("%Y-%m-%d %H:%M:%S.%f")
    raw = str(monotonic_raw_ns())
    if begin:
        return {"emulated": "true", "collectionDateBegin": date, "collectionDateEnd": "",
                "collectionTimeBegin": str(now_us), "collectionTimeEnd": "", "clockMonotonicRaw": raw}
    return {"emulated": "true", "collectionDateBegin": "", "collectionDateEnd": date,
            "collectionTimeBegin": "", "collectionTimeEnd": str(now_us), "clockMonotonicRaw": raw}


def _write_json(path: str, obj: object) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f)
