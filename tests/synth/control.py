"""The control files of a result folder: info.json, sample.json, start_info, end_info,
host_start.log and (for a device) dev_start.log."""
from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from typing import Dict, Optional, Tuple

from .conventions import HOST_CNTVCT0, HOST_FREQ_MHZ, HOST_MONO0_NS, PID, WALL0_US, ChipProfile


def _wall_text(mono_ns: int) -> Tuple[str, str]:
    """(collectionTime us text, collectionDate text, UTC) of a host monotonic time in ns."""
    us = WALL0_US + (mono_ns - HOST_MONO0_NS) // 1000
    date = datetime.fromtimestamp(us // 10 ** 6, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    return str(us), f"{date}.{us % 10 ** 6:06d}"


def _info_json(profile: ChipProfile, device: Optional[int]) -> Dict[str, object]:
    info: Dict[str, object] = {
        "jobInfo": "NA", "hostname": "localhost", "OS": "Linux", "hwtype": "aarch64", "pid": PID,
        "pid_name": "python3", "platform_version": profile.platform_version, "drvVersion": 467732,
        "version": "1.0", "cannVersion": "8.0.0", "rank_id": -1,
        "CPU": [{"Id": 0, "Name": "HiSilicon", "Frequency": f"{HOST_FREQ_MHZ:.6f}", "Logical_CPU_Count": 4,
                 "Type": "TaishanV110"}],
        "cpuCores": 4, "sysClockFreq": 100, "cpuNums": 4, "memoryTotal": 16000000, "netCardNums": 0,
        "netCard": [], "upTime": "1000", "devices": "64" if device is None else str(device), "DeviceInfo": [],
    }
    if device is not None:
        info["DeviceInfo"] = [{
            "id": device, "env_type": 3, "ctrl_cpu_id": "ARMv8_Cortex_A55", "ctrl_cpu_core_num": 1,
            "ctrl_cpu_endian_little": 1, "ts_cpu_core_num": 1, "ai_cpu_core_num": 6,
            "ai_core_num": profile.ai_core_num, "ai_cpu_core_id": 1, "ai_core_id": 0, "aicpu_occupy_bitmap": 126,
            "ctrl_cpu": "0", "ai_cpu": "1,2,3,4,5,6", "aiv_num": profile.aiv_num,
            "hwts_frequency": profile.hwts_frequency, "aic_frequency": profile.aic_frequency,
            "aiv_frequency": profile.aic_frequency,
        }]
    return info


def _sample_json(profile: ChipProfile, device: Optional[int]) -> Dict[str, object]:
    return {
        "devices": "64" if device is None else str(device), "jobId": "NA", "result_dir": "", "profLevel": "l1",
        "taskTime": "l1", "ascendcl": "on", "runtime_api": "on", "task_trace": "on", "ts_timeline": "on",
        "hwts_log": "on", "ai_core_profiling": "on", "ai_core_profiling_mode": "task-based",
        "ai_core_metrics": profile.aic_metrics, "aiv_profiling": "on", "aiv_profiling_mode": "task-based",
        "aiv_metrics": profile.aiv_metrics, "ai_core_profiling_events": profile.aic_events,
        "aiv_profiling_events": profile.aiv_events, "llc_profiling": "", "instr_profiling_freq": 1000,
        "aicore_sampling_interval": 10, "aiv_sampling_interval": 10,
    }


def write_text(path: str, text: str) -> None:
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)


def write_control(result_dir: str, profile: ChipProfile, device: Optional[int], end_ns: int) -> None:
    suffix = "" if device is None else f".{device}"
    begin_us, begin_date = _wall_text(HOST_MONO0_NS)
    end_us, end_date = _wall_text(end_ns)
    start_info = {"collectionDateBegin": begin_date, "collectionDateEnd": "", "collectionTimeBegin": begin_us,
                  "collectionTimeEnd": "", "clockMonotonicRaw": str(HOST_MONO0_NS)}
    end_info = {"collectionDateBegin": "", "collectionDateEnd": end_date, "collectionTimeBegin": "",
                "collectionTimeEnd": end_us, "clockMonotonicRaw": str(end_ns)}
    realtime = f"clock_realtime: {WALL0_US * 1000}\n"
    host_start = (f"[{'Host' if device is None else f'Device{device}'}]\n{realtime}"
                  f"clock_monotonic_raw: {HOST_MONO0_NS}\ncntvct: {HOST_CNTVCT0}\ncntvct_diff: 0\n")
    write_text(os.path.join(result_dir, f"info.json{suffix}"), json.dumps(_info_json(profile, device)))
    write_text(os.path.join(result_dir, "sample.json"), json.dumps(_sample_json(profile, device)))
    write_text(os.path.join(result_dir, f"start_info{suffix}"), json.dumps(start_info))
    write_text(os.path.join(result_dir, f"end_info{suffix}"), json.dumps(end_info))
    write_text(os.path.join(result_dir, f"host_start.log{suffix}"), host_start)
    if device is not None:
        write_text(os.path.join(result_dir, f"dev_start.log{suffix}"),
                   f"{realtime}clock_monotonic_raw: {HOST_MONO0_NS}\ncntvct: {profile.dev_cntvct(device)}\n")
