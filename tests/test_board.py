"""The SoC board collector (collectors/board/) against a REAL OpenSSH server on 127.0.0.1.

The module starts its own sshd (temporary host key, a free high port, `UsePAM no`, password and
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

import json
import logging
import os
import pwd
import re
import secrets
import shutil
import socket
import stat
import subprocess
import tempfile
import time
from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import paramiko
import pytest

import synth_job
from conftest import stop_with_signal, tree_hashes
from msprof_kit.collectors import board as board_collector
from msprof_kit.collectors.board import ssh as board_ssh
from msprof_kit.errors import (AclJsonError, BoardAuthFailed, BoardConfigError, BoardProgramFailed,
                               BoardProgramMissing, BoardProgramNotRunnable, BoardProgramTimeout, BoardUnreachable,
                               CopyBackFailed, Diagnostics, HostKeyChanged, IncompleteJob, NoJobProduced,
                               UnknownHostKey, UnsafePath, UploadFailed)

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "board_program", "main.c")
SSHD = shutil.which("sshd") or ("/usr/sbin/sshd" if os.path.exists("/usr/sbin/sshd") else None)

pytestmark = pytest.mark.skipif(SSHD is None, reason="the OpenSSH server (sshd) is not installed; "
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


def _free_port() -> int:
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
        port = _free_port()
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


def _payload_tree(payload: str, skip: Sequence[str] = ()) -> Dict[str, str]:
    return {k: v for k, v in tree_hashes(payload).items() if not os.path.basename(k).startswith(tuple(skip))}


def _one_line(exc: BaseException) -> str:
    text = str(exc)
    assert text and "\n" not in text
    return text


# ------------------------------------------------------------------------------------------------
# The flow


def test_collect_brings_the_job_back(board: Board) -> None:
    main = board.project()
    diag = Diagnostics()
    result = board_collector.collect_board(main, board.ini(), board.output(), diag=diag)
    assert result == [os.path.join(board.output(), "JOBBOARD1")]
    job = result[0]
    got = tree_hashes(job)
    seen = json.loads(open(os.path.join(job, "board_acl.json"), encoding="utf-8").read())
    del got["board_acl.json"]
    assert got == _payload_tree(board.payload)  # every file, byte for byte
    # the acl.json the program read: the SoC keys, in the guide's order, with the defaults
    profiler = seen["profiler"]
    assert list(seen) == ["profiler"]
    assert list(profiler) == ["switch", "output", "aacpu", "aac_metrics", "acl_api", "interval"]
    assert {k: v for k, v in profiler.items() if k != "output"} == {
        "switch": "on", "aacpu": "on", "aac_metrics": "ArithmeticUtilization", "acl_api": "on", "interval": "0"}
    run_dir, prof = os.path.split(profiler["output"])
    assert prof == "profiling" and os.path.dirname(run_dir) == board.s.home and RUN_DIR.match(os.path.basename(run_dir))
    assert diag.warnings == []
    assert os.listdir(board.output()) == ["JOBBOARD1"]  # no partial copies left


def test_flags_reach_the_board(board: Board) -> None:
    main = board.project()
    [job] = board_collector.collect_board(main, board.ini(), board.output(), interval=2, acl_api="off", aacpu="off")
    profiler = json.loads(open(os.path.join(job, "board_acl.json"), encoding="utf-8").read())["profiler"]
    assert (profiler["acl_api"], profiler["aacpu"], profiler["interval"]) == ("off", "off", "2")
    got = tree_hashes(job)
    del got["board_acl.json"]
    assert got == _payload_tree(board.payload, skip=("AclModule.", "DATA_PREPROCESS."))


def test_acl_json_where_the_sample_reads_it(board: Board) -> None:
    """A sample whose main, in out/, reads ../src/acl.json: upload the folder above, say where."""
    main = board.project(name="sample_resnet", program="main_src")
    root = os.path.dirname(main)
    out_dir = os.path.join(root, "out")
    os.makedirs(out_dir)
    os.rename(main, os.path.join(out_dir, "main"))
    shutil.move(os.path.join(root, "payload"), os.path.join(out_dir, "payload"))
    os.makedirs(os.path.join(root, "src"))
    [job] = board_collector.collect_board(os.path.join(out_dir, "main"), board.ini(), board.output(), project=root,
                                          acl_json="../src/acl.json")
    assert os.path.isfile(os.path.join(job, "info.json.0"))


def test_key_file_login(board: Board) -> None:
    main = board.project()
    ini = board.ini(pwd=None, key_file=board.s.key_file, mode=0o644)  # no password: no permission warning
    diag = Diagnostics()
    [job] = board_collector.collect_board(main, ini, board.output(), diag=diag)
    assert os.path.isdir(os.path.join(job, "data")) and diag.warnings == []


def test_two_runs_into_one_output_keep_both(board: Board) -> None:
    main = board.project()
    [first] = board_collector.collect_board(main, board.ini(), board.output())
    before = tree_hashes(first)
    [second] = board_collector.collect_board(main, board.ini(), board.output())
    assert os.path.basename(first) == "JOBBOARD1" and os.path.basename(second) == "JOBBOARD1_1"
    assert tree_hashes(first) == before  # untouched
    assert sorted(os.listdir(board.output())) == ["JOBBOARD1", "JOBBOARD1_1"]
    assert {k: v for k, v in tree_hashes(second).items() if k != "board_acl.json"} == _payload_tree(board.payload)


def test_all_imports_and_exports(board: Board) -> None:
    main = board.project()
    from msprof_kit import cli

    jobs = board_collector.collect_board(main, board.ini(), board.output())
    job = os.path.join(board.output(), "JOBBOARD1")
    assert jobs == [job]
    files = cli.import_and_export(jobs, Diagnostics())  # the CLI's --all pipeline
    assert files and all(os.path.isfile(f) and f.startswith(job + os.sep) for f in files)
    names = sorted(os.path.relpath(f, job) for f in files)
    assert any(n.startswith("summary/op_summary_") and n.endswith(".csv") for n in names)
    assert any(n.startswith("summary/acl_statistic_") for n in names)
    assert any(n.startswith("timeline/task_time_") and n.endswith(".json") for n in names)
    assert any(n.startswith("timeline/acl_") for n in names)
    assert os.path.isfile(os.path.join(job, "sqlite", "msprof_kit.db"))
    with open(next(f for f in files if "task_time_" in f), encoding="utf-8") as f:
        events = json.load(f)
    assert any(e.get("ph") == "X" for e in events)


def test_the_cli_collects_and_exports_in_one_command(board: Board, capsys: pytest.CaptureFixture) -> None:
    """Issue 5's acceptance: `msprof-kit collect -m main --config board.ini --all` leaves the JOB
    collection and its exports locally, and prints what it collected and wrote."""
    from msprof_kit import cli

    main = board.project()
    code = cli.main(["collect", "-m", main, "--config", board.ini(), "--output", board.output(), "--all",
                     "--interval", "2"])
    out, err = capsys.readouterr()
    job = os.path.join(board.output(), "JOBBOARD1")
    assert code == 0, err
    assert out.splitlines()[0] == f"Collected {job}"
    wrote = [line[len("Wrote "):] for line in out.splitlines() if line.startswith("Wrote ")]
    assert any("/summary/op_summary_" in w for w in wrote) and any("/timeline/task_time_" in w for w in wrote)
    assert all(os.path.isfile(w) for w in wrote)
    with open(os.path.join(job, "board_acl.json"), encoding="utf-8") as f:
        assert json.load(f)["profiler"]["interval"] == "2"
    assert board.s.password not in out + err


def test_the_cli_reports_a_wrong_password_in_one_line(board: Board, capsys: pytest.CaptureFixture) -> None:
    from msprof_kit import cli

    main = board.project()
    code = cli.main(["collect", "-m", main, "--config", board.ini(pwd="not-the-password"), "--output",
                     board.output()])
    err = capsys.readouterr().err
    assert code == 8 and err.count("\n") == 1 and err.startswith("Error: ") and "not-the-password" not in err


def test_switch_off_brings_nothing(board: Board) -> None:
    main = board.project()
    diag = Diagnostics()
    assert board_collector.collect_board(main, board.ini(), board.output(), switch="off", diag=diag) == []
    assert os.listdir(board.output()) == []
    assert any("switch is off" in w for w in diag.warnings)


# ------------------------------------------------------------------------------------------------
# Failures of spec §4.4, each with its own error


def test_wrong_password(board: Board) -> None:
    main = board.project()
    with pytest.raises(BoardAuthFailed) as err:
        board_collector.collect_board(main, board.ini(pwd="not-" + board.s.password), board.output())
    text = _one_line(err.value)
    assert f"refused the login of '{board.s.user}'" in text and "password" in text
    assert board.s.password not in text and err.value.exit_code == 8


def test_closed_port(board: Board) -> None:
    main = board.project()
    port = _free_port()  # nothing listens there
    with pytest.raises(BoardUnreachable) as err:
        board_collector.collect_board(main, board.ini(port=str(port)), board.output())
    assert f"127.0.0.1 port {port}: connection refused" in _one_line(err.value)


def test_unknown_host_key_then_accepted(board: Board) -> None:
    main = board.project()
    os.remove(board.known_hosts)
    with pytest.raises(UnknownHostKey) as err:
        board_collector.collect_board(main, board.ini(), board.output())
    text = _one_line(err.value)
    assert board.s.fingerprint in text and "--accept-new-host-key" in text
    assert not os.path.exists(board.known_hosts)  # nothing recorded
    diag = Diagnostics()
    [job] = board_collector.collect_board(main, board.ini(), board.output(), accept_new_host_key=True, diag=diag)
    assert os.path.isdir(job)
    with open(board.known_hosts, encoding="ascii") as f:
        assert f.read() == board.s.host_key_line + "\n"
    assert stat.S_IMODE(os.stat(board.known_hosts).st_mode) == 0o600
    assert any(board.s.fingerprint in w and "recorded" in w for w in diag.warnings)
    # recorded: the next run needs no option
    assert len(board_collector.collect_board(main, board.ini(), board.output())) == 1


def test_changed_host_key_is_always_an_error(board: Board) -> None:
    main = board.project()
    with open(board.known_hosts, "w", encoding="ascii") as f:
        f.write(board.s.other_key_line + "\n")
    for accept in (False, True):
        with pytest.raises(HostKeyChanged) as err:
            board_collector.collect_board(main, board.ini(), board.output(), accept_new_host_key=accept)
        text = _one_line(err.value)
        assert "CHANGED" in text and board.s.fingerprint in text
    with open(board.known_hosts, encoding="ascii") as f:
        assert f.read() == board.s.other_key_line + "\n"  # not overwritten


def test_main_missing_or_not_executable(board: Board) -> None:
    with pytest.raises(BoardProgramMissing) as err:
        board_collector.collect_board(os.path.join(board.work, "nothing", "main"), board.ini(), board.output())
    assert "does not exist" in _one_line(err.value) and err.value.exit_code == 2
    main = board.project()
    os.chmod(main, 0o644)
    with pytest.raises(BoardProgramMissing, match="not an executable file"):
        board_collector.collect_board(main, board.ini(), board.output())


def test_main_the_board_cannot_start(board: Board) -> None:
    main = board.project()
    with open(main, "w", encoding="ascii") as f:  # an interpreter the board does not have
        f.write("#!/nonexistent/interpreter\n")
    with pytest.raises(BoardProgramNotRunnable) as err:
        board_collector.collect_board(main, board.ini(), board.output())
    assert "exit status 127" in _one_line(err.value)


def test_main_fails(board: Board) -> None:
    main = board.project(mode="fail")
    with pytest.raises(BoardProgramFailed) as err:
        board_collector.collect_board(main, board.ini(), board.output())
    text = _one_line(err.value)
    assert "main exited with status 1 on the board: main: svp_acl_mdl_execute failed: error 100003" in text
    assert err.value.exit_code == 7
    assert os.listdir(board.output()) == []


def test_main_hangs_and_is_killed(board: Board) -> None:
    main = board.project(mode="hang")
    start = time.monotonic()
    with pytest.raises(BoardProgramTimeout) as err:
        board_collector.collect_board(main, board.ini(), board.output(), timeout=1.0)
    assert time.monotonic() - start < 8
    assert "did not finish within 1 s" in _one_line(err.value)
    # the board fixture checks that no process of the user is left


def test_interrupted_run_kills_main_and_cleans_up(board: Board, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C while main runs: main is killed on the board and the board cleaned up all the same."""
    real_pump = board_ssh.Session._pump
    polls = []

    def pump(chan: paramiko.Channel, out: bytearray, err: bytearray) -> bool:
        polls.append(1)
        if b"profiler switch=on" in out:  # main is running (it printed its settings)
            raise KeyboardInterrupt
        return real_pump(chan, out, err)

    monkeypatch.setattr(board_ssh.Session, "_pump", staticmethod(pump))
    main = board.project(mode="hang")
    with pytest.raises(KeyboardInterrupt):
        board_collector.collect_board(main, board.ini(), board.output(), timeout=30)
    assert polls
    # the board fixture checks that main is gone and the home is as before


