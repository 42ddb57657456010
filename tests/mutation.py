"""Damage for the mutation test (tests/test_mutation.py): named kinds of damage applied to a copy of
a raw collection, a snapshot of the raw tree that follows no link, and one run of the CLI
(`import`, `export summary`, `export timeline`) in subprocesses with a timeout, a memory cap and
its own process group.

A kind is a function `kind(d: Damage) -> str` that damages one thing of the copy `d.root`, chosen
with `d.rng` (a `random.Random` seeded by the test), and returns what it did, in one line. The
files of a collection fall in these groups (`Files`):

* `control`: JSON control files (`info.json*`, `sample.json`, `start_info*`, `end_info*`);
* `logs`: `key: value` text control files (`host_start.log*`, `dev_start.log*`);
* `dicts`: text dictionaries (`*hash_dic*`, `*type_info_dic*`);
* `slices`: binary data slices (`*.slice_N` under `data/`, or the JOB's data files), not dictionaries;
* `markers`: `.done` / `.complete` markers (JOB collections).
"""
from __future__ import annotations

import hashlib
import os
import random
import re
import resource
import signal
import stat
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from users import RunAs

#: what the tool writes into a collection; the raw-tree check leaves these out (top level only)
OUTPUT_DIRS = ("sqlite", "mindstudio_profiler_output", "mindstudio_profiler_log", "summary", "timeline")
OUTPUT_FILE = re.compile(r"^msprof_\d+\.db$")
TIMESTAMP = re.compile(r"_\d{14}(?=\.)")
SLICE = re.compile(r"^(?P<stem>.+)\.slice_(?P<n>\d+)$")
COMMANDS = (("import",), ("export", "summary"), ("export", "timeline"))
MEMORY_CAP = 3 << 30   # address space of each CLI process (and its workers), bytes: /dev/zero must not eat the host


@dataclass
class Files:
    """The regular files of a collection by group, as paths relative to its root (sorted)."""

    control: List[str] = field(default_factory=list)
    logs: List[str] = field(default_factory=list)
    dicts: List[str] = field(default_factory=list)
    slices: List[str] = field(default_factory=list)
    markers: List[str] = field(default_factory=list)

    @property
    def all(self) -> List[str]:
        return sorted(self.control + self.logs + self.dicts + self.slices + self.markers)

    @property
    def data(self) -> List[str]:
        return sorted(self.dicts + self.slices)


def classify(root: str) -> Files:
    out = Files()
    for base, dirs, names in os.walk(root):
        rel_base = os.path.relpath(base, root)
        if rel_base == ".":
            dirs[:] = [d for d in dirs if d not in OUTPUT_DIRS]
        dirs.sort()
        for name in sorted(names):
            rel = os.path.normpath(os.path.join(rel_base, name))
            if rel_base == "." and OUTPUT_FILE.match(name):
                continue
            if name.endswith((".done", ".complete")):
                out.markers.append(rel)
            elif name.startswith(("info.json", "sample.json", "start_info", "end_info")):
                out.control.append(rel)
            elif name.startswith(("host_start.log", "dev_start.log")):
                out.logs.append(rel)
            elif "hash_dic" in name or "type_info_dic" in name:
                out.dicts.append(rel)
            else:
                out.slices.append(rel)
    return out


# --- the raw tree --------------------------------------------------------------------------------

def snapshot(root: str) -> Dict[str, Tuple[str, ...]]:
    """Every entry below root but the tool's outputs: relative path → (type, mode, sha256 | link
    target). Follows no link and opens nothing but regular files (a FIFO or a device is not read)."""
    out: Dict[str, Tuple[str, ...]] = {}
    broot = os.fsencode(root)

    def walk(path: bytes, rel: bytes) -> None:
        with os.scandir(path) as it:
            entries = sorted(it, key=lambda e: e.name)
        for e in entries:
            r = os.path.join(rel, e.name) if rel else e.name
            if not rel and (os.fsdecode(e.name) in OUTPUT_DIRS or OUTPUT_FILE.match(os.fsdecode(e.name))):
                continue
            st = os.lstat(e.path)
            mode = oct(stat.S_IMODE(st.st_mode))
            key = os.fsdecode(r)
            if stat.S_ISLNK(st.st_mode):
                out[key] = ("link", os.fsdecode(os.readlink(e.path)))
            elif stat.S_ISDIR(st.st_mode):
                out[key] = ("dir", mode)
                walk(e.path, r)
            elif stat.S_ISREG(st.st_mode):
                h = hashlib.sha256()
                with open(e.path, "rb") as f:
                    for chunk in iter(lambda: f.read(1 << 20), b""):
                        h.update(chunk)
                out[key] = ("file", mode, h.hexdigest())
            else:
                out[key] = ("special", mode, oct(stat.S_IFMT(st.st_mode)))

    walk(broot, b"")
    return out


