"""Collect a profile by acl.json: write the file where the program reads it, run the program, find
the PROF_xxx (CANN) or JOBxxx (SoC) directory the run produced, and put the old acl.json back.
Importing and exporting the result (`collect --all`) is the CLI's pipeline (msprof_kit/cli.py).

Where things go (docs/collectors.md has the full story):
* acl.json is written to `acl_json_path` when given, else to `./acl.json` in the current
  directory, which is where a program calling `aclInit("acl.json")` looks (relative paths are
  resolved against the cwd, and the program runs in the cwd). A file already there is put back
  byte for byte afterwards; a file msprof-kit created is removed.
* The runtime writes into `output` when that is an existing writable directory, else into the
  program's own directory (spec/collectors.md §2.1, §2.3). msprof-kit creates a missing `output`
  first; both places are searched, and a fallback is reported as a warning.
* The new collection is found by listing both places before and after the run and keeping the
  entries (name and inode) that were not there before, so an older PROF_xxx is never picked up.
"""
from __future__ import annotations

import collections
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from typing import IO, Deque, Dict, List, Mapping, Optional, Set, Tuple

from msprof_kit.errors import (ApplicationError, ApplicationTimeout, BadOption, CollectorError, Diagnostics,
                               NoNewCollection)
from msprof_kit.interrupt import terminate_as_interrupt

from .acljson import flavour_of, switch_is_on, validate, write_acl_json

# the directory names msprof's analysis accepts as PROF collections; SoC boards name theirs JOB...
PROF_NAME = re.compile(r"PROF_\d{1,10}_\d{1,20}_[A-Z0-9]{5,20}")
STDERR_TAIL = 20        # lines of the program's stderr kept for the error message
KILL_GRACE_S = 2.0      # between SIGTERM and SIGKILL when a run times out

Listing = Set[Tuple[str, int]]


def resolve_program(argv0: str) -> str:
    """The absolute path of the program: a path (with a /) as given, from the cwd; a bare name
    from PATH. ApplicationError when it is missing or not executable."""
    if os.sep in argv0:
        path = os.path.abspath(argv0)
    else:
        found = shutil.which(argv0)
        if found is None:
            raise ApplicationError(f"{argv0}: no such program on PATH")
        path = os.path.abspath(found)
    if not os.path.isfile(path):
        raise ApplicationError("no such program", path=path)
    if not os.access(path, os.X_OK):
        raise ApplicationError("the program is not executable (chmod +x it)", path=path)
    return path


def is_collection_name(root: str, name: str) -> bool:
    """Whether `root`/`name` is a folder named as a collection (PROF_..., JOB...)."""
    path = os.path.join(root, name)
    return os.path.isdir(path) and (bool(PROF_NAME.fullmatch(name)) or name.startswith("JOB"))


def listing(root: str) -> Listing:
    """(name, inode) of the PROF_xxx / JOBxxx directories in `root` (empty when it is missing)."""
    try:
        entries = list(os.scandir(root))
    except OSError:
        return set()
    return {(e.name, e.inode()) for e in entries if is_collection_name(root, e.name)}


def new_collections(before: Mapping[str, Listing]) -> List[str]:
    """The collection directories now in each root of `before` that were not there before."""
    found: List[str] = []
    for root, old in before.items():
        found += [os.path.join(root, name) for name, ino in sorted(listing(root) - old)]
    return found


def _incomplete(path: str) -> Optional[str]:
    """Why the collection looks unfinished (no end_info / info.json.0), or None."""
    name = os.path.basename(path)
    if name.startswith("JOB"):
        return None if os.path.isfile(os.path.join(path, "info.json.0")) else "it has no info.json.0"
    subs = [s for s in sorted(os.listdir(path)) if s == "host" or s.startswith("device_")]
    if not subs:
        return "it has no host/ or device_N/ directory"
    for sub in subs:
        if not any(f.startswith("end_info") for f in os.listdir(os.path.join(path, sub))):
            return f"{sub}/ has no end_info"
    return None


def _tee(stream: IO[bytes], tail: Deque[str]) -> None:
    """Pass the program's stderr through to ours, keeping the last lines for an error message."""
    for raw in iter(stream.readline, b""):
        line = raw.decode("utf-8", errors="replace")
        sys.stderr.write(line)
        sys.stderr.flush()
        if line.strip():
            tail.append(line.strip())
    stream.close()


