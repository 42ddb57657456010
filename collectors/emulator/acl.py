"""The emulated `acl` module: EmulatedAcl (acl.init / acl.finalize and the state machine behind every
call: profiling configs, start and stop, subscriptions, devices, contexts and models) and its
`prof`, `rt` and `mdl` namespaces, which forward each call to it; and the emulator the environment
configures. Its records live in state.py, the files it writes in tree.py, and msproftx in
msproftx.py; the module docstring of the package has the rules and their sources."""
from __future__ import annotations

import json
import os
import random
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from msprof_kit.errors import AclJsonError, BadOption

from .. import acljson
from ..acl_codes import (ACL_AICORE_NONE, ACL_ERROR_INVALID_FILE, ACL_ERROR_INVALID_MODEL_ID,
                         ACL_ERROR_INVALID_PARAM, ACL_ERROR_INVALID_DEVICE, ACL_ERROR_INVALID_PROFILING_CONFIG,
                         ACL_ERROR_PARSE_FILE, ACL_ERROR_PROF_ALREADY_RUN, ACL_ERROR_PROF_API_CONFLICT,
                         ACL_ERROR_PROF_MODULES_UNSUPPORTED, ACL_ERROR_PROF_NOT_RUN,
                         ACL_ERROR_PROF_REPEAT_SUBSCRIBE, ACL_ERROR_PROFILING_FAILURE, ACL_ERROR_REPEAT_FINALIZE,
                         ACL_ERROR_REPEAT_INITIALIZE, ACL_ERROR_UNINITIALIZE, ACL_PROF_ACL_API, ACL_PROF_MSPROFTX,
                         ACL_PROF_TASK_TIME, ACL_SUCCESS, AICORE_METRICS, KNOWN_DATA_TYPE_MASK, MAX_DEVICES)
from . import msproftx
from .state import (API_CTRL, CMD, CURRENT, DEFAULT_EXEC_SECONDS, HANDLE_BASE, OFF, PROFILES, STRICT, SUBSCRIBE,
                    Call, Collection, ProfConfig, State, Subscription, monotonic_raw_ns, started_keys)
from .tree import close_collection, open_collection, prof_name, write_event


class _Namespace:
    def __init__(self, owner: "EmulatedAcl") -> None:
        self._acl = owner


