"""The one exception tree of msprof-kit, and the warnings collected while working.

The library raises these and never prints; the CLI turns them into one line and an exit code.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, List, Optional, Tuple

from .progress import Progress


class MsprofKitError(Exception):
    """Base of every error msprof-kit raises on purpose. `exit_code` is what the CLI returns."""

    exit_code = 1

    def __init__(self, message: str, path: Optional[str] = None, offset: Optional[int] = None) -> None:
        self.path = path
        self.offset = offset
        self.message = message
        super().__init__(str(self))

    def __str__(self) -> str:
        where = ""
        if self.path is not None:
            where = f"{self.path}: " if self.offset is None else f"{self.path}: offset {self.offset}: "
        return f"{where}{self.message}"


class PathNotFound(MsprofKitError):
    """A path that does not exist."""

    exit_code = 2


class NotACollection(MsprofKitError):
    """A path that cannot hold a collection (a file where a folder of collections is expected)."""

    exit_code = 2


class UnreadableFile(MsprofKitError):
    """A file, folder or database that cannot be read (no permission, an I/O error, not the expected format)."""

    exit_code = 2


class MissingControlFile(MsprofKitError):
    """A control file the collection needs (info.json, start_info, ...) is absent."""

    exit_code = 3


class BadControlFile(MsprofKitError):
    """A control file that cannot be parsed (not JSON, not 'key: value' lines, not a regular file)."""

    exit_code = 3


class UnknownChip(MsprofKitError):
    """info.json names a chip msprof-kit does not decode (or no number)."""

    exit_code = 3


class NoData(MsprofKitError):
    """Nothing usable to import or show: no records, or none left after the checks."""

    exit_code = 4


class NoCollection(NoData, NotACollection):
    """A folder that exists but holds no collection or no usable data: "no data" (exit 4) under
    every command, as an empty folder is (README, exit codes). A path that does not exist or is not
    a folder is a path error (2)."""


class BadRecords(NoData):
    """A raw stream of a JOB collection that cannot be used (truncated though marked complete,
    or contradicting itself)."""


class BadOption(MsprofKitError):
    """An option value or a combination of options that cannot be honoured."""

    exit_code = 1


class StoreError(MsprofKitError):
    """The sqlite store cannot be opened, read or written as expected (damaged, from another version)."""

    exit_code = 5


class OutputError(MsprofKitError):
    """An output file could not be written (a full disk, no permission); `cause` says why."""

    exit_code = 10

    def __init__(self, message: str, path: Optional[str] = None, offset: Optional[int] = None,
                 cause: str = "") -> None:
        self.cause = cause
        super().__init__(message, path=path, offset=offset)

    def __reduce__(self) -> Tuple[type, Tuple[object, ...]]:  # whole across a worker's pipe
        return (type(self), (self.message, self.path, self.offset, self.cause))


class InvalidIteration(BadOption):
    """An iteration range outside the model's iterations (the reference's INVALID_STEP_TRACE code)."""

    exit_code = 9


@dataclass
class Diagnostics:
    """What one command tells its user besides its result: warnings (each names the file, offset and
    what was dropped), notes (where things went when not where they usually go), and its progress
    (silent unless the CLI gives a reporter; msprof_kit.progress)."""

    warnings: List[str] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)
    progress: Progress = field(default_factory=Progress, repr=False, compare=False)

    def note(self, message: str) -> None:
        """Add a note, once."""
        if message not in self.notes:
            self.notes.append(message)

    def warn(self, message: str) -> None:
        """Add a warning, once."""
        if message not in self.warnings:
            self.warnings.append(message)

    def extend(self, messages: Iterable[object]) -> None:
        """Add each message (an Issue, a text) as a warning, once."""
        for m in messages:
            self.warn(str(m))


# ---------------------------------------------------------------------------------------------
# Collectors (collectors/: acl.json, local run, pyACL session, emulator). Exit codes: 6 for a
# configuration or ACL error, 7 when the profiled application fails, 4 when no collection appeared.


class CollectorError(MsprofKitError):
    """Collecting a profile failed before, during or after the profiled program ran."""

    exit_code = 6


class AclJsonError(CollectorError):
    """A `profiler` section that the runtime would refuse. `key` names the offending key (None for
    the section itself); `acl_code` is the code aclInit would return (None when the runtime would
    accept the value but msprof-kit refuses it on purpose, e.g. a misspelt switch)."""

    def __init__(self, message: str, key: Optional[str] = None, acl_code: Optional[int] = None,
                 path: Optional[str] = None) -> None:
        self.key = key
        self.acl_code = acl_code
        super().__init__(message, path=path)


class ApplicationError(CollectorError):
    """The profiled program could not be started, crashed or exited non-zero."""

    exit_code = 7


class ApplicationTimeout(ApplicationError):
    """The profiled program ran longer than the timeout and was killed."""


class NoNewCollection(CollectorError):
    """The program ran but no new PROF_xxx / JOBxxx directory appeared where one was expected."""

    exit_code = 4


class PyAclNotAvailable(CollectorError):
    """The `acl` module (pyACL, part of CANN) is not importable and the emulator was not asked for."""


class AclError(CollectorError):
    """An `acl.*` call returned a non-zero code. `call` is the Python call ('acl.prof.start'),
    `code` the returned value; subclasses name the code (collectors/session.py maps them)."""

    def __init__(self, message: str, call: str = "", code: int = 0) -> None:
        self.call = call
        self.code = code
        super().__init__(message)


class AclInvalidParam(AclError):
    """100000 ACL_ERROR_INVALID_PARAM."""


class AclUninitialized(AclError):
    """100001 ACL_ERROR_UNINITIALIZE."""


class AclRepeatInitialize(AclError):
    """100002 ACL_ERROR_REPEAT_INITIALIZE."""


class AclInvalidFile(AclError):
    """100003 ACL_ERROR_INVALID_FILE."""


class AclParseFile(AclError):
    """100006 ACL_ERROR_PARSE_FILE."""


class AclInvalidProfilingConfig(AclError):
    """100010 ACL_ERROR_INVALID_PROFILING_CONFIG."""


class AclInvalidModelId(AclError):
    """100011 ACL_ERROR_INVALID_MODEL_ID."""


class AclRepeatFinalize(AclError):
    """100037 ACL_ERROR_REPEAT_FINALIZE."""


class ProfAlreadyRunning(AclError):
    """100042 ACL_ERROR_PROF_ALREADY_RUN."""


class ProfNotRunning(AclError):
    """100043 ACL_ERROR_PROF_NOT_RUN."""


class ProfRepeatSubscribe(AclError):
    """148046 ACL_ERROR_PROF_REPEAT_SUBSCRIBE."""


class ProfApiConflict(AclError):
    """148047 ACL_ERROR_PROF_API_CONFLICT."""


class AclInvalidDevice(AclError):
    """200002 ACL_ERROR_INVALID_DEVICE."""


class AclFeatureUnsupported(AclError):
    """200006 ACL_ERROR_FEATURE_UNSUPPORTED."""


class ProfModulesUnsupported(AclError):
    """200007 ACL_ERROR_PROF_MODULES_UNSUPPORTED."""


class StorageOverLimit(AclError):
    """300000 ACL_ERROR_STORAGE_OVER_LIMIT."""


class AclInternalError(AclError):
    """500000 ACL_ERROR_INTERNAL_ERROR."""


class ProfilingFailure(AclError):
    """500005 ACL_ERROR_PROFILING_FAILURE."""


class MsproftxFailed(AclError):
    """-1: the collector's PROFILING_FAILED, returned by msproftx calls made outside start/stop or
    without the msproftx data type."""


class AclConfigRejected(AclError):
    """acl.prof.create_config / create_stamp returned a NULL handle (0)."""


class UnknownAclError(AclError):
    """A non-zero code the mapping table does not know."""


# ---------------------------------------------------------------------------------------------
# SoC boards over SSH (collectors/board/). Each failure of spec/collectors.md §4.4 has its own
# class. Exit codes: 6 configuration (ini, options, path characters), 2 a local `main` that is
# missing, 8 connecting (unreachable, login, host key), 10 transfers (upload, copy back), 7 the
# program on the board, 4 no or incomplete JOB collection.


class BoardError(CollectorError):
    """Collecting on a SoC board over SSH failed. No message ever holds the ini's password."""


