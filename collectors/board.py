"""Collect a profile on a HiSilicon SoC board over SSH: the `msprof.pyc collect` flow of the SoC
Profiling guide (spec/collectors.md §4), done with paramiko.

`collect_board(main, config, output, ...)` reads `[ssh_config]` from board.ini, connects (host key
checked against known_hosts), uploads the folder holding `main`, writes the SoC acl.json there,
runs `main` with a timeout, finds the JOB directories the run produced, brings them back into
`output` (SFTP copy with a file count and size check, or an NFS mount of the board's profiling
folder when asked), and removes from the board everything it created. Importing and exporting
each JOB locally (`collect --all`) is the CLI's pipeline (msprof_kit/cli.py). docs/collectors.md
("SoC boards over SSH") is the user's guide.

Choices where the guide is silent ([INFER] in spec §4.3), one place each:
- the board side lives in one fresh folder, `<remote_dir or home>/msprof_kit_<stamp>_<hex>/`,
  holding the uploaded project and `profiling/` (the acl.json `output`); removing that folder is
  the whole clean-up, so nothing of the user's on the board is ever touched;
- acl.json is written at `acl_json` relative to `main`'s folder ("acl.json" by default; a sample
  that reads "../src/acl.json" passes that and uploads the folder above with `project`);
- `main` runs from its own folder with no arguments, in its own process group, killed (TERM,
  then KILL) when it outlives `timeout`;
- new JOB directories are the `JOB*` folders that appear, between a listing before and one after
  the run, in `profiling/` or (the profiler's fallback when `output` is not writable) next to
  `main`;
- paths: the acl.json `output` on the board takes only letters, digits and `_` between its `/`
  (the SoC guide's rule, as acljson checks it); the other paths that reach a command or the
  profiler (main, the project and output folders, remote_dir, the NFS export) may also hold `.`
  and `-` (SAFE_PATH). Names of files inside the project are not limited: they travel only
  over SFTP. Every command sent to the board is shell-quoted all the same.
"""
from __future__ import annotations

import base64
import configparser
import hashlib
import logging
import os
import posixpath
import re
import secrets
import shlex
import shutil
import socket
import stat
import tempfile
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Tuple, Type, Union

from msprof_kit.errors import (BoardAuthFailed, BoardConfigError, BoardConnectionError, BoardProgramFailed,
                               BoardProgramMissing, BoardProgramNotRunnable, BoardProgramTimeout, BoardUnreachable,
                               CopyBackFailed, Diagnostics, HostKeyChanged, IncompleteJob, MsprofKitError,
                               NoJobProduced, UnknownHostKey, UnsafePath, UploadFailed)
from msprof_kit.interrupt import terminate_as_interrupt

from .acljson import dumps_acl_json, soc_profiler_config

if TYPE_CHECKING:  # paramiko is the `ssh` extra, imported when a board is contacted
    import paramiko

__all__ = ["collect_board", "read_board_ini", "BoardConfig", "Runner", "SAFE_PATH", "mount_command"]

LOG = logging.getLogger(__name__)

#: characters accepted in local and board paths: the profiler's letters, digits and `_`, plus
#: `/`, `.` and `-` (separators, extensions, dated names); no spaces, quotes or shell characters
SAFE_PATH = re.compile(r"^[A-Za-z0-9_./-]+$")
SOC_OUTPUT_PART = re.compile(r"^[A-Za-z0-9_]+$")     #: a component of the acl.json output (SoC guide)
SAFE_HOST = re.compile(r"^[A-Za-z0-9.:-]+$")       #: host names, IPv4 and IPv6 addresses
SAFE_USER = re.compile(r"^[A-Za-z0-9._-]+$")
JOB_NAME = re.compile(r"^JOB[A-Za-z0-9_]*$")          #: the JOB folders the board may hand back
BOARD_UMASK = "0027"                                 #: at least what the SoC guide asks of the remote run
SOC_METRICS = "ArithmeticUtilization"                #: the only aac_metrics the SoC collects (§2.3)
INI_SECTION = "ssh_config"
INI_KEYS = ("ip", "username", "pwd", "port", "key_file", "known_hosts", "remote_dir")
DEFAULT_KNOWN_HOSTS = "~/.ssh/known_hosts"
PROFILING_DIR = "profiling"                          #: the board's profiling folder inside the run folder
JOB_PREFIX = "JOB"
MOUNT_OPTIONS = "nolock,tcp"                         #: the guide's NFS mount options
SHORT_TIMEOUT = 60.0                                 #: s, for mkdir/mount/umount/rm/kill on the board
KILL_GRACE = 2.0                                     #: s between TERM and KILL for a timed-out program
TAIL_BYTES = 64 * 1024                               #: stdout/stderr kept per command (the tail)
POLL = 0.02                                          #: s between channel polls
REDACTED = "********"
PID_MARK = "MSPROF_KIT_PID="                         #: prefixes the PID line a board command starts with

#: runs one mount or umount command on the board: argv in, (exit status, message) out
Runner = Callable[[Sequence[str]], Tuple[int, str]]