class EmulatedProf(_Namespace):
    """EMULATION of `acl.prof` (see the module docstring for the rules and their sources)."""

    def init(self, profiler_result_path: str) -> int:
        """acl.prof.init: the profiling result folder; an ACL error code."""
        return self._acl._call("acl.prof.init", (profiler_result_path,), lambda: self._acl._prof_init(profiler_result_path))

    def create_config(self, device_list: Sequence[int], aicore_metrics: int, aicore_events: Any,
                      data_type_config: int) -> int:
        """acl.prof.create_config: a config handle (0 when refused)."""
        args = (list(device_list) if isinstance(device_list, (list, tuple)) else device_list, aicore_metrics,
                aicore_events, data_type_config)
        return self._acl._call("acl.prof.create_config", args, lambda: self._acl._create_config(*args))

    def destroy_config(self, prof_config: int) -> int:
        """acl.prof.destroy_config; an ACL error code."""
        return self._acl._call("acl.prof.destroy_config", (prof_config,), lambda: self._acl._destroy_config(prof_config))

    def start(self, prof_config: int) -> int:
        """acl.prof.start: a collection begins on the config's devices; an ACL error code."""
        return self._acl._call("acl.prof.start", (prof_config,), lambda: self._acl._start(prof_config))

    def stop(self, prof_config: int) -> int:
        """acl.prof.stop: the config's collections are written; an ACL error code."""
        return self._acl._call("acl.prof.stop", (prof_config,), lambda: self._acl._stop(prof_config))

    def finalize(self) -> int:
        """acl.prof.finalize; an ACL error code."""
        return self._acl._call("acl.prof.finalize", (), self._acl._prof_finalize)

    def create_stamp(self) -> int:
        """acl.prof.create_stamp: a stamp handle (0 when refused)."""
        return self._acl._call("acl.prof.create_stamp", (), lambda: msproftx.create_stamp(self._acl._s))

    def destroy_stamp(self, stamp: int) -> None:
        """acl.prof.destroy_stamp (no result, as pyACL's)."""
        self._acl._call("acl.prof.destroy_stamp", (stamp,),
                        lambda: msproftx.destroy_stamp(self._acl._s, stamp))

    def set_stamp_trace_message(self, stamp: int, msg: str, msg_len: int) -> int:
        """acl.prof.set_stamp_trace_message; an ACL error code."""
        return self._acl._call("acl.prof.set_stamp_trace_message", (stamp, msg, msg_len),
                               lambda: msproftx.set_message(self._acl._s, stamp, msg, msg_len))

    def mark(self, stamp: int) -> int:
        """acl.prof.mark: an instant event; an ACL error code."""
        return self._acl._call("acl.prof.mark", (stamp,), lambda: msproftx.mark(self._acl._s, stamp))

    def push(self, stamp: int) -> int:
        """acl.prof.push: opens a range on this thread; an ACL error code."""
        return self._acl._call("acl.prof.push", (stamp,), lambda: msproftx.push(self._acl._s, stamp))

    def pop(self) -> int:
        """acl.prof.pop: closes this thread's last pushed range; an ACL error code."""
        return self._acl._call("acl.prof.pop", (), lambda: msproftx.pop(self._acl._s))

    def range_start(self, stamp: int) -> Tuple[int, int]:
        """acl.prof.range_start: (range id, ACL error code)."""
        return self._acl._call("acl.prof.range_start", (stamp,),
                               lambda: msproftx.range_start(self._acl._s, stamp))

    def range_stop(self, range_id: int) -> int:
        """acl.prof.range_stop; an ACL error code."""
        return self._acl._call("acl.prof.range_stop", (range_id,),
                               lambda: msproftx.range_stop(self._acl._s, range_id))

    def create_subscribe_config(self, time_info_switch: int, aicore_metrics: int, fd: int) -> int:
        """acl.prof.create_subscribe_config: a config handle."""
        return self._acl._call("acl.prof.create_subscribe_config", (time_info_switch, aicore_metrics, fd),
                               self._acl._create_subscribe_config)

    def destroy_subscribe_config(self, config: int) -> int:
        """acl.prof.destroy_subscribe_config; an ACL error code."""
        return self._acl._call("acl.prof.destroy_subscribe_config", (config,),
                               lambda: self._acl._destroy_subscribe_config(config))

    def model_subscribe(self, model_id: int, subscribe_config: int) -> int:
        """acl.prof.model_subscribe; an ACL error code."""
        return self._acl._call("acl.prof.model_subscribe", (model_id, subscribe_config),
                               lambda: self._acl._model_subscribe(model_id, subscribe_config))

    def model_un_subscribe(self, model_id: int) -> int:
        """acl.prof.model_un_subscribe; an ACL error code."""
        return self._acl._call("acl.prof.model_un_subscribe", (model_id,),
                               lambda: self._acl._model_un_subscribe(model_id))


class EmulatedRt(_Namespace):
    """EMULATION of the few `acl.rt` calls an inference runner needs."""

    def set_device(self, device_id: int) -> int:
        """acl.rt.set_device; an ACL error code."""
        return self._acl._call("acl.rt.set_device", (device_id,), lambda: self._acl._set_device(device_id))

    def reset_device(self, device_id: int) -> int:
        """acl.rt.reset_device; an ACL error code."""
        return self._acl._call("acl.rt.reset_device", (device_id,), lambda: self._acl._reset_device(device_id))

    def get_device_count(self) -> Tuple[int, int]:
        """acl.rt.get_device_count: (device_count, ACL error code)."""
        return self._acl._call("acl.rt.get_device_count", (), lambda: (self._acl.device_count, ACL_SUCCESS))

    def create_context(self, device_id: int) -> Tuple[int, int]:
        """acl.rt.create_context: (context handle, ACL error code)."""
        return self._acl._call("acl.rt.create_context", (device_id,), lambda: self._acl._create_context(device_id))

    def destroy_context(self, context: int) -> int:
        """acl.rt.destroy_context; an ACL error code."""
        return self._acl._call("acl.rt.destroy_context", (context,), lambda: self._acl._destroy_context(context))


class EmulatedMdl(_Namespace):
    """EMULATION of the few `acl.mdl` calls an inference runner needs; execute only sleeps."""

    def load_from_file(self, model_path: str) -> Tuple[int, int]:
        """acl.mdl.load_from_file: (model id, ACL error code)."""
        return self._acl._call("acl.mdl.load_from_file", (model_path,), lambda: self._acl._load(model_path))

    def execute(self, model_id: int, input_dataset: Any, output_dataset: Any) -> int:
        """acl.mdl.execute: sleeps exec_seconds; an ACL error code."""
        return self._acl._call("acl.mdl.execute", (model_id,), lambda: self._acl._execute(model_id))

    def unload(self, model_id: int) -> int:
        """acl.mdl.unload; an ACL error code."""
        return self._acl._call("acl.mdl.unload", (model_id,), lambda: self._acl._unload(model_id))


