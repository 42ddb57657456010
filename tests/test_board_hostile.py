"""The board collector against a HOSTILE SFTP server: a paramiko server on 127.0.0.1 whose listings
hand back names no real file system holds (`../../x`, `a/b`, `..`, non-UTF-8 bytes), so that the
collector's own checks on this side are what keep the copy-back inside `--output`.

The server runs the collector's commands with `sh -c` in a throwaway folder (`remote_dir`) and
serves SFTP from the real file system, except that listings of the folders a test names get the
hostile entries added. The program `main` is a shell script writing one JOB from a payload.
"""
from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import tempfile
import threading
from typing import Any, Dict, Iterator, List, Tuple, Union

import paramiko
import pytest

import synth_job
from msprof_kit.collectors import board as board_collector
from msprof_kit.collectors.board import collect as board_collect
from msprof_kit.errors import CopyBackFailed, Diagnostics

USER, PASSWORD = "board", "hostile-pw"

MAIN = """#!/bin/sh
out=$(sed -n 's/^ *"output": "\\(.*\\)",$/\\1/p' acl.json)
mkdir "$out/JOBBOARD1" && cp -R payload/. "$out/JOBBOARD1/"
"""

Name = Union[str, bytes]


class _Handle(paramiko.SFTPHandle):
    def stat(self) -> Any:
        try:
            return paramiko.SFTPAttributes.from_stat(os.fstat(self.readfile.fileno()))
        except OSError as exc:
            return paramiko.SFTPServer.convert_errno(exc.errno)

    def chattr(self, attr: Any) -> int:
        return paramiko.sftp.SFTP_OK


class HostileSFTP(paramiko.SFTPServerInterface):
    """The real file system, with `extra[folder]` entries added to the listing of `folder`."""

    extra: Dict[str, List[Tuple[Name, int]]] = {}

    def canonicalize(self, path: str) -> str:
        return os.path.normpath(path if path.startswith("/") else os.path.join("/", path))

    def list_folder(self, path: str) -> Any:
        try:
            out = []
            for name in os.listdir(path):
                attr = paramiko.SFTPAttributes.from_stat(os.lstat(os.path.join(path, name)))
                attr.filename = name
                out.append(attr)
        except OSError as exc:
            return paramiko.SFTPServer.convert_errno(exc.errno)
        for folder, entries in self.extra.items():
            if os.path.normpath(path) == folder:
                for name, mode in entries:
                    attr = paramiko.SFTPAttributes()
                    attr.filename, attr.st_mode, attr.st_size = name, mode, 5  # type: ignore[assignment]
                    out.append(attr)
        return out

    def stat(self, path: str) -> Any:
        try:
            return paramiko.SFTPAttributes.from_stat(os.stat(path))
        except OSError as exc:
            return paramiko.SFTPServer.convert_errno(exc.errno)

    lstat = stat

    def open(self, path: str, flags: int, attr: Any) -> Any:
        try:
            fd = os.open(path, flags, 0o640)
        except OSError as exc:
            return paramiko.SFTPServer.convert_errno(exc.errno)
        mode = "wb" if flags & os.O_WRONLY else "r+b" if flags & os.O_RDWR else "rb"
        handle = _Handle(flags)
        handle.filename = path
        handle.readfile = handle.writefile = os.fdopen(fd, mode)
        return handle

    def mkdir(self, path: str, attr: Any) -> int:
        try:
            os.mkdir(path)
        except OSError as exc:
            return paramiko.SFTPServer.convert_errno(exc.errno)
        return paramiko.sftp.SFTP_OK

    def chattr(self, path: str, attr: Any) -> int:
        try:
            if attr.st_mode is not None:
                os.chmod(path, stat.S_IMODE(attr.st_mode))
        except OSError as exc:
            return paramiko.SFTPServer.convert_errno(exc.errno)
        return paramiko.sftp.SFTP_OK


