"""The `profiler` section of acl.json, in its two flavours, checked as the runtime checks it, and
written out.

* CANN flavour, read by `aclInit(path)` / `acl.init(path)`: the keys of spec/collectors.md §2.1.
  The runtime validates every key before it looks at `switch`, so an unknown key, a value of the
  wrong JSON type or a bad value makes aclInit fail with ACL_ERROR_INVALID_PARAM (100000) even
  when the switch is off (§2.2).
* SoC flavour, read by `svp_acl_init(path)` on HiSilicon boards: `switch`, `output`, `aacpu`,
  `aac_metrics`, `acl_api`, `interval` (§2.3).

Every key is one row of `CANN_KEYS` / `SOC_KEYS` (name, value rule, meaning, runtime default);
validation, the CLI's option list and docs/collectors.md all come from these rows.

Where msprof-kit is stricter than the runtime on purpose (a switch other than on/off, which the
runtime silently reads as off; an empty `aic_metrics`; SoC `aac_metrics` other than
ArithmeticUtilization, which the board silently ignores), the error's `acl_code` is None and the
message says what the runtime would have done instead.
"""
from __future__ import annotations

import difflib
import json
import os
import re
import tempfile
from dataclasses import dataclass
from typing import Callable, Dict, Mapping, Optional, Tuple, Union

from msprof_kit.errors import AclJsonError, CollectorError

from .acl_codes import ACL_ERROR_INVALID_PARAM, AICORE_METRIC_NAMES

CANN = "cann"
SOC = "soc"
FLAVOURS = (CANN, SOC)
RUNTIME_CALL = {CANN: "aclInit", SOC: "svp_acl_init"}

# A value problem: (what was expected, the ACL code the runtime returns, or None with the reason
# msprof-kit refuses a value the runtime would take).
Problem = Tuple[str, Optional[int], str]
Check = Callable[[str], Optional[Problem]]
Value = Union[str, int]


def _bad(expected: str, code: Optional[int] = ACL_ERROR_INVALID_PARAM, why: str = "") -> Problem:
    return expected, code, why


def one_of(*values: str) -> Check:
    """A check that the value is one of `values`."""
    def check(value: str) -> Optional[Problem]:
        return None if value in values else _bad("one of " + ", ".join(values))
    return check


ON_OFF = one_of("on", "off")


def switch_rule(value: str) -> Optional[Problem]:
    """The runtime reads anything but "on" as off (§2.2); msprof-kit refuses the typo instead."""
    if value in ("on", "off"):
        return None
    return _bad("on or off", None, "the runtime would read it as off and silently collect nothing")


def int_range(low: int, high: int) -> Check:
    """A check that the value is a decimal integer from `low` to `high`."""
    def check(value: str) -> Optional[Problem]:
        if re.fullmatch(r"[0-9]+", value) and low <= int(value) <= high:
            return None
        return _bad(f"an integer from {low} to {high}")
    return check


def subset_of(*values: str) -> Check:
    """A check that the value is a comma-separated list of distinct items of `values`."""
    def check(value: str) -> Optional[Problem]:
        items = value.split(",")
        if value and all(i in values for i in items) and len(set(items)) == len(items):
            return None
        return _bad("a comma-separated list of " + ", ".join(values))
    return check


def storage_limit(value: str) -> Optional[Problem]:
    """storage_limit: '<N>MB', N from 200 to 2^32 - 1."""
    m = re.fullmatch(r"([0-9]+)MB", value)
    if m and 200 <= int(m.group(1)) <= 4294967295:
        return None
    return _bad("200MB to 4294967295MB (a number followed by MB)")


def non_empty(value: str) -> Optional[Problem]:
    """Any text but a blank one."""
    return None if value.strip() else _bad("a non-empty string")


def optype(value: str) -> Optional[Problem]:
    """Comma-separated operator types, none empty, at most 256 characters in all."""
    items = value.split(",")
    if value and len(value) <= 256 and all(items):
        return None
    return _bad("comma-separated operator types, at most 256 characters")


