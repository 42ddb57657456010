"""Phase 0 of `msprof-kit cluster`: which PROF_* folder is which rank, found as msprof-analyze finds
them (cluster_data_preprocess/prof_data_allocate.py, msprof_data_preprocessor.py).

* The folders: every directory whose name starts with ``PROF_`` at most 10 levels below the
  cluster folder (the folder itself included), in the order ``os.walk`` meets them.
* A PROF's rank: ``rank_id`` of the first ``info.json.<1-2 digits>`` found in a sub-directory of
  the PROF (that is ``device_<d>/info.json.<d>``; ``host/info.json`` is not read). Its device id
  is the file name's suffix; its host is that file's ``hostUid`` and ``hostname``.
* Two PROFs with one rank: the one whose name has the newest timestamp (``PROF_<n>_<ts>_<x>``)
  wins; the others are dropped with a warning.
* ``rank_id`` -1 counts only when no PROF has a rank id: the ranks are then numbered 0, 1, ... in
  the order of (hostUid, device id), each key taking the PROF whose name sorts first by its
  timestamp (msprof-analyze's rule; with any real rank id the -1 PROFs are dropped, with a warning).
* The order of the result is msprof-analyze's data_map order (the walk order, or the fallback
  numbering), which is the row order of cluster_step_trace_time.csv.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from ..errors import BadControlFile, Diagnostics, MissingControlFile, NoCollection, PathNotFound

MAX_DEPTH = 10
PROF_PREFIX = "PROF_"
INFO_JSON = re.compile(r"^info\.json\.(\d{1,2})$")
NO_RANK = -1


@dataclass(frozen=True)
class RankInfo:
    """One rank of a cluster: its PROF folder, rank id (-1 when info.json has none), device id
    and host (info.json `hostUid`, `hostname`)."""
    path: str
    rank: int
    device: int
    host_uid: str
    host_name: str


def _limited_walk(top: str) -> List[str]:
    """The PROF_* directories under `top` (and `top` itself), at most MAX_DEPTH levels down."""
    found = [top] if os.path.basename(os.path.normpath(top)).startswith(PROF_PREFIX) else []
    base = top.count(os.sep)
    for root, dirs, _ in os.walk(top):
        if root.count(os.sep) - base > MAX_DEPTH:
            dirs.clear()
            continue
        found += [os.path.join(root, d) for d in dirs if d.startswith(PROF_PREFIX)]
    return found


def _info_json(prof: str) -> Optional[str]:
    """The first sub-directory's info.json.<d> (listing order, as msprof-analyze), or None."""
    try:
        names = os.listdir(prof)
    except OSError:
        return None
    for name in names:
        sub = os.path.join(prof, name)
        if not os.path.isdir(sub):
            continue
        try:
            inner = os.listdir(sub)
        except OSError:
            continue
        for file_name in inner:
            if INFO_JSON.match(file_name):
                return os.path.join(sub, file_name)
    return None


def read_rank(prof: str) -> RankInfo:
    """The RankInfo of one PROF folder; MissingControlFile / BadControlFile (one line naming the
    file) when its device info.json is absent or unreadable."""
    path = _info_json(prof)
    if path is None:
        raise MissingControlFile("no device_<d>/info.json.<d>: cannot tell the rank", path=prof)
    try:
        with open(path, encoding="utf-8") as f:
            info = json.load(f)
    except (OSError, ValueError) as exc:
        raise BadControlFile(f"cannot read the rank's info.json ({exc})", path=path) from exc
    if not isinstance(info, dict):
        raise BadControlFile("expected a JSON object", path=path)
    match = INFO_JSON.match(os.path.basename(path))
    device = int(match.group(1)) if match else -1
    rank = info.get("rank_id", NO_RANK)
    try:
        rank = int(rank)
    except (TypeError, ValueError):
        raise BadControlFile(f"rank_id {rank!r} is not an integer", path=path) from None
    return RankInfo(os.path.abspath(prof), rank, device, str(info.get("hostUid", "")), str(info.get("hostname", "")))


def _timestamp(path: str, position: int = -2) -> str:
    parts = os.path.basename(path).split("_")
    return parts[position] if len(parts) >= -position else ""


def find_ranks(cluster_dir: str, diag: Diagnostics, failed: Optional[Dict[str, str]] = None) -> List[RankInfo]:
    """The ranks under `cluster_dir` in msprof-analyze's data_map order. A PROF folder whose rank
    cannot be read is one line (path -> error) in `failed` when given, else a warning in `diag`.
    NoCollection when no PROF folder has a rank."""
    if not os.path.isdir(cluster_dir):
        raise PathNotFound("no such directory", path=cluster_dir)
    unreadable: Dict[str, str] = {}
    by_rank: Dict[int, List[RankInfo]] = {}
    by_host: Dict[Tuple[str, int], List[RankInfo]] = {}
    for prof in _limited_walk(cluster_dir):
        try:
            info = read_rank(prof)
        except (MissingControlFile, BadControlFile) as exc:
            unreadable[os.path.abspath(prof)] = str(exc)
            continue
        if info.rank != NO_RANK:
            by_rank.setdefault(info.rank, []).append(info)
        else:
            by_host.setdefault((info.host_uid, info.device), []).append(info)
    ranks: List[RankInfo] = []
    if by_rank:
        for rank, infos in by_rank.items():
            newest = infos[0]
            if len(infos) > 1:
                try:
                    newest = sorted(infos, key=lambda i: int(_timestamp(i.path)), reverse=True)[0]
                except ValueError:
                    pass
                dropped = [i.path for i in infos if i is not newest]
                diag.warn(f"rank {rank}: {len(infos)} PROF folders; using the newest, {newest.path} "
                          f"(not {', '.join(dropped)})")
            ranks.append(newest)
        for infos in by_host.values():
            for info in infos:
                diag.warn(f"{info.path}: rank_id -1 while other PROF folders have rank ids; left out")
    else:
        for number, key in enumerate(sorted(by_host)):
            infos = sorted(by_host[key], key=lambda i: _timestamp(i.path))
            if len(infos) > 1:
                diag.warn(f"host {key[0]} device {key[1]}: {len(infos)} PROF folders; using {infos[0].path}")
            first = infos[0]
            ranks.append(RankInfo(first.path, number, first.device, first.host_uid, first.host_name))
    if failed is not None:
        failed.update(unreadable)
    else:
        for message in unreadable.values():
            diag.warn(message)
    if not ranks:
        raise NoCollection("no PROF_* folder with a device info.json (rank) below this folder"
                           + (f" ({len(unreadable)} unreadable)" if unreadable else ""), path=cluster_dir)
    return ranks