@dataclass(frozen=True)
class BoardConfig:
    """`[ssh_config]` of board.ini. `password` never shows in repr()."""

    path: str
    ip: str
    username: str
    port: int = 22
    password: Optional[str] = field(default=None, repr=False)
    key_file: Optional[str] = None
    known_hosts: Optional[str] = None
    remote_dir: Optional[str] = None


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
    plan = _plan(main, config, output, interval, acl_api, aacpu, switch, aac_metrics, nfs, timeout,
                 project, acl_json, known_hosts, diag)
    session = _Session.connect(plan, accept_new_host_key, connect_timeout, diag)
    try:
        jobs = session.collect(runner)
    finally:
        session.close()
    return list(jobs)


def mount_command(nfs: str, mount_point: str) -> List[str]:
    """The guide's mount of the board's profiling folder on the NFS export `nfs`."""
    return ["mount", "-t", "nfs", "-o", MOUNT_OPTIONS, nfs, mount_point]


# ------------------------------------------------------------------------------------------------
# Inputs


def read_board_ini(path: str, diag: Diagnostics) -> BoardConfig:
    """`[ssh_config]`: ip, username, pwd and/or key_file, port (default 22); optional known_hosts
    and remote_dir. Warns when a file holding a password can be read by group or others."""
    if not os.path.isfile(path):
        raise BoardConfigError("board ini not found", path=path)
    parser = configparser.ConfigParser(interpolation=None)  # a password may hold '%'
    try:
        with open(path, encoding="utf-8") as f:
            parser.read_file(f)
    except configparser.MissingSectionHeaderError as exc:  # its text quotes the line: say only where
        raise BoardConfigError(f"not an ini file: line {exc.lineno} comes before any [section]", path=path) from None
    except configparser.ParsingError as exc:
        lines = ", ".join(str(n) for n, _ in exc.errors)
        raise BoardConfigError(f"not an ini file: cannot parse line {lines}", path=path) from None
    except configparser.Error as exc:  # duplicate sections or keys: their texts hold names only
        raise BoardConfigError(f"bad ini file: {exc.message}", path=path) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BoardConfigError(f"cannot read the ini file: {getattr(exc, 'strerror', None) or exc}", path=path) from None
    if not parser.has_section(INI_SECTION):
        raise BoardConfigError(f"no [{INI_SECTION}] section", path=path)
    sec = parser[INI_SECTION]
    for key in sec:
        if key not in INI_KEYS:
            diag.warn(f"{path}: [{INI_SECTION}] key '{key}' is not used (known: {', '.join(INI_KEYS)})")

    def value(key: str) -> Optional[str]:
        text = sec.get(key, "").strip()
        return text or None

    ip, user = value("ip"), value("username")
    if ip is None:
        raise BoardConfigError(f"[{INI_SECTION}] has no 'ip'", path=path)
    if not SAFE_HOST.match(ip):
        raise BoardConfigError(f"[{INI_SECTION}] ip '{ip}' is not a host name or address", path=path)
    if user is None:
        raise BoardConfigError(f"[{INI_SECTION}] has no 'username'", path=path)
    if not SAFE_USER.match(user):
        raise BoardConfigError(f"[{INI_SECTION}] username '{user}' holds characters a login name cannot", path=path)
    port_text = value("port") or "22"
    if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise BoardConfigError(f"[{INI_SECTION}] port must be an integer in 1..65535, not '{port_text}'", path=path)
    password = sec.get("pwd") or None  # taken as written: spaces may belong to it
    key_file = value("key_file")
    if key_file is not None:
        key_file = os.path.expanduser(key_file)
        if not os.path.isfile(key_file):
            raise BoardConfigError(f"[{INI_SECTION}] key_file {key_file} does not exist", path=path)
    if password is None and key_file is None:
        raise BoardConfigError(f"[{INI_SECTION}] has neither 'pwd' nor 'key_file'", path=path)
    known = value("known_hosts")
    remote_dir = value("remote_dir")
    if remote_dir is not None:
        _check_path(remote_dir, f"[{INI_SECTION}] remote_dir")
        if not remote_dir.startswith("/"):
            raise BoardConfigError(f"[{INI_SECTION}] remote_dir must be an absolute path", path=path)
    if password is not None:
        mode = stat.S_IMODE(os.stat(path).st_mode)
        if mode & (stat.S_IRGRP | stat.S_IROTH):
            diag.warn(f"{path}: holds a password and can be read by group or others (mode {mode:04o}): "
                      "chmod 600 it, or log in with key_file instead")
    return BoardConfig(path=path, ip=ip, username=user, port=int(port_text), password=password, key_file=key_file,
                       known_hosts=os.path.expanduser(known) if known else None, remote_dir=remote_dir)


@dataclass
class _Plan:
    """Everything checked before connecting."""

    board: BoardConfig
    known_hosts: str
    project: str            #: local folder uploaded
    main_rel: str           #: `main` relative to `project`, '/'-separated
    acl_rel: str            #: acl.json relative to `project`, '/'-separated
    acl_fields: Dict[str, Any]
    switch: str
    output: str
    nfs: Optional[Tuple[str, str]]  #: (server, absolute export path)
    timeout: float


def _check_path(path: str, what: str) -> None:
    if not SAFE_PATH.match(path):
        bad = sorted({c for c in path if not SAFE_PATH.match(c)})
        shown = " ".join(repr(c) for c in bad)
        raise UnsafePath(f"{what} holds characters the profiler does not accept ({shown}); "
                         "use letters, digits, '_', '-', '.' and '/'", path=path)