def aic_metrics(value: str) -> Optional[Problem]:
    """aic_metrics: a metric group name, or Custom: and up to 8 hex event ids."""
    if value in AICORE_METRIC_NAMES:
        return None
    if value == "":
        # ais_bench writes "" (spec §5.3); whether CANN takes it is not verified (§8)
        return _bad("a metric group name; leave the key out for the platform default", None,
                    "an empty value is written by ais_bench, but no source says CANN accepts it")
    custom = re.fullmatch(r"Custom:(0x[0-9a-fA-F]+(?:,0x[0-9a-fA-F]+){0,7})", value)
    if custom:
        return None
    return _bad("one of " + ", ".join(AICORE_METRIC_NAMES) + " or Custom:<up to 8 hex event ids>")


# The characters msprof refuses in an output path (§2.1): control characters and shell specials.
CANN_BAD_PATH_CHARS = "\n\f\r\b\t\v\x7f\"'\\%><|&$;`"
MAX_PATH = 4096


def cann_path(value: str) -> Optional[Problem]:
    """A CANN output path: not empty, none of CANN_BAD_PATH_CHARS, at most MAX_PATH bytes."""
    if value == "":
        return _bad("a directory; leave the key out for the default (the program's directory)", None,
                    "no source says what the runtime does with an empty output")
    bad = sorted({c for c in value if c in CANN_BAD_PATH_CHARS})
    if bad:
        return _bad("a path without " + " ".join(repr(c)[1:-1] for c in bad))
    if len(value.encode("utf-8")) > MAX_PATH:
        return _bad(f"a path of at most {MAX_PATH} bytes")
    return None


def soc_path(value: str) -> Optional[Problem]:
    """The SoC guide allows only letters, digits and `_` in paths: here each component between `/`
    is `.`, `..` or made of those characters (the separators themselves being allowed is our reading)."""
    parts = [p for p in value.split("/") if p]
    if value and all(p in (".", "..") or re.fullmatch(r"[A-Za-z0-9_]+", p) for p in parts):
        return None
    return _bad("a path made only of letters, digits and _ (separated by /)")


def soc_aac_metrics(value: str) -> Optional[Problem]:
    """The SoC's AA-core metrics: only ArithmeticUtilization."""
    if value == "ArithmeticUtilization":
        return None
    return _bad("ArithmeticUtilization (the only group the SoC supports)", None,
                "the board would silently collect no AA-core data")


def soc_interval(value: str) -> Optional[Problem]:
    """A SoC sampling interval: a decimal integer >= 0 (inference rounds)."""
    if re.fullmatch(r"[0-9]+", value):
        return None
    return _bad("an integer >= 0 (sample every N inference rounds)")


@dataclass(frozen=True)
class KeySpec:
    """One `profiler` key: its value rule, what it does and the runtime's default when absent."""

    name: str
    check: Check
    meaning: str
    default: str
    numbers_too: bool = False  # a JSON integer is taken as well as a string (SoC interval)


CANN_KEYS: Tuple[KeySpec, ...] = (
    KeySpec("switch", switch_rule, "master switch: on collects AscendCL, Runtime API and task data", "off"),
    KeySpec("output", cann_path, "result directory (relative to the program's cwd); a PROF_xxx per run",
            "the program's directory"),
    KeySpec("storage_limit", storage_limit, "disk limit of the collection, 200MB..4294967295MB", "unset"),
    KeySpec("ascendcl", ON_OFF, "AscendCL API data", "on"),
    KeySpec("runtime_api", ON_OFF, "Runtime API data", "on"),
    KeySpec("task_time", one_of("on", "off", "l0", "l1", "l2", "l3"), "task time level", "on"),
    KeySpec("aicpu", ON_OFF, "AI CPU task start/end", "off"),
    KeySpec("aic_metrics", aic_metrics, "AI Core metric group, or Custom:<events>", "PipeUtilization"),
    KeySpec("l2", ON_OFF, "L2 cache data", "off"),
    KeySpec("hccl", ON_OFF, "HCCL data (deprecated)", "off"),
    KeySpec("msproftx", ON_OFF, "msproftx user stamps", "off"),
    KeySpec("ge_api", one_of("l0", "l1", "off"), "GE API level", "off"),
    KeySpec("task_memory", ON_OFF, "operator memory", "off"),
    KeySpec("task_tsfw", ON_OFF, "task scheduler firmware data", "off"),
    KeySpec("instr_profiling", ON_OFF, "instruction profiling (A2/A3: excludes the task keys)", "off"),
    KeySpec("instr_profiling_freq", int_range(300, 30000), "instruction profiling period, cycles", "1000"),
    KeySpec("sys_hardware_mem_freq", int_range(1, 100), "hardware memory sampling, Hz", "unset"),
    KeySpec("llc_profiling", one_of("read", "write"), "LLC profiling mode", "unset"),
    KeySpec("sys_io_sampling_freq", int_range(1, 100), "NIC/RoCE sampling, Hz", "unset"),
    KeySpec("dvpp_freq", int_range(1, 100), "DVPP sampling, Hz", "unset"),
    KeySpec("sys_lp_freq", int_range(1, 100), "low-power sampling, Hz", "unset"),
    KeySpec("sys_interconnection_freq", int_range(1, 50), "HCCS/PCIe sampling, Hz", "unset"),
    KeySpec("sys_cpu_freq", int_range(1, 50), "AI CPU / ctrl CPU sampling, Hz", "unset"),
    KeySpec("host_sys_usage_freq", int_range(1, 50), "host usage sampling, Hz", "unset"),
    KeySpec("host_sys", subset_of("cpu", "mem", "disk", "network", "osrt", "numa"), "host system data", "unset"),
    KeySpec("host_sys_usage", subset_of("cpu", "mem"), "host usage data", "unset"),
    KeySpec("sys_mem_serviceflow", non_empty, "memory service flow", "unset"),
    KeySpec("optype", optype, "operator types to collect", "unset"),
)

