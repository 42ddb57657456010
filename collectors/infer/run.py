"""The entry point, `infer`: check the options, then run under msprof (§5.3) or here, one device
after the other, and write the summaries (§5.5, §5.6)."""
from __future__ import annotations

import datetime
import json
import os
import subprocess
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

from msprof_kit.errors import ApplicationError, Diagnostics, InferOptionError, MsprofFailed, PathNotFound

from ..acl_runtime import EMULATE_ENV, get_acl
from ..emulator import ANNOUNCEMENT, MARKER
from ..local import Listing, listing, new_collections
from .device import Undo, check, report_cleanup, run_device
from .files import (SUMMARY_SUFFIX, make_dir, make_run_dir, profiler_output_of, remove_empty_tree, summary_files,
                    write_file, write_generated_acl_json)
from .inputs import Options, Sample, absolute, parse_devices, parse_inputs, samples_from_inputs
from .plan import (ACL_JSON, ACL_JSON_NAME, DUMP, DUMP_DIR, PROFILER, PROFILER_DIR, RunPlan, generated_acl_json,
                   msprof_choice, msprof_command, plan_run, rerun_argv)
from .stats import DeviceResult, InferResult

Runner = Callable[[Sequence[str], Mapping[str, str]], int]


def run_command(argv: Sequence[str], env: Mapping[str, str]) -> int:
    """The default runner: start argv without a shell, its output passed through; its exit status
    (negative: the signal that ended it)."""
    try:
        return subprocess.run(list(argv), env=dict(env), check=False).returncode
    except OSError as exc:
        raise ApplicationError(f"cannot start msprof: {exc.strerror or exc}", path=argv[0]) from exc


# --- running under msprof (§5.3) ----------------------------------------------------------------
def _under_msprof(opts: Options, msprof: str, emulated: bool, emulate: Optional[bool], runner: Runner,
                  diag: Diagnostics) -> InferResult:
    """msprof runs the inference again (`rerun_argv`); its new PROF_xxx and summary files are the
    result. MsprofFailed when msprof fails."""
    assert opts.output is not None
    env = dict(os.environ)
    if emulate is not None:
        env[EMULATE_ENV] = "1" if emulate else "0"
    application = rerun_argv(opts.argv())
    spaced = [a for a in application if any(c.isspace() for c in a)]
    if spaced:
        diag.warn(f"{spaced[0]!r} holds white space; it is quoted in --application, but msprof versions that "
                  "split the command line on spaces would cut it")
    prof_root = os.path.join(opts.output, PROFILER_DIR)
    make_dir(prof_root)
    before: Dict[str, Listing] = {prof_root: listing(prof_root)}
    summaries_before = set(summary_files(opts.output))
    command = msprof_command(msprof, opts.output, application)
    status = runner(command, env)
    prof_dirs = new_collections(before)
    summaries = [p for p in summary_files(opts.output) if p not in summaries_before]
    if status != 0:
        how = f"was killed by signal {-status}" if status < 0 else f"exited with status {status}"
        left = f"; it left {', '.join(prof_dirs)}" if prof_dirs else ""
        raise MsprofFailed(f"msprof {how} while running the inference{left}", status, path=msprof)
    if not prof_dirs:
        diag.warn(f"msprof ran but no new PROF_xxx directory appeared in {prof_root}")
    return InferResult(mode=PROFILER, emulated=emulated, output=opts.output, summary_files=summaries,
                       prof_dirs=prof_dirs, profiler_via="msprof", msprof_command=command, returncode=status,
                       display_all=opts.display_all, args=["msprof-kit", "infer", *opts.argv()])


# --- running here -------------------------------------------------------------------------------
def _run_here(acl: Any, emulated: bool, opts: Options, plan: RunPlan, why_not_msprof: str,
              diag: Diagnostics) -> InferResult:
    """The run in this process; the result folder it made is removed again when the run fails
    before writing anything into it."""
    samples = samples_from_inputs(opts.inputs)
    result = InferResult(mode=plan.mode, emulated=emulated, output=opts.output, display_all=opts.display_all,
                         args=["msprof-kit", "infer", *opts.argv()])
    if plan.mode == PROFILER:
        result.profiler_via, result.why_not_msprof = "acl.json", why_not_msprof
    created = False
    if opts.output is not None:
        make_dir(opts.output)
        result.run_dir, created = make_run_dir(opts.output, opts.output_dirname, datetime.datetime.now())
    try:
        _run_in(result, acl, emulated, opts, plan, samples, diag)
    except BaseException:
        if created and result.run_dir is not None:
            remove_empty_tree(result.run_dir)
        raise
    return result