class _Server(paramiko.ServerInterface):
    def check_auth_password(self, username: str, password: str) -> int:
        ok = username == USER and password == PASSWORD
        return paramiko.AUTH_SUCCESSFUL if ok else paramiko.AUTH_FAILED

    def get_allowed_auths(self, username: str) -> str:
        return "password"

    def check_channel_request(self, kind: str, chanid: int) -> int:
        return paramiko.OPEN_SUCCEEDED if kind == "session" else paramiko.OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED

    def check_channel_exec_request(self, channel: paramiko.Channel, command: bytes) -> bool:
        threading.Thread(target=_execute, args=(channel, command.decode()), daemon=True).start()
        return True


def _execute(channel: paramiko.Channel, command: str) -> None:
    """The collector's command, run here with sh; output and status sent back on the channel."""
    proc = subprocess.run(["sh", "-c", command], capture_output=True, stdin=subprocess.DEVNULL, timeout=60)
    channel.sendall(proc.stdout)
    channel.sendall_stderr(proc.stderr)
    channel.send_exit_status(proc.returncode)
    try:
        channel.close()
    except EOFError:  # the collector read the exit status and closed the connection first: nothing left to close
        pass


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tuple[int, str]]:
    """(port, known_hosts file) of a paramiko server on 127.0.0.1, served until the module ends."""
    folder = str(tmp_path_factory.mktemp("hostile_server"))
    key = paramiko.Ed25519Key.from_private_key_file(_keygen(folder))
    known = os.path.join(folder, "known_hosts")
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.2)
    port = listener.getsockname()[1]
    with open(known, "w", encoding="ascii") as f:
        f.write(f"[127.0.0.1]:{port} {key.get_name()} {key.get_base64()}\n")
    stop = threading.Event()
    transports: List[paramiko.Transport] = []

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except socket.timeout:
                continue
            t = paramiko.Transport(conn)
            t.add_server_key(key)
            t.set_subsystem_handler("sftp", paramiko.SFTPServer, HostileSFTP)
            t.start_server(server=_Server())
            transports.append(t)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield port, known
    finally:
        stop.set()
        thread.join(5)
        for t in transports:
            t.close()
        listener.close()


def _keygen(folder: str) -> str:
    path = os.path.join(folder, "host_key")
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", path], check=True,
                   stdout=subprocess.DEVNULL)
    return path


@pytest.fixture
def case(hostile: Tuple[int, str]) -> Iterator[Dict[str, str]]:
    """A project (main + payload), a board folder, an output folder and board.ini, all in a folder
    whose path the profiler accepts (letters, digits, '_'); removed and the hostile entries reset
    afterwards."""
    port, known = hostile
    root = tempfile.mkdtemp(prefix="msk_hostile_", dir="/tmp")
    project = os.path.join(root, "app")
    os.makedirs(project)
    main = os.path.join(project, "main")
    with open(main, "w", encoding="ascii") as f:
        f.write(MAIN)
    os.chmod(main, 0o755)
    synth_job.write_job(project, 20, job_name="payload")
    remote = os.path.join(root, "board")
    os.makedirs(remote)
    ini = os.path.join(root, "board.ini")
    with open(ini, "w", encoding="utf-8") as f:
        f.write(f"[ssh_config]\nip = 127.0.0.1\nport = {port}\nusername = {USER}\npwd = {PASSWORD}\n"
                f"known_hosts = {known}\nremote_dir = {remote}\n")
    os.chmod(ini, 0o600)
    try:
        yield {"root": root, "main": main, "ini": ini, "remote": remote, "out": os.path.join(root, "out")}
    finally:
        HostileSFTP.extra = {}
        shutil.rmtree(root)


class _Hook:
    """Adds `entries` to the listing of the run's profiling folder or of its JOBBOARD1, once the
    collector has made the run folder (its name is random)."""

    def __init__(self, where: str, entries: List[Tuple[Name, int]]) -> None:
        self.where, self.entries = where, entries

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        real = board_collect.run_main

        def run_main(session: Any, main_remote: str, main_dir: str) -> None:
            real(session, main_remote, main_dir)
            assert session.run_dir is not None
            prof = os.path.join(session.run_dir, "profiling")
            folder = prof if self.where == "profiling" else os.path.join(prof, "JOBBOARD1")
            HostileSFTP.extra = {folder: self.entries}

        monkeypatch.setattr(board_collect, "run_main", run_main)