def tree_diff(before: Dict[str, Tuple[str, ...]], after: Dict[str, Tuple[str, ...]]) -> List[str]:
    lines = []
    for k in sorted(set(before) | set(after)):
        if before.get(k) != after.get(k):
            lines.append(f"{k}: {before.get(k)} -> {after.get(k)}")
    return lines


def outputs(root: str) -> Dict[str, str]:
    """sha256 of each exported CSV/JSON/TXT file (mindstudio_profiler_output/, summary/, timeline/),
    keyed by its name without the 14-digit export timestamp."""
    out = {}
    for sub in ("mindstudio_profiler_output", "summary", "timeline"):
        d = os.path.join(root, sub)
        if not os.path.isdir(d):
            continue
        for base, _, names in os.walk(d):
            for name in names:
                if not name.endswith((".csv", ".json", ".txt")):
                    continue
                p = os.path.join(base, name)
                with open(p, "rb") as f:
                    digest = hashlib.sha256(f.read()).hexdigest()
                out[TIMESTAMP.sub("", os.path.relpath(p, root))] = digest
    return out


# --- the kinds of damage -------------------------------------------------------------------------

class NotApplicable(Exception):
    """This kind has nothing to damage in this collection."""


@dataclass
class Damage:
    root: str            #: the collection (PROF_xxx or JOBxxx) in a writable copy
    outside: str         #: a folder beside the copy, outside the collection
    rng: random.Random
    files: Files
    #: set by a kind that renames the collection itself
    new_root: Optional[str] = None
    #: set by a kind that must run the CLI as another user: the path it made unreadable
    unreadable: Optional[str] = None
    #: the file damaged (relative path), set by `pick`
    target: str = ""

    def pick(self, *groups: Sequence[str]) -> str:
        pool = sorted({p for g in groups for p in g})
        if not pool:
            raise NotApplicable("no file of that group")
        self.target = self.rng.choice(pool)
        return self.target

    def path(self, rel: str) -> str:
        return os.path.join(self.root, rel)

    def read(self, rel: str) -> bytes:
        with open(self.path(rel), "rb") as f:
            return f.read()

    def write(self, rel: str, data: bytes) -> None:
        with open(self.path(rel), "wb") as f:
            f.write(data)

    def replace_with(self, rel: str, make: Callable[[str], None]) -> None:
        p = self.path(rel)
        os.unlink(p)
        make(p)


def truncate(d: Damage) -> str:
    rel = d.pick(d.files.slices, d.files.dicts, d.files.control, d.files.logs)
    data = d.read(rel)
    if len(data) < 2:
        raise NotApplicable(f"{rel} holds {len(data)} bytes")
    cut = d.rng.randrange(1, len(data))
    d.write(rel, data[:cut])
    return f"truncate {rel} to {cut} of {len(data)} bytes"


#: (file name pattern, record size, offset of its magic number) of the record streams whose records
#: carry a magic number; a stream's first slice starts on a record boundary
MAGIC_STREAMS = [
    (re.compile(r"(^|/)(un)?aging\.api_event\.data\.slice_0$"), 40, 0),
    (re.compile(r"(^|/)(un)?aging\.compact\.(node_basic_info|node_attr_info|task_track|memcpy_info)\.slice_0$"), 64, 0),
    (re.compile(r"(^|/)(un)?aging\.additional\.(tensor_info|context_id_info|graph_id_map|fusion_op_info)\.slice_0$"),
     256, 0),
    (re.compile(r"(^|/)(stars_soc|hwts)\.data\.\d+\.slice_0$"), 64, 2),
    (re.compile(r"(^|/)(ffts_profile|aicore)\.data\.\d+\.slice_0$"), 128, 2),
    (re.compile(r"(^|/)hwts\.log\.data\.\d+\.dev\.profiler_default_tag\.\d+\.slice_0$"), 64, 2),
    (re.compile(r"(^|/)AclModule\.acl_\w+\.\d+\.slice_0$"), 128, 0),
]


