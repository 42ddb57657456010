"""Finding collections on disk and reading their control files.

A `PROF_xxx` collection holds `host/` and `device_N/` result directories, each with an
`info.json[.N]` and a `data/` folder of raw slices (host_formats.md §1). A directory may
also hold several collections. Nothing here writes to disk.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Dict, List, Optional, Tuple

from .errors import BadControlFile, Diagnostics, MissingControlFile, NotACollection, PathNotFound, \
    UnknownChip, UnreadableFile

HOST_ID = 64
SKIPPED_SUFFIXES = (".done", ".complete", ".zip")
NOT_RESULT_DIRS = {".profiler", "HCCL_PROF", "timeline", "query", "sqlite", "log", "analyze",
                   "mindstudio_profiler_log", "mindstudio_profiler_output"}


@dataclass(frozen=True)
class Chip:
    """A chip generation as named by info.json `platform_version`."""

    platform: int
    name: str
    family: str  # "stars" (STARS soc log + FFTS PMU) or "hwts" (HWTS log + AI Core PMU)


CHIPS: Dict[int, Chip] = {
    1: Chip(1, "Ascend910A", "hwts"),
    2: Chip(2, "MDC", "hwts"),
    3: Chip(3, "Lhisi", "hwts"),
    4: Chip(4, "Ascend310P", "hwts"),
    5: Chip(5, "Ascend910B", "stars"),
    7: Chip(7, "Ascend310B", "stars"),
    8: Chip(8, "TinyV1", "stars"),
    11: Chip(11, "MdcMiniV3", "stars"),
}
UNSUPPORTED_CHIPS = {0: "Ascend310 (TLV ts_track)", 9: "nano (V5)", 15: "Ascend950 (V6)", 16: "V6.2"}
NPU_NAMES = {0: "Ascend310", 1: "Ascend910A", 4: "Ascend310P", 5: "Ascend910B", 7: "Ascend310B", 15: "Ascend950"}


@dataclass
class ResultDir:
    """`host/` or `device_N/` with its parsed control files."""

    path: str
    device_id: int
    info: Dict[str, object]
    sample: Dict[str, object] = field(default_factory=dict)
    start_info: Dict[str, object] = field(default_factory=dict)
    end_info: Dict[str, object] = field(default_factory=dict)
    host_start: Dict[str, int] = field(default_factory=dict)
    dev_start: Dict[str, int] = field(default_factory=dict)
    files: Dict[str, str] = field(default_factory=dict)  # control file kind -> path

    @property
    def is_host(self) -> bool:
        return self.device_id == HOST_ID

    @property
    def data_dir(self) -> str:
        return os.path.join(self.path, "data")

    @property
    def name(self) -> str:
        return os.path.basename(self.path)

    def device_info(self) -> Dict[str, object]:
        infos = self.info.get("DeviceInfo") or []
        return infos[0] if isinstance(infos, list) and infos and isinstance(infos[0], dict) else {}

    def host_freq_mhz(self) -> Optional[Fraction]:
        """Host counter frequency, MHz; None when host timestamps are already ns."""
        cpus = self.info.get("CPU") or []
        text = str(cpus[0].get("Frequency", "")) if isinstance(cpus, list) and cpus and isinstance(cpus[0], dict) else ""
        value = _fraction(text)
        return value if value and value != 1000 else None


@dataclass
class Collection:
    """One PROF_xxx directory."""

    path: str
    host: Optional[ResultDir]
    devices: List[ResultDir]

    @property
    def name(self) -> str:
        return os.path.basename(os.path.normpath(self.path))

    def result_dirs(self) -> List[ResultDir]:
        return ([self.host] if self.host else []) + self.devices

    def chip(self) -> Chip:
        """The chip, from the first info.json that names one."""
        for rd in self.devices + ([self.host] if self.host else []):
            text = str(rd.info.get("platform_version", "")).strip()
            if not text:
                continue
            where = rd.files.get("info.json", rd.path)
            if not text.isdigit():
                raise UnknownChip(f"platform_version {text!r} is not a number; expected one of "
                                  f"{sorted(CHIPS)}", path=where)
            platform = int(text)
            if platform in CHIPS:
                return CHIPS[platform]
            if platform in UNSUPPORTED_CHIPS:
                raise UnknownChip(f"platform_version {platform} ({UNSUPPORTED_CHIPS[platform]}) is not supported "
                                  f"yet; supported: {sorted(CHIPS)}", path=where)
            raise UnknownChip(f"unknown platform_version {platform}; expected one of {sorted(CHIPS)}", path=where)
        raise MissingControlFile("no info.json names a platform_version", path=self.path)


def _fraction(text: str) -> Optional[Fraction]:
    try:
        value = Fraction(text.strip())
    except (ValueError, ZeroDivisionError):
        return None
    return value if value > 0 else None


def _pick(names: List[str], prefix: str) -> Optional[str]:
    """First name starting with `prefix` that is not a marker file (sorted, as the reference does)."""
    for name in sorted(names):
        if name.startswith(prefix) and not name.endswith(SKIPPED_SUFFIXES) \
                and f"{name}.complete" not in names:
            return name
    return None


def _read_text(path: str) -> str:
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as exc:
        raise UnreadableFile(f"cannot read: {exc.strerror}", path=path) from exc
    return raw.decode("utf-8", errors="replace")


def read_json(path: str) -> Dict[str, object]:
    """A single-object JSON control file (the reference reads the first line; we accept any layout)."""
    text = _read_text(path)
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        try:
            value = json.loads(text.splitlines()[0]) if text.strip() else None
        except (json.JSONDecodeError, IndexError) as exc:
            raise BadControlFile(f"not valid JSON ({exc.msg} at character {exc.pos}); expected one JSON object",
                                 path=path, offset=exc.pos) from exc
    if not isinstance(value, dict):
        raise BadControlFile("expected one JSON object", path=path, offset=0)
    return value


def read_key_values(path: str) -> Dict[str, int]:
    """`key: value` lines (host_start.log / dev_start.log); section headers are ignored."""
    values: Dict[str, int] = {}
    offset = 0
    for line in _read_text(path).splitlines(keepends=True):
        stripped = line.strip()
        if stripped and not stripped.startswith(("[", "#", ";")):
            key, sep, value = stripped.partition(":")
            if not sep or not value.strip().lstrip("-").isdigit():
                raise BadControlFile(f"line {stripped!r}: expected 'key: unsigned integer'", path=path, offset=offset)
            values[key.strip()] = int(value.strip())
        offset += len(line.encode("utf-8"))
    return values


def _is_result_dir(path: str) -> bool:
    try:
        names = os.listdir(path)
    except OSError:
        return False
    return any(n.startswith("info.json") and not n.endswith(SKIPPED_SUFFIXES) for n in names)


def _device_id(name: str) -> Optional[int]:
    if name == "host":
        return HOST_ID
    match = re.fullmatch(r"device_(\d+)", name)
    return int(match.group(1)) if match else None


def load_result_dir(path: str, device_id: int, diag: Diagnostics) -> ResultDir:
    """Parse the control files of one result directory."""
    try:
        names = os.listdir(path)
    except OSError as exc:
        raise UnreadableFile(f"cannot list directory: {exc.strerror}", path=path) from exc
    is_host = device_id == HOST_ID
    found: Dict[str, str] = {}
    for kind in ("info.json", "sample.json", "start_info", "end_info", "host_start.log", "dev_start.log"):
        picked = _pick(names, kind)
        if picked:
            found[kind] = os.path.join(path, picked)
    if "info.json" not in found:
        raise MissingControlFile("no info.json here; expected a result dir with info.json[.N]", path=path)
    rd = ResultDir(path=path, device_id=device_id, info=read_json(found["info.json"]), files=found)
    if "sample.json" in found:
        rd.sample = read_json(found["sample.json"])
    if "start_info" in found:
        rd.start_info = read_json(found["start_info"])
    if "end_info" in found:
        rd.end_info = read_json(found["end_info"])
    if "host_start.log" in found:
        rd.host_start = read_key_values(found["host_start.log"])
    if "dev_start.log" in found and not is_host:
        rd.dev_start = read_key_values(found["dev_start.log"])
    return rd


def _collection_at(path: str, diag: Diagnostics) -> Optional[Collection]:
    host: Optional[ResultDir] = None
    devices: List[ResultDir] = []
    for name in sorted(os.listdir(path)):
        sub = os.path.join(path, name)
        dev = _device_id(name)
        if dev is None or not os.path.isdir(sub) or os.path.islink(sub) or not _is_result_dir(sub):
            continue
        rd = load_result_dir(sub, dev, diag)
        if not os.path.isdir(rd.data_dir):
            diag.warn(f"{sub}: no data/ directory; this result dir is skipped")
            continue
        if dev == HOST_ID:
            host = rd
        else:
            devices.append(rd)
    if host is None and not devices:
        return None
    devices.sort(key=lambda r: r.device_id)
    return Collection(path=path, host=host, devices=devices)


def find_collections(path: str, diag: Diagnostics) -> List[Collection]:
    """The PROF collections at `path`: the directory itself, or the ones directly below it."""
    if not os.path.exists(path):
        raise PathNotFound("no such file or directory", path=path)
    if not os.path.isdir(path):
        raise NotACollection("not a directory; expected a PROF_xxx collection or a folder of them", path=path)
    if not os.access(path, os.R_OK | os.X_OK):
        raise UnreadableFile("directory is not readable", path=path)
    here = _collection_at(path, diag)
    if here is not None:
        return [here]
    found: List[Collection] = []
    for name in sorted(os.listdir(path)):
        sub = os.path.join(path, name)
        if name in NOT_RESULT_DIRS or not os.path.isdir(sub) or os.path.islink(sub):
            continue
        coll = _collection_at(sub, diag)
        if coll is not None:
            found.append(coll)
    if not found:
        raise NotACollection("not a profiling collection: expected host/ or device_N/ directories holding "
                             "info.json and data/, or folders (PROF_xxx) that hold them", path=path)
    return found


# --------------------------------------------------------------------------------------------
# Data files

HOST_DATA = re.compile(r"^(?P<cls>aging|unaging)\.(?P<module>api_event|compact|additional|variable)\."
                       r"(?P<tag>[A-Za-z0-9_]+)\.slice_(?P<n>\d+)$")
DEVICE_DATA = re.compile(r"^(?P<stem>[A-Za-z_][A-Za-z0-9_.]*?)\.(?P<dev>\d+)\.slice_(?P<n>\d+)$")


def data_files(rd: ResultDir) -> Dict[Tuple[str, str], List[str]]:
    """Raw data slices by (kind, group), each list in slice order.

    Host: kind = 'api_event' or the compact/additional tag ('task_track', 'hash_dic', ...),
    group = 'aging' or 'unaging'. Device: kind = the stem ('stars_soc.data', 'hwts.data'),
    group = ''.
    """
    try:
        names = os.listdir(rd.data_dir)
    except OSError as exc:
        raise UnreadableFile(f"cannot list directory: {exc.strerror}", path=rd.data_dir) from exc
    groups: Dict[Tuple[str, str], List[Tuple[int, str]]] = {}
    for name in names:
        if name.endswith(SKIPPED_SUFFIXES) or f"{name}.complete" in names:
            continue
        if rd.is_host:
            match = HOST_DATA.match(name)
            if not match:
                continue
            kind = "api_event" if match["module"] == "api_event" else match["tag"]
            key = (kind, match["cls"])
        else:
            match = DEVICE_DATA.match(name)
            if not match:
                continue
            key = (match["stem"], "")
        groups.setdefault(key, []).append((int(match["n"]), os.path.join(rd.data_dir, name)))
    return {k: [p for _, p in sorted(v)] for k, v in groups.items()}
