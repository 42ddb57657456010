"""KIT_INFO: what each result directory's control files (info.json, sample.json) say about its device."""
from __future__ import annotations

from typing import List, Sequence, Tuple

from ..layout import ResultDir

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
