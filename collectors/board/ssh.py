"""The SSH session with the board (paramiko, imported when a board is contacted): connecting with
the host key checked against known_hosts, running commands (each word shell-quoted, in their own
process group, killed on timeout or interruption), SFTP calls, and the secret kept out of every
message."""
from __future__ import annotations

import base64
import hashlib
import logging
import os
import re
import shlex
import socket
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence, Tuple, Type

from msprof_kit.errors import (BoardAuthFailed, BoardConfigError, BoardConnectionError, BoardUnreachable,
                               Diagnostics, HostKeyChanged, UnknownHostKey, UploadFailed)

from .config import BOARD_UMASK, Plan

if TYPE_CHECKING:  # paramiko is the `ssh` extra, imported when a board is contacted
    import paramiko

LOG = logging.getLogger(__name__)

SHORT_TIMEOUT = 60.0                                 #: s, for mkdir/mount/umount/rm/kill on the board
KILL_GRACE = 2.0                                     #: s between TERM and KILL for a timed-out program
TAIL_BYTES = 64 * 1024                               #: stdout/stderr kept per command (the tail)
POLL = 0.02                                          #: s between channel polls
REDACTED = "********"
PID_MARK = "MSPROF_KIT_PID="                         #: prefixes the PID line a board command starts with

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
class Result:
    """What a board command ended with: its exit status and its standard output and error."""
    status: Optional[int]   #: exit status; -1 when ended by a signal; None when it timed out
    out: str
    err: str

class Session:
    """One SSH connection to the board, the folder it works in there (`run_dir`, and whether the
    profiling folder is `mounted`), and the commands and SFTP calls made over it."""

    def __init__(self, plan: Plan, client: "paramiko.SSHClient", diag: Diagnostics) -> None:
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
    def connect(cls, plan: Plan, accept_new: bool, connect_timeout: float, diag: Diagnostics) -> "Session":
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
                                           f"{one_line(str(exc) or type(exc).__name__, b.password)}") from None
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

    def clean(self, text: str) -> str:
        return one_line(text, self.secret)

    # --- remote commands

    def run(self, argv: Sequence[str], timeout: float, cwd: Optional[str] = None) -> Result:
        """Run argv on the board (each word shell-quoted; stdin at EOF). The shell reports its PID,
        which is the command's process group once it has exec'd the command: that group is killed
        (TERM, then KILL) when the command outlives `timeout` seconds or this side is interrupted."""
        words = " ".join(shlex.quote(a) for a in argv)
        command = (f"umask {BOARD_UMASK} && " + (f"cd {shlex.quote(cwd)} && " if cwd else "")
                   + f"echo {PID_MARK}$$ && exec {words}")
        LOG.debug("board: %s", self.clean(command))
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
                                       f"{self.clean(str(exc) or type(exc).__name__)}") from None
        try:  # from the command's start on, whatever stops us (Ctrl-C, SIGTERM) stops it on the board first
            try:
                chan.exec_command(command)
                chan.shutdown_write()
            except self.errors as exc:
                raise BoardConnectionError(f"cannot run a command on {self.label}: "
                                           f"{self.clean(str(exc) or type(exc).__name__)}") from None
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
                    return Result(None, self._text(out), self._text(err))
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
        result = Result(status, self._text(out), self._text(err))
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
        self.quiet(f"kill -s TERM -- -{pid} 2>/dev/null || kill -s TERM {pid} 2>/dev/null")
        end = time.monotonic() + KILL_GRACE
        while time.monotonic() < end:
            if chan is not None and chan.exit_status_ready():
                return
            if chan is None and self.quiet(f"kill -0 -- -{pid} 2>/dev/null || kill -0 {pid} 2>/dev/null") != 0:
                return
            time.sleep(0.1)
        self.quiet(f"kill -s KILL -- -{pid} 2>/dev/null || kill -s KILL {pid} 2>/dev/null")

    def quiet(self, command: str) -> Optional[int]:
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
            LOG.debug("board command failed: %s", self.clean(str(exc)))
            return None

    def ssh_runner(self, argv: Sequence[str]) -> Tuple[int, str]:
        result = self.run(argv, SHORT_TIMEOUT)
        if result.status is None:
            return 124, f"no answer within {SHORT_TIMEOUT:g} s"
        return result.status, (result.err or result.out).strip()

    # --- SFTP

    def sftp_call(self, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except self.errors as exc:
            raise BoardConnectionError(f"cannot {what} on {self.label}: {self.reason(exc)}") from None

    def reason(self, exc: BaseException) -> str:
        text = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        return self.clean(str(text))

    def mkdir(self, path: str, mode: int = 0o750) -> None:
        assert self.sftp is not None
        try:
            self.sftp.mkdir(path, mode)
        except self.errors as exc:
            raise UploadFailed(f"cannot create {path} on the board: {self.reason(exc)}") from None

    def exists(self, path: str) -> bool:
        assert self.sftp is not None
        try:
            self.sftp.stat(path)
        except FileNotFoundError:
            return False
        except self.errors as exc:
            raise BoardConnectionError(f"cannot look at {path} on {self.label}: {self.reason(exc)}") from None
        return True

def one_line(text: str, secret: Optional[str]) -> str:
    """`text` on one line with the password (`secret`) masked, for a message."""
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
