"""The board collector (collectors/board/) against a REAL OpenSSH server on 127.0.0.1 (the
board of tests/board_server.py): the flow, from upload to the JOB brought back, and each failure
of spec §4.4 with its own error. board.ini, secrets, --nfs and a hostile board:
test_board_guards.py."""
from __future__ import annotations

import json
import os
import shutil
import stat
import time

import paramiko
import pytest

from board_server import NEEDS_SSHD, RUN_DIR, Board, free_port, one_line, payload_tree
from conftest import tree_hashes
from msprof_kit.collectors import board as board_collector
from msprof_kit.collectors.board import ssh as board_ssh
from msprof_kit.errors import (AclJsonError, BoardAuthFailed, BoardProgramFailed, BoardProgramMissing,
                               BoardProgramNotRunnable, BoardProgramTimeout, BoardUnreachable, CopyBackFailed,
                               Diagnostics, HostKeyChanged, IncompleteJob, NoJobProduced, UnknownHostKey,
                               UnsafePath, UploadFailed)

pytestmark = NEEDS_SSHD


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
    assert got == payload_tree(board.payload)  # every file, byte for byte
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
    assert got == payload_tree(board.payload, skip=("AclModule.", "DATA_PREPROCESS."))


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
    assert {k: v for k, v in tree_hashes(second).items() if k != "board_acl.json"} == payload_tree(board.payload)


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
    text = one_line(err.value)
    assert f"refused the login of '{board.s.user}'" in text and "password" in text
    assert board.s.password not in text and err.value.exit_code == 8


def test_closed_port(board: Board) -> None:
    main = board.project()
    port = free_port()  # nothing listens there
    with pytest.raises(BoardUnreachable) as err:
        board_collector.collect_board(main, board.ini(port=str(port)), board.output())
    assert f"127.0.0.1 port {port}: connection refused" in one_line(err.value)


def test_unknown_host_key_then_accepted(board: Board) -> None:
    main = board.project()
    os.remove(board.known_hosts)
    with pytest.raises(UnknownHostKey) as err:
        board_collector.collect_board(main, board.ini(), board.output())
    text = one_line(err.value)
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
        text = one_line(err.value)
        assert "CHANGED" in text and board.s.fingerprint in text
    with open(board.known_hosts, encoding="ascii") as f:
        assert f.read() == board.s.other_key_line + "\n"  # not overwritten


def test_main_missing_or_not_executable(board: Board) -> None:
    with pytest.raises(BoardProgramMissing) as err:
        board_collector.collect_board(os.path.join(board.work, "nothing", "main"), board.ini(), board.output())
    assert "does not exist" in one_line(err.value) and err.value.exit_code == 2
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
    assert "exit status 127" in one_line(err.value)


def test_main_fails(board: Board) -> None:
    main = board.project(mode="fail")
    with pytest.raises(BoardProgramFailed) as err:
        board_collector.collect_board(main, board.ini(), board.output())
    text = one_line(err.value)
    assert "main exited with status 1 on the board: main: svp_acl_mdl_execute failed: error 100003" in text
    assert err.value.exit_code == 7
    assert os.listdir(board.output()) == []


def test_main_hangs_and_is_killed(board: Board) -> None:
    main = board.project(mode="hang")
    start = time.monotonic()
    with pytest.raises(BoardProgramTimeout) as err:
        board_collector.collect_board(main, board.ini(), board.output(), timeout=1.0)
    assert time.monotonic() - start < 8
    assert "did not finish within 1 s" in one_line(err.value)
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
    text = one_line(err.value)
    assert "no new JOB directory" in text and "conf/acl.json" in text and err.value.exit_code == 4


def test_incomplete_job_is_copied_and_reported(board: Board) -> None:
    main = board.project()
    os.remove(os.path.join(os.path.dirname(main), "payload", "info.json.0"))
    with pytest.raises(IncompleteJob) as err:
        board_collector.collect_board(main, board.ini(), board.output())
    job = os.path.join(board.output(), "JOBBOARD1")
    assert f"{job} has no info.json.N" in one_line(err.value)
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
    text = one_line(err.value)
    assert "copying" in text and "partial copy was removed" in text
    assert ("Connection lost" in text) if how == "error" else ("10 bytes here" in text)
    assert len(calls) == 3
    assert os.listdir(board.output()) == []  # no JOB, no partial folder


def test_upload_refused(board: Board) -> None:
    main = board.project()
    with pytest.raises(UploadFailed) as err:
        board_collector.collect_board(main, board.ini(remote_dir="/usr"), board.output())
    assert "cannot create /usr/msprof_kit_" in one_line(err.value)


def test_paths_with_bad_characters(board: Board) -> None:
    main = board.project()
    ini = board.ini()
    with pytest.raises(UnsafePath) as err:
        board_collector.collect_board(main, ini, os.path.join(board.work, "my out"), diag=Diagnostics())
    assert "' '" in one_line(err.value)
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
    ini = board.ini(port=str(free_port()))  # nothing listens: a connection attempt would fail otherwise
    for kw in ({"switch": "yes"}, {"aac_metrics": "PipeUtilization"}, {"interval": "-1"}, {"acl_api": "1"}):
        with pytest.raises(AclJsonError):
            board_collector.collect_board(main, ini, board.output(), **kw)


