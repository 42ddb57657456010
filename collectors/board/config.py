"""The inputs of a board collection, all checked before anything connects: `[ssh_config]` of
board.ini, the paths that reach the board (SAFE_PATH; the acl.json output by the SoC guide's
stricter rule), the acl.json values, the NFS export, and the Plan made of them."""
from __future__ import annotations

import configparser
import os
import posixpath
import re
import stat
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from msprof_kit.errors import BoardConfigError, BoardProgramMissing, Diagnostics, UnsafePath

from ..acljson import soc_profiler_config

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

def mount_command(nfs: str, mount_point: str) -> List[str]:
    """The guide's mount of the board's profiling folder on the NFS export `nfs`."""
    return ["mount", "-t", "nfs", "-o", MOUNT_OPTIONS, nfs, mount_point]

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
        check_path(remote_dir, f"[{INI_SECTION}] remote_dir")
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
class Plan:
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

def check_path(path: str, what: str) -> None:
    """Refuse a board path holding characters the profiler does not accept (UnsafePath names them)."""
    if not SAFE_PATH.match(path):
        bad = sorted({c for c in path if not SAFE_PATH.match(c)})
        shown = " ".join(repr(c) for c in bad)
        raise UnsafePath(f"{what} holds characters the profiler does not accept ({shown}); "
                         "use letters, digits, '_', '-', '.' and '/'", path=path)

def check_output_path(path: str) -> None:
    """The acl.json `output` on the board: the profiler's own rule, stricter than SAFE_PATH."""
    bad = [p for p in path.split("/") if p and not SOC_OUTPUT_PART.match(p)]
    if bad:
        raise UnsafePath(f"the board's profiling folder would be {path}, but the profiler accepts only letters, "
                         f"digits and '_' in the acl.json output ('{bad[0]}' has others); set remote_dir in the "
                         "ini to such a folder", path=path)

def make_plan(main: str, config: str, output: str, interval: Union[int, str], acl_api: str, aacpu: str, switch: str,
              aac_metrics: str, nfs: Optional[str], timeout: float, project: Optional[str], acl_json: str,
          known_hosts: Optional[str], diag: Diagnostics) -> Plan:
    """Check every board.ini and command-line value (acl.json fields, timeout, paths, NFS spec, known hosts) and
    return the Plan, before any connection is made."""
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
    check_path(main_abs, "the program's path")
    proj = os.path.abspath(project) if project else os.path.dirname(main_abs)
    check_path(proj, "the project folder")
    if not os.path.isdir(proj):
        raise BoardConfigError("the project folder does not exist", path=proj)
    if os.path.commonpath([proj, main_abs]) != proj:
        raise BoardConfigError(f"the program {main_abs} is not inside the project folder", path=proj)
    main_rel = os.path.relpath(main_abs, proj).replace(os.sep, "/")
    check_path(acl_json, "the acl.json path")
    if acl_json.startswith("/"):
        raise BoardConfigError(f"the acl.json path '{acl_json}' must be relative to the program's folder")
    acl_rel = posixpath.normpath(posixpath.join(posixpath.dirname(main_rel), acl_json))
    if acl_rel == ".." or acl_rel.startswith("../") or acl_rel == main_rel:
        raise BoardConfigError(f"the acl.json path '{acl_json}' must name a file inside the project folder "
                               f"{proj} (upload a larger folder with --project)")
    out = os.path.abspath(output)
    check_path(out, "the output folder")
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as exc:
        raise BoardConfigError(f"cannot create the output folder: {exc.strerror}", path=out) from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise BoardConfigError("the output folder is not writable", path=out)
    board = read_board_ini(config, diag)
    nfs_parts = _parse_nfs(nfs) if nfs is not None else None
    known = known_hosts or board.known_hosts or os.path.expanduser(DEFAULT_KNOWN_HOSTS)
    return Plan(board=board, known_hosts=os.path.abspath(known), project=proj, main_rel=main_rel, acl_rel=acl_rel,
                acl_fields=fields, switch=switch, output=out, nfs=nfs_parts, timeout=float(timeout))

def _parse_nfs(spec: str) -> Tuple[str, str]:
    server, sep, path = spec.partition(":/")
    if not sep or not server or not SAFE_HOST.match(server):
        raise BoardConfigError(f"--nfs must be SERVER:/absolute/path, not '{spec}'")
    path = "/" + path
    check_path(path, "the NFS export path")
    return server, posixpath.normpath(path)
