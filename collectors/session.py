"""Profile a region of a Python program through pyACL's profiling API (spec/collectors.md §1).

    with ProfilingSession("/abs/prof_out", devices=[0], data_types="acl_api,task_time,msproftx") as s:
        s.mark("warm-up done")
        with s.range("inference"):
            run_model()
    print(s.collections)   # the new PROF_xxx directories

The session makes the documented calls in the documented order (§1.4):
`[acl.init] -> acl.prof.init -> acl.prof.create_config -> acl.prof.start` on entry, and on exit,
also when anything failed, `acl.prof.stop -> acl.prof.destroy_config -> acl.prof.finalize ->
[acl.finalize]`: only the steps whose opening call succeeded are undone, each is attempted even
when an earlier one fails, and a clean-up failure never hides the error that caused the clean-up
(it becomes a Diagnostics warning and a note on that error).

Every non-zero return becomes the named error of `ACL_ERRORS`; a code the table does not know
becomes UnknownAclError. The `acl` module is the real pyACL when importable, else (only when
asked) the emulator, which announces itself (collectors/acl_runtime.get_acl).
"""
from __future__ import annotations

import contextlib
import os
import threading
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Type, Union

from msprof_kit.errors import (AclConfigRejected, AclError, AclFeatureUnsupported, AclInternalError,
                               AclInvalidDevice, AclInvalidFile, AclInvalidModelId, AclInvalidParam,
                               AclInvalidProfilingConfig, AclParseFile, AclRepeatFinalize, AclRepeatInitialize,
                               AclUninitialized, BadOption, CollectorError, Diagnostics, MsproftxFailed,
                               ProfAlreadyRunning, ProfApiConflict, ProfilingFailure, ProfModulesUnsupported,
                               ProfNotRunning, ProfRepeatSubscribe, StorageOverLimit, UnknownAclError)

from .acl_codes import (ACL_AICORE_NONE, ACL_PROF_AICORE_METRICS, ACL_PROF_MSPROFTX, MAX_DEVICES,
                        aicore_metrics_value, code_name, data_type_config)
from .acl_runtime import get_acl
from .local import Listing, listing, new_collections

# code -> (the error raised, what it means for the caller). Sources: acl_base.h (§1.3) and the
# situations of the §1.4 table that return each code.
ACL_ERRORS: Dict[int, Tuple[Type[AclError], str]] = {
    100000: (AclInvalidParam, "an argument was refused (empty or over-long path, a NULL or unknown config, "
                              "data types 0)"),
    100001: (AclUninitialized, "acl.init has not been called; call it first (ProfilingSession(init_acl=True) "
                               "does)"),
    100002: (AclRepeatInitialize, "already initialised; acl.init and acl.prof.init are called once per process"),
    100003: (AclInvalidFile, "the path cannot be created or written, holds characters the profiler refuses, "
                             "or the acl.json file cannot be read"),
    100006: (AclParseFile, "the acl.json file is not valid JSON"),
    100010: (AclInvalidProfilingConfig, "acl.prof.stop must be given the config acl.prof.start was given"),
    100011: (AclInvalidModelId, "no model has this id"),
    100037: (AclRepeatFinalize, "already finalised"),
    100042: (ProfAlreadyRunning, "profiling is already on: acl.json or msprof switched it on (acl.prof.* "
                                 "cannot be used then), or a device of this config is already started"),
    100043: (ProfNotRunning, "profiling is not running: acl.prof.init was not called, or a device of this "
                             "config was not started"),
    148046: (ProfRepeatSubscribe, "the model is already subscribed"),
    148047: (ProfApiConflict, "the subscription API is in use; it cannot be mixed with acl.prof.init/finalize"),
    200002: (AclInvalidDevice, "a device of the config is not available"),
    200006: (AclFeatureUnsupported, "the profiling API is not supported on this platform or mode"),
    200007: (ProfModulesUnsupported, "the data types hold bits this CANN does not support"),
    300000: (StorageOverLimit, "the profiling storage limit is exceeded"),
    500000: (AclInternalError, "internal error of the runtime (see the CANN log)"),
    500005: (ProfilingFailure, "the profiler failed (see the CANN log under $ASCEND_PROCESS_LOG_PATH or "
                               "~/ascend/log)"),
    -1: (MsproftxFailed, "msproftx is not active: markers must sit between start and stop of a config with "
                         "the msproftx data type"),
}
UNKNOWN_MEANING = "a code msprof-kit does not know; see acl_base.h of the installed CANN"


