"""README.txt beside the exports: what each file in mindstudio_profiler_output/ holds.

Like the reference, it is rebuilt from the files present after every export and lists timeline
(JSON) files first, then summary (CSV) files. Unlike the reference (set order, differs run to
run), the order is alphabetical, and the descriptions are our own."""
from __future__ import annotations

import os
import re
from typing import Dict, List

from .context import OUTPUT_DIR

_KIND = re.compile(r"(_\d)?(_slice_\d+)?_\d+$")

DESCRIPTIONS: Dict[str, str] = {
    "msprof": "The timeline (Chrome trace format; open it in Perfetto, chrome://tracing or MindStudio "
              "Insight).\n"
              "\tCANN: host API calls per thread (AscendCL, model, node, runtime and communication levels).\n"
              "\tAscend Hardware: device tasks per stream, with op names, task types and ids; arrows "
              "join each node launch on the host to the tasks it started.\n"
              "\tAI Core Freq: the AI Core frequency over the collection.\n"
              "\tOverlap Analysis: when the device computed (Computing) and when it was idle (Free).",
    "step_trace": "Iterations of each model: when each one ended and how long it took (us).",
    "op_summary": "One row per operator execution on the device: model, task and stream ids, op name and type, "
                  "task type, start (local wall clock, us), duration and the wait since the previous task (us), "
                  "block numbers, tensor shapes, data types and formats, and the PMU metrics of the collected "
                  "metric group (aicore_time = time on the AI Cores, <pipe>_time = time of each pipeline).",
    "op_statistic": "Operators grouped by op type and core type: count, total, min, average and max duration "
                    "(us), and each group's share of the device's total operator time.",
    "api_statistic": "Host API calls grouped by name and level (acl, model, node, runtime, communication): total, "
                     "count, average, min and max duration (us) and the variance.",
    "task_time": "One row per device task: kernel name, task type, stream and task ids, duration, start and "
                 "stop (us).",
    "msprof_tx": "The msproftx / mstx markers and ranges the application reported: process, thread, category, "
                 "event type, payload, start and end (local wall clock, us), message and mstx domain (the CSV); "
                 "their timeline layer alone, a process named after the program (the JSON).",
}


def kind_of(name: str) -> str:
    """The export kind of an output file name (`op_summary` for `op_summary_20231125090304.csv`)."""
    stem, _ = os.path.splitext(name)
    return _KIND.sub("", stem)


def readme_path(collection_path: str) -> str:
    """Where a collection's README.txt of exports goes."""
    return os.path.join(collection_path, OUTPUT_DIR, "README.txt")


def write_readme(collection_path: str) -> str:
    """Write README.txt describing each timeline and summary file the output folder holds; returns its path."""
    folder = os.path.join(collection_path, OUTPUT_DIR)
    names = sorted(os.listdir(folder)) if os.path.isdir(folder) else []
    timeline: List[str] = sorted({kind_of(n) for n in names if n.endswith(".json")})
    summary: List[str] = sorted({kind_of(n) for n in names if n.endswith(".csv")})
    lines = ["Timeline file description:"]
    lines += [f"{i}.{k}.json:{DESCRIPTIONS.get(k, 'No description for this file type.')}"
              for i, k in enumerate(timeline, 1)]
    lines += ["", "Summary file description:"]
    lines += [f"{i}.{k}.csv:{DESCRIPTIONS.get(k, 'No description for this file type.')}"
              for i, k in enumerate(summary, 1)]
    path = readme_path(collection_path)
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return path
