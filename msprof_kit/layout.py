"""Finding collections on disk and reading their control files.

A `PROF_xxx` collection holds `host/` and `device_N/` result directories, each with an
`info.json[.N]` and a `data/` folder of raw slices (host_formats.md §1). A legacy `JOBxxx`
collection (older CANN releases, SoC boards) holds its raw files in `data/` beside
`info.json.0` and friends, or directly in the JOB folder (docs/store.md, "JOB collections").
A directory may also hold several collections. Nothing here writes to disk.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from fractions import Fraction
from typing import AbstractSet, Dict, Iterable, List, Optional, Tuple

from .errors import BadControlFile, Diagnostics, MissingControlFile, NoCollection, NotACollection, PathNotFound, \
    UnknownChip, UnreadableFile
from .files import NotRegularFile, file_kind, open_regular

HOST_ID = 64
EMULATED_MARKER = "EMULATED_BY_MSPROF_KIT.txt"  # collectors/emulator/ MARKER: a synthetic PROF
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
        """Whether this is `host/` (device id HOST_ID)."""
        return self.device_id == HOST_ID

    @property
    def data_dir(self) -> str:
        """The folder of its raw slices, `data/`."""
        return os.path.join(self.path, "data")

    @property
    def name(self) -> str:
        """The name of its folder ('host', 'device_0'; a JOB folder's for a JOB device)."""
        return os.path.basename(self.path)

    def _device_info(self) -> Dict[str, object]:
        infos = self.info.get("DeviceInfo") or []
        return infos[0] if isinstance(infos, list) and infos and isinstance(infos[0], dict) else {}

    def device_info(self) -> Dict[str, object]:
        """DeviceInfo[0] of info.json, without the core counts and AI Core frequencies that are not
        usable numbers (device_info_problems says which)."""
        return {k: v for k, v in self._device_info().items() if _device_value_problem(k, v) is None}

    def device_info_problems(self) -> List[str]:
        """What is wrong with DeviceInfo[0]'s core counts and AI Core frequencies, one text each."""
        return [f"DeviceInfo[0].{k} is {json.dumps(v)}; expected {want}"
                for k, v in self._device_info().items() for want in [_device_value_problem(k, v)] if want]

    def hwts_mhz(self) -> Fraction:
        """The device system counter (DeviceInfo hwts_frequency), MHz; 0 when absent or unusable."""
        return _fraction(str(self.device_info().get("hwts_frequency", ""))) or Fraction(0)

    def host_freq_mhz(self) -> Optional[Fraction]:
        """Host counter frequency, MHz; None when host timestamps are already ns."""
        cpus = self.info.get("CPU") or []
        text = str(cpus[0].get("Frequency", "")) if isinstance(cpus, list) and cpus and isinstance(cpus[0], dict) else ""
        value = _fraction(text)
        return value if value and value != 1000 else None

    def host_freq_problem(self) -> Optional[str]:
        """CPU[0].Frequency as JSON text when it is neither a usable frequency, nor the empty string
        or 1000 that mean ns timestamps ('absent' when there is none); else None."""
        cpus = self.info.get("CPU")
        cpu = cpus[0] if isinstance(cpus, list) and cpus and isinstance(cpus[0], dict) else {}
        if "Frequency" not in cpu:
            return "absent"
        value = cpu["Frequency"]
        if value == "" or _fraction(str(value)) is not None:
            return None
        return json.dumps(value)


@dataclass(frozen=True)
class JobFile:
    """One raw data slice of a JOB collection."""

    kind: str       # a key of JOB_FILES: 'hwts', 'training_trace', 'aicpu', 'acl', 'task_desc', ...
    path: str
    device_id: int
    slice: int
    sub: str        # AclModule category ('acl_model', 'acl_op', ...), else ''
    encoding: str   # 'binary', or 'vm' / 'ge' for the text Framework files (whose enums differ)
    job: str        # the job id infix of container files ('JOB2' in '...0.JOB2.slice_0'), else ''
    done: bool      # a `.done` marker sits beside it (the slice was closed)


@dataclass
class JobLayout:
    """What a JOB collection holds besides its per-device control files."""

    name: str                  # the job's name: the folder's, or the job id infix of its files
    data_dirs: List[str]       # where the raw files were found (the folder and/or its data/)
    files: List[JobFile]       # in (kind, device, sub, slice) order

    def group(self, kind: str) -> Dict[Tuple[int, str], List[JobFile]]:
        """The slices of one kind by (device, sub), each list in slice order."""
        out: Dict[Tuple[int, str], List[JobFile]] = {}
        for f in self.files:
            if f.kind == kind:
                out.setdefault((f.device_id, f.sub), []).append(f)
        return out


@dataclass
class Collection:
    """One PROF_xxx directory, or one legacy JOBxxx directory (`kind` 'job', described by `job`;
    its `devices` are per-device views of the JOB folder's control files)."""

    path: str
    host: Optional[ResultDir]
    devices: List[ResultDir]
    kind: str = "prof"
    job: Optional[JobLayout] = None

    @property
    def name(self) -> str:
        """The folder's name ('PROF_...', 'JOB...')."""
        return os.path.basename(os.path.normpath(self.path))

    def result_dirs(self) -> List[ResultDir]:
        """`host/` (when there is one), then the devices."""
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
        if os.path.isfile(os.path.join(self.path, EMULATED_MARKER)):
            raise MissingControlFile(f"no info.json names a platform_version: written by msprof-kit's pyACL "
                                     f"emulator ({EMULATED_MARKER}), it is synthetic and holds no profiling "
                                     "records to import", path=self.path)
        raise MissingControlFile("no info.json names a platform_version", path=self.path)


# counter frequencies accepted (MHz): 1 kHz to 100 GHz; beyond, tick conversions overflow 64 bits
FREQ_MHZ = (Fraction(1, 1000), Fraction(100000))
#: DeviceInfo counts msprof-kit computes with, and their range
DEVICE_COUNTS = ("ai_core_num", "aiv_num")
COUNT_MAX = 65535
#: DeviceInfo AI Core frequencies (MHz), in FREQ_MHZ; 0 or "" mean unknown
DEVICE_FREQS = ("aic_frequency", "aiv_frequency")


def _device_value_problem(key: str, value: object) -> Optional[str]:
    """What a DeviceInfo core count or AI Core frequency should be, when `value` is not; else None."""
    if key in DEVICE_COUNTS:
        text = str(value).strip()
        if text.isdigit() and int(text) <= COUNT_MAX:
            return None
        return f"a count of cores (0 to {COUNT_MAX})"
    if key in DEVICE_FREQS:
        text = str(value).strip()
        if text in ("", "0") or _fraction(text) is not None:
            return None
        return f"the frequency in MHz ({float(FREQ_MHZ[0]):g} to {float(FREQ_MHZ[1]):g})"
    return None

FREQ_TEXT = "0.001 to 100000"


def _fraction(text: str) -> Optional[Fraction]:
    """A counter frequency in MHz, or None when `text` is not a number within FREQ_MHZ."""
    try:
        value = Fraction(text.strip())
    except (ValueError, ZeroDivisionError):
        return None
    return value if FREQ_MHZ[0] <= value <= FREQ_MHZ[1] else None


def _pick(names: AbstractSet[str], prefix: str) -> Optional[str]:
    """First name starting with `prefix` that is not a marker file (sorted, as the reference does)."""
    for name in sorted(names):
        if name.startswith(prefix) and not name.endswith(SKIPPED_SUFFIXES) \
                and f"{name}.complete" not in names:
            return name
    return None


def _read_text(path: str) -> str:
    """A control file's text. Only a regular file is read: anything else (a FIFO would block the
    import, /dev/zero never ends) is an error naming what it is."""
    try:
        with open_regular(path) as f:
            raw = f.read()
    except NotRegularFile as exc:
        raise BadControlFile(f"{exc.what}, not a regular file; expected a regular file", path=path, offset=0) from exc
    except OSError as exc:
        raise UnreadableFile(f"cannot read: {exc.strerror}", path=path) from exc
    return raw.decode("utf-8", errors="replace")


def read_json(path: str) -> Dict[str, object]:
    """A single-object JSON control file (the reference reads the first line; we accept any layout)."""
    text = _read_text(path)
    try:
        value = json.loads(text)
    except RecursionError as exc:
        raise BadControlFile("JSON nested too deeply; expected one JSON object of settings", path=path,
                             offset=0) from exc
    except json.JSONDecodeError:
        try:  # text that is not blank has a first line
            value = json.loads(text.splitlines()[0]) if text.strip() else None
        except json.JSONDecodeError as exc:
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
        names = set(os.listdir(path))
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
    if is_host:
        found.pop("dev_start.log", None)
    return _read_controls(path, device_id, found)


def _read_controls(path: str, device_id: int, found: Dict[str, str]) -> ResultDir:
    """A ResultDir with the control files `found` (kind -> path) read."""
    rd = ResultDir(path=path, device_id=device_id, info=read_json(found["info.json"]) if "info.json" in found else {},
                   files=found)
    if "sample.json" in found:
        rd.sample = read_json(found["sample.json"])
    if "start_info" in found:
        rd.start_info = read_json(found["start_info"])
    if "end_info" in found:
        rd.end_info = read_json(found["end_info"])
    if "host_start.log" in found:
        rd.host_start = read_key_values(found["host_start.log"])
    if "dev_start.log" in found:
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
    """The collections at `path`: the directory itself (PROF_xxx or JOBxxx), or the ones
    directly below it."""
    if not os.path.exists(path):
        raise PathNotFound("no such file or directory", path=path)
    if not os.path.isdir(path):
        raise NotACollection("not a directory; expected a PROF_xxx collection or a folder of them", path=path)
    if not os.access(path, os.R_OK | os.X_OK):
        raise UnreadableFile("directory is not readable", path=path)
    here = _collection_at(path, diag) or job_collection_at(path, diag)
    if here is not None:
        return [here]
    found: List[Collection] = []
    for name in sorted(os.listdir(path)):
        sub = os.path.join(path, name)
        if name in NOT_RESULT_DIRS or not os.path.isdir(sub) or os.path.islink(sub):
            continue
        coll = _collection_at(sub, diag) or job_collection_at(sub, diag)
        if coll is not None:
            found.append(coll)
    if not found:
        # (the text is pinned by tests/test_bad_input.py; JOB layouts are in docs/store.md)
        raise NoCollection("not a profiling collection: expected host/ or device_N/ directories holding "
                             "info.json and data/, or folders (PROF_xxx) that hold them", path=path)
    return found


# --------------------------------------------------------------------------------------------
# Legacy JOB collections

_SLICE = r"\.(?P<dev>\d+)(?:\.(?P<job>[A-Za-z][A-Za-z0-9_]*))?\.slice_(?P<n>\d+)$"
# kind -> file name pattern; group `sub` (when present) refines the kind
JOB_FILES: Dict[str, "re.Pattern[str]"] = {
    "hwts": re.compile(r"^hwts\.(?:log\.data\.\d+\.dev\.profiler_default_tag|data)" + _SLICE),
    "training_trace": re.compile(r"^training_trace\.\d+\.dev\.profiler_default_tag" + _SLICE),
    "aicpu": re.compile(r"^DATA_PREPROCESS\.(?:dev\.)?AICPU" + _SLICE),
    "acl": re.compile(r"^AclModule\.(?P<sub>acl_[a-z_]+?)" + _SLICE),
    # text Framework files: `host.vm.` (MindSpore VM backend) or `host.` (GE backend)
    "task_desc": re.compile(r"^Framework\.(?P<host>host\.(?:vm[._])?)?task_desc_info" + _SLICE),
    "graph_desc": re.compile(r"^Framework\.(?P<host>host\.(?:vm[._])?)?graph_desc_info" + _SLICE),
    "point": re.compile(r"^Framework\.(?P<host>host\.(?:vm[._])?)?point" + _SLICE),
    "tensor_data": re.compile(r"^Framework\.tensor_data_info" + _SLICE),
    "step_info": re.compile(r"^Framework\.step_info" + _SLICE),
    "hash_dic": re.compile(r"^Framework\.hash_dic" + _SLICE),
}
JOB_CONTROL = ("info.json", "sample.json", "start_info", "end_info", "host_start.log", "dev_start.log")


def _job_file(folder: str, name: str, names: AbstractSet[str]) -> Optional[JobFile]:
    if name.endswith(SKIPPED_SUFFIXES):
        return None
    for kind, pattern in JOB_FILES.items():
        m = pattern.match(name)
        if m is None:
            continue
        groups = m.groupdict()
        host = groups.get("host") or ""
        if kind in ("task_desc", "graph_desc", "point"):
            # `host.vm.`: MindSpore VM backend text; `host.`: GE backend text; a task_desc_info
            # without `host.` is the binary GE reporter's (checked against its magic when read)
            encoding = "vm" if "vm" in host else "binary" if kind == "task_desc" and not host else "ge"
        else:
            encoding = "text" if kind == "hash_dic" else "binary"
        return JobFile(kind=kind, path=os.path.join(folder, name), device_id=int(m["dev"]), slice=int(m["n"]),
                       sub=groups.get("sub") or "", encoding=encoding, job=groups.get("job") or "",
                       done=f"{name}.done" in names)
    return None


def _job_files(folder: str, diag: Diagnostics) -> List[JobFile]:
    """The raw files of a JOB folder (one listing); those that are not regular files are skipped
    with a warning."""
    try:
        with os.scandir(folder) as listing:
            entries = {e.name: e for e in listing}
    except OSError:
        return []
    present = entries.keys()
    _warn_undecodable(folder, entries, diag)
    found = [f for f in (_job_file(folder, n, present) for n in entries) if f is not None]
    return [f for f in found if _regular_slice(entries[os.path.basename(f.path)], diag)]


def _warn_undecodable(folder: str, names: Iterable[str], diag: Diagnostics) -> None:
    """One warning for the file names of `folder` that are not UTF-8: they cannot be told apart
    from raw data slices, so whatever they held is not read."""
    bad = [n for n in names if not _is_utf8(n)]
    if bad:
        shown = os.fsencode(bad[0])
        diag.warn(f"{folder}: {len(bad)} file name(s) not UTF-8 (the first: {shown!r}); not read, so whatever "
                  "they hold is lost")


def _is_utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:  # os.listdir gives undecodable bytes as lone surrogates
        return False
    return True


def _regular_slice(entry: "os.DirEntry[str]", diag: Diagnostics) -> bool:
    """Whether a listed slice is a regular file (symlinks followed); if not, a warning says what
    it is and that it is skipped. A regular file costs no stat where the listing says its type."""
    try:
        if entry.is_file():
            return True
        what = f"{file_kind(os.stat(entry.path).st_mode)}, not a regular file"
    except OSError as exc:
        what = f"cannot be read ({exc.strerror})"
    diag.warn(f"{entry.path}: {what}; this slice is skipped")
    return False


def _job_control(folder: str, names: AbstractSet[str], numbered: Dict[str, List[str]], kind: str,
                 device: int) -> Optional[str]:
    """`<kind>.<device>`, else `<kind>` alone, else `<kind>.<n>` when it is the only one
    (`numbered`: the `<kind>.<n>` names of each kind)."""
    for cand in (f"{kind}.{device}", kind):
        if cand in names:
            return os.path.join(folder, cand)
    others = numbered.get(kind, [])
    return os.path.join(folder, others[0]) if len(others) == 1 else None


def job_collection_at(path: str, diag: Diagnostics) -> Optional[Collection]:
    """A legacy JOB collection at `path`: raw legacy files in it or in its `data/` folder, or a
    `JOB*` folder with `data/` (SoC boards). Result dirs of a PROF collection (host/, device_N/)
    are not JOB collections."""
    name = os.path.basename(os.path.normpath(path))
    parent = os.path.basename(os.path.dirname(os.path.normpath(path)))
    if _device_id(name) is not None or (name == "data" and _device_id(parent) is not None):
        return None
    data = os.path.join(path, "data")
    dirs = [path] + ([data] if os.path.isdir(data) else [])
    files = [f for d in dirs for f in _job_files(d, diag)]
    if not files and not (name.startswith("JOB") and os.path.isdir(data)):
        return None
    try:
        names = set(os.listdir(path))
    except OSError as exc:
        raise UnreadableFile(f"cannot list directory: {exc.strerror}", path=path) from exc
    numbered: Dict[str, List[str]] = {}
    for n in names:
        kind, dot, number = n.rpartition(".")
        if dot and number.isdigit() and kind in JOB_CONTROL:
            numbered.setdefault(kind, []).append(n)
    control_devices = {int(n.rsplit(".", 1)[1]) for n in names
                       if n.startswith("info.json.") and n.rsplit(".", 1)[1].isdigit()}
    devices = sorted({f.device_id for f in files} | control_devices) or [0]
    result_dirs: List[ResultDir] = []
    for dev in devices:
        found = {kind: p for kind in JOB_CONTROL for p in [_job_control(path, names, numbered, kind, dev)] if p}
        result_dirs.append(_read_controls(path, dev, found))
    tags = sorted({f.job for f in files if f.job})
    if len(tags) > 1:
        diag.warn(f"{path}: raw files of several jobs ({', '.join(tags)}) are imported together")
    files.sort(key=lambda f: (f.kind, f.device_id, f.sub, f.slice, f.path))
    layout = JobLayout(name=tags[0] if len(tags) == 1 else name, data_dirs=dirs, files=files)
    return Collection(path=path, host=None, devices=result_dirs, kind="job", job=layout)


# --------------------------------------------------------------------------------------------
# Data files

HOST_DATA = re.compile(r"^(?P<cls>aging|unaging)\.(?P<module>api_event|compact|additional|variable)\."
                       r"(?P<tag>[A-Za-z0-9_]+)\.slice_(?P<n>\d+)$")
DEVICE_DATA = re.compile(r"^(?P<stem>[A-Za-z_][A-Za-z0-9_.]*?)\.(?P<dev>\d+)\.slice_(?P<n>\d+)$")


def data_files(rd: ResultDir, diag: Diagnostics) -> Dict[Tuple[str, str], List[str]]:
    """Raw data slices by (kind, group), each list in slice order.

    Host: kind = 'api_event' or the compact/additional tag ('task_track', 'hash_dic', ...),
    group = 'aging' or 'unaging'. Device: kind = the stem ('stars_soc.data', 'hwts.data'),
    group = ''. One listing of data/, names looked up in a set (linear in the number of files);
    a slice that is not a regular file is skipped with a warning.
    """
    try:
        with os.scandir(rd.data_dir) as listing:
            entries = {e.name: e for e in listing}
    except OSError as exc:
        raise UnreadableFile(f"cannot list directory: {exc.strerror}", path=rd.data_dir) from exc
    names = entries.keys()
    _warn_undecodable(rd.data_dir, names, diag)
    groups: Dict[Tuple[str, str], List[Tuple[int, str]]] = {}
    for name, entry in entries.items():
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
        if _regular_slice(entry, diag):
            groups.setdefault(key, []).append((int(match["n"]), os.path.join(rd.data_dir, name)))
    return {k: [p for _, p in sorted(v)] for k, v in groups.items()}
