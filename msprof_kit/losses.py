"""Warnings for raw data that is missing or empty, naming the file and what the user loses
(issue 21, item 6; the rules are listed in docs/store.md, "Damaged input").

Looks only at the names and sizes of a result dir's slices (`layout.data_files`), never at their
bytes: the decoders report what is wrong inside a file."""
from __future__ import annotations

import os
import re
from typing import Dict, List, Tuple

import numpy as np

from .errors import Diagnostics

# what each raw stream carries, as the warning says it is lost (host kinds, then device stems)
CARRIES: Dict[str, str] = {
    "api_event": "the host API times (CANN_API, api_statistic) and the launch APIs that give device tasks "
                 "their op",
    "task_track": "the host tasks that give device tasks their op names and types",
    "node_basic_info": "the op types, GE task types, block dims and HF32 flags of the ops",
    "tensor_info": "the input and output shapes, formats and data types of the ops",
    "context_id_info": "the context ids that tie FFTS+ subtasks to their ops",
    "graph_id_map": "the model names",
    "stars_soc.data": "the device task start and end times (TASK)",
    "hwts.data": "the device task start and end times (TASK)",
    "ffts_profile.data": "the PMU metrics of the device tasks",
    "aicore.data": "the AI Core PMU metrics of the device tasks",
    "ts_track.data": "the step trace and task-id wrap records",
}
DICTIONARIES = ("hash_dic", "type_info_dic")  # checked once parsed (ingest.names.read_dictionary): "no entries"
TASK_LOGS = {"stars": "stars_soc.data", "hwts": "hwts.data"}
_SLICE = re.compile(r"^(?P<stem>.*\.slice_)(?P<n>\d+)$")


def _carries(kind: str) -> str:
    return CARRIES.get(kind, "its records")


def _size(path: str) -> int:
    """The size of a slice; -1 when it cannot be told (the reader then reports the file)."""
    try:
        return os.stat(path).st_size
    except OSError:
        return -1


def check_slices(files: Dict[Tuple[str, str], List[str]], diag: Diagnostics) -> None:
    """Warn of each stream whose slices are all empty, of each empty slice in a stream that has
    others with data, and of each gap in a stream's slice numbers (slices count from 0; the first
    missing one is named)."""
    for (kind, _), paths in sorted(files.items()):
        empty = [p for p in paths if _size(p) == 0]
        if kind not in DICTIONARIES and empty and len(empty) == len(paths):
            many = f" (as are all {len(paths)} slices of this stream)" if len(paths) > 1 else ""
            diag.warn(f"{paths[0]}: empty{many}; {_carries(kind)} are lost")
        elif kind not in DICTIONARIES and empty:
            more = f" (and {len(empty) - 1} more of its slices)" if len(empty) > 1 else ""
            diag.warn(f"{empty[0]}: empty{more} while other slices of the stream hold data; its share of "
                      f"{_carries(kind)} is lost")
        parsed = [_SLICE.match(os.path.basename(p)) for p in paths]
        numbers = np.array([int(m["n"]) for m in parsed if m], dtype=np.int64)
        if not len(numbers) or len(numbers) == numbers.max() + 1:
            continue
        absent = np.setdiff1d(np.arange(numbers.max() + 1), numbers)
        first = parsed[0]
        assert first is not None
        name = os.path.join(os.path.dirname(paths[0]), f"{first['stem']}{absent[0]}")
        others = f" (and {len(absent) - 1} more of slices 0..{numbers.max()})" if len(absent) > 1 else ""
        diag.warn(f"{name}: missing{others} while later slices are there; its share of {_carries(kind)} "
                  f"is lost")


def check_task_log(files: Dict[Tuple[str, str], List[str]], data_dir: str, device_id: int, family: str,
                   diag: Diagnostics) -> None:
    """Warn when a device has raw data but not the log its tasks come from."""
    stem = TASK_LOGS[family]
    if files and (stem, "") not in files:
        diag.warn(f"{data_dir}: no {stem}.{device_id}.slice_N while other raw data is there; "
                  f"{_carries(stem)} of device {device_id} are lost, and its PMU records match no task")
