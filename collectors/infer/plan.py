"""The rules of an inference run (spec/collectors.md §5.2) and the msprof command of `--profiler`
(§5.3), as data and functions that write nothing (msprof_choice only searches PATH)."""
from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from msprof_kit.errors import InferOptionError

# --- what ais_bench does, as data (spec/collectors.md §5) ----------------------------------------
# the switches msprof gets after --output and --application, in this order (§5.3)
MSPROF_FLAGS: Tuple[str, ...] = (
    "--model-execution=on", "--sys-hardware-mem=on", "--sys-cpu-profiling=off", "--sys-profiling=off",
    "--sys-pid-profiling=off", "--dvpp-profiling=on", "--runtime-api=on", "--task-time=on", "--aicpu=on")
# appended to the re-run's own arguments: the re-run must not start msprof again, nor warm up
RERUN_OVERRIDES: Tuple[str, ...] = ("--profiler=0", "--warmup_count=0")
# set to 1, any of these keeps msprof out and selects acl.json mode: the old ais_bench's
# (misspelt) name, its README's spelling, ait's and msit's (§5.3)
NO_MSPROF_ENV: Tuple[str, ...] = ("GE_PROFILIGN_TO_STD_OUT", "GE_PROFILING_TO_STD_OUT", "AIT_NO_MSPROF_MODE",
                                  "MSIT_NO_MSPROF_MODE")
RERUN_COMMAND = ("-m", "msprof_kit", "infer")   # what msprof runs, after `<python>`: msprof-kit infer
PROFILER_DIR, DUMP_DIR, ACL_JSON_NAME = "profiler", "dump", "acl.json"

# run modes (plan_run)
PLAIN, ACL_JSON, PROFILER, DUMP = "plain", "acl_json", "profiler", "dump"


@dataclass(frozen=True)
class RunPlan:
    """What a run does once ais_bench's rules are applied. `mode` is PLAIN, ACL_JSON, PROFILER or
    DUMP; `warmup_count` the warm-up runs actually made; `notes` what the rules changed or ignored."""

    mode: str
    warmup_count: int
    notes: Tuple[str, ...] = ()


def plan_run(profiler: bool = False, dump: bool = False, acl_json_path: Optional[str] = None,
             output: Optional[str] = None, output_dirname: Optional[str] = None, has_inputs: bool = False,
             warmup_count: int = 1, loop: int = 1) -> RunPlan:
    """Apply §5.2 to the options (pure: nothing is read or written). InferOptionError for what the
    rules refuse."""
    if isinstance(loop, bool) or not isinstance(loop, int) or loop < 1:
        raise InferOptionError(f"--loop is {loop!r}; expected an integer > 0")
    if isinstance(warmup_count, bool) or not isinstance(warmup_count, int) or warmup_count < 0:
        raise InferOptionError(f"--warmup-count is {warmup_count!r}; expected an integer >= 0")
    if output_dirname is not None:
        if output is None:
            raise InferOptionError("--output-dirname needs --output (it names the result folder inside it)")
        parts = output_dirname.replace("\\", "/").split("/")
        if not output_dirname or os.path.isabs(output_dirname) or any(p in ("", ".", "..") for p in parts):
            raise InferOptionError(f"--output-dirname is {output_dirname!r}; expected a relative folder name "
                                   "inside --output, without '.', '..' or empty parts")
    if acl_json_path is not None:
        ignored = [name for name, on in (("--profiler", profiler), ("--dump", dump)) if on]
        notes = (f"--acl-json-path is given, so {' and '.join(ignored)} {'is' if len(ignored) == 1 else 'are'} "
                 f"ignored: {acl_json_path} goes to acl.init as it is",) if ignored else ()
        return RunPlan(ACL_JSON, warmup_count, notes)
    if profiler and dump:
        raise InferOptionError("--profiler and --dump cannot both be on: profiling and dumping exclude each "
                               "other (run twice)")
    if (profiler or dump) and output is None:
        raise InferOptionError(f"--{'profiler' if profiler else 'dump'} needs --output: its data is written "
                               f"into <output>/{PROFILER_DIR if profiler else DUMP_DIR}/")
    if profiler:
        if has_inputs and warmup_count != 0:
            return RunPlan(PROFILER, 0, (f"--profiler with --input: the warm-up count {warmup_count} becomes 0, "
                                         "so that the profile holds only the measured runs",))
        return RunPlan(PROFILER, warmup_count)
    return RunPlan(DUMP if dump else PLAIN, warmup_count)


def msprof_choice(environ: Mapping[str, str]) -> Tuple[Optional[str], str]:
    """(msprof's path, "") when --profiler should run under msprof: it is on environ's PATH and no
    NO_MSPROF_ENV variable is 1; else (None, why not)."""
    for name in NO_MSPROF_ENV:
        if environ.get(name, "").strip() == "1":
            return None, f"{name}=1 is set"
    found = shutil.which("msprof", path=environ.get("PATH", os.defpath))
    if found is None:
        return None, "msprof is not on PATH"
    return os.path.abspath(found), ""


def msprof_command(msprof: str, output: str, application: Sequence[str]) -> List[str]:
    """The msprof argv of §5.3: `--output=<output>/profiler`, the application as one quoted
    command line, then MSPROF_FLAGS. `output` and every path in `application` should be absolute."""
    return [msprof, f"--output={os.path.join(output, PROFILER_DIR)}", f"--application={shlex.join(application)}",
            *MSPROF_FLAGS]


def rerun_argv(options: Sequence[str], python: Optional[str] = None) -> List[str]:
    """The command msprof runs: `msprof-kit infer` under the same Python, the run's options, then
    RERUN_OVERRIDES (later options win)."""
    return [python or sys.executable, *RERUN_COMMAND, *options, *RERUN_OVERRIDES]


def generated_acl_json(mode: str, output: str, model: str) -> Dict[str, Any]:
    """The acl.json ais_bench writes into <output> (absolute): for PROFILER, profiling on into
    <output>/profiler with an empty aic_metrics and aicpu on (§5.3); for DUMP, a dump of every
    operator of the model (named after its file, without folder or extension) into <output>/dump (§5.4)."""
    if mode == PROFILER:
        return {"profiler": {"switch": "on", "output": os.path.join(output, PROFILER_DIR), "aicpu": "on",
                             "aic_metrics": ""}}
    if mode == DUMP:
        stem = os.path.splitext(os.path.basename(model))[0]
        return {"dump": {"dump_list": [{"model_name": stem}], "dump_mode": "all",
                         "dump_path": os.path.join(output, DUMP_DIR)}}
    raise ValueError(f"no generated acl.json for mode {mode!r}")


def acl_json_text(config: Mapping[str, Any]) -> str:
    """As ais_bench writes it: 4-space indent, sorted keys, no trailing newline."""
    return json.dumps(config, indent=4, sort_keys=True)