def _check_output_path(path: str) -> None:
    """The acl.json `output` on the board: the profiler's own rule, stricter than SAFE_PATH."""
    bad = [p for p in path.split("/") if p and not SOC_OUTPUT_PART.match(p)]
    if bad:
        raise UnsafePath(f"the board's profiling folder would be {path}, but the profiler accepts only letters, "
                         f"digits and '_' in the acl.json output ('{bad[0]}' has others); set remote_dir in the "
                         "ini to such a folder", path=path)


def _plan(main: str, config: str, output: str, interval: Union[int, str], acl_api: str, aacpu: str, switch: str,
          aac_metrics: str, nfs: Optional[str], timeout: float, project: Optional[str], acl_json: str,
          known_hosts: Optional[str], diag: Diagnostics) -> _Plan:
    fields: Dict[str, Any] = {"switch": switch, "acl_api": acl_api, "aacpu": aacpu, "aac_metrics": aac_metrics,
                              "interval": interval}
    soc_profiler_config(**fields)  # the acl.json values, checked before anything else happens
    if not timeout > 0:
        raise BoardConfigError(f"the timeout must be positive, not {timeout}")
    main_abs = os.path.abspath(main)
    if not os.path.exists(main_abs):
        raise BoardProgramMissing("the program to run on the board does not exist", path=main_abs)
    if not os.path.isfile(main_abs) or not os.access(main_abs, os.X_OK):
        raise BoardProgramMissing("the program to run on the board is not an executable file", path=main_abs)
    _check_path(main_abs, "the program's path")
    proj = os.path.abspath(project) if project else os.path.dirname(main_abs)
    _check_path(proj, "the project folder")
    if not os.path.isdir(proj):
        raise BoardConfigError("the project folder does not exist", path=proj)
    if os.path.commonpath([proj, main_abs]) != proj:
        raise BoardConfigError(f"the program {main_abs} is not inside the project folder", path=proj)
    main_rel = os.path.relpath(main_abs, proj).replace(os.sep, "/")
    _check_path(acl_json, "the acl.json path")
    if acl_json.startswith("/"):
        raise BoardConfigError(f"the acl.json path '{acl_json}' must be relative to the program's folder")
    acl_rel = posixpath.normpath(posixpath.join(posixpath.dirname(main_rel), acl_json))
    if acl_rel == ".." or acl_rel.startswith("../") or acl_rel == main_rel:
        raise BoardConfigError(f"the acl.json path '{acl_json}' must name a file inside the project folder "
                               f"{proj} (upload a larger folder with --project)")
    out = os.path.abspath(output)
    _check_path(out, "the output folder")
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as exc:
        raise BoardConfigError(f"cannot create the output folder: {exc.strerror}", path=out) from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise BoardConfigError("the output folder is not writable", path=out)
    board = read_board_ini(config, diag)
    nfs_parts = _parse_nfs(nfs) if nfs is not None else None
    known = known_hosts or board.known_hosts or os.path.expanduser(DEFAULT_KNOWN_HOSTS)
    return _Plan(board=board, known_hosts=os.path.abspath(known), project=proj, main_rel=main_rel, acl_rel=acl_rel,
                 acl_fields=fields, switch=switch, output=out, nfs=nfs_parts, timeout=float(timeout))


def _parse_nfs(spec: str) -> Tuple[str, str]:
    server, sep, path = spec.partition(":/")
    if not sep or not server or not SAFE_HOST.match(server):
        raise BoardConfigError(f"--nfs must be SERVER:/absolute/path, not '{spec}'")
    path = "/" + path
    _check_path(path, "the NFS export path")
    return server, posixpath.normpath(path)


# ------------------------------------------------------------------------------------------------
# The SSH session


def _paramiko() -> Any:
    try:
        import paramiko
    except ImportError:
        raise BoardConfigError("collecting on a board needs paramiko: pip install 'msprof-kit[ssh]'") from None
    return paramiko


def fingerprint(key: "paramiko.PKey") -> str:
    """OpenSSH's SHA256 fingerprint of a host key."""
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode("ascii").rstrip("=")