SOC_KEYS: Tuple[KeySpec, ...] = (
    KeySpec("switch", switch_rule, "master switch", "off"),
    KeySpec("output", soc_path, "existing writable directory; one JOBxxx per device", "the program's directory"),
    KeySpec("aacpu", ON_OFF, "AA CPU (AI CPU) data", "on"),
    KeySpec("aac_metrics", soc_aac_metrics, "AA-core metric group", "ArithmeticUtilization"),
    KeySpec("acl_api", ON_OFF, "ACL API timing", "on"),
    KeySpec("interval", soc_interval, "sample every N inference rounds (0: every round)", "0", numbers_too=True),
)

KEYS: Dict[str, Dict[str, KeySpec]] = {
    CANN: {k.name: k for k in CANN_KEYS},
    SOC: {k.name: k for k in SOC_KEYS},
}

# keys that GE options or older adapters know, which aclInit refuses: a hint for the message
NOT_ACL_JSON_KEYS = {
    "training_trace": "training_trace is a GE option (with fp_point/bp_point), not an acl.json key",
    "aiv_metrics": "aiv_metrics was accepted only by the Dec-2025 adapter, not by current CANN",
}
# On A2/A3, instr_profiling on excludes these (§2.1); enforced whenever a key is set to other than off
INSTR_EXCLUSIVE = ("aicpu", "aic_metrics", "l2", "hccl", "task_time", "ascendcl", "runtime_api")


