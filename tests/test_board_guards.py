"""The board collector against a REAL OpenSSH server on 127.0.0.1 (the board of
tests/board_server.py), the guards: board.ini checks and secrets never shown, --nfs, and a
hostile or careless board. The flow and the failures of spec §4.4: test_board.py."""
from __future__ import annotations

import logging
import os
import shutil
import subprocess
import tempfile
import time
from typing import List, Optional, Sequence, Tuple

import pytest

from board_server import NEEDS_SSHD, RUN_DIR, Board, Server, one_line, payload_tree
from conftest import stop_with_signal, tree_hashes
from msprof_kit.collectors import board as board_collector
from msprof_kit.errors import (BoardAuthFailed, BoardConfigError, BoardProgramFailed, CopyBackFailed,
                               Diagnostics)

pytestmark = NEEDS_SSHD


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
    assert message in one_line(err.value) and err.value.exit_code == 6


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
    text = one_line(err.value)
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
        assert {k: v for k, v in tree_hashes(job).items() if k != "board_acl.json"} == payload_tree(board.payload)
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
    assert "not UTF-8" in one_line(err.value)
    assert os.listdir(board.output()) == []


def test_a_non_utf8_name_inside_the_job_is_one_error(board: Board) -> None:
    extra = "printf x > \"$out/JOBBOARD1/data/$(printf 'a\\377b')\"\n"
    with pytest.raises(CopyBackFailed) as err:
        board_collector.collect_board(_script_project(board, extra), board.ini(), board.output())
    text = one_line(err.value)
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
