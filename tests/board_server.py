"""The board the board-collector tests (test_board.py, test_board_guards.py) talk to: a REAL
OpenSSH server on 127.0.0.1 and a throwaway user, the compiled board program, the JOB payload it
hands out, and the fixtures that give them to a test (tests/conftest.py registers this module as
a plugin; the fixture `server` is module-scoped, so each test module starts its own sshd and user).

A module starts its own sshd (temporary host key, a free high port, `UsePAM no`, password and
key logins, `internal-sftp`) for a throwaway user made with useradd/chpasswd and removed with
userdel -r afterwards. The board program is tests/board_program/main.c, compiled here with gcc:
it reads the acl.json the collector writes and, with the switch on, writes a JOB collection (a
copy of a payload made by tests/synth_job.py) into the acl.json output. After every test the
user's home must be exactly as before and none of the user's processes may be left running.

Not exercised: the NFS transport itself (this kernel has no NFS client). The mount command is
checked through an injected runner, and the fallback through both that runner and the real
`mount`, which the unprivileged board user may not run.
"""
from __future__ import annotations

import os
import pwd
import re
import secrets
import shutil
import socket
import stat
import subprocess
import time
from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import pytest

import synth_job
from conftest import tree_hashes

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "board_program", "main.c")
SSHD = shutil.which("sshd") or ("/usr/sbin/sshd" if os.path.exists("/usr/sbin/sshd") else None)

#: the mark of every module that uses these fixtures (`pytestmark = NEEDS_SSHD`)
NEEDS_SSHD = pytest.mark.skipif(SSHD is None, reason="the OpenSSH server (sshd) is not installed; "
                                "`apt-get install openssh-server` (.ci/run does it)")

RUN_DIR = re.compile(r"^msprof_kit_\d{14}_[0-9a-f]{6}$")


# ------------------------------------------------------------------------------------------------
# The board: sshd, a throwaway user, the compiled program


@dataclass
class Server:
    user: str
    password: str
    port: int
    home: str
    host_key_line: str        #: the known_hosts line of the server's key
    other_key_line: str       #: the same host name with another key (a "re-flashed" board)
    fingerprint: str          #: SHA256:... of the server's key
    key_file: str             #: a private key the user's authorized_keys accepts
    uid: int
    gid: int


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _keygen(path: str) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "msprof-kit-test", "-f", path],
                   check=True, stdout=subprocess.DEVNULL)
    with open(path + ".pub", encoding="ascii") as f:
        kind, b64 = f.read().split()[:2]
    return f"{kind} {b64}"


def _start_sshd(folder: str, user: str, host_key: str) -> Tuple["subprocess.Popen[bytes]", int]:
    """sshd -D on a free port; retried when another process takes the port first."""
    assert SSHD is not None
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # the privilege separation directory
    for _ in range(5):
        port = free_port()
        config = os.path.join(folder, "sshd_config")
        with open(config, "w", encoding="ascii") as f:
            f.write(f"""Port {port}
ListenAddress 127.0.0.1
HostKey {host_key}
PidFile {os.path.join(folder, "sshd.pid")}
UsePAM no
PasswordAuthentication yes
PermitEmptyPasswords no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
AuthorizedKeysFile .ssh/authorized_keys
PermitRootLogin no
AllowUsers {user}
X11Forwarding no
AllowTcpForwarding no
PrintMotd no
LoginGraceTime 20
LogLevel ERROR
Subsystem sftp internal-sftp
""")
        log = open(os.path.join(folder, "sshd.log"), "ab")
        proc = subprocess.Popen([SSHD, "-D", "-e", "-f", config], stdout=log, stderr=log)
        log.close()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                return proc, port
            except OSError:
                time.sleep(0.05)
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    with open(os.path.join(folder, "sshd.log"), encoding="utf-8", errors="replace") as f:
        raise RuntimeError("sshd did not start: " + f.read()[-2000:])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = str(tmp_path_factory.mktemp("sshd"))
    user = "msk" + secrets.token_hex(4)
    password = "Pw%" + secrets.token_hex(8) + "#;x"   # '%', '#', ';' must survive the ini
    home = f"/home/{user}"
    subprocess.run(["useradd", "--create-home", "--home-dir", home, "--shell", "/bin/sh", user], check=True)
    proc: Optional["subprocess.Popen[bytes]"] = None
    try:
        subprocess.run(["chpasswd"], input=f"{user}:{password}\n".encode(), check=True)
        entry = pwd.getpwnam(user)
        # a key login as well, set up before any test looks at the home
        key_file = os.path.join(folder, "user_key")
        pub = _keygen(key_file)
        ssh_dir = os.path.join(home, ".ssh")
        os.makedirs(ssh_dir, mode=0o700)
        with open(os.path.join(ssh_dir, "authorized_keys"), "w", encoding="ascii") as f:
            f.write(pub + "\n")
        for p in (ssh_dir, os.path.join(ssh_dir, "authorized_keys")):
            os.chown(p, entry.pw_uid, entry.pw_gid)
        os.chmod(os.path.join(ssh_dir, "authorized_keys"), 0o600)
        host_key = os.path.join(folder, "ssh_host_ed25519_key")
        host_pub = _keygen(host_key)
        other_pub = _keygen(os.path.join(folder, "other_host_key"))
        proc, port = _start_sshd(folder, user, host_key)
        fp = subprocess.run(["ssh-keygen", "-l", "-E", "sha256", "-f", host_key + ".pub"], check=True,
                            capture_output=True, text=True).stdout.split()[1]
        name = f"[127.0.0.1]:{port}"
        yield Server(user=user, password=password, port=port, home=home, host_key_line=f"{name} {host_pub}",
                     other_key_line=f"{name} {other_pub}", fingerprint=fp, key_file=key_file,
                     uid=entry.pw_uid, gid=entry.pw_gid)
    finally:
        if proc is not None:  # stop sshd by its PID
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for pid in _user_pids(user):
            os.kill(pid, 9)
        subprocess.run(["userdel", "-r", user], check=False, capture_output=True)
        with pytest.raises(KeyError):
            pwd.getpwnam(user)