#: streams whose records may rightly repeat (parsers.stream.MAY_REPEAT)
MAY_REPEAT = re.compile(r"\.additional\.(tensor_info|context_id_info|graph_id_map|fusion_op_info)\.")


def flip(d: Damage) -> str:
    """Bits flipped where a reader can tell: in the magic numbers of records (host, STARS, HWTS,
    AclModule). A bit flipped in a counter, a time or an id gives data that is valid as far as any
    reader can know, so 'output changed, hence a warning' could not be asked of it."""
    def layout(rel: str) -> Optional[Tuple[int, int]]:
        return next(((size, at) for pattern, size, at in MAGIC_STREAMS if pattern.search(rel)), None)

    rel = d.pick([r for r in d.files.slices if layout(r) and os.path.getsize(d.path(r)) >= 64])
    size, at = layout(rel) or (0, 0)
    data = bytearray(d.read(rel))
    records = len(data) // size
    if not records:
        raise NotApplicable(f"{rel} holds no whole record")
    chosen = sorted(d.rng.sample(range(records), min(records, d.rng.randint(1, 8))))
    for k in chosen:
        data[k * size + at + d.rng.randrange(2)] ^= 1 << d.rng.randrange(8)
    d.write(rel, bytes(data))
    return f"flip one bit of the magic number of records {chosen} ({size} B) of {rel}"


def zero(d: Damage) -> str:
    rel = d.pick(d.files.slices)
    data = bytearray(d.read(rel))
    if not data:
        raise NotApplicable(f"{rel} is empty")
    start = d.rng.randrange(len(data))
    n = min(len(data) - start, d.rng.choice([8, 64, 256, 4096]))
    data[start:start + n] = bytes(n)
    d.write(rel, bytes(data))
    return f"zero bytes {start}..{start + n} of {rel}"


