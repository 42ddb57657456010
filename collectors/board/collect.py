"""The flow of a board collection (spec/collectors.md §4.3): plan, connect, make the run folder,
upload, write acl.json, mount (when asked), run `main`, find the new JOB folders and bring them
back; the board cleaned up whatever happens, with SIGTERM and SIGHUP handled as Ctrl-C."""
from __future__ import annotations

import logging
import os
import posixpath
import secrets
import time
from typing import List, Optional, Tuple, Union

from msprof_kit.errors import (BoardProgramFailed, BoardProgramNotRunnable, BoardProgramTimeout, Diagnostics,
                               IncompleteJob, NoJobProduced, UploadFailed)
from msprof_kit.interrupt import terminate_as_interrupt

from .cleanup import clean_up
from .config import PROFILING_DIR, SOC_METRICS, Runner, check_output_path, check_path, make_plan, mount_command
from .fetch import bring_back, job_dirs, missing_parts
from .ssh import Session
from .upload import upload, write_acl_json

LOG = logging.getLogger(__name__)

def collect_board(main: str, config: str, output: str, interval: Union[int, str] = 0, acl_api: str = "on",
                  aacpu: str = "on", switch: str = "on", aac_metrics: str = SOC_METRICS,
                  nfs: Optional[str] = None, accept_new_host_key: bool = False, timeout: float = 3600.0,
                  diag: Optional[Diagnostics] = None, runner: Optional[Runner] = None,
                  known_hosts: Optional[str] = None, project: Optional[str] = None, acl_json: str = "acl.json",
                  connect_timeout: float = 10.0) -> List[str]:
    """Run `main` on the board of `config` (board.ini) with SoC profiling and bring the JOB data
    back into `output`.

    `interval`, `acl_api`, `aacpu`, `switch` and `aac_metrics` are the acl.json keys of the SoC
    flavour. `nfs` ("SERVER:/abs/path") mounts the board's profiling folder there first (through
    `runner`, by default a command over SSH), falling back to the SFTP copy when the mount fails.
    `known_hosts` (else the ini's, else ~/.ssh/known_hosts) holds the trusted host keys;
    `accept_new_host_key` trusts and records a key seen for the first time. `timeout` (s) bounds
    the run of `main`, `connect_timeout` (s) the connection. `project` is the folder uploaded
    (default: `main`'s folder); `acl_json` is where the program reads acl.json, relative to
     `main`'s folder. Warnings go to `diag`.

    Returns the local JOB directories. With `switch` "off" and no JOB produced, returns [] with a
    warning. SIGTERM and SIGHUP are handled as Ctrl-C: the program's process group on the board is
    killed and the board cleaned.
    """
    with terminate_as_interrupt():
        return _collect_board(main, config, output, interval, acl_api, aacpu, switch, aac_metrics, nfs,
                              accept_new_host_key, timeout, diag if diag is not None else Diagnostics(),
                              runner, known_hosts, project, acl_json, connect_timeout)

def _collect_board(main: str, config: str, output: str, interval: Union[int, str], acl_api: str, aacpu: str,
                   switch: str, aac_metrics: str, nfs: Optional[str], accept_new_host_key: bool, timeout: float,
                   diag: Diagnostics, runner: Optional[Runner], known_hosts: Optional[str],
                   project: Optional[str], acl_json: str, connect_timeout: float) -> List[str]:
    """collect_board, inside its signal handling."""
    plan = make_plan(main, config, output, interval, acl_api, aacpu, switch, aac_metrics, nfs, timeout,
                     project, acl_json, known_hosts, diag)
    session = Session.connect(plan, accept_new_host_key, connect_timeout, diag)
    try:
        jobs = collect(session, runner)
    finally:
        session.close()
    return list(jobs)

def collect(session: Session, runner: Optional[Runner]) -> List[str]:
    """Steps 3..9 of spec §4.3; the board is cleaned up whatever happens."""
    try:
        return _collect(session, runner or session.ssh_runner)
    finally:
        clean_up(session, runner or session.ssh_runner)