def _shown(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


def _refuse(flavour: str, key: Optional[str], what: str, code: Optional[int], why: str = "") -> AclJsonError:
    if code is not None:
        tail = f"{RUNTIME_CALL[flavour]} would return ACL_ERROR_INVALID_PARAM {code}"
    else:
        tail = f"refused by msprof-kit: {why}"
    return AclJsonError(f"acl.json profiler ({flavour} flavour): {what} ({tail})", key=key, acl_code=code)


def validate(config: Mapping[str, object], flavour: str) -> None:
    """Raise AclJsonError unless `config` (the `profiler` object) is one the `flavour` runtime
    ('cann' or 'soc') accepts. Values are JSON strings; the SoC `interval` may also be an integer."""
    if flavour not in FLAVOURS:
        raise CollectorError(f"unknown acl.json flavour {flavour!r}; expected cann or soc")
    if not isinstance(config, Mapping):
        raise _refuse(flavour, None, f"the profiler section is {_shown(config)}, not an object",
                      ACL_ERROR_INVALID_PARAM)
    specs = KEYS[flavour]
    for key, value in config.items():
        spec = specs.get(key)
        if spec is None:
            other = SOC if flavour == CANN else CANN
            close = difflib.get_close_matches(str(key), list(specs), n=1)
            if key in NOT_ACL_JSON_KEYS:
                hint = NOT_ACL_JSON_KEYS[str(key)]
            elif key in KEYS[other]:
                hint = f"it is a {other}-flavour key"
            elif close:
                hint = f"did you mean {_shown(close[0])}?"
            else:
                hint = "known keys: " + ", ".join(specs)
            raise _refuse(flavour, str(key), f"unknown key {_shown(key)} ({hint}); every key is checked even "
                          "with the switch off", ACL_ERROR_INVALID_PARAM)
        if isinstance(value, bool) or not (isinstance(value, str) or (spec.numbers_too and isinstance(value, int))):
            kind = "a string" if not spec.numbers_too else "a string or an integer"
            raise _refuse(flavour, key, f"{key} is {_shown(value)}; the value must be {kind}",
                          ACL_ERROR_INVALID_PARAM)
        problem = spec.check(str(value))
        if problem is not None:
            expected, code, why = problem
            raise _refuse(flavour, key, f"{key} is {_shown(value)}; expected {expected}", code, why)
    if flavour == CANN and config.get("instr_profiling") == "on":
        clash = [k for k in INSTR_EXCLUSIVE if k in config and config[k] != "off"]
        if clash:
            raise _refuse(flavour, "instr_profiling", "instr_profiling on cannot be combined with "
                          + ", ".join(f"{k} {_shown(config[k])}" for k in clash), ACL_ERROR_INVALID_PARAM)


def flavour_of(profiler: Mapping[str, object]) -> str:
    """'soc' when the section has a key only the SoC flavour knows (aacpu, aac_metrics, acl_api,
    interval), else 'cann'."""
    soc_only = set(KEYS[SOC]) - set(KEYS[CANN])
    return SOC if any(k in soc_only for k in profiler) else CANN


def switch_is_on(profiler: Mapping[str, object]) -> bool:
    """The runtime's rule: profiling is on only when switch is exactly "on"."""
    return profiler.get("switch") == "on"


def soc_profiler_config(switch: str = "on", output: Optional[str] = None, aacpu: str = "on",
                        aac_metrics: str = "ArithmeticUtilization", acl_api: str = "on",
                        interval: Value = 0) -> Dict[str, Value]:
    """A validated SoC `profiler` section in the guide's key order. `interval` is written as a
    string, as the guide's example does; `output=None` leaves the key out (the board then writes
    into the program's directory)."""
    config: Dict[str, Value] = {"switch": switch}
    if output is not None:
        config["output"] = output
    config.update({"aacpu": aacpu, "aac_metrics": aac_metrics, "acl_api": acl_api,
                   "interval": str(interval) if isinstance(interval, int) and not isinstance(interval, bool)
                   else interval})
    validate(config, SOC)
    return config


def cann_profiler_config(**keys: Optional[Value]) -> Dict[str, Value]:
    """A validated CANN `profiler` section from keyword arguments named as the keys (task_time="l1",
    aic_metrics="PipeUtilization", ...). `switch` defaults to "on" and comes first; keys given as
    None are left out; integers (frequencies) are written as strings, as acl.json wants."""
    config: Dict[str, Value] = {"switch": "on"}
    for key, value in keys.items():
        if value is None:
            config.pop(key, None)
            continue
        config[key] = str(value) if isinstance(value, int) and not isinstance(value, bool) else value
    validate(config, CANN)
    return config


def dumps_acl_json(profiler: Mapping[str, object]) -> str:
    """The whole acl.json text, `{"profiler": {...}}`: 4-space indent, keys in the given order,
    UTF-8 (not escaped), one trailing newline. The section is validated first (flavour from its
    keys, see flavour_of), so an invalid file is never written."""
    validate(profiler, flavour_of(profiler))
    return json.dumps({"profiler": dict(profiler)}, indent=4, ensure_ascii=False) + "\n"


def write_acl_json(path: str, profiler: Mapping[str, object]) -> str:
    """Write the acl.json text to `path` (through a temp file and a rename, mode 0640) and return
    its absolute path."""
    text = dumps_acl_json(profiler)
    target = os.path.abspath(path)
    folder = os.path.dirname(target)
    try:
        fd, tmp = tempfile.mkstemp(prefix=".acl.json.", dir=folder)
    except OSError as exc:
        raise CollectorError(f"cannot write acl.json: {exc.strerror or exc}", path=target) from exc
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o640)
        os.replace(tmp, target)
    except OSError as exc:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise CollectorError(f"cannot write acl.json: {exc.strerror or exc}", path=target) from exc
    return target