def test_no_job_where_the_program_reads_another_acl_json(board: Board) -> None:
    """The program reads ./acl.json (its own, switch off) while the collector wrote conf/acl.json."""
    main = board.project()
    with open(os.path.join(os.path.dirname(main), "acl.json"), "w", encoding="ascii") as f:
        f.write('{"profiler": {"switch": "off"}}\n')
    os.makedirs(os.path.join(os.path.dirname(main), "conf"))
    with pytest.raises(NoJobProduced) as err:
        board_collector.collect_board(main, board.ini(), board.output(), acl_json="conf/acl.json")
    text = _one_line(err.value)
    assert "no new JOB directory" in text and "conf/acl.json" in text and err.value.exit_code == 4


def test_incomplete_job_is_copied_and_reported(board: Board) -> None:
    main = board.project()
    os.remove(os.path.join(os.path.dirname(main), "payload", "info.json.0"))
    with pytest.raises(IncompleteJob) as err:
        board_collector.collect_board(main, board.ini(), board.output())
    job = os.path.join(board.output(), "JOBBOARD1")
    assert f"{job} has no info.json.N" in _one_line(err.value)
    assert os.path.isdir(os.path.join(job, "data"))  # the data is not lost


@pytest.mark.parametrize("how", ["error", "short"])
def test_interrupted_copy_back(board: Board, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    """The third file of the copy back breaks: an error mid-file, or a file that arrives short."""
    real_get = paramiko.SFTPClient.get
    calls = []

    def get(self: paramiko.SFTPClient, remotepath: str, localpath: str, *args: object, **kw: object) -> None:
        calls.append(remotepath)
        if len(calls) != 3:
            return real_get(self, remotepath, localpath, *args, **kw)
        with self.open(remotepath, "rb") as src, open(localpath, "wb") as dst:
            dst.write(src.read(10))
        if how == "error":
            raise OSError("Connection lost")
        return None

    monkeypatch.setattr(paramiko.SFTPClient, "get", get)
    main = board.project()
    with pytest.raises(CopyBackFailed) as err:
        board_collector.collect_board(main, board.ini(), board.output())
    text = _one_line(err.value)
    assert "copying" in text and "partial copy was removed" in text
    assert ("Connection lost" in text) if how == "error" else ("10 bytes here" in text)
    assert len(calls) == 3
    assert os.listdir(board.output()) == []  # no JOB, no partial folder


def test_upload_refused(board: Board) -> None:
    main = board.project()
    with pytest.raises(UploadFailed) as err:
        board_collector.collect_board(main, board.ini(remote_dir="/usr"), board.output())
    assert "cannot create /usr/msprof_kit_" in _one_line(err.value)


def test_paths_with_bad_characters(board: Board) -> None:
    main = board.project()
    ini = board.ini()
    with pytest.raises(UnsafePath) as err:
        board_collector.collect_board(main, ini, os.path.join(board.work, "my out"), diag=Diagnostics())
    assert "' '" in _one_line(err.value)
    odd = os.path.join(board.work, "app$1")
    os.makedirs(odd)
    shutil.copy2(main, os.path.join(odd, "main"))
    with pytest.raises(UnsafePath, match=r"'\$'"):
        board_collector.collect_board(os.path.join(odd, "main"), ini, board.output())
    with pytest.raises(UnsafePath, match="remote_dir"):
        board_collector.collect_board(main, board.ini("odd.ini", remote_dir="/tmp/a;rm"), board.output())
    with pytest.raises(UnsafePath, match="NFS export path"):
        board_collector.collect_board(main, ini, board.output(), nfs="127.0.0.1:/srv/a b")
    # allowed in ordinary paths, but not in the acl.json output the board program is given
    with pytest.raises(UnsafePath, match="only letters, digits and '_' in the acl.json output"):
        board_collector.collect_board(main, board.ini("dash.ini", remote_dir="/tmp/msprof-kit"), board.output())
    assert not os.path.exists(board.output()) or os.listdir(board.output()) == []


def test_bad_acl_json_values_are_refused_before_connecting(board: Board) -> None:
    main = board.project()
    ini = board.ini(port=str(_free_port()))  # nothing listens: a connection attempt would fail otherwise
    for kw in ({"switch": "yes"}, {"aac_metrics": "PipeUtilization"}, {"interval": "-1"}, {"acl_api": "1"}):
        with pytest.raises(AclJsonError):
            board_collector.collect_board(main, ini, board.output(), **kw)


# ------------------------------------------------------------------------------------------------
# board.ini and secrets


@pytest.mark.parametrize("text, message", [
    (None, "board ini not found"),
    ("[other]\nip = 1.2.3.4\n", "no [ssh_config] section"),
    ("ip = 1.2.3.4\n", "before any [section]"),
    ("[ssh_config]\nusername = u\npwd = p\n", "has no 'ip'"),
    ("[ssh_config]\nip = 1.2.3.4\npwd = p\n", "has no 'username'"),
    ("[ssh_config]\nip = 1.2.3.4\nusername = u\npwd = p\nport = twenty\n", "port must be an integer in 1..65535"),
    ("[ssh_config]\nip = 1.2.3.4\nusername = u\npwd = p\nport = 70000\n", "port must be an integer in 1..65535"),
    ("[ssh_config]\nip = 1.2.3.4\nusername = u\n", "neither 'pwd' nor 'key_file'"),
    ("[ssh_config]\nip = 1.2.3.4\nusername = u\nkey_file = /nonexistent/key\n", "does not exist"),
    ("[ssh_config]\nip = 1.2.3.4 ; rm\nusername = u\npwd = p\n", "not a host name or address"),
])
def test_ini_errors(work: str, text: Optional[str], message: str) -> None:
    path = os.path.join(work, "board.ini")
    if text is not None:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    with pytest.raises(BoardConfigError) as err:
        board_collector.read_board_ini(path, Diagnostics())
    assert message in _one_line(err.value) and err.value.exit_code == 6


def test_ini_readable_by_others_draws_a_warning(work: str) -> None:
    path = os.path.join(work, "board.ini")
    with open(path, "w", encoding="utf-8") as f:
        f.write("[ssh_config]\nip = 127.0.0.1\nusername = u\npwd = S3cret%x\nport = 2222\npasswd = typo\n")
    for mode, warned in ((0o644, True), (0o640, True), (0o604, True), (0o600, False), (0o400, False)):
        os.chmod(path, mode)
        diag = Diagnostics()
        cfg = board_collector.read_board_ini(path, diag)
        assert cfg.password == "S3cret%x" and cfg.port == 2222  # '%' kept: no interpolation
        assert "S3cret" not in repr(cfg)
        assert any(f"(mode {mode:04o})" in w for w in diag.warnings) == warned
        assert any("'passwd' is not used" in w for w in diag.warnings)
        assert not any("S3cret" in w for w in diag.warnings)


def test_password_never_shown(board: Board, caplog: pytest.LogCaptureFixture,
                              capsys: pytest.CaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)  # paramiko's transport log included
    secret = board.s.password
    texts: List[str] = []
    main = board.project()
    diag = Diagnostics()
    board_collector.collect_board(main, board.ini(mode=0o644), board.output(), diag=diag)
    texts += diag.warnings
    with pytest.raises(BoardAuthFailed) as auth:
        board_collector.collect_board(main, board.ini(pwd=secret + "x"), board.output())
    texts.append(str(auth.value))
    failing = board.project(mode="fail", name="failing_app")
    with pytest.raises(BoardProgramFailed) as failed:
        board_collector.collect_board(failing, board.ini(), board.output())
    texts.append(str(failed.value))
    out, err = capsys.readouterr()
    assert "connecting to" in caplog.text and "board: " in caplog.text  # the log was really captured
    assert any("holds a password" in t for t in texts)
    for text in texts + [caplog.text, out, err]:
        assert secret not in text and secret[3:-3] not in text


def test_password_printed_by_the_board_is_redacted(board: Board, caplog: pytest.LogCaptureFixture) -> None:
    """Even a program that echoes the password (here: in its error) does not get it into a message."""
    caplog.set_level(logging.DEBUG)
    main = board.project()
    with open(main, "w", encoding="ascii") as f:
        f.write(f"#!/bin/sh\necho 'login {board.s.password} failed' >&2\nexit 3\n")
    with pytest.raises(BoardProgramFailed) as err:
        board_collector.collect_board(main, board.ini(), board.output())
    text = _one_line(err.value)
    assert "login ******** failed" in text and board.s.password not in text
    assert board.s.password not in caplog.text


# ------------------------------------------------------------------------------------------------
# --nfs. The NFS transport itself is not exercised: this kernel has no NFS client.


def test_nfs_mount_refused_for_real_falls_back_to_copy(board: Board) -> None:
    """The real `mount` on the board fails (the board user is not root): copy back over SFTP."""
    main = board.project()
    diag = Diagnostics()
    [job] = board_collector.collect_board(main, board.ini(), board.output(), nfs="127.0.0.1:/srv/msprof_nfs", diag=diag)
    assert os.path.isfile(os.path.join(job, "info.json.0"))
    assert any("mounting 127.0.0.1:/srv/msprof_nfs on the board failed" in w and "over SFTP" in w
               for w in diag.warnings)


class FakeMount:
    """An injected runner: records the commands; 'mounts' by putting a link to the export in place
    of the board folder (board and server are this machine), or refuses."""

    def __init__(self, server: Server, works: bool) -> None:
        self.server = server
        self.works = works
        self.calls: List[List[str]] = []

    def __call__(self, argv: Sequence[str]) -> Tuple[int, str]:
        self.calls.append(list(argv))
        if not self.works:
            return 32, "mount.nfs: No such device"
        point = argv[-1]
        if argv[0] == "mount":
            os.rmdir(point)
            os.symlink(argv[-2].split(":", 1)[1], point)
        else:
            os.unlink(point)
            os.mkdir(point)
            os.chown(point, self.server.uid, self.server.gid)
        return 0, ""


def _mount_argv(calls: List[List[str]], export: str, home: str) -> str:
    """Check the exact mount command of the guide; return the mount point."""
    argv = calls[0]
    assert argv[:6] == ["mount", "-t", "nfs", "-o", "nolock,tcp", f"127.0.0.1:{export}"] and len(argv) == 7
    run_dir, prof = os.path.split(argv[6])
    assert prof == "profiling" and os.path.dirname(run_dir) == home and RUN_DIR.match(os.path.basename(run_dir))
    assert " ".join(argv) == f"mount -t nfs -o nolock,tcp 127.0.0.1:{export} {argv[6]}"
    return argv[6]


def test_nfs_mount_fails_through_the_runner(board: Board) -> None:
    main = board.project()
    runner = FakeMount(board.s, works=False)
    diag = Diagnostics()
    [job] = board_collector.collect_board(main, board.ini(), board.output(), nfs="127.0.0.1:/srv/nfs_prof",
                                          runner=runner, diag=diag)
    _mount_argv(runner.calls, "/srv/nfs_prof", board.s.home)
    assert len(runner.calls) == 1  # nothing mounted, so no umount
    assert any("exit status 32: mount.nfs: No such device" in w for w in diag.warnings)
    assert os.path.isfile(os.path.join(job, "info.json.0"))


def test_nfs_mounted_data_is_taken_from_the_export(board: Board) -> None:
    main = board.project()
    export = tempfile.mkdtemp(prefix="msprof_kit_nfs_", dir="/tmp")  # the board user must write there
    try:
        os.chown(export, board.s.uid, board.s.gid)
        os.makedirs(os.path.join(export, "JOBBOARD1", "data"))  # an earlier run's JOB on the export
        runner = FakeMount(board.s, works=True)
        diag = Diagnostics()
        [job] = board_collector.collect_board(main, board.ini(), board.output(), nfs=f"127.0.0.1:{export}",
                                              runner=runner, diag=diag)
        point = _mount_argv(runner.calls, export, board.s.home)
        assert runner.calls[1:] == [["umount", point]]
        assert diag.warnings == []
        # the new JOB (the earlier one was there before the run) moved from the export to output
        assert job == os.path.join(board.output(), "JOBBOARD2")
        assert {k: v for k, v in tree_hashes(job).items() if k != "board_acl.json"} == _payload_tree(board.payload)
        assert sorted(os.listdir(export)) == ["JOBBOARD1"]
    finally:
        shutil.rmtree(export)


def test_nfs_spec_is_checked(board: Board) -> None:
    main = board.project()
    for spec in ("nfs-server", "server:relative/path", ":/abs", "bad host:/abs"):
        with pytest.raises(BoardConfigError, match="SERVER:/absolute/path"):
            board_collector.collect_board(main, board.ini(), board.output(), nfs=spec)


# ------------------------------------------------------------------------------------------------
# A hostile or careless board (issue 21): names it hands back never leave the output folder, the
# remote run has umask 0027, and SIGTERM cleans up as Ctrl-C does


HOSTILE_MAIN = """#!/bin/sh
# writes JOBBOARD1 (the payload) into the acl.json output, the umask it ran with, then runs ./extra
out=$(sed -n 's/^ *"output": "\\(.*\\)",$/\\1/p' acl.json)
mkdir "$out/JOBBOARD1" && cp -R payload/. "$out/JOBBOARD1/" && umask > "$out/JOBBOARD1/umask.txt" || exit 3
[ -f extra ] && . ./extra
exit 0
"""


def _script_project(board: Board, extra: str = "", name: str = "sample_sh") -> str:
    """A project whose main is a shell script (HOSTILE_MAIN) running `extra` after writing the JOB."""
    main = board.project(name=name)
    with open(main, "w", encoding="ascii") as f:
        f.write(HOSTILE_MAIN)
    os.chmod(main, 0o755)
    if extra:
        with open(os.path.join(os.path.dirname(main), "extra"), "w", encoding="ascii") as f:
            f.write(extra)
    return main


def test_remote_run_has_umask_0027(board: Board) -> None:
    [job] = board_collector.collect_board(_script_project(board), board.ini(), board.output())
    with open(os.path.join(job, "umask.txt"), encoding="ascii") as f:
        assert f.read().strip() == "0027"


def test_board_links_and_odd_job_names_stay_on_the_board(board: Board) -> None:
    """main plants a JOB-like folder with a '.', a JOB link to a folder of the host, and a link
    inside the JOB: none is followed or copied, each is named in a warning."""
    target = os.path.join(board.work, "host_secret")
    os.makedirs(target)
    extra = (f'mkdir "$out/JOB.evil" "$out/JOB-x"; ln -s {target} "$out/JOBlink"; '
             f'ln -s {target} "$out/JOBBOARD1/data/escape"; ln -s /etc/passwd "$out/JOBBOARD1/passwd"\n')
    diag = Diagnostics()
    [job] = board_collector.collect_board(_script_project(board, extra), board.ini(), board.output(), diag=diag)
    assert os.path.basename(job) == "JOBBOARD1"
    assert not os.path.lexists(os.path.join(job, "data", "escape"))
    assert not os.path.lexists(os.path.join(job, "passwd"))
    assert os.listdir(target) == [] and sorted(os.listdir(board.output())) == ["JOBBOARD1"]
    said = "\n".join(diag.warnings)
    assert "'JOB.evil'" in said and "'JOB-x'" in said and "escape on the board is not a regular file" in said


def test_a_non_utf8_job_name_is_one_error(board: Board) -> None:
    extra = "mkdir \"$out/$(printf 'JOB\\377')\"\n"
    with pytest.raises(CopyBackFailed) as err:
        board_collector.collect_board(_script_project(board, extra), board.ini(), board.output())
    assert "not UTF-8" in _one_line(err.value)
    assert os.listdir(board.output()) == []


def test_a_non_utf8_name_inside_the_job_is_one_error(board: Board) -> None:
    extra = "printf x > \"$out/JOBBOARD1/data/$(printf 'a\\377b')\"\n"
    with pytest.raises(CopyBackFailed) as err:
        board_collector.collect_board(_script_project(board, extra), board.ini(), board.output())
    text = _one_line(err.value)
    assert "not UTF-8" in text and "JOBBOARD1" in text
    assert os.listdir(board.output()) == []  # no JOB, no partial folder


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGHUP"])
def test_sigterm_kills_main_and_cleans_the_board(board: Board, signame: str) -> None:
    """The CLI gets SIGTERM (or SIGHUP) while main runs: main is killed on the board, the board is
    cleaned (the fixture checks both), the exit status is 128 + the signal's number."""
    import sys

    main = board.project(mode="hang")
    proc = subprocess.Popen([sys.executable, "-m", "msprof_kit", "collect", "-m", main, "--config", board.ini(),
                             "--output", board.output(), "--timeout", "60"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=board.work, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # main runs on the board once the user has a `main` process
            found = subprocess.run(["ps", "-o", "comm=", "-u", board.s.user], capture_output=True, text=True)
            if "main" in found.stdout.split():
                break
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        else:
            pytest.fail("main never started on the board")
    except BaseException:
        os.killpg(proc.pid, 9)
        proc.wait()
        raise
    stop_with_signal(proc, signame)
    assert os.listdir(board.output()) == []
