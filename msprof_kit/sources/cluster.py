"""A cluster analysis output folder (`cluster_analysis_output/`, as `msprof-kit cluster` and
msprof-analyze write it) read for `show` and `plot`: cluster_step_trace_time.csv,
cluster_communication.json, cluster_communication_matrix.json, slow_ranks.csv, slow_links.csv.

Only the files are read (with pandas / json); the cluster package that writes them is not imported.
Times are µs as in the step trace, wait and transit times ms as in the communication JSON,
bandwidths GB/s.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

import numpy as np
import pandas as pd

from ..errors import NoData, UnreadableFile
from ..files import read_json_object

OUTPUT_FOLDER = "cluster_analysis_output"
STEP_TRACE_CSV = "cluster_step_trace_time.csv"
COMMUNICATION_JSON = "cluster_communication.json"
MATRIX_JSON = "cluster_communication_matrix.json"
SLOW_RANKS_CSV = "slow_ranks.csv"
SLOW_LINKS_CSV = "slow_links.csv"
MARKERS = (STEP_TRACE_CSV, COMMUNICATION_JSON)
LOOKED_FOR_CLUSTER = (f"{OUTPUT_FOLDER}/ (or its files: {STEP_TRACE_CSV}, {COMMUNICATION_JSON}, {MATRIX_JSON}, "
                      f"{SLOW_RANKS_CSV}, {SLOW_LINKS_CSV})")
TOTAL = "Total Op Info"
SUMMARY_COLUMNS = ["Rank", "Computing(us)", "Communication(Not Overlapped)(us)", "Free(us)", "Overlapped(us)",
                   "Wait(ms)", "Transit(ms)", "Wait Ratio"]


def cluster_output_dir(path: str) -> Optional[str]:
    """The cluster output folder `path` is, or holds as cluster_analysis_output/; None if neither."""
    for folder in (path, os.path.join(path, OUTPUT_FOLDER)):
        if os.path.isdir(folder) and any(os.path.isfile(os.path.join(folder, m)) for m in MARKERS):
            return folder
    return None


@dataclass
class ClusterFiles:
    """What a cluster output folder holds (None for a file it has not)."""

    folder: str
    step_trace: Optional[pd.DataFrame]
    communication: Optional[Dict[str, Any]]
    matrix: Optional[Dict[str, Any]]
    slow_ranks: Optional[pd.DataFrame]
    slow_links: Optional[pd.DataFrame]

    def source(self, name: str) -> str:
        """The path of one of the folder's files."""
        return os.path.join(self.folder, name)