def _collect(session: Session, runner: Runner) -> List[str]:
    plan = session.plan
    session.sftp = session.sftp_call("open SFTP", session.client.open_sftp)
    base = plan.board.remote_dir or session.sftp_call("find the home folder", session.sftp.normalize, ".")
    check_path(base, "the board folder")
    run_dir = posixpath.join(base, f"msprof_kit_{time.strftime('%Y%m%d%H%M%S')}_{secrets.token_hex(3)}")
    check_output_path(posixpath.join(run_dir, PROFILING_DIR))
    try:
        session.sftp.mkdir(run_dir, 0o700)
    except session.errors as exc:
        raise UploadFailed(f"cannot create {run_dir} on the board: {session.reason(exc)}") from None
    session.run_dir = run_dir
    remote_project = posixpath.join(run_dir, os.path.basename(plan.project))
    prof_dir = posixpath.join(run_dir, PROFILING_DIR)
    upload(session, plan.project, remote_project)
    main_remote = posixpath.join(remote_project, plan.main_rel)
    main_dir = posixpath.dirname(main_remote)
    session.mkdir(prof_dir)
    write_acl_json(session, posixpath.join(remote_project, plan.acl_rel), prof_dir)
    if plan.nfs is not None:
        mount(session, runner, prof_dir)
    before = {d: job_dirs(session, d) for d in (prof_dir, main_dir)}
    run_main(session, main_remote, main_dir)
    new: List[Tuple[str, str]] = []
    for folder, old in before.items():
        for name in sorted(set(job_dirs(session, folder)) - set(old)):
            new.append((folder, name))
            if folder == main_dir:
                session.diag.warn(f"{name}: the program wrote it next to main ({main_dir}), not into the acl.json "
                                  f"output {prof_dir}")
    if not new:
        if plan.switch == "off":
            session.diag.warn("switch is off and the program produced no JOB directory: nothing to bring back")
            return []
        raise NoJobProduced(
            f"main ran but no new JOB directory appeared in {prof_dir} or {main_dir} on the board: check that "
            "the model was converted with --online_model_type=2, that the program calls svp_acl_init with "
            f"the acl.json at {plan.acl_rel} of the project and calls svp_acl_finalize")
    lacks = [missing_parts(session, posixpath.join(folder, name)) for folder, name in new]
    local = [bring_back(session, folder, name, prof_dir) for folder, name in new]
    broken = [(path, what) for path, what in zip(local, lacks) if what]
    if broken:
        shown = "; ".join(f"{path} has no {what}" for path, what in broken)
        raise IncompleteJob(f"incomplete JOB collection copied back: {shown} (did the program call "
                            "svp_acl_finalize?)")
    return local

def mount(session: Session, runner: Runner, prof_dir: str) -> None:
    """Mount the NFS export on the local profiling folder (`mount_command`); the session records that it is
    mounted so clean-up unmounts it."""
    assert session.plan.nfs is not None
    spec = f"{session.plan.nfs[0]}:{session.plan.nfs[1]}"
    argv = mount_command(spec, prof_dir)
    status, message = runner(argv)
    if status == 0:
        session.mounted = True
        LOG.info("mounted %s on %s", spec, prof_dir)
        return
    session.diag.warn(f"mounting {spec} on the board failed (exit status {status}: {session.clean(message)}); "
                      "the JOB data is copied back over SFTP instead")

def run_main(session: Session, main_remote: str, main_dir: str) -> None:
    """Run the user's program on the board within the plan's timeout, naming its last output line when it fails
    or times out."""
    LOG.info("running %s on the board (timeout %g s)", main_remote, session.plan.timeout)
    result = session.run([main_remote], session.plan.timeout, cwd=main_dir)
    last = _last_line(result.err) or _last_line(result.out)
    said = f": {last}" if last else ""
    if result.status is None:
        raise BoardProgramTimeout(f"main did not finish within {session.plan.timeout:g} s on the board and was "
                                  f"killed{said}")
    if result.status in (126, 127):
        raise BoardProgramNotRunnable(f"the board could not start main (exit status {result.status}){said}")
    if result.status == -1:
        raise BoardProgramFailed(f"main was ended by a signal on the board{said}")
    if result.status != 0:
        raise BoardProgramFailed(f"main exited with status {result.status} on the board{said}")

def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""