def _run_in(result: InferResult, acl: Any, emulated: bool, opts: Options, plan: RunPlan, samples: Sequence[Sample],
            diag: Diagnostics) -> None:
    """Write the run's acl.json when it needs one, run every device, write the summaries."""
    prof_root: Optional[str] = None
    if opts.output is not None and plan.mode in (PROFILER, DUMP):
        folder = os.path.join(opts.output, PROFILER_DIR if plan.mode == PROFILER else DUMP_DIR)
        make_dir(folder)
        result.acl_json = os.path.join(opts.output, ACL_JSON_NAME)
        write_generated_acl_json(result.acl_json, generated_acl_json(plan.mode, opts.output, opts.model))
        prof_root = folder if plan.mode == PROFILER else None
    if plan.mode == ACL_JSON:
        assert opts.acl_json_path is not None
        result.acl_json = opts.acl_json_path
        prof_root = profiler_output_of(opts.acl_json_path)
    before: Dict[str, Listing] = {prof_root: listing(prof_root)} if prof_root else {}
    if plan.mode == DUMP and emulated:
        diag.warn("the emulator writes no dump data: the dump folder stays empty")
    result.devices = _run_devices(acl, emulated, opts, plan, samples, result.acl_json, result.run_dir, diag)
    result.prof_dirs = new_collections(before)
    if prof_root is not None and not result.prof_dirs:
        diag.warn(f"profiling was on but no new PROF_xxx directory appeared in {prof_root}")
    if result.run_dir is None:
        return
    if emulated:
        write_file(os.path.join(result.run_dir, MARKER),
                   f"{ANNOUNCEMENT}.\nThe model was not run: the times in the summary are the emulator's "
                   "sleeps, and there are no output files.\n")
    for dev in result.devices:
        if len(result.devices) == 1:
            dev.summary_path = result.run_dir + SUMMARY_SUFFIX
        else:
            dev.summary_path = os.path.join(result.run_dir, f"device{dev.device}{SUMMARY_SUFFIX}")
        write_file(dev.summary_path, json.dumps(dev.summary_json(result.args, emulated), indent=4) + "\n")
        result.summary_files.append(dev.summary_path)


def _run_devices(acl: Any, emulated: bool, opts: Options, plan: RunPlan, samples: Sequence[Sample],
                 config: Optional[str], run_dir: Optional[str], diag: Diagnostics) -> List[DeviceResult]:
    """acl.init (with `config`, the run's acl.json, if any), each device in turn, acl.finalize; on
    any error what was opened is closed before the error goes on."""
    undo = Undo()
    results: List[DeviceResult] = []
    try:
        check("acl.init", acl.init(config) if config else acl.init())
        undo.push("acl.finalize", acl.finalize)
        for device in opts.devices:
            out_dir = run_dir
            if run_dir is not None and len(opts.devices) > 1:
                out_dir = os.path.join(run_dir, f"device{device}")
                make_dir(out_dir)
            results.append(run_device(acl, emulated, device, opts, plan, samples, out_dir, undo, diag))
    except BaseException as exc:
        report_cleanup(undo.unwind(), exc, diag)
        raise
    report_cleanup(undo.unwind(), None, diag)
    return results


# --- the entry point ----------------------------------------------------------------------------
def infer(model: str, inputs: Union[str, Sequence[str], None] = None, output: Optional[str] = None, loop: int = 1,
          warmup_count: int = 1, devices: Union[int, str, Sequence[int]] = (0,), batch: Optional[int] = None,
          profiler: bool = False, dump: bool = False, acl_json_path: Optional[str] = None,
          emulate: Optional[bool] = None, diag: Optional[Diagnostics] = None, runner: Optional[Runner] = None,
          output_dirname: Optional[str] = None, display_all: bool = False) -> InferResult:
    """Run `model` (an .om file) with ais_bench's options and rules (module docstring).

    `inputs`: files or folders, "a,b" or a list (none: zero data). `output`: the results root
    (none: nothing is written). `loop`: measured runs per sample (> 0); `warmup_count`: unmeasured
    runs first (>= 0). `devices`: 0, "0,1" or [0, 1], run one after the other. `batch`: for the
    throughput (default: dim 0 of input 0, or 1). `profiler` / `dump` / `acl_json_path`: §5.2.
    `emulate`: as get_acl. `runner(argv, env) -> status` starts msprof (default: a subprocess).
    `output_dirname`: a fixed result folder instead of the date. `display_all`: also print H2D/D2H.

    Raises InferOptionError for refused options, PathNotFound for a missing model or input,
    PyAclNotAvailable without pyACL (and without the emulator being asked for), the named AclError
    of a failing acl call, and MsprofFailed (carrying msprof's exit status) when msprof fails."""
    diag = diag if diag is not None else Diagnostics()
    input_paths = parse_inputs(inputs)
    plan = plan_run(profiler=bool(profiler), dump=bool(dump), acl_json_path=acl_json_path, output=output,
                    output_dirname=output_dirname, has_inputs=bool(input_paths), warmup_count=warmup_count,
                    loop=loop)
    if batch is not None and (isinstance(batch, bool) or not isinstance(batch, int) or batch < 1):
        raise InferOptionError(f"--batch is {batch!r}; expected an integer > 0")
    model_path = absolute(model)
    if not os.path.isfile(model_path):
        raise PathNotFound("no such model file", path=model_path)
    json_path = absolute(acl_json_path) if acl_json_path is not None else None
    if json_path is not None and not os.path.isfile(json_path):
        raise PathNotFound("no such acl.json file", path=json_path)
    opts = Options(model=model_path, inputs=input_paths, output=absolute(output) if output is not None else None,
                   output_dirname=output_dirname, loop=loop, warmup_count=warmup_count,
                   devices=parse_devices(devices), batch=batch, profiler=bool(profiler), dump=bool(dump),
                   acl_json_path=json_path, display_all=bool(display_all))
    for note in plan.notes:
        diag.warn(note)
    why_not = ""
    if plan.mode == PROFILER:
        msprof, why_not = msprof_choice(os.environ)
        if msprof is not None:
            # fail here, not inside msprof, when the re-run could not find pyACL either
            _, emulated = get_acl(emulate, diag)
            return _under_msprof(opts, msprof, emulated, emulate, runner or run_command, diag)
    acl, emulated = get_acl(emulate, diag)
    return _run_here(acl, emulated, opts, plan, why_not, diag)