def _everything_below(root: str) -> List[str]:
    return sorted(os.path.relpath(os.path.join(b, n), root) for b, ds, fs in os.walk(root) for n in ds + fs)


def test_the_hostile_server_serves_a_normal_job(case: Dict[str, str]) -> None:
    """Without hostile entries the server is an ordinary board: the JOB comes back whole."""
    [job] = board_collector.collect_board(case["main"], case["ini"], case["out"])
    assert os.path.isfile(os.path.join(job, "info.json.0")) and os.listdir(case["remote"]) == []


# paramiko's client drops '.' and '..' from listings itself; the collector refuses them all the same
ESCAPES = ["../../../../escaped", "data/../../escaped", "a/b", "", "nul\0byte"]


@pytest.mark.parametrize("name", ESCAPES)
def test_entries_leading_out_of_the_copy_are_refused(case: Dict[str, str], monkeypatch: pytest.MonkeyPatch,
                                                     name: str) -> None:
    kind = stat.S_IFREG | 0o644
    _Hook("job", [(name, kind)]).install(monkeypatch)
    before = _everything_below(case["root"])
    with pytest.raises(CopyBackFailed) as err:
        board_collector.collect_board(case["main"], case["ini"], case["out"])
    text = str(err.value)
    assert "\n" not in text and repr(name) in text and "nothing was copied" in text
    assert os.listdir(case["out"]) == []  # no JOB, no partial copy
    assert os.listdir(case["remote"]) == []  # the board cleaned all the same
    after = [p for p in _everything_below(case["root"]) if not p.startswith("out")]
    assert after == [p for p in before if not p.startswith("out")]
    assert not os.path.lexists(os.path.join(case["root"], "escaped"))


def test_a_non_utf8_entry_is_one_error(case: Dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    _Hook("job", [(b"data\xff", stat.S_IFREG | 0o644)]).install(monkeypatch)
    with pytest.raises(CopyBackFailed) as err:
        board_collector.collect_board(case["main"], case["ini"], case["out"])
    assert "not UTF-8" in str(err.value) and os.listdir(case["out"]) == []


@pytest.mark.parametrize("name", ["JOB/../../escaped", "JOB..", "JOB/x", "JOB x"])
def test_job_names_that_are_not_job_names_are_left_on_the_board(case: Dict[str, str],
                                                              monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    _Hook("profiling", [(name, stat.S_IFDIR | 0o755)]).install(monkeypatch)
    diag = Diagnostics()
    [job] = board_collector.collect_board(case["main"], case["ini"], case["out"], diag=diag)
    assert os.path.basename(job) == "JOBBOARD1" and os.listdir(case["out"]) == ["JOBBOARD1"]
    assert any(repr(name) in w and "not copied" in w for w in diag.warnings)
    assert not os.path.lexists(os.path.join(case["root"], "escaped"))


def test_a_non_utf8_job_name_is_one_error(case: Dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    _Hook("profiling", [(b"JOB\xfe", stat.S_IFDIR | 0o755)]).install(monkeypatch)
    with pytest.raises(CopyBackFailed) as err:
        board_collector.collect_board(case["main"], case["ini"], case["out"])
    assert "not UTF-8" in str(err.value) and os.listdir(case["out"]) == []


def test_a_link_inside_the_copy_cannot_carry_a_file_out(case: Dict[str, str], monkeypatch: pytest.MonkeyPatch,
                                                         tmp_path: Any) -> None:
    """A board that lists `data` as a folder but whose copy holds a link there already (a race, or
    a board lying about types): the resolved-path check stops the write."""
    outside = str(tmp_path / "outside")
    os.makedirs(outside)
    real_makedirs = os.makedirs

    def makedirs(path: str, *a: Any, **kw: Any) -> None:
        if os.path.basename(path) == "data" and ".JOBBOARD1.partial-" in path:
            os.symlink(outside, path)  # what a swapped folder would look like here
            return
        real_makedirs(path, *a, **kw)

    monkeypatch.setattr(os, "makedirs", makedirs)
    with pytest.raises(CopyBackFailed) as err:
        board_collector.collect_board(case["main"], case["ini"], case["out"])
    assert "outside the copy" in str(err.value)
    assert os.listdir(outside) == [] and os.listdir(case["out"]) == []