def _stop_group(proc: "subprocess.Popen[bytes]") -> None:
    """SIGTERM the program's process group, SIGKILL it after a grace period."""
    for sig, wait in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, None)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


def run_program(program: str, argv: List[str], timeout: Optional[float]) -> Tuple[int, List[str]]:
    """Run `program` with `argv` (argv[0] as the user wrote it) in the cwd, its stdout passed
    through and its stderr teed; (exit status, last stderr lines). A negative status is the signal
    that ended it. ApplicationTimeout when it runs past `timeout` seconds (it is killed, with its
    process group)."""
    try:
        proc = subprocess.Popen(argv, executable=program, stderr=subprocess.PIPE, start_new_session=True)
    except OSError as exc:
        raise ApplicationError(f"cannot start the program: {exc.strerror or exc}", path=program) from exc
    tail: Deque[str] = collections.deque(maxlen=STDERR_TAIL)
    assert proc.stderr is not None
    reader = threading.Thread(target=_tee, args=(proc.stderr, tail), daemon=True)
    try:  # from here on, whatever stops us (Ctrl-C, SIGTERM) stops the program first
        reader.start()
        status = proc.wait(timeout if timeout and timeout > 0 else None)
    except subprocess.TimeoutExpired:
        _stop_group(proc)
        reader.join(KILL_GRACE_S)
        raise ApplicationTimeout(f"the program ran longer than the {timeout:g} s timeout and was killed",
                                 path=program) from None
    except BaseException:  # Ctrl-C and friends: the program must not outlive us
        _stop_group(proc)
        raise
    reader.join()
    return status, list(tail)


class _AclJsonSwap:
    """Put msprof-kit's acl.json at `path`, and later the previous file back (or remove ours). A
    symbolic link is written through: its target is swapped and put back, the link stays a link."""

    def __init__(self, path: str, diag: Diagnostics) -> None:
        self.path = os.path.realpath(path)
        self.saved: Optional[bytes] = None
        self.mode = 0o640
        if os.path.isdir(self.path):
            raise CollectorError("the acl.json path is a directory", path=self.path)
        if os.path.exists(self.path):
            try:
                with open(self.path, "rb") as f:
                    self.saved = f.read()
                self.mode = os.stat(self.path).st_mode & 0o7777
            except OSError as exc:
                raise CollectorError(f"cannot read the existing acl.json: {exc.strerror or exc}",
                                     path=self.path) from exc
            other = self._other_sections(self.saved)
            if other:
                diag.warn(f"{self.path}: the existing acl.json's other sections ({', '.join(other)}) are not "
                          "used during the profiling run; the file is put back afterwards")

    @staticmethod
    def _other_sections(text: bytes) -> List[str]:
        try:
            config = json.loads(text.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            return []
        return sorted(k for k in config if k != "profiler") if isinstance(config, dict) else []

    def write(self, profiler: Mapping[str, object]) -> None:
        write_acl_json(self.path, profiler)

    def restore(self) -> None:
        if self.saved is None:
            if os.path.exists(self.path):
                os.remove(self.path)
            return
        fd, tmp = tempfile.mkstemp(prefix=".acl.json.", dir=os.path.dirname(self.path))
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(self.saved)
            os.chmod(tmp, self.mode)
            os.replace(tmp, self.path)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)


def _prepare_output(out_dir: str, fallback: str, diag: Diagnostics) -> None:
    """Create a missing output directory; warn when the runtime will have to fall back."""
    if not os.path.exists(out_dir):
        try:
            os.makedirs(out_dir, mode=0o750)
        except OSError as exc:
            diag.warn(f"{out_dir}: cannot create the output directory ({exc.strerror or exc}); "
                      f"the runtime writes into the program's directory {fallback}")
            return
    if not os.path.isdir(out_dir) or not os.access(out_dir, os.W_OK | os.X_OK):
        diag.warn(f"{out_dir}: the output is not a writable directory; the runtime writes into the "
                  f"program's directory {fallback}")


def _describe_exit(status: int) -> str:
    if status < 0:
        try:
            name = signal.Signals(-status).name
        except ValueError:
            name = f"signal {-status}"
        return f"was killed by {name}" + (" (it crashed)" if name in ("SIGSEGV", "SIGBUS", "SIGABRT", "SIGILL",
                                                                         "SIGFPE") else "")
    return f"exited with status {status}"