class BoardConfigError(BoardError):
    """board.ini, or an option of the board collect, is missing or wrong (found before connecting)."""


class UnsafePath(BoardError):
    """A local or board path holds a character the profiler does not accept (letters, digits, `_`,
    and `/` `.` `-` as separators only)."""


class BoardProgramMissing(BoardError):
    """The local `main` to run on the board does not exist, is not a file or is not executable."""

    exit_code = 2


class BoardConnectionError(BoardError):
    """The SSH connection to the board could not be made or broke."""

    exit_code = 8


class BoardUnreachable(BoardConnectionError):
    """Connection refused, no route, name not resolved, or no answer within the connect timeout."""


class BoardAuthFailed(BoardConnectionError):
    """The board refused the login (wrong password or key)."""


class UnknownHostKey(BoardConnectionError):
    """The board's host key is not in known_hosts and accepting a new key was not asked for."""


class HostKeyChanged(BoardConnectionError):
    """The board's host key differs from the one recorded in known_hosts (always an error)."""


class BoardTransferError(BoardError):
    """An SFTP transfer to or from the board failed."""

    exit_code = 10


class UploadFailed(BoardTransferError):
    """The project, or acl.json, could not be written on the board (disk full, permissions)."""


class CopyBackFailed(BoardTransferError):
    """A JOB collection could not be copied back whole (an error, or a file count or size mismatch);
    the partial local copy has been removed."""


class BoardProgramNotRunnable(BoardError, ApplicationError):
    """The shell on the board could not start `main` (exit status 126 or 127: not executable, wrong
    architecture, missing interpreter)."""


class BoardProgramFailed(BoardError, ApplicationError):
    """`main` on the board exited non-zero or was killed by a signal."""


class BoardProgramTimeout(BoardError, ApplicationTimeout):
    """`main` on the board ran past the timeout and was killed."""


class NoJobProduced(BoardError, NoNewCollection):
    """`main` ran but no new JOB directory appeared on the board."""


class IncompleteJob(BoardError, NoNewCollection):
    """A new JOB directory lacks `data/` or `info.json.N` (the program did not call
    svp_acl_finalize); it was copied back all the same."""


# ---------------------------------------------------------------------------------------------
# The inference runner (collectors/infer/), after ais_bench. Exit codes: 6 for options its rules
# refuse; when msprof runs the inference and fails, msprof's own exit status.


class InferOptionError(CollectorError):
    """Options of the inference runner that ais_bench's rules refuse (spec/collectors.md §5.2):
    --profiler with --dump, either without --output, --output-dirname without --output, a loop
    below 1, a bad device list, inputs that do not fit the model."""


class MsprofFailed(ApplicationError):
    """msprof, running the inference under it, exited non-zero. `status` is what the process
    returned (negative: killed by that signal); `exit_code` passes it on (128 + N for signal N),
    as ais_bench returns msprof's exit code."""

    def __init__(self, message: str, status: int, path: Optional[str] = None) -> None:
        self.status = status
        super().__init__(message, path=path)
        self.exit_code = status if 0 < status < 256 else (128 - status if status < 0 else 1)