def _user_pids(user: str) -> List[int]:
    """The user's live processes (a zombie sshd child, not yet reaped by its monitor, runs nothing)."""
    found = subprocess.run(["ps", "-o", "pid=,stat=", "-u", user], capture_output=True, text=True)
    rows = (line.split() for line in found.stdout.splitlines() if line.strip())
    return [int(pid) for pid, state in rows if not state.startswith("Z")]


def _snapshot(root: str) -> Dict[str, Tuple[str, int, int]]:
    """Every path below root: (kind, mode, size) (sizes of files only)."""
    out: Dict[str, Tuple[str, int, int]] = {}
    for base, dirs, files in os.walk(root):
        for n in dirs + files:
            p = os.path.join(base, n)
            st = os.lstat(p)
            kind = "dir" if stat.S_ISDIR(st.st_mode) else "link" if stat.S_ISLNK(st.st_mode) else "file"
            out[os.path.relpath(p, root)] = (kind, stat.S_IMODE(st.st_mode), st.st_size if kind == "file" else 0)
    return out


@pytest.fixture(scope="module")
def programs(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, str]:
    """The board program, built twice: reading ./acl.json (as run from its folder) and reading
    ../src/acl.json (the layout of the SoC samples)."""
    out = str(tmp_path_factory.mktemp("build"))
    built = {}
    for name, defines in (("main", []), ("main_src", ['-DACL_JSON_PATH="../src/acl.json"'])):
        path = os.path.join(out, name)
        subprocess.run(["gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-O1", *defines, "-o", path, SOURCE],
                       check=True)
        built[name] = path
    return built


@pytest.fixture(scope="module")
def payload(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A synthetic SoC JOB (data/ + info.json.0) for the board program to hand out."""
    root = str(tmp_path_factory.mktemp("payload"))
    return synth_job.write_job(root, 40, job_name="payload")


@pytest.fixture
def work(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A fresh local folder whose path holds only characters the profiler accepts (a parametrized
    test's tmp_path has brackets)."""
    return str(tmp_path_factory.mktemp("case"))


class Board:
    """What a test needs to talk to the board; checks afterwards that the board is clean."""

    def __init__(self, server: Server, programs: Dict[str, str], payload: str, work: str) -> None:
        self.s = server
        self.programs = programs
        self.payload = payload
        self.work = work
        self.known_hosts = os.path.join(work, "known_hosts")
        with open(self.known_hosts, "w", encoding="ascii") as f:
            f.write(server.host_key_line + "\n")

    def ini(self, name: str = "board.ini", mode: int = 0o600, **keys: Optional[str]) -> str:
        values: Dict[str, Optional[str]] = {"ip": "127.0.0.1", "username": self.s.user, "pwd": self.s.password,
                                            "port": str(self.s.port), "known_hosts": self.known_hosts}
        values.update(keys)
        path = os.path.join(self.work, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write("[ssh_config]\n" + "".join(f"{k} = {v}\n" for k, v in values.items() if v is not None))
        os.chmod(path, mode)
        return path

    def project(self, mode: Optional[str] = None, name: str = "sample_app", program: str = "main") -> str:
        """A project folder: main, payload/, a dummy model, and `mode` when given; returns main."""
        folder = os.path.join(self.work, name)
        os.makedirs(folder)
        main = os.path.join(folder, "main")
        shutil.copy2(self.programs[program], main)
        shutil.copytree(self.payload, os.path.join(folder, "payload"))
        with open(os.path.join(folder, "model.om"), "wb") as f:
            f.write(os.urandom(4096))
        if mode is not None:
            with open(os.path.join(folder, "mode"), "w", encoding="ascii") as f:
                f.write(mode + "\n")
        return main

    def output(self, name: str = "out") -> str:
        return os.path.join(self.work, name)


@pytest.fixture
def board(server: Server, programs: Dict[str, str], payload: str, work: str) -> Iterator[Board]:
    before = _snapshot(server.home)
    yield Board(server, programs, payload, work)
    assert _snapshot(server.home) == before, "the collector left something behind on the board"
    deadline = time.monotonic() + 5
    while _user_pids(server.user) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = _user_pids(server.user)
    assert left == [], "a process of the board user is still running: " + subprocess.run(["ps", "-o", "pid,stat,args", "-u", server.user], capture_output=True, text=True).stdout


def payload_tree(payload: str, skip: Sequence[str] = ()) -> Dict[str, str]:
    return {k: v for k, v in tree_hashes(payload).items() if not os.path.basename(k).startswith(tuple(skip))}


def one_line(exc: BaseException) -> str:
    text = str(exc)
    assert text and "\n" not in text
    return text