def collect_local(application: str, profiler: Mapping[str, object], output: Optional[str] = None,
                  acl_json_path: Optional[str] = None, timeout: Optional[float] = None,
                  diag: Optional[Diagnostics] = None) -> List[str]:
    """Profile one run of `application` (a command line, split as a shell would, never run through
    a shell) through acl.json, and return the new collection directories (absolute paths).

    `profiler` is the `profiler` section (cann_profiler_config / soc_profiler_config); `output`,
    when given, replaces its `output` key. `acl_json_path` is where the program reads acl.json
    (default ./acl.json). `timeout` is in seconds (None or <= 0: none). Warnings (output fallback,
    incomplete collection, profiling switched off) go to `diag`.

    Raises AclJsonError for a section the runtime would refuse (nothing is run), ApplicationError
    when the program cannot start, crashes or exits non-zero, ApplicationTimeout, and
    NoNewCollection when the switch is on and no new directory appeared. SIGTERM and SIGHUP are
    handled as Ctrl-C: the program's process group is killed and acl.json put back."""
    with terminate_as_interrupt():
        return _collect_local(application, profiler, output, acl_json_path, timeout,
                              diag if diag is not None else Diagnostics())


def _collect_local(application: str, profiler: Mapping[str, object], output: Optional[str],
                   acl_json_path: Optional[str], timeout: Optional[float], diag: Diagnostics) -> List[str]:
    """collect_local, inside its signal handling."""
    try:
        argv = shlex.split(application)
    except ValueError as exc:
        raise BadOption(f"cannot split the application command line: {exc}") from exc
    if not argv:
        raise BadOption("the application command line is empty")
    program = resolve_program(argv[0])

    section: Dict[str, object] = dict(profiler)
    if output is not None:
        section["output"] = output
    validate(section, flavour_of(section))

    exe_dir = os.path.dirname(os.path.realpath(program))
    out_value = section.get("output")
    out_dir = os.path.abspath(str(out_value)) if out_value else exe_dir
    profiling = switch_is_on(section)
    if profiling and out_dir != exe_dir:
        _prepare_output(out_dir, exe_dir, diag)
    if not profiling:
        diag.warn('the profiler switch is not "on": the program runs without profiling and no collection '
                  "is expected")

    roots = [out_dir] if out_dir == exe_dir else [out_dir, exe_dir]
    before = {root: listing(root) for root in roots}
    swap = _AclJsonSwap(acl_json_path or "acl.json", diag)
    try:
        swap.write(section)
        status, tail = run_program(program, argv, timeout)
    except ApplicationTimeout as exc:
        _restore_quietly(swap, diag)
        found = new_collections(before)
        partial = f"; it left {', '.join(found)}" if found else ""
        raise ApplicationTimeout(exc.message + partial, path=exc.path) from None
    except BaseException:
        _restore_quietly(swap, diag)
        raise
    found = new_collections(before)
    try:
        swap.restore()
    except OSError as exc:
        kept = f" (the run's data is in {', '.join(found)})" if found else ""
        raise CollectorError(f"cannot put the previous acl.json back: {exc.strerror or exc}{kept}",
                             path=swap.path) from exc

    if status != 0:
        partial = f"; it left {', '.join(found)}" if found else ""
        last = f": {tail[-1][:300]}" if tail else ""
        raise ApplicationError(f"the program {_describe_exit(status)}{last}{partial}", path=program)
    if not profiling:
        return found
    if not found:
        raise NoNewCollection(
            f"the program ran but no new PROF_xxx or JOBxxx directory appeared in {' or '.join(roots)}; "
            f"check that it reads {swap.path} (--acl-json-path tells where it reads acl.json) and calls "
            "aclFinalize")
    for path in found:
        if os.path.dirname(path) != out_dir:
            diag.warn(f"{path}: the runtime wrote into the program's directory instead of {out_dir}")
        why = _incomplete(path)
        if why:
            diag.warn(f"{path}: the collection looks incomplete ({why}); did the program call aclFinalize?")
    return found


def _restore_quietly(swap: _AclJsonSwap, diag: Diagnostics) -> None:
    """Put acl.json back while another error is on its way: a failure here becomes a warning, so
    it cannot hide that error."""
    try:
        swap.restore()
    except OSError as exc:
        diag.warn(f"{swap.path}: cannot put the previous acl.json back ({exc.strerror or exc})")