def duplicate(d: Damage) -> str:
    """A span of a slice written twice in a row: whole records at record boundaries (a write done
    twice) where the stream's layout is known, else a span of an odd number of bytes (no record
    size is odd, so the stream no longer divides into records). A span of whole records that
    starts inside a record would give records that are each valid, a tail of one spliced onto
    the head of another, which no reader can tell from real data."""
    rel = d.pick(d.files.slices, d.files.dicts)
    data = d.read(rel)
    if len(data) < 2:
        raise NotApplicable(f"{rel} holds {len(data)} bytes")
    layout = next(((size, at) for pattern, size, at in MAGIC_STREAMS if pattern.search(rel)), None)
    if MAY_REPEAT.search(rel):  # an op's tensor records may rightly repeat byte for byte
        layout = None
    if layout is not None and len(data) >= 2 * layout[0] and d.rng.random() < 0.5:
        size = layout[0]
        start = d.rng.randrange(len(data) // size) * size
        n = min(len(data) // size * size - start, size * d.rng.randint(1, 4))
    else:
        start = d.rng.randrange(len(data) - 1)
        n = d.rng.randint(1, min(len(data) - start, 512))
        n -= 1 - n % 2 if n > 1 else 0
    d.write(rel, data[:start + n] + data[start:start + n] + data[start + n:])
    return f"duplicate bytes {start}..{start + n} of {rel} in place"


def delete_control(d: Damage) -> str:
    rel = d.pick(d.files.control, d.files.logs)
    os.unlink(d.path(rel))
    return f"delete {rel}"


DEEP = 200_000


def bad_json(d: Damage) -> str:
    rel = d.pick(d.files.control)
    text = d.read(rel)
    variant = d.rng.choice(["cut", "garbage", "list", "deep", "types", "empty_object", "non_utf8"])
    if variant == "cut":
        new = text[:d.rng.randrange(1, max(2, len(text)))]
    elif variant == "garbage":
        at = d.rng.randrange(len(text) or 1)
        new = text[:at] + b"}{,:\"" + text[at:]
    elif variant == "list":
        new = b"[" + text + b"]"
    elif variant == "deep":
        new = b"[" * DEEP + b"]" * DEEP
    elif variant == "types":  # every value a list: a wrong type everywhere
        new = re.sub(rb'(:\s*)("[^"]*"|-?[0-9.eE+-]+)', rb"\1[]", text)
    elif variant == "empty_object":
        new = b"{}"
    else:
        new = text.replace(b'"', b'"\xff\xfe', 1)
    d.write(rel, new)
    return f"bad JSON ({variant}) in {rel}"


#: numbers no control field can hold: beyond 64 bits, beyond a double's range, or too small to divide by
#: (-1 and 0 are left out: a cntvct_diff of -1 or an offset of 0 is valid data)
HUGE = ["18446744073709551616", "9223372036854775808", "-9223372036854775809", "1e308", "1e-300",
        "100000000000000000000000000000000000000"]


def huge_numbers(d: Damage) -> str:
    """A number of a control file or a dictionary id set to an extreme (2^64, 2^63, -2^63-1, 1e308,
    1e-300, 1e38). Values inside binary records are left to `flip` and `zero`: a counter of 2^64-1 is
    still a counter as far as a reader can know."""
    rel = d.pick(d.files.control, d.files.logs, d.files.dicts)
    data = d.read(rel)
    value = d.rng.choice(HUGE)
    numbers = list(re.finditer(rb"(?<![\w.])-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?(?![\w.])", data))
    if not numbers:
        raise NotApplicable(f"no number in {rel}")
    m = d.rng.choice(numbers)
    d.write(rel, data[:m.start()] + value.encode() + data[m.end():])
    return f"number {m.group().decode()!r} at offset {m.start()} of {rel} set to {value}"


def symlink_outside(d: Damage) -> str:
    rel = d.pick(d.files.all)
    data = d.read(rel)
    variant = d.rng.choice(["same", "other"])
    target = os.path.join(d.outside, "linked_" + os.path.basename(rel))
    with open(target, "wb") as f:
        f.write(data if variant == "same" else bytes(d.rng.getrandbits(8) for _ in range(max(1, len(data)))))
    d.replace_with(rel, lambda p: os.symlink(target, p))
    return f"{rel} -> symlink to a file outside the collection ({'same bytes' if variant == 'same' else 'random bytes'})"


def dev_zero(d: Damage) -> str:
    rel = d.pick(d.files.dicts, d.files.slices, d.files.control, d.files.logs)
    d.replace_with(rel, lambda p: os.symlink("/dev/zero", p))
    return f"{rel} -> symlink to /dev/zero"


def fifo(d: Damage) -> str:
    rel = d.pick(d.files.control, d.files.logs, d.files.dicts, d.files.slices)
    d.replace_with(rel, os.mkfifo)
    return f"{rel} -> FIFO (no writer)"


def empty_slice(d: Damage) -> str:
    rel = d.pick(d.files.slices, d.files.dicts)
    d.write(rel, b"")
    return f"{rel} emptied (0 bytes)"


def dir_for_file(d: Damage) -> str:
    rel = d.pick(d.files.control, d.files.logs, d.files.dicts, d.files.slices)
    d.replace_with(rel, os.mkdir)
    return f"{rel} -> empty directory"


def non_utf8_name(d: Damage) -> str:
    variant = d.rng.choice(["rename_file", "stray_file", "rename_collection"])
    if variant == "rename_collection":
        parent, name = os.path.split(d.root)
        new = os.path.join(os.fsencode(parent), os.fsencode(name) + b"_\xff\xfe")
        os.rename(d.root, new)
        d.new_root = os.fsdecode(new)
        return f"collection renamed to {os.path.basename(new)!r}"
    if variant == "stray_file":
        folder = os.path.dirname(d.path(d.pick(d.files.data)))
        name = b"unaging.api_event.data.slice_\xff" if d.rng.random() < 0.5 else b"\xe9t\xe9.slice_0"
        with open(os.path.join(os.fsencode(folder), name), "wb") as f:
            f.write(b"\x00" * 40)
        return f"stray file {name!r} added in {os.path.relpath(folder, d.root)}"
    rel = d.pick(d.files.data, d.files.control)
    src = os.fsencode(d.path(rel))
    head, tail = os.path.split(src)
    cut = d.rng.randrange(len(tail) + 1)
    new = os.path.join(head, tail[:cut] + b"\xff" + tail[cut:])
    os.rename(src, new)
    return f"{rel} renamed to {os.path.basename(new)!r}"


def unreadable(d: Damage) -> str:
    rel = d.pick(d.files.all)
    os.chmod(d.path(rel), 0)
    d.unreadable = d.path(rel)
    return f"{rel} made unreadable (mode 000)"


def missing_slice(d: Damage) -> str:
    """Slice N of a stream missing: a slice other than the last of a multi-slice stream deleted (with
    its marker), else a one-slice stream's slice_0 renamed slice_1."""
    streams: Dict[str, List[Tuple[int, str]]] = {}
    for rel in d.files.data:
        m = SLICE.match(rel)
        if m:
            streams.setdefault(m.group("stem"), []).append((int(m.group("n")), rel))
    multi = {k: sorted(v) for k, v in streams.items() if len(v) > 1}
    if multi:
        stem = d.rng.choice(sorted(multi))
        n, rel = d.rng.choice(multi[stem][:-1])
        d.target = rel
        os.unlink(d.path(rel))
        for marker in (rel + ".done", rel + ".complete"):
            if os.path.exists(d.path(marker)):
                os.unlink(d.path(marker))
        return f"slice {n} of {len(multi[stem])} of {stem} deleted"
    if not streams:
        raise NotApplicable("no sliced stream")
    stem = d.rng.choice(sorted(streams))
    _, rel = streams[stem][0]
    d.target = rel
    os.rename(d.path(rel), d.path(f"{stem}.slice_1"))
    return f"{rel} renamed {os.path.basename(stem)}.slice_1 (slice 0 missing)"


KINDS: Dict[str, Callable[[Damage], str]] = {f.__name__: f for f in (
    truncate, flip, zero, duplicate, delete_control, bad_json, huge_numbers, symlink_outside, dev_zero, fifo,
    empty_slice, dir_for_file, non_utf8_name, unreadable, missing_slice)}


# --- running the CLI -----------------------------------------------------------------------------

@dataclass
class Command:
    argv: List[str]
    code: Optional[int]        #: None: timed out (the process group was killed)
    stdout: str
    stderr: str
    seconds: float


def _preexec(who: Optional[RunAs]) -> Callable[[], None]:
    def preexec() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if who is not None:
            who.apply()
    return preexec


def run_cli(args: Sequence[str], timeout: float, who: Optional[RunAs] = None, cwd: Optional[str] = None) -> Command:
    """`python -m msprof_kit ARGS` in its own session, killed with its process group after timeout s."""
    argv = [sys.executable, "-m", "msprof_kit", *args]
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    if who is not None and who.uid is not None and cwd is not None:
        env["HOME"] = cwd
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                            preexec_fn=_preexec(who), cwd=cwd, env=env)
    try:
        out, err = proc.communicate(timeout=timeout)
        code: Optional[int] = proc.returncode
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = proc.communicate()
        code = None
    return Command(list(args), code, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"),
                   time.monotonic() - t0)


def run_all(collection: str, timeout: float, who: Optional[RunAs] = None, cwd: Optional[str] = None) -> List[Command]:
    """import, export summary, export timeline; stops after a command that timed out."""
    done = []
    for words in COMMANDS:
        c = run_cli([*words, "-dir", collection], timeout, who, cwd)
        done.append(c)
        if c.code is None:
            break
    return done


def warnings(stderr: str, collection: str) -> List[str]:
    return [line.replace(collection, "<DIR>") for line in stderr.splitlines() if line.startswith("Warning:")]