def _host_key_policy(paramiko: Any, known_hosts: str, accept_new: bool, diag: Diagnostics) -> Any:
    class Policy(paramiko.MissingHostKeyPolicy):
        """A host key seen for the first time: refused, or with `accept_new` trusted and appended to
        known_hosts. (paramiko raises BadHostKeyException itself when a recorded key differs.)"""

        def missing_host_key(self, client: "paramiko.SSHClient", hostname: str, key: "paramiko.PKey") -> None:
            if not accept_new:
                raise UnknownHostKey(f"the board {hostname} is not in {known_hosts} (its {key.get_name()} key is "
                                     f"{fingerprint(key)}); check that fingerprint, then pass "
                                     "--accept-new-host-key to trust and record it")
            client.get_host_keys().add(hostname, key.get_name(), key)
            folder = os.path.dirname(known_hosts)
            try:
                os.makedirs(folder, mode=0o700, exist_ok=True)
                fd = os.open(known_hosts, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                with os.fdopen(fd, "a", encoding="ascii") as f:
                    f.write(f"{hostname} {key.get_name()} {key.get_base64()}\n")
            except OSError as exc:
                raise BoardConfigError(f"cannot record the board's host key: {exc.strerror}", path=known_hosts) from None
            diag.warn(f"trusted the new host key of {hostname} ({key.get_name()} {fingerprint(key)}) "
                      f"and recorded it in {known_hosts}")

    return Policy()


@dataclass
class _Result:
    status: Optional[int]   #: exit status; -1 when ended by a signal; None when it timed out
    out: str
    err: str


class _Session:
    """One SSH connection to the board, the folder it works in there, and its clean-up."""

    def __init__(self, plan: _Plan, client: "paramiko.SSHClient", diag: Diagnostics) -> None:
        self.plan = plan
        self.client = client
        self.diag = diag
        self.secret = plan.board.password
        self.sftp: Optional["paramiko.SFTPClient"] = None
        self.run_dir: Optional[str] = None
        self.mounted = False
        self.label = f"{plan.board.username}@{plan.board.ip}:{plan.board.port}"
        #: what paramiko raises when a channel, SFTP or the connection fails
        self.errors: Tuple[Type[BaseException], ...] = (OSError, EOFError, _paramiko().SSHException)

    # --- connecting and closing

    @classmethod
    def connect(cls, plan: _Plan, accept_new: bool, connect_timeout: float, diag: Diagnostics) -> "_Session":
        paramiko = _paramiko()
        b = plan.board
        where = f"{b.ip} port {b.port}"
        client = paramiko.SSHClient()
        try:
            if os.path.exists(plan.known_hosts):
                try:
                    client.load_host_keys(plan.known_hosts)
                except (OSError, paramiko.SSHException) as exc:
                    raise BoardConfigError(f"cannot read known hosts: {exc}", path=plan.known_hosts) from None
            client.set_missing_host_key_policy(_host_key_policy(paramiko, plan.known_hosts, accept_new, diag))
            LOG.info("connecting to %s@%s", b.username, where)
            try:
                client.connect(b.ip, port=b.port, username=b.username, password=b.password, key_filename=b.key_file,
                               look_for_keys=False, allow_agent=False, timeout=connect_timeout,
                               banner_timeout=connect_timeout, auth_timeout=connect_timeout)
            except paramiko.BadHostKeyException as exc:
                raise HostKeyChanged(
                    f"the host key of the board {where} has CHANGED: known_hosts has {fingerprint(exc.expected_key)}, "
                    f"the board showed {fingerprint(exc.key)}; if the board was re-flashed, delete its line from "
                    f"{plan.known_hosts} and connect again", path=plan.known_hosts) from None
            except paramiko.AuthenticationException:
                how = " and ".join(w for w, v in (("password", b.password), ("key_file", b.key_file)) if v)
                raise BoardAuthFailed(f"the board {where} refused the login of '{b.username}' "
                                      f"(check the {how} in the ini)", path=b.path) from None
            except paramiko.ssh_exception.NoValidConnectionsError:
                raise BoardUnreachable(f"cannot connect to the board at {where}: connection refused "
                                       "(is sshd running there, and is the port right?)") from None
            except socket.timeout:
                raise BoardUnreachable(f"cannot connect to the board at {where}: no answer within "
                                       f"{connect_timeout:g} s") from None
            except socket.gaierror as exc:
                raise BoardUnreachable(f"cannot connect to the board at {where}: {exc.strerror}") from None
            except (paramiko.SSHException, EOFError) as exc:
                raise BoardConnectionError(f"SSH with the board at {where} failed: "
                                           f"{_one_line(str(exc) or type(exc).__name__, b.password)}") from None
            except OSError as exc:
                raise BoardUnreachable(f"cannot connect to the board at {where}: {exc.strerror or exc}") from None
            LOG.info("connected to %s", where)
            return cls(plan, client, diag)
        except BaseException:
            client.close()
            raise

    def close(self) -> None:
        if self.sftp is not None:
            self.sftp.close()
        self.client.close()

    def _clean(self, text: str) -> str:
        return _one_line(text, self.secret)

    # --- the flow

    def collect(self, runner: Optional[Runner]) -> List[str]:
        """Steps 3..9 of spec §4.3; the board is cleaned up whatever happens."""
        try:
            return self._collect(runner or self._ssh_runner)
        finally:
            self._cleanup(runner or self._ssh_runner)

    def _collect(self, runner: Runner) -> List[str]:
        plan = self.plan
        self.sftp = self._sftp_call("open SFTP", self.client.open_sftp)
        base = plan.board.remote_dir or self._sftp_call("find the home folder", self.sftp.normalize, ".")
        _check_path(base, "the board folder")
        run_dir = posixpath.join(base, f"msprof_kit_{time.strftime('%Y%m%d%H%M%S')}_{secrets.token_hex(3)}")
        _check_output_path(posixpath.join(run_dir, PROFILING_DIR))
        try:
            self.sftp.mkdir(run_dir, 0o700)
        except self.errors as exc:
            raise UploadFailed(f"cannot create {run_dir} on the board: {self._reason(exc)}") from None
        self.run_dir = run_dir
        remote_project = posixpath.join(run_dir, os.path.basename(plan.project))
        prof_dir = posixpath.join(run_dir, PROFILING_DIR)
        self._upload(plan.project, remote_project)
        main_remote = posixpath.join(remote_project, plan.main_rel)
        main_dir = posixpath.dirname(main_remote)
        self._mkdir(prof_dir)
        self._write_acl_json(posixpath.join(remote_project, plan.acl_rel), prof_dir)
        if plan.nfs is not None:
            self._mount(runner, prof_dir)
        before = {d: self._job_dirs(d) for d in (prof_dir, main_dir)}
        self._run_main(main_remote, main_dir)
        new: List[Tuple[str, str]] = []
        for folder, old in before.items():
            for name in sorted(set(self._job_dirs(folder)) - set(old)):
                new.append((folder, name))
                if folder == main_dir:
                    self.diag.warn(f"{name}: the program wrote it next to main ({main_dir}), not into the acl.json "
                                   f"output {prof_dir}")
        if not new:
            if plan.switch == "off":
                self.diag.warn("switch is off and the program produced no JOB directory: nothing to bring back")
                return []
            raise NoJobProduced(
                f"main ran but no new JOB directory appeared in {prof_dir} or {main_dir} on the board: check that "
                "the model was converted with --online_model_type=2, that the program calls svp_acl_init with "
                f"the acl.json at {plan.acl_rel} of the project and calls svp_acl_finalize")
        lacks = [self._missing_parts(posixpath.join(folder, name)) for folder, name in new]
        local = [self._bring_back(folder, name, prof_dir) for folder, name in new]
        broken = [(path, what) for path, what in zip(local, lacks) if what]
        if broken:
            shown = "; ".join(f"{path} has no {what}" for path, what in broken)
            raise IncompleteJob(f"incomplete JOB collection copied back: {shown} (did the program call "
                                "svp_acl_finalize?)")
        return local

    # --- remote commands

    def _run(self, argv: Sequence[str], timeout: float, cwd: Optional[str] = None) -> _Result:
        """Run argv on the board (each word shell-quoted; stdin at EOF). The shell reports its PID,
        which is the command's process group once it has exec'd the command: that group is killed
        (TERM, then KILL) when the command outlives `timeout` seconds or this side is interrupted."""
        words = " ".join(shlex.quote(a) for a in argv)
        command = (f"umask {BOARD_UMASK} && " + (f"cd {shlex.quote(cwd)} && " if cwd else "")
                   + f"echo {PID_MARK}$$ && exec {words}")
        LOG.debug("board: %s", self._clean(command))
        transport = self.client.get_transport()
        if transport is None or not transport.is_active():
            raise BoardConnectionError(f"the SSH connection to {self.label} was lost")
        out, err = bytearray(), bytearray()
        pid: Optional[int] = None
        deadline = time.monotonic() + timeout
        try:
            chan = transport.open_session(timeout=SHORT_TIMEOUT)
        except self.errors as exc:
            raise BoardConnectionError(f"cannot run a command on {self.label}: "
                                       f"{self._clean(str(exc) or type(exc).__name__)}") from None
        try:  # from the command's start on, whatever stops us (Ctrl-C, SIGTERM) stops it on the board first
            try:
                chan.exec_command(command)
                chan.shutdown_write()
            except self.errors as exc:
                raise BoardConnectionError(f"cannot run a command on {self.label}: "
                                           f"{self._clean(str(exc) or type(exc).__name__)}") from None
            while True:
                got = self._pump(chan, out, err)
                if pid is None:
                    pid = _take_pid(out)
                del out[:-TAIL_BYTES], err[:-TAIL_BYTES]
                if chan.exit_status_ready() and not chan.recv_ready() and not chan.recv_stderr_ready():
                    break
                if time.monotonic() > deadline:
                    if pid is not None:
                        self._kill(pid, chan)
                    return _Result(None, self._text(out), self._text(err))
                if not got:
                    time.sleep(POLL)
            status = chan.recv_exit_status()
        except BaseException:  # interrupted here, or the connection broke: do not leave it running
            pid = pid if pid is not None else _take_pid(out)
            if pid is None:  # interrupted before its PID line arrived: wait a moment for it
                end = time.monotonic() + KILL_GRACE
                while pid is None and time.monotonic() < end and not chan.exit_status_ready():
                    if not self._pump(chan, out, err):
                        time.sleep(POLL)
                    pid = _take_pid(out)
            if pid is not None and not chan.exit_status_ready():
                self._kill(pid, None)
            raise
        finally:
            chan.close()
        result = _Result(status, self._text(out), self._text(err))
        if result.out:
            LOG.debug("board stdout: %s", result.out)
        if result.err:
            LOG.debug("board stderr: %s", result.err)
        return result

    @staticmethod
    def _pump(chan: "paramiko.Channel", out: bytearray, err: bytearray) -> bool:
        got = False
        while chan.recv_ready():
            out += chan.recv(32768)
            got = True
        while chan.recv_stderr_ready():
            err += chan.recv_stderr(32768)
            got = True
        return got

    def _text(self, raw: bytearray) -> str:
        text = raw.decode("utf-8", "replace")
        return text.replace(self.secret, REDACTED) if self.secret else text

    def _kill(self, pid: int, chan: Optional["paramiko.Channel"]) -> None:
        """TERM the process group `pid` leads (the command's shell, which exec'd the program), then
        KILL it when it is still there after KILL_GRACE seconds."""
        self._quiet(f"kill -s TERM -- -{pid} 2>/dev/null || kill -s TERM {pid} 2>/dev/null")
        end = time.monotonic() + KILL_GRACE
        while time.monotonic() < end:
            if chan is not None and chan.exit_status_ready():
                return
            if chan is None and self._quiet(f"kill -0 -- -{pid} 2>/dev/null || kill -0 {pid} 2>/dev/null") != 0:
                return
            time.sleep(0.1)
        self._quiet(f"kill -s KILL -- -{pid} 2>/dev/null || kill -s KILL {pid} 2>/dev/null")

    def _quiet(self, command: str) -> Optional[int]:
        """A fixed command (built here from integers and quoted paths), for killing and clean-up;
        returns its status, or None when it could not be run."""
        transport = self.client.get_transport()
        if transport is None or not transport.is_active():
            return None
        try:
            chan = transport.open_session(timeout=SHORT_TIMEOUT)
            chan.settimeout(SHORT_TIMEOUT)
            chan.exec_command(command)
            while chan.recv(32768):  # drain until EOF
                pass
            return chan.recv_exit_status()
        except self.errors as exc:
            LOG.debug("board command failed: %s", self._clean(str(exc)))
            return None

    def _ssh_runner(self, argv: Sequence[str]) -> Tuple[int, str]:
        result = self._run(argv, SHORT_TIMEOUT)
        if result.status is None:
            return 124, f"no answer within {SHORT_TIMEOUT:g} s"
        return result.status, (result.err or result.out).strip()

    # --- steps

    def _sftp_call(self, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except self.errors as exc:
            raise BoardConnectionError(f"cannot {what} on {self.label}: {self._reason(exc)}") from None

    def _reason(self, exc: BaseException) -> str:
        text = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        return self._clean(str(text))

    def _mkdir(self, path: str, mode: int = 0o750) -> None:
        assert self.sftp is not None
        try:
            self.sftp.mkdir(path, mode)
        except self.errors as exc:
            raise UploadFailed(f"cannot create {path} on the board: {self._reason(exc)}") from None

    def _upload(self, local_root: str, remote_root: str) -> None:
        """Copy the project folder to the board (files keep their permission bits)."""
        assert self.sftp is not None
        count = size = 0
        skip_output = os.path.commonpath([local_root, self.plan.output]) == local_root
        for base, dirnames, filenames in os.walk(local_root):
            rel = os.path.relpath(base, local_root)
            rdir = remote_root if rel == "." else posixpath.join(remote_root, *rel.split(os.sep))
            self._mkdir(rdir, _masked(stat.S_IMODE(os.stat(base).st_mode) | 0o700))
            keep = []
            for d in sorted(dirnames):
                full = os.path.join(base, d)
                if os.path.islink(full):
                    self.diag.warn(f"{full}: a link to a folder, not uploaded")
                elif (skip_output and full == self.plan.output) or (base == self.plan.output and d.startswith(JOB_PREFIX)):
                    LOG.debug("not uploading %s (the output folder, or a JOB collected before)", full)
                else:
                    keep.append(d)
            dirnames[:] = keep
            for name in sorted(filenames):
                lp = os.path.join(base, name)
                rp = posixpath.join(rdir, name)
                if not os.path.isfile(lp):
                    self.diag.warn(f"{lp}: not a regular file, not uploaded")
                    continue
                try:
                    attrs = self.sftp.put(lp, rp, confirm=True)
                    self.sftp.chmod(rp, _masked(stat.S_IMODE(os.stat(lp).st_mode)))
                except self.errors as exc:
                    raise UploadFailed(f"cannot upload {lp} to the board as {rp}: {self._reason(exc)}") from None
                count += 1
                size += attrs.st_size or 0
        LOG.info("uploaded %d files (%d bytes) to %s", count, size, remote_root)

    def _write_acl_json(self, path: str, prof_dir: str) -> None:
        assert self.sftp is not None
        text = dumps_acl_json(soc_profiler_config(output=prof_dir, **self.plan.acl_fields))
        parent = posixpath.dirname(path)
        missing = []
        while parent != self.run_dir and not self._exists(parent):
            missing.append(parent)
            parent = posixpath.dirname(parent)
        for folder in reversed(missing):
            self._mkdir(folder)
        try:
            with self.sftp.open(path, "w") as f:
                f.write(text.encode("utf-8"))
            self.sftp.chmod(path, 0o640)
        except self.errors as exc:
            raise UploadFailed(f"cannot write {path} on the board: {self._reason(exc)}") from None
        LOG.info("wrote %s on the board", path)

    def _exists(self, path: str) -> bool:
        assert self.sftp is not None
        try:
            self.sftp.stat(path)
        except FileNotFoundError:
            return False
        except self.errors as exc:
            raise BoardConnectionError(f"cannot look at {path} on {self.label}: {self._reason(exc)}") from None
        return True

    def _mount(self, runner: Runner, prof_dir: str) -> None:
        assert self.plan.nfs is not None
        spec = f"{self.plan.nfs[0]}:{self.plan.nfs[1]}"
        argv = mount_command(spec, prof_dir)
        status, message = runner(argv)
        if status == 0:
            self.mounted = True
            LOG.info("mounted %s on %s", spec, prof_dir)
            return
        self.diag.warn(f"mounting {spec} on the board failed (exit status {status}: {self._clean(message)}); "
                       "the JOB data is copied back over SFTP instead")

    def _run_main(self, main_remote: str, main_dir: str) -> None:
        LOG.info("running %s on the board (timeout %g s)", main_remote, self.plan.timeout)
        result = self._run([main_remote], self.plan.timeout, cwd=main_dir)
        last = _last_line(result.err) or _last_line(result.out)
        said = f": {last}" if last else ""
        if result.status is None:
            raise BoardProgramTimeout(f"main did not finish within {self.plan.timeout:g} s on the board and was "
                                      f"killed{said}")
        if result.status in (126, 127):
            raise BoardProgramNotRunnable(f"the board could not start main (exit status {result.status}){said}")
        if result.status == -1:
            raise BoardProgramFailed(f"main was ended by a signal on the board{said}")
        if result.status != 0:
            raise BoardProgramFailed(f"main exited with status {result.status} on the board{said}")

    def _job_dirs(self, folder: str) -> List[str]:
        """The JOB folders in `folder` on the board. A name the board returns becomes a local path
        later: only `JOB` followed by letters, digits and `_` is taken; other JOB-like entries are
        named in a warning and left on the board."""
        assert self.sftp is not None
        try:
            entries = self.sftp.listdir_attr(folder)
        except FileNotFoundError:
            return []
        except UnicodeDecodeError:
            raise CopyBackFailed(f"the board listed a name that is not UTF-8 in {folder}; nothing was copied "
                                 "from there") from None
        except self.errors as exc:
            raise BoardConnectionError(f"cannot list {folder} on {self.label}: {self._reason(exc)}") from None
        found = []
        for e in entries:
            name = e.filename
            if not name.startswith(JOB_PREFIX):
                continue
            if not JOB_NAME.match(name):
                self.diag.warn(f"{folder} on the board holds {name!r}, which is not a JOB folder name ('JOB' "
                               "followed by letters, digits and '_'): not copied")
            elif stat.S_ISDIR(e.st_mode or 0):
                found.append(name)
        return sorted(found)

    def _missing_parts(self, job: str) -> str:
        """What a JOB directory lacks of `data/` and `info.json.N` ('' when complete)."""
        assert self.sftp is not None
        entries = {e.filename: e for e in self._listing(job)}
        lacks = []
        if "data" not in entries or not stat.S_ISDIR(entries["data"].st_mode or 0):
            lacks.append("data/")
        if not any(re.fullmatch(r"info\.json\.\d+", n) for n in entries):
            lacks.append("info.json.N")
        return " and ".join(lacks)

    def _listing(self, folder: str) -> List[Any]:
        """listdir_attr of `folder` on the board, every name checked: a name that is not UTF-8, is
        empty, `.` or `..`, or holds `/` or NUL would take a local path out of the copy, so it fails
        the copy-back (CopyBackFailed) before anything is written."""
        assert self.sftp is not None
        try:
            entries = self.sftp.listdir_attr(folder)
        except UnicodeDecodeError:
            raise CopyBackFailed(f"copying {folder} back failed: the board listed a name that is not UTF-8 "
                                 "there") from None
        except self.errors as exc:
            raise CopyBackFailed(f"copying {folder} back failed: cannot list it on {self.label}: "
                                 f"{self._reason(exc)}") from None
        for e in entries:
            name = e.filename
            if name in ("", ".", "..") or "/" in name or "\0" in name:
                raise CopyBackFailed(f"copying {folder} back failed: the board listed the entry {name!r}, which "
                                     "is not a plain file or folder name; nothing was copied")
        return sorted(entries, key=lambda e: e.filename)

    def _remote_tree(self, root: str) -> Tuple[List[str], List[Tuple[str, int]]]:
        """Folders and (file, size) pairs below root, relative to it."""
        dirs: List[str] = []
        files: List[Tuple[str, int]] = []
        todo = [""]
        while todo:
            rel = todo.pop()
            for e in self._listing(posixpath.join(root, rel) if rel else root):
                sub = posixpath.join(rel, e.filename) if rel else e.filename
                mode = e.st_mode or 0
                if stat.S_ISDIR(mode):
                    dirs.append(sub)
                    todo.append(sub)
                elif stat.S_ISREG(mode):
                    files.append((sub, e.st_size or 0))
                else:
                    self.diag.warn(f"{posixpath.join(root, sub)} on the board is not a regular file, not copied")
        return dirs, files

    def _bring_back(self, folder: str, name: str, prof_dir: str) -> str:
        """The JOB `folder/name` into the output folder, under a name not used there yet."""
        out = self.plan.output
        if self.mounted and folder == prof_dir and self.plan.nfs is not None:
            export_dir = self.plan.nfs[1]
            here = os.path.join(export_dir, name)
            if os.path.isdir(here):  # this machine serves the NFS export: the data is already here
                if os.path.realpath(export_dir) == os.path.realpath(out):
                    return here
                return _move_local(here, out, name)
        return self._copy_job(posixpath.join(folder, name), out, name)

    def _copy_job(self, remote: str, out: str, name: str) -> str:
        assert self.sftp is not None
        if not JOB_NAME.match(name):  # _job_dirs let only such names through; checked again where it matters
            raise CopyBackFailed(f"the board's JOB folder {name!r} is not a JOB folder name; nothing was copied")
        copy_errors: Tuple[Type[BaseException], ...] = (UnicodeDecodeError,) + self.errors
        partial = tempfile.mkdtemp(prefix=f".{name}.partial-", dir=out)
        try:
            try:
                dirs, files = self._remote_tree(remote)
                for d in dirs:
                    os.makedirs(_inside(partial, d, remote), exist_ok=True)
                for rel, size in files:
                    local = _inside(partial, rel, remote)
                    self.sftp.get(posixpath.join(remote, rel), local)
                    got = os.path.getsize(local)
                    if got != size:
                        raise CopyBackFailed(f"copying {remote} back failed: {rel} has {got} bytes here, "
                                             f"{size} on the board; the partial copy was removed")
                _verify_tree(partial, files, f"copying {remote} back failed")
            except copy_errors as exc:
                raise CopyBackFailed(f"copying {remote} back failed: {self._reason(exc)}; the partial copy was "
                                     "removed") from None
            final = _claim(out, name)
            os.rename(partial, final)
        except BaseException:
            shutil.rmtree(partial, ignore_errors=True)
            raise
        LOG.info("copied %s (%d files) to %s", remote, len(files), final)
        return final

    # --- clean-up

    def _cleanup(self, runner: Runner) -> None:
        """Remove from the board everything this run created; problems become warnings (they must
        not hide the error that may be on its way)."""
        keep_mount = False
        if self.mounted and self.run_dir is not None:
            prof_dir = posixpath.join(self.run_dir, PROFILING_DIR)
            try:
                status, message = runner(["umount", prof_dir])
            except MsprofKitError as exc:
                status, message = -1, str(exc)
            if status == 0:
                self.mounted = False
            else:
                keep_mount = True
                self.diag.warn(f"umount {prof_dir} on the board failed (exit status {status}: "
                               f"{self._clean(message)}); the mounted folder and {self.run_dir} were left there")
        if self.run_dir is None:
            return
        targets = [self.run_dir]
        if keep_mount:  # never delete through a mount: that would delete the server's files
            try:
                names = self.sftp.listdir(self.run_dir) if self.sftp is not None else []
            except self.errors as exc:
                self.diag.warn(f"could not list {self.run_dir} on the board to clean it up: {self._reason(exc)}")
                return
            targets = [posixpath.join(self.run_dir, n) for n in names if n != PROFILING_DIR]
            if not targets:
                return
        removed = self._quiet("rm -rf -- " + " ".join(shlex.quote(t) for t in targets))
        if removed != 0:
            self.diag.warn(f"could not remove {self.run_dir} from the board "
                           f"({'connection lost' if removed is None else f'rm exit status {removed}'})")
        else:
            LOG.info("removed %s from the board", self.run_dir)


# ------------------------------------------------------------------------------------------------
# Local helpers


def _one_line(text: str, secret: Optional[str]) -> str:
    if secret:
        text = text.replace(secret, REDACTED)
    return " ".join(text.split())


def _take_pid(out: bytearray) -> Optional[int]:
    """The PID a board command's shell reported first (its line is removed from `out`), or None."""
    found = re.search(rb"(?:^|\n)" + PID_MARK.encode() + rb"(\d+)\n", out)
    if found is None:
        return None
    pid = int(found.group(1))  # read before the cut: the match looks into `out`
    del out[found.start():found.end()]
    return pid


def _masked(mode: int) -> int:
    """A permission mode with the bits BOARD_UMASK clears cleared."""
    return mode & ~int(BOARD_UMASK, 8)


def _inside(root: str, rel: str, remote: str) -> str:
    """The local path of the board's `rel` ('/'-separated) below `root`, checked to stay inside it
    once resolved (links included)."""
    local = os.path.join(root, *rel.split("/"))
    real_root = os.path.realpath(root)
    if os.path.commonpath([real_root, os.path.realpath(local)]) != real_root:
        raise CopyBackFailed(f"copying {remote} back failed: its entry {rel!r} would be written outside the copy; "
                             "nothing was kept")
    return local


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


def _claim(out: str, name: str) -> str:
    """An empty folder `out/name`, or `out/name_1`, `_2`, ... when taken: claimed by creating it, so
    two runs never write into one JOB folder (a folder renamed onto it replaces it)."""
    k = 0
    while True:
        final = os.path.join(out, name if k == 0 else f"{name}_{k}")
        try:
            os.mkdir(final)
            return final
        except FileExistsError:
            k += 1


def _verify_tree(root: str, files: Sequence[Tuple[str, int]], what: str) -> None:
    """Raise CopyBackFailed unless `root` holds exactly `files` with their sizes."""
    have: Dict[str, int] = {}
    for base, _, names in os.walk(root):
        for n in names:
            p = os.path.join(base, n)
            have[os.path.relpath(p, root).replace(os.sep, "/")] = os.path.getsize(p)
    want = dict(files)
    if have != want:
        missing = sorted(set(want) - set(have))
        wrong = sorted(k for k in set(want) & set(have) if want[k] != have[k])
        raise CopyBackFailed(f"{what}: {len(have)} of {len(want)} files arrived"
                             + (f", missing {missing[0]}" if missing else "")
                             + (f", {wrong[0]} has the wrong size" if wrong else "")
                             + "; the partial copy was removed")


def _move_local(src: str, out: str, name: str) -> str:
    """Move the JOB `src` (on this machine's NFS export) into `out`, checked like a copy."""
    files = []
    for base, _, names in os.walk(src):
        for n in names:
            p = os.path.join(base, n)
            files.append((os.path.relpath(p, src).replace(os.sep, "/"), os.path.getsize(p)))
    partial = tempfile.mkdtemp(prefix=f".{name}.partial-", dir=out)
    try:
        shutil.copytree(src, partial, dirs_exist_ok=True)
        _verify_tree(partial, files, f"moving {src} failed")
        final = _claim(out, name)
        os.rename(partial, final)
    except OSError as exc:
        shutil.rmtree(partial, ignore_errors=True)
        raise CopyBackFailed(f"moving {src} into {out} failed: {exc.strerror or exc}; the partial copy was "
                             "removed") from None
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    shutil.rmtree(src)
    LOG.info("moved %s to %s", src, final)
    return final
