"""KIT_INFO: what each result directory's control files (info.json, sample.json) say about its device."""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

from ..errors import Diagnostics
from ..layout import Collection, ResultDir

SAMPLE_KEYS = ("ai_core_metrics", "aiv_metrics", "ai_core_profiling_events", "aiv_profiling_events")


def device_info_rows(rd: ResultDir, info: List[Tuple[int, str, str]], sample_keys: Sequence[str] = SAMPLE_KEYS
                     ) -> None:
    """KIT_INFO rows of a result directory: its folder, pid, the sample settings named and the
    device's counts and frequencies."""
    info.append((rd.device_id, "dir", rd.name))
    pid = str(rd.info.get("pid", "")).strip()
    if pid.isdigit():
        info.append((rd.device_id, "pid", pid))
    for key in sample_keys:
        if key in rd.sample:
            info.append((rd.device_id, key, str(rd.sample[key])))
    di = rd.device_info()
    for key in ("aic_frequency", "ai_core_num", "aiv_num", "hwts_frequency"):
        if key in di:
            info.append((rd.device_id, key, str(di[key])))


def _rank_text(rd: Optional[ResultDir]) -> Optional[int]:
    if rd is None:
        return None
    value = str(rd.info.get("rank_id", "")).strip()
    return int(value) if value.lstrip("-").isdigit() else None


def rank_of(rd: ResultDir, coll: Collection, diag: Diagnostics) -> int:
    """RANK_DEVICE_MAP's rank id of a device: `rank_id` of its info.json (of the host's when the
    device's has none), -1 when neither gives one. A host and device that disagree are warned of,
    and the device's is kept (the device's data is the rank's)."""
    device, host = _rank_text(rd), _rank_text(coll.host)
    if device is not None and host is not None and device != host:
        diag.warn(f"{rd.path}: its info.json says rank_id {device}, the host's info.json says {host}; "
                  f"RANK_DEVICE_MAP keeps the device's")
    got = device if device is not None else host
    return -1 if got is None else got