class EmulatedAcl:
    """EMULATION of the `acl` module: `init`, `finalize`, and the `prof`, `rt`, `mdl` namespaces.

    `profile` is 'strict' (collector version A, the documented behaviour) or 'current' (version C's
    leniencies); `device_count` is what acl.rt.get_device_count reports and what device ids are
    checked against; `offline_devices` are ids that exist but fail start with 200002;
    `exec_seconds` is how long acl.mdl.execute sleeps."""

    __emulated__ = True

    def __init__(self, profile: str = STRICT, device_count: int = 1, offline_devices: Sequence[int] = (),
                 exec_seconds: float = DEFAULT_EXEC_SECONDS) -> None:
        if profile not in PROFILES:
            raise BadOption(f"unknown emulator profile {profile!r}; expected strict or current")
        if not 1 <= device_count <= MAX_DEVICES:
            raise BadOption(f"emulated device count {device_count} is outside 1..{MAX_DEVICES}")
        self.profile = profile
        self.device_count = device_count
        self.offline_devices = frozenset(offline_devices)
        self.exec_seconds = exec_seconds
        self.calls: List[Call] = []
        self._injected: Dict[str, List[Any]] = {}
        self._lock = threading.RLock()
        self._s = State()
        self._rng = random.Random()
        self.prof = EmulatedProf(self)
        self.rt = EmulatedRt(self)
        self.mdl = EmulatedMdl(self)

    def __repr__(self) -> str:
        return f"<EMULATED acl (msprof-kit), profile {self.profile}, {self.device_count} device(s)>"

    # -- test knobs -------------------------------------------------------------------------------
    def inject(self, name: str, result: Any, times: int = 1) -> None:
        """The next `times` calls of `name` ('acl.prof.stop') return `result` and change nothing."""
        self._injected.setdefault(name, []).extend([result] * times)

    def call_names(self) -> List[str]:
        """The names of the calls made so far, in order ('acl.prof.start', ...)."""
        return [name for name, _, _ in self.calls]

    @property
    def mode(self) -> str:
        """The collector's process-wide mode: OFF, API_CTRL, CMD or SUBSCRIBE."""
        return self._s.mode

    @property
    def collections(self) -> List[str]:
        """The PROF_xxx directories written so far, in order."""
        return [c.path for c in self._s.collections]

    def _call(self, name: str, args: Tuple[Any, ...], fn: Callable[[], Any]) -> Any:
        with self._lock:
            queue = self._injected.get(name)
            result = queue.pop(0) if queue else fn()
            self.calls.append((name, args, result))
            return result

    # -- acl.init / acl.finalize ------------------------------------------------------------------
    def init(self, config_path: str = "") -> int:
        """acl.init: `config_path` an acl.json (or ''); an ACL error code."""
        return self._call("acl.init", (config_path,), lambda: self._init(config_path))

    def finalize(self) -> int:
        """acl.finalize; an ACL error code."""
        return self._call("acl.finalize", (), self._finalize)

    def _init(self, config_path: str) -> int:
        s = self._s
        if s.acl == "init":
            return ACL_ERROR_REPEAT_INITIALIZE
        profiler: Optional[Dict[str, Any]] = None
        if config_path:
            try:
                with open(config_path, "rb") as f:
                    text = f.read()
            except OSError:
                return ACL_ERROR_INVALID_FILE
            try:
                config = json.loads(text.decode("utf-8"))
            except (UnicodeDecodeError, ValueError):
                return ACL_ERROR_PARSE_FILE
            if not isinstance(config, dict):
                return ACL_ERROR_PARSE_FILE
            section = config.get("profiler")
            if section:
                try:
                    acljson.validate(section, acljson.CANN)
                except AclJsonError as exc:
                    if exc.acl_code is not None:
                        return exc.acl_code
                profiler = section
        if profiler is not None and acljson.switch_is_on(profiler):
            out = str(profiler.get("output") or os.getcwd())  # [INFER] a Python program's "exe dir": the cwd
            try:
                os.makedirs(out, exist_ok=True)
                s.cmd_collection = self._open_collection(out, (0,), ACL_PROF_ACL_API | ACL_PROF_TASK_TIME, 0,
                                                         ACL_AICORE_NONE, source="acl.json")
            except OSError:
                return ACL_ERROR_PROFILING_FAILURE
            s.mode = CMD
        s.acl = "init"
        return ACL_SUCCESS

    def _finalize(self) -> int:
        s = self._s
        if s.acl == "finalized":
            return ACL_ERROR_REPEAT_FINALIZE
        if s.acl == "uninit":
            return ACL_ERROR_UNINITIALIZE  # [INFER]
        self._close_all()
        if s.cmd_collection is not None:
            close_collection(s.cmd_collection)
            s.cmd_collection = None
        s.mode = OFF if s.mode in (CMD, API_CTRL) else s.mode
        s.prof_path = None
        s.acl = "finalized"
        return ACL_SUCCESS

    # -- acl.prof ---------------------------------------------------------------------------------
    def _path_problem(self, path: Any) -> Optional[int]:
        if not isinstance(path, str) or not path or len(path.encode("utf-8")) > acljson.MAX_PATH:
            return ACL_ERROR_INVALID_PARAM
        if any(c in acljson.CANN_BAD_PATH_CHARS for c in path):
            return ACL_ERROR_INVALID_FILE
        return None

    def _prof_init(self, path: Any) -> int:
        s = self._s
        problem = self._path_problem(path)
        if problem == ACL_ERROR_INVALID_PARAM:
            return problem
        if s.mode == CMD:
            return ACL_ERROR_PROF_ALREADY_RUN
        if s.mode == SUBSCRIBE:
            return ACL_ERROR_PROF_API_CONFLICT
        if s.mode == API_CTRL:
            return ACL_ERROR_REPEAT_INITIALIZE
        if self.profile == STRICT and s.acl != "init":
            return ACL_ERROR_UNINITIALIZE  # [INFER] documented order, no implementation check found
        if problem is not None:
            return problem
        absolute = os.path.abspath(path)
        if self.profile == STRICT:
            try:
                os.makedirs(absolute, exist_ok=True)
            except OSError:
                return ACL_ERROR_INVALID_FILE
            if not os.access(absolute, os.R_OK | os.W_OK | os.X_OK):
                return ACL_ERROR_INVALID_FILE
        s.prof_path = absolute
        s.mode = API_CTRL
        return ACL_SUCCESS

    def _create_config(self, device_list: Any, metrics: Any, events: Any, data_types: Any) -> int:
        s = self._s
        if not isinstance(device_list, list) or not all(isinstance(d, int) and not isinstance(d, bool)
                                                        for d in device_list):
            return 0
        if events not in (0, None) or not isinstance(metrics, int) or not isinstance(data_types, int):
            return 0
        if len(device_list) > MAX_DEVICES or len(device_list) > self.device_count:
            return 0
        if any(d < 0 or d >= self.device_count for d in device_list) or len(set(device_list)) != len(device_list):
            return 0
        if not device_list and not data_types & ACL_PROF_MSPROFTX:
            return 0
        s.next_handle += 1
        handle = HANDLE_BASE + 0x40 * s.next_handle
        s.configs[handle] = ProfConfig(tuple(device_list), metrics, data_types)
        return handle

    def _destroy_config(self, handle: Any) -> int:
        if not handle or handle not in self._s.configs:
            return ACL_ERROR_INVALID_PARAM
        del self._s.configs[handle]
        return ACL_SUCCESS

    def _config_problem(self, config: ProfConfig) -> Optional[int]:
        if config.data_types == 0:
            return ACL_ERROR_INVALID_PARAM
        if config.data_types & ~KNOWN_DATA_TYPE_MASK:
            return ACL_ERROR_PROF_MODULES_UNSUPPORTED
        if config.metrics != ACL_AICORE_NONE and config.metrics not in AICORE_METRICS:
            return ACL_ERROR_INVALID_PARAM  # [INFER]
        return None

    def _mode_refusal(self) -> Optional[int]:
        """The error of an API-mode prof call (start, stop, finalize) while another mode holds
        profiling: msprof's command line (CMD) or a model subscription; None when none does."""
        if self._s.mode == CMD:
            return ACL_ERROR_PROF_ALREADY_RUN
        if self._s.mode == SUBSCRIBE:
            return ACL_ERROR_PROF_API_CONFLICT
        return None

    def _stop_refusal(self) -> Optional[int]:
        """What stop and finalize return without doing anything: the mode refusal, or with
        profiling OFF, NOT_RUN in the STRICT profile and SUCCESS otherwise; None to go on."""
        refusal = self._mode_refusal()
        if refusal is None and self._s.mode == OFF:
            return ACL_ERROR_PROF_NOT_RUN if self.profile == STRICT else ACL_SUCCESS
        return refusal

    def _start(self, handle: Any) -> int:
        s = self._s
        refusal = self._mode_refusal()
        if refusal is not None:
            return refusal
        if s.mode == OFF:
            if self.profile == STRICT:
                return ACL_ERROR_PROF_NOT_RUN
            s.prof_path = os.path.abspath(os.environ.get("ACL_PROF_PATH") or "./")  # version C: auto-init
            s.mode = API_CTRL
        if not handle and self.profile == CURRENT:
            config = ProfConfig((0,), ACL_AICORE_NONE, ACL_PROF_ACL_API | ACL_PROF_TASK_TIME)
        elif not handle or handle not in s.configs:
            return ACL_ERROR_INVALID_PARAM
        else:
            config = s.configs[handle]
        problem = self._config_problem(config)
        if problem is not None:
            return problem
        keys = started_keys(config)
        if any(k in s.started for k in keys):
            return ACL_ERROR_PROF_ALREADY_RUN
        if any(d in self.offline_devices for d in config.devices):
            return ACL_ERROR_INVALID_DEVICE
        assert s.prof_path is not None
        try:
            os.makedirs(s.prof_path, exist_ok=True)
            coll = self._open_collection(s.prof_path, config.devices, config.data_types, handle or 0,
                                         config.metrics, source="acl.prof.start")
        except OSError:
            return ACL_ERROR_PROFILING_FAILURE
        for k in keys:
            s.started[k] = coll
        return ACL_SUCCESS

    def _stop(self, handle: Any) -> int:
        s = self._s
        refusal = self._stop_refusal()
        if refusal is not None:
            return refusal
        if not handle or handle not in s.configs:
            return ACL_ERROR_INVALID_PARAM
        config = s.configs[handle]
        keys = started_keys(config)
        if any(k not in s.started for k in keys):
            return ACL_ERROR_PROF_NOT_RUN
        if any(s.started[k].data_types != config.data_types for k in keys):
            return ACL_ERROR_INVALID_PROFILING_CONFIG
        closing = {id(s.started[k]): s.started[k] for k in keys}
        for k in keys:
            del s.started[k]
        for coll in closing.values():
            if not any(c is coll for c in s.started.values()):
                close_collection(coll)
        return ACL_SUCCESS

    def _prof_finalize(self) -> int:
        s = self._s
        refusal = self._stop_refusal()
        if refusal is not None:
            return refusal
        self._close_all()
        s.mode = OFF
        s.prof_path = None
        return ACL_SUCCESS

    def _close_all(self) -> None:
        s = self._s
        for coll in list({id(c): c for c in s.started.values()}.values()):
            close_collection(coll)
        s.started.clear()
        s.pushed.clear()
        s.ranges.clear()

    # -- msproftx ---------------------------------------------------------------------------------
    # -- subscription (only what the mode rules need) ----------------------------------------------
    def _create_subscribe_config(self) -> int:
        s = self._s
        s.next_handle += 1
        handle = HANDLE_BASE + 0x40 * s.next_handle + 0x10
        s.subscribe_configs.add(handle)
        return handle

    def _destroy_subscribe_config(self, handle: Any) -> int:
        if handle not in self._s.subscribe_configs:
            return ACL_ERROR_INVALID_PARAM
        self._s.subscribe_configs.discard(handle)
        return ACL_SUCCESS

    def _model_subscribe(self, model_id: Any, config: Any) -> int:
        s = self._s
        if s.mode == API_CTRL:
            return ACL_ERROR_PROF_API_CONFLICT
        if s.mode == CMD:
            return ACL_ERROR_PROF_ALREADY_RUN
        if config not in s.subscribe_configs:
            return ACL_ERROR_INVALID_PARAM
        if model_id not in s.models:
            return ACL_ERROR_INVALID_MODEL_ID
        if model_id in s.subscriptions:
            return ACL_ERROR_PROF_REPEAT_SUBSCRIBE
        s.subscriptions[model_id] = Subscription(config)
        s.mode = SUBSCRIBE
        return ACL_SUCCESS

    def _model_un_subscribe(self, model_id: Any) -> int:
        s = self._s
        if model_id not in s.subscriptions:
            return ACL_ERROR_INVALID_PARAM
        del s.subscriptions[model_id]
        if not s.subscriptions:
            s.mode = OFF
        return ACL_SUCCESS

    # -- acl.rt and acl.mdl (EMULATION for an inference runner) ------------------------------------
    def _set_device(self, device_id: Any) -> int:
        s = self._s
        if s.acl != "init":
            return ACL_ERROR_UNINITIALIZE
        if not isinstance(device_id, int) or not 0 <= device_id < self.device_count:
            return ACL_ERROR_INVALID_PARAM
        if device_id in self.offline_devices:
            return ACL_ERROR_INVALID_DEVICE
        s.devices_set[device_id] = s.devices_set.get(device_id, 0) + 1
        s.current_device = device_id
        return ACL_SUCCESS

    def _reset_device(self, device_id: Any) -> int:
        s = self._s
        if s.devices_set.get(device_id, 0) == 0:
            return ACL_ERROR_INVALID_PARAM
        s.devices_set[device_id] -= 1
        if s.devices_set[device_id] == 0:
            del s.devices_set[device_id]
            if s.current_device == device_id:
                s.current_device = None
        return ACL_SUCCESS

    def _create_context(self, device_id: Any) -> Tuple[int, int]:
        s = self._s
        if device_id not in s.devices_set:
            ret = self._set_device(device_id)
            if ret != ACL_SUCCESS:
                return 0, ret
        s.next_handle += 1
        context = HANDLE_BASE + 0x40 * s.next_handle + 0x20
        s.contexts[context] = device_id
        return context, ACL_SUCCESS

    def _destroy_context(self, context: Any) -> int:
        if context not in self._s.contexts:
            return ACL_ERROR_INVALID_PARAM
        del self._s.contexts[context]
        return ACL_SUCCESS

    def _load(self, model_path: Any) -> Tuple[int, int]:
        s = self._s
        if s.acl != "init":
            return 0, ACL_ERROR_UNINITIALIZE
        if s.current_device is None:
            return 0, ACL_ERROR_INVALID_DEVICE
        if not isinstance(model_path, str) or not os.path.isfile(model_path):
            return 0, ACL_ERROR_INVALID_FILE
        model_id = s.next_model
        s.next_model += 1
        s.models[model_id] = model_path
        return model_id, ACL_SUCCESS

    def _execute(self, model_id: Any) -> int:
        s = self._s
        if model_id not in s.models:
            return ACL_ERROR_INVALID_MODEL_ID
        begin = monotonic_raw_ns()
        time.sleep(self.exec_seconds)
        coll = s.started.get(s.current_device) if s.current_device is not None else None
        if coll is not None:
            write_event(coll, {"kind": "model_execute", "ts_ns": begin, "dur_ns": monotonic_raw_ns() - begin,
                               "tid": threading.get_ident(), "model_id": model_id, "device": s.current_device})
        return ACL_SUCCESS

    def _unload(self, model_id: Any) -> int:
        s = self._s
        if model_id not in s.models:
            return ACL_ERROR_INVALID_MODEL_ID
        del s.models[model_id]
        s.subscriptions.pop(model_id, None)
        return ACL_SUCCESS


    # -- the synthetic PROF tree ------------------------------------------------------------------
    def _open_collection(self, root: str, devices: Tuple[int, ...], data_types: int, handle: int,
                         metrics: int, source: str) -> Collection:
        s = self._s
        s.prof_index += 1
        coll = open_collection(os.path.join(root, prof_name(s.prof_index, self._rng)), devices, data_types, handle,
                               metrics, source, repr(self))
        s.collections.append(coll)
        return coll


def from_environment() -> EmulatedAcl:
    """The emulator configured by MSPROF_KIT_EMULATE_PROFILE (strict|current, default strict),
    MSPROF_KIT_EMULATE_DEVICES (default 1) and MSPROF_KIT_EMULATE_EXEC_MS (default 5)."""
    profile = os.environ.get("MSPROF_KIT_EMULATE_PROFILE", STRICT).strip().lower() or STRICT
    try:
        devices = int(os.environ.get("MSPROF_KIT_EMULATE_DEVICES", "1"))
        exec_ms = float(os.environ.get("MSPROF_KIT_EMULATE_EXEC_MS", str(DEFAULT_EXEC_SECONDS * 1000)))
    except ValueError as exc:
        raise BadOption(f"bad emulator setting: {exc}") from exc
    if exec_ms < 0:
        raise BadOption(f"MSPROF_KIT_EMULATE_EXEC_MS is {exec_ms:g}; expected >= 0")
    return EmulatedAcl(profile=profile, device_count=devices, exec_seconds=exec_ms / 1000)