def _csv(path: str, **kwargs: Any) -> Optional[pd.DataFrame]:
    if not os.path.isfile(path):
        return None
    try:
        return pd.read_csv(path, **kwargs)
    except (OSError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as e:
        first = str(e).splitlines()[0] if str(e) else repr(e)
        raise UnreadableFile(f"not a readable CSV: {first}", path=path) from None


def _json(path: str) -> Optional[Dict[str, Any]]:
    return read_json_object(path) if os.path.isfile(path) else None


def read_cluster(path: str) -> ClusterFiles:
    """The files of the cluster output folder at or in `path` (cluster_output_dir); NoData when there
    is none, UnreadableFile naming a file that cannot be read."""
    folder = cluster_output_dir(path)
    if folder is None:
        raise NoData(f"no cluster analysis output here; looked for {LOOKED_FOR_CLUSTER}", path=path)
    step = _csv(os.path.join(folder, STEP_TRACE_CSV), dtype={"Step": str, "Type": str, "Index": str},
                keep_default_na=False)
    if step is not None:
        needed = ["Type", "Index", "Computing", "Communication(Not Overlapped)", "Free"]
        missing = [c for c in needed if c not in step.columns]
        if missing:
            raise UnreadableFile(f"not a cluster step trace: no column {', '.join(missing)}",
                                 path=os.path.join(folder, STEP_TRACE_CSV))
    return ClusterFiles(folder, step, _json(os.path.join(folder, COMMUNICATION_JSON)),
                        _json(os.path.join(folder, MATRIX_JSON)), _csv(os.path.join(folder, SLOW_RANKS_CSV)),
                        _csv(os.path.join(folder, SLOW_LINKS_CSV), dtype={"link": str}))


def rank_waits(communication: Dict[str, Any]) -> pd.DataFrame:
    """Per rank its wait and transit time (ms) summed over the Total Op Info of every group."""
    rows = []
    for steps in communication.values():
        for ops in steps.values():
            for key, ranks in ops.items():
                if not key.startswith(TOTAL + "@") or not isinstance(ranks, dict):
                    continue
                for rank, info in ranks.items():
                    time = info.get("Communication Time Info", {})
                    rows.append((int(rank), float(time.get("Wait Time(ms)", 0) or 0),
                                 float(time.get("Transit Time(ms)", 0) or 0)))
    frame = pd.DataFrame(rows, columns=["Rank", "Wait(ms)", "Transit(ms)"])
    return frame.groupby("Rank")[["Wait(ms)", "Transit(ms)"]].sum().reset_index()


def rank_summary(files: ClusterFiles) -> Optional[pd.DataFrame]:
    """One row per rank: computing, communication not overlapped, free and overlapped time (µs) from
    the step trace; wait and transit time (ms) and the wait ratio wait / (wait + transit) from the
    communication JSON. Ranks in the order of slow_ranks.csv when there is one, else by rank."""
    parts: List[pd.DataFrame] = []
    if files.step_trace is not None:
        rows = files.step_trace[files.step_trace["Type"].astype(str) == "rank"]
        parts.append(pd.DataFrame({
            "Rank": pd.to_numeric(rows["Index"]).astype("int64").to_numpy(),
            "Computing(us)": pd.to_numeric(rows["Computing"]).to_numpy(np.float64),
            "Communication(Not Overlapped)(us)": pd.to_numeric(rows["Communication(Not Overlapped)"]).to_numpy(
                np.float64),
            "Free(us)": pd.to_numeric(rows["Free"]).to_numpy(np.float64),
            "Overlapped(us)": pd.to_numeric(rows["Overlapped"]).to_numpy(np.float64)
            if "Overlapped" in rows.columns else np.nan}))
    if files.communication is not None:
        parts.append(rank_waits(files.communication))
    if not parts:
        return None
    out = parts[0]
    for part in parts[1:]:
        out = out.merge(part, on="Rank", how="outer")
    for column in SUMMARY_COLUMNS:
        if column not in out.columns:
            out[column] = np.nan
    wait = out["Wait(ms)"].to_numpy(np.float64)
    whole = wait + out["Transit(ms)"].to_numpy(np.float64)
    out["Wait Ratio"] = np.divide(wait, whole, out=np.full(len(out), np.nan), where=whole > 0)
    out = out.sort_values("Rank", kind="stable")
    if files.slow_ranks is not None and "rank" in files.slow_ranks.columns:
        order = {int(r): i for i, r in enumerate(files.slow_ranks["rank"])}
        out = out.sort_values("Rank", key=lambda ranks: ranks.map(lambda r: order.get(int(r), len(order))),
                              kind="stable")
    return out[SUMMARY_COLUMNS].reset_index(drop=True)


def link_bandwidth(files: ClusterFiles) -> Optional[pd.DataFrame]:
    """Per (src, dst, transport) between two ranks: transit size (MB), time (ms) and bandwidth (GB/s)
    summed over the Total Op Info of every group of cluster_communication_matrix.json; from
    slow_links.csv when the folder has no matrix JSON."""
    if files.matrix is not None:
        rows = []
        for steps in files.matrix.values():
            for ops in steps.values():
                for key, links in ops.items():
                    if not key.startswith(TOTAL + "@") or not isinstance(links, dict):
                        continue
                    for link, value in links.items():
                        src, _, dst = str(link).partition("-")
                        if src != dst:
                            rows.append((int(src), int(dst), str(value.get("Transport Type", "")),
                                         float(value.get("Transit Size(MB)", 0) or 0),
                                         float(value.get("Transit Time(ms)", 0) or 0)))
        frame = pd.DataFrame(rows, columns=["src", "dst", "transport", "size_mb", "time_ms"])
        frame = frame.groupby(["src", "dst", "transport"])[["size_mb", "time_ms"]].sum().reset_index()
        size = frame["size_mb"].to_numpy(np.float64)
        time = frame["time_ms"].to_numpy(np.float64)
        frame["gbps"] = np.divide(size, time, out=np.full(len(frame), np.nan), where=time > 0)
        return frame if len(frame) else None
    links = files.slow_links
    if links is None or not {"link", "transport", "bandwidth_gbps"} <= set(links.columns):
        return None
    ends = [str(link).partition("-") for link in links["link"]]
    return pd.DataFrame({"src": [int(e[0]) for e in ends], "dst": [int(e[2]) for e in ends],
                         "transport": links["transport"].astype(str),
                         "size_mb": links.get("transit_size_mb", np.nan), "time_ms": links.get("transit_time_ms", np.nan),
                         "gbps": links["bandwidth_gbps"].astype(np.float64)})