def acl_error(call: str, code: int) -> AclError:
    """The named error for `code` returned by `call` ('acl.prof.start')."""
    cls, meaning = ACL_ERRORS.get(code, (UnknownAclError, UNKNOWN_MEANING))
    return cls(f"{call} returned {code_name(code)}: {meaning}", call=call, code=code)


def check(call: str, ret: Any) -> None:
    """Raise the named error unless `ret` is 0 (ACL_SUCCESS)."""
    if isinstance(ret, bool) or not isinstance(ret, int):
        raise UnknownAclError(f"{call} returned {ret!r}, not an ACL code", call=call, code=0)
    if ret != 0:
        raise acl_error(call, ret)


def _attach(original: BaseException, failure: BaseException) -> None:
    note = f"clean-up also failed: {failure}"
    add_note = getattr(original, "add_note", None)  # Python 3.11+
    if add_note is not None:
        add_note(note)


class ProfilingSession:
    """A pyACL profiling session (see the module docstring).

    `output`: result directory (made absolute, as acl.prof.init wants); `devices`: device ids
    (empty only with the msproftx data type); `data_types`: an int of ACL_PROF_* bits or names
    ('acl_api,task_time' or a list, acl_codes.DATA_TYPE_BITS); `aicore_metrics`: a metric-group
    name, an enum value, or None (a metric group also sets the aicore_metrics bit, without which it
    has no effect); `acl`: the module to use (default: get_acl(emulate)); `init_acl`: call
    acl.init(acl_json) first and acl.finalize last, for programs that do not do it themselves."""

    def __init__(self, output: str, devices: Sequence[int] = (0,),
                 data_types: Union[int, str, Sequence[str]] = "acl_api,task_time",
                 aicore_metrics: Union[int, str, None] = None, acl: Optional[Any] = None,
                 emulate: Optional[bool] = None, init_acl: bool = False, acl_json: str = "",
                 diag: Optional[Diagnostics] = None) -> None:
        self.diag = diag if diag is not None else Diagnostics()
        if acl is None:
            acl, self.emulated = get_acl(emulate, self.diag)
        else:
            self.emulated = bool(getattr(acl, "__emulated__", False))
        self.acl: Any = acl  # a module (pyACL) or the emulator: attributes looked up at run time
        self.output = os.path.abspath(output)
        self.devices = [int(d) for d in devices]
        self.data_types = data_type_config(data_types if isinstance(data_types, (int, str)) else list(data_types))
        self.aicore_metrics = aicore_metrics_value(aicore_metrics)
        if self.aicore_metrics != ACL_AICORE_NONE and not self.data_types & ACL_PROF_AICORE_METRICS:
            self.data_types |= ACL_PROF_AICORE_METRICS
        self.init_acl = init_acl
        self.acl_json = acl_json
        self.collections: List[str] = []
        self.cleanup_errors: List[BaseException] = []
        self._acl_inited = False
        self._prof_inited = False
        self._config = 0
        self._started = False
        self._before: Dict[str, Listing] = {}
        self._pushed = threading.local()
        self._ranges: Dict[int, int] = {}
        self._check_devices()

    def _check_devices(self) -> None:
        """What create_config would refuse with a bare NULL, said precisely beforehand."""
        if len(set(self.devices)) != len(self.devices):
            raise BadOption(f"device ids {self.devices} repeat an id")
        if len(self.devices) > MAX_DEVICES or any(d < 0 for d in self.devices):
            raise BadOption(f"device ids {self.devices}: at most {MAX_DEVICES} ids, each >= 0")
        if not self.devices and not self.data_types & ACL_PROF_MSPROFTX:
            raise BadOption("no device given: a config without devices is allowed only with the msproftx data type")

    # -- opening and closing ----------------------------------------------------------------------
    def start(self) -> "ProfilingSession":
        """Open the session ([acl.init], prof.init, create_config, start); on any failure what
        was opened is closed again before the error is raised."""
        if self._prof_inited or self._acl_inited:
            raise CollectorError("the profiling session is already started")
        self.cleanup_errors = []
        try:
            if self.init_acl:
                check("acl.init", self.acl.init(self.acl_json))
                self._acl_inited = True
            self._before = {self.output: listing(self.output)}
            check("acl.prof.init", self.acl.prof.init(self.output))
            self._prof_inited = True
            config = self.acl.prof.create_config(list(self.devices), self.aicore_metrics, 0, self.data_types)
            if not config:
                raise self._rejected()
            self._config = config
            check("acl.prof.start", self.acl.prof.start(config))
            self._started = True
        except BaseException as exc:
            self._cleanup(exc)
            raise
        return self

    def _rejected(self) -> AclConfigRejected:
        why = ""
        count = getattr(getattr(self.acl, "rt", None), "get_device_count", None)
        answer = count() if count is not None else None
        if isinstance(answer, tuple) and len(answer) == 2 and answer[1] == 0:  # (count, ret)
            found = int(answer[0])
            missing = [d for d in self.devices if d >= found]
            if missing or len(self.devices) > found:
                why = f": device {missing[0] if missing else self.devices[-1]} is not among the {found} device(s)"
        return AclConfigRejected("acl.prof.create_config returned NULL" + (why or ": the device list, metrics or "
                                 "data types were refused"), call="acl.prof.create_config", code=0)

    def stop(self) -> List[str]:
        """Stop and clean up; the new PROF_xxx directories (also in `collections`). The first
        clean-up failure is raised (the others are Diagnostics warnings)."""
        failures = self._cleanup(None)
        if failures:
            for extra in failures[1:]:
                self.diag.warn(f"clean-up also failed: {extra}")
            raise failures[0]
        return self.collections

    def _attempt(self, call: str, fn: Any, *args: Any) -> Optional[BaseException]:
        try:
            result = fn(*args)
            if call != "acl.prof.destroy_stamp":
                check(call, result)
        except Exception as exc:  # recorded and reported by _cleanup, never dropped
            return exc
        return None

    def _cleanup(self, original: Optional[BaseException]) -> List[BaseException]:
        """Undo what was opened, in the documented order; returns the failures. With an
        `original` error, each failure becomes a warning and a note on it."""
        failures: List[BaseException] = []
        prof = self.acl.prof
        steps: List[Tuple[str, Any, Tuple[Any, ...]]] = []
        if self._started:
            for range_id, stamp in list(self._ranges.items()):
                self.diag.warn(f"msproftx range {range_id} was still open at stop; it is closed")
                steps += [("acl.prof.range_stop", prof.range_stop, (range_id,)),
                          ("acl.prof.destroy_stamp", prof.destroy_stamp, (stamp,))]
            for stamp in reversed(self._stack()):
                self.diag.warn("an msproftx push was not popped before stop; it is popped")
                steps += [("acl.prof.pop", prof.pop, ()), ("acl.prof.destroy_stamp", prof.destroy_stamp, (stamp,))]
            steps.append(("acl.prof.stop", prof.stop, (self._config,)))
        if self._config:
            steps.append(("acl.prof.destroy_config", prof.destroy_config, (self._config,)))
        if self._prof_inited:
            steps.append(("acl.prof.finalize", prof.finalize, ()))
        if self._acl_inited:
            steps.append(("acl.finalize", self.acl.finalize, ()))
        self._ranges.clear()
        self._pushed.stack = []
        self._started, self._config, self._prof_inited, self._acl_inited = False, 0, False, False
        for call, fn, args in steps:
            failure = self._attempt(call, fn, *args)
            if failure is not None:
                failures.append(failure)
        if self._before:
            self.collections = new_collections(self._before)
            self._before = {}
        self.cleanup_errors = failures
        if original is not None:
            for failure in failures:
                self.diag.warn(f"clean-up after the error also failed: {failure}")
                _attach(original, failure)
        return failures

    def __enter__(self) -> "ProfilingSession":
        return self.start()

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException], tb: Any) -> None:
        if exc is None:
            self.stop()
        else:
            self._cleanup(exc)

    # -- msproftx markers -------------------------------------------------------------------------
    def _stack(self) -> List[int]:
        stack: Optional[List[int]] = getattr(self._pushed, "stack", None)
        if stack is None:
            stack = self._pushed.stack = []
        return stack

    def _stamp(self, message: str) -> int:
        if not self._started:
            raise CollectorError("msproftx markers go between the session's start and stop")
        if not self.data_types & ACL_PROF_MSPROFTX:
            raise BadOption("msproftx markers need the msproftx data type (data_types=...,msproftx)")
        stamp = self.acl.prof.create_stamp()
        if not stamp:
            raise MsproftxFailed("acl.prof.create_stamp returned NULL: " + ACL_ERRORS[-1][1],
                                 call="acl.prof.create_stamp", code=0)
        try:
            encoded = message.encode("utf-8")
            check("acl.prof.set_stamp_trace_message",
                  self.acl.prof.set_stamp_trace_message(stamp, message, len(encoded)))
        except BaseException:
            self.acl.prof.destroy_stamp(stamp)
            raise
        return stamp

    def mark(self, message: str) -> None:
        """An instant marker."""
        stamp = self._stamp(message)
        try:
            check("acl.prof.mark", self.acl.prof.mark(stamp))
        finally:
            self.acl.prof.destroy_stamp(stamp)

    def push(self, message: str) -> None:
        """Open a nested region on this thread (closed by pop on the same thread)."""
        stamp = self._stamp(message)
        try:
            check("acl.prof.push", self.acl.prof.push(stamp))
        except BaseException:
            self.acl.prof.destroy_stamp(stamp)
            raise
        self._stack().append(stamp)

    def pop(self) -> None:
        """Close this thread's last region opened by push."""
        stack = self._stack()
        if not stack:
            raise CollectorError("msproftx pop without a push on this thread")
        check("acl.prof.pop", self.acl.prof.pop())
        self.acl.prof.destroy_stamp(stack.pop())

    def range_start(self, message: str) -> int:
        """Open a region that may be closed on another thread; returns its range id."""
        stamp = self._stamp(message)
        try:
            range_id, ret = self.acl.prof.range_start(stamp)
            check("acl.prof.range_start", ret)
        except BaseException:
            self.acl.prof.destroy_stamp(stamp)
            raise
        self._ranges[range_id] = stamp
        return int(range_id)

    def range_stop(self, range_id: int) -> None:
        """Close the region range_start opened as `range_id`."""
        if range_id not in self._ranges:
            raise CollectorError(f"msproftx range {range_id} was not started by this session")
        check("acl.prof.range_stop", self.acl.prof.range_stop(range_id))
        self.acl.prof.destroy_stamp(self._ranges.pop(range_id))

    @contextlib.contextmanager
    def range(self, message: str) -> Iterator[int]:
        """A region around the `with` body (range_start, then range_stop even when the body raises);
        yields its range id."""
        range_id = self.range_start(message)
        try:
            yield range_id
        except BaseException as exc:
            try:
                self.range_stop(range_id)
            except AclError as failure:  # the body's error stays the one raised
                self.diag.warn(f"closing msproftx range {range_id} also failed: {failure}")
                _attach(exc, failure)
            raise
        self.range_stop(range_id)
