"""The files of a run (spec/collectors.md §5.5): its result folder, written atomically, the acl.json
it generates, and where a user's acl.json sends the profiling data."""
from __future__ import annotations

import datetime
import json
import os
import tempfile
from typing import Any, List, Mapping, Optional, Tuple, Union

from msprof_kit.errors import CollectorError, InferOptionError

from .inputs import absolute
from .plan import DUMP_DIR, PROFILER_DIR, acl_json_text

RUN_DIR_FORMAT = "%Y_%m_%d-%H_%M_%S"           # the dated result folder (§5.5)
SUMMARY_SUFFIX = "_summary.json"
DIR_MODE = 0o750


def make_dir(path: str) -> None:
    """Create the folder and its parents (mode DIR_MODE); an existing one is fine."""
    try:
        os.makedirs(path, mode=DIR_MODE, exist_ok=True)
    except OSError as exc:
        raise CollectorError(f"cannot create the folder: {exc.strerror or exc}", path=path) from exc


def write_file(path: str, data: Union[str, bytes], mode: int = 0o640) -> None:
    """Write through a temp file and a rename, so that a reader never sees half a file."""
    folder = os.path.dirname(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", dir=folder)
    except OSError as exc:
        raise CollectorError(f"cannot write: {exc.strerror or exc}", path=path) from exc
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except OSError as exc:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise CollectorError(f"cannot write: {exc.strerror or exc}", path=path) from exc


def write_generated_acl_json(path: str, config: Mapping[str, Any]) -> None:
    """Write <output>/acl.json; an existing one is replaced only when it holds nothing but the
    profiler or dump sections (one written by an earlier run), never a user's other settings."""
    if os.path.exists(path):
        try:
            with open(path, "rb") as f:
                old = json.loads(f.read().decode("utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            old = None
        if not isinstance(old, dict) or set(old) - {"profiler", "dump"}:
            raise InferOptionError("an acl.json with other settings is in the way of the one this run writes; "
                                   "move it, or pass it with --acl-json-path", path=path)
    write_file(path, acl_json_text(config))


def make_run_dir(output: str, output_dirname: Optional[str], now: datetime.datetime) -> Tuple[str, bool]:
    """(<output>/<output_dirname>, whether it was made) (reused, as ais_bench does), or a new
    <output>/<date> (local time); a date folder that exists already gets _1, _2, ... so that a run
    never writes into another's."""
    if output_dirname is not None:
        path = os.path.join(output, output_dirname)
        existed = os.path.isdir(path)
        make_dir(path)
        return path, not existed
    base = os.path.join(output, now.strftime(RUN_DIR_FORMAT))
    for n in range(1000):
        path = base if n == 0 else f"{base}_{n}"
        try:
            os.mkdir(path, DIR_MODE)
            return path, True
        except FileExistsError:
            continue
        except OSError as exc:
            raise CollectorError(f"cannot create the result folder: {exc.strerror or exc}", path=path) from exc
    raise CollectorError("1000 result folders of this second exist already", path=base)


def remove_empty_tree(path: str) -> None:
    """Remove `path` when it holds only empty folders (what a failed run created and left unused)."""
    for root, dirs, files in os.walk(path, topdown=False):
        if files or os.listdir(root):
            return
        os.rmdir(root)


def profiler_output_of(acl_json_path: str) -> Optional[str]:
    """Where a user's acl.json sends profiling data: its profiler output (absolute, from the cwd),
    when the switch is on and an output is given; else None. A file that cannot be read or parsed
    gives None here; acl.init reports it."""
    try:
        with open(acl_json_path, "rb") as f:
            config = json.loads(f.read().decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    section = config.get("profiler") if isinstance(config, dict) else None
    if not isinstance(section, dict) or section.get("switch") != "on" or not section.get("output"):
        return None
    return absolute(str(section["output"]))


def summary_files(output: str) -> List[str]:
    """The *_summary.json files in `output` and in its folders one level down (several devices)."""
    found: List[str] = []
    try:
        entries = sorted(os.scandir(output), key=lambda e: e.name)
    except OSError:
        return found
    for entry in entries:
        if entry.is_file() and entry.name.endswith(SUMMARY_SUFFIX):
            found.append(entry.path)
        elif entry.is_dir() and entry.name not in (PROFILER_DIR, DUMP_DIR):
            try:
                found += sorted(e.path for e in os.scandir(entry.path)
                                if e.is_file() and e.name.endswith(SUMMARY_SUFFIX))
            except OSError:
                continue
    return found
