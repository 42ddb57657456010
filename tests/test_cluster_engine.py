"""cluster/engine.py and cluster/run.py on a real Dask: a LocalCluster of two worker processes, and a
`dask scheduler` with two `dask worker` processes on 127.0.0.1, mapping the import of each rank of
the golden 910b_hccl_8ranks job (a fresh copy) and returning the rank's id, device and task count,
checked against the reference's msprof.db of that rank. A worker killed mid-run, a rank that
raises, a SIGTERM: the result is complete or says what is missing, and nothing is left behind.

Each test runs once (the Dask engine does not depend on the C decoder or its Python twin)."""
from __future__ import annotations

import functools
import glob
import io
import json
import os
import shutil
import signal
import socket
import sqlite3
import stat
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from typing import Dict, Iterator, List, Tuple

import pytest

from conftest import GOLDEN, needs_shared, run_once_with_c

distributed = pytest.importorskip("distributed", reason="Dask distributed is not installed (extra `cluster`)")
import psutil  # noqa: E402 - comes with distributed

from msprof_kit import importer, store  # noqa: E402
from msprof_kit.cluster import engine  # noqa: E402
from msprof_kit.errors import Diagnostics, MsprofKitError, NoData  # noqa: E402
from msprof_kit.progress import LineProgress  # noqa: E402

# The functions below travel to the workers by reference, as msprof-kit's own do: the LocalCluster's
# workers (spawned) get this process's sys.path, so they import this module; the `dask worker`
# processes are given the tests folder on PYTHONPATH.
HERE = os.path.dirname(os.path.abspath(__file__))

CASE = os.path.join(GOLDEN, "910b_hccl_8ranks")
ONCE = "the Dask engine does not depend on the decoder implementation"


@pytest.fixture(autouse=True)
def once(native_implementation: str) -> None:
    run_once_with_c(native_implementation, ONCE)


# --- the functions mapped (run in the workers) -------------------------------------------------------

def rank_summary(prof: str) -> Tuple[int, int, int]:
    """Import one rank (jobs 1) and return (rank id, device id, TASK rows) from its store."""
    importer.import_path(prof, Diagnostics(), 1)
    with sqlite3.connect(store.store_path(prof)) as conn:
        rank, device = conn.execute("SELECT rankId, deviceId FROM RANK_DEVICE_MAP").fetchone()
        tasks = conn.execute("SELECT count(*) FROM TASK").fetchone()[0]
    return int(rank), int(device), int(tasks)


def summary_or_raise(prof: str) -> Tuple[int, int, int]:
    """rank_summary, but a path ending in 'boom' raises a plain ValueError of two lines."""
    if prof.endswith("boom"):
        raise ValueError("no such thing\nas a boom rank")
    return rank_summary(prof)


def summary_after_go(markers: str, prof: str) -> Tuple[int, int, int]:
    """rank_summary once the test lets it go: each start leaves markers/<n>.<pid> (n counts the
    starts), then waits for markers/go (at most 60 s)."""
    name = os.path.basename(prof)
    open(os.path.join(markers, f"{name}.{os.getpid()}.{time.monotonic_ns()}"), "w").close()
    deadline = time.monotonic() + 60
    while not os.path.exists(os.path.join(markers, "go")) and time.monotonic() < deadline:
        time.sleep(0.05)
    return rank_summary(prof)


def sleepy(seconds: float, item: str) -> str:
    """Sleep, then return the item (for the interrupt test)."""
    time.sleep(seconds)
    return item


# --- helpers ---------------------------------------------------------------------------------------------

def fresh_cluster(dest: str) -> List[str]:
    """A writable copy of the golden cluster folder; its PROF paths, sorted."""
    [src] = glob.glob(os.path.join(CASE, "input", "CLUSTER_*"))
    target = os.path.join(dest, os.path.basename(src))
    shutil.copytree(src, target)
    for root, dirs, files in os.walk(target):
        for name in dirs + files:
            path = os.path.join(root, name)
            os.chmod(path, os.stat(path).st_mode | stat.S_IWUSR)
    return sorted(glob.glob(os.path.join(target, "PROF_*")))


def expected() -> Dict[str, Tuple[int, int, int]]:
    """PROF name -> (rank id from device_<d>/info.json.<d>, device d, TASK rows of the reference's
    msprof.db of that rank)."""
    out = {}
    for prof in glob.glob(os.path.join(CASE, "input", "CLUSTER_*", "PROF_*")):
        [info] = glob.glob(os.path.join(prof, "device_*", "info.json.*"))
        rank = json.load(open(info))["rank_id"]
        device = int(info.rsplit(".", 1)[1])
        with sqlite3.connect(os.path.join(CASE, f"reference_rank{rank}", "msprof.db")) as conn:
            tasks = conn.execute("SELECT count(*) FROM TASK").fetchone()[0]
        out[os.path.basename(prof)] = (rank, device, tasks)
    return out


def by_name(results: Dict[str, Tuple[int, int, int]]) -> Dict[str, Tuple[int, int, int]]:
    return {os.path.basename(path): value for path, value in results.items()}


def scratch_folders() -> List[str]:
    return sorted(glob.glob(os.path.join(tempfile.gettempdir(), "msprof-kit-dask-*")))


def children() -> List[int]:
    """This process's live descendants, but multiprocessing's resource tracker (started with the first
    spawned process, it lives as long as this process)."""
    out = []
    for proc in psutil.Process().children(recursive=True):
        try:
            if proc.status() != psutil.STATUS_ZOMBIE and "resource_tracker" not in " ".join(proc.cmdline()):
                out.append(proc.pid)
        except psutil.NoSuchProcess:
            pass
    return out


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# --- LocalCluster ----------------------------------------------------------------------------------------

@needs_shared
def test_local_cluster_reads_every_rank(tmp_path) -> None:
    """Two worker processes import the 8 golden ranks: each rank's id, device and task count are the
    reference's; the progress counts ranks; no worker process and no scratch folder is left."""
    profs = fresh_cluster(str(tmp_path))
    before_children, before_scratch = children(), scratch_folders()
    stream = io.StringIO()
    results, failures = engine.map_ranks(rank_summary, profs, workers=2,
                                         progress=LineProgress(stream, every=0.0))
    assert failures == {}
    assert list(results) == profs  # in the items' order
    assert by_name(results) == expected()
    assert sorted(rank for rank, _, _ in results.values()) == list(range(8))
    lines = stream.getvalue().splitlines()
    assert lines[0] == "msprof-kit: starting the Dask workers: started"
    assert lines[1].startswith("msprof-kit: starting the Dask workers: done, ")
    assert lines[2] == "msprof-kit: reading ranks: started"  # no bokeh here: no dashboard
    assert lines[-1].startswith("msprof-kit: reading ranks: done, 8/8 ranks, ")
    assert [line.split(": ")[-1] for line in lines[3:-1]] == [f"{n}/8 ranks" for n in range(1, 9)]
    assert children() == before_children
    assert scratch_folders() == before_scratch


@needs_shared
def test_a_failing_rank_is_one_line_and_the_rest_go_on(tmp_path, capfd) -> None:
    """A missing rank (a MsprofKitError: not retried) and a rank whose function raises ValueError
    (retried once, then 'ValueError: ...' on one line): the other ranks' results are all there, and
    stderr holds no traceback."""
    profs = fresh_cluster(str(tmp_path))[:3]
    missing = os.path.join(str(tmp_path), "PROF_gone")
    boom = os.path.join(str(tmp_path), "boom")
    results, failures = engine.map_ranks(summary_or_raise, profs + [missing, boom], workers=2)
    assert by_name(results) == {name: value for name, value in expected().items()
                                if name in {os.path.basename(p) for p in profs}}
    assert list(failures) == [missing, boom]
    assert failures[missing].startswith(missing) and "\n" not in failures[missing]
    assert failures[boom] == "ValueError: no such thing as a boom rank"
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Compute Failed" not in err, err


@needs_shared
def test_a_killed_worker_is_retried_and_the_result_is_complete(tmp_path) -> None:
    """A worker is killed (SIGKILL) while it holds a rank: the scheduler runs that rank again on a
    worker that lives, and all 8 results are there, none failed."""
    profs = fresh_cluster(str(tmp_path / "in"))
    markers = str(tmp_path / "markers")
    os.mkdir(markers)
    killed: List[Tuple[str, int]] = []

    def kill_first() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            started = sorted(os.listdir(markers))
            if started:
                name, pid, _ = started[0].rsplit(".", 2)
                os.kill(int(pid), signal.SIGKILL)
                killed.append((name, int(pid)))
                break
            time.sleep(0.05)
        time.sleep(0.5)  # the scheduler notices the dead worker before the others may go on
        open(os.path.join(markers, "go"), "w").close()

    killer = threading.Thread(target=kill_first, daemon=True)
    killer.start()
    results, failures = engine.map_ranks(functools.partial(summary_after_go, markers), profs, workers=2)
    killer.join(timeout=5)
    assert failures == {}
    assert by_name(results) == expected()
    [(name, pid)] = killed
    starts = [m for m in os.listdir(markers) if m.startswith(name + ".")]
    assert len(starts) >= 2 and any(int(m.rsplit(".", 2)[1]) != pid for m in starts)  # run again elsewhere


def test_a_rank_whose_workers_keep_dying_is_a_failure_line() -> None:
    """A task that kills its worker every time: after allowed_failures reruns it is a failure line;
    the other item's result is there."""
    results, failures = engine.map_ranks(_die_on_x, ["x", "y"], workers=2, allowed_failures=1)
    assert results == {"y": "y"}
    assert failures == {"x": "a worker died while reading it, each time it was tried (killed, or out of memory)"}


def _die_on_x(item: str) -> str:
    if item == "x":
        os.kill(os.getpid(), signal.SIGKILL)
    return item


# --- an existing cluster: dask scheduler + dask worker ---------------------------------------------------

@pytest.fixture
def dask_cluster(tmp_path) -> Iterator[str]:
    """A `dask scheduler` and two `dask worker` processes (one thread each) on 127.0.0.1; their
    address. All three are stopped at the end, whatever happened."""
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    procs: List["subprocess.Popen[bytes]"] = []
    dask = [sys.executable, "-m", "dask"]
    logs = tmp_path / "logs"
    logs.mkdir()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([HERE] + sys.path),
               DASK_TEMPORARY_DIRECTORY=str(tmp_path / "scratch"))  # not the shared /tmp/dask-scratch-space
    try:
        procs.append(subprocess.Popen(dask + ["scheduler", "--host", "127.0.0.1", "--port", str(port),
                                              "--no-dashboard"], stdout=subprocess.DEVNULL,
                                      stderr=open(logs / "scheduler", "wb"), start_new_session=True, env=env))
        for index in range(2):
            procs.append(subprocess.Popen(dask + ["worker", address, "--nthreads", "1", "--host", "127.0.0.1",
                                                  "--no-dashboard", "--name", f"w{index}", "--local-directory",
                                                  str(tmp_path / f"w{index}")], stdout=subprocess.DEVNULL,
                                          stderr=open(logs / f"w{index}", "wb"), start_new_session=True,
                                          env=env))
        with distributed.Client(address, timeout="30s") as client:
            client.wait_for_workers(2, timeout=60)
        yield address
    finally:
        for proc in reversed(procs):
            if proc.poll() is None:
                proc.terminate()
        for proc in reversed(procs):
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


@needs_shared
def test_an_existing_scheduler_and_two_workers(tmp_path, dask_cluster, monkeypatch) -> None:
    """map_ranks pointed at the scheduler (scheduler=, then DASK_SCHEDULER_ADDRESS): the 8 ranks read by
    the two `dask worker` processes, no local cluster started."""
    profs = fresh_cluster(str(tmp_path / "in"))
    before = children()
    results, failures = engine.map_ranks(rank_summary, profs, scheduler=dask_cluster)
    assert failures == {} and by_name(results) == expected()
    monkeypatch.setenv(engine.SCHEDULER_ENV, dask_cluster)
    results, failures = engine.map_ranks(rank_summary, profs[:2])
    assert failures == {} and by_name(results) == {name: value for name, value in expected().items()
                                                   if name in {os.path.basename(p) for p in profs[:2]}}
    assert children() == before


def test_an_unreachable_scheduler_is_one_line(monkeypatch) -> None:
    monkeypatch.setattr(engine, "CONNECT_TIMEOUT", 2.0)
    address = f"tcp://127.0.0.1:{free_port()}"
    with pytest.raises(engine.SchedulerUnreachable) as caught:
        engine.map_ranks(sleepy, ["a"], scheduler=address)
    assert str(caught.value).startswith(f"cannot reach the Dask scheduler at {address}: ")
    assert "\n" not in str(caught.value) and caught.value.exit_code == 2


# --- signals ----------------------------------------------------------------------------------------------

SIGTERM_SCRIPT = textwrap.dedent("""
    import functools, sys
    from msprof_kit.cluster import engine
    from msprof_kit.interrupt import Terminated, terminate_as_interrupt
    from msprof_kit.progress import LineProgress
    sys.path.insert(0, {tests!r})
    import test_cluster_engine as here
    try:
        with terminate_as_interrupt():
            engine.map_ranks(functools.partial(here.sleepy, 60.0), ["a", "b", "c"], workers=2,
                             progress=LineProgress(sys.stderr, every=0.0))
    except Terminated as exc:
        print(f"Terminated ({{exc.name}})", file=sys.stderr)
        sys.exit(exc.exit_code)
""")


def workers_once_reading(proc: subprocess.Popen) -> Tuple[bytes, List[int]]:
    """What `proc` wrote on stderr until its progress says the ranks are being read (at most 60 s),
    and the pids below it then."""
    assert proc.stderr is not None
    seen = b""
    deadline = time.monotonic() + 60
    while b"reading ranks: started" not in seen and time.monotonic() < deadline:
        seen += proc.stderr.readline()
    return seen, [p.pid for p in psutil.Process(proc.pid).children(recursive=True)]


def test_sigterm_stops_the_workers_and_leaves_nothing(tmp_path) -> None:
    """SIGTERM while the workers run: the command ends as Ctrl-C would (status 143), its worker
    processes are gone and its scratch folder removed."""
    env = dict(os.environ, TMPDIR=str(tmp_path))
    script = SIGTERM_SCRIPT.format(tests=HERE)
    proc = subprocess.Popen([sys.executable, "-c", script], stderr=subprocess.PIPE, env=env,
                            start_new_session=True)
    try:
        seen, workers = workers_once_reading(proc)
        assert workers and glob.glob(os.path.join(str(tmp_path), "msprof-kit-dask-*"))
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    text = (seen + err).decode()
    assert proc.returncode == 128 + signal.SIGTERM, text
    assert text.strip().splitlines()[-1] == "Terminated (SIGTERM)" and "Traceback" not in text, text
    time.sleep(0.5)
    assert not [pid for pid in workers if psutil.pid_exists(pid) and
                psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
    assert os.listdir(str(tmp_path)) == []


# --- the output folder ---------------------------------------------------------------------------------------

def _write_a(folder: str) -> str:
    path = os.path.join(folder, "a.csv")
    with open(path, "w") as out:
        out.write("rank\n0\n")
    return path


def _fail(folder: str) -> List[str]:
    open(os.path.join(folder, "half.json"), "w").close()
    raise NoData("the join found no communication group")


def test_the_output_folder_is_written_whole_or_not_at_all(tmp_path) -> None:
    from msprof_kit.cluster import outdir
    folder = str(tmp_path / "cluster_analysis_output")
    assert outdir.write_atomically(folder, [_write_a]) == [os.path.join(folder, "a.csv")]
    assert os.listdir(str(tmp_path)) == ["cluster_analysis_output"]
    with pytest.raises(MsprofKitError):
        outdir.write_atomically(folder, [_write_a, _fail])
    assert os.listdir(str(tmp_path)) == ["cluster_analysis_output"]  # no temporary folder left
    assert os.listdir(folder) == ["a.csv"]  # the previous output as it was


# --- the command ----------------------------------------------------------------------------------------------

def test_the_command_without_dask_says_how_to_install_it(tmp_path) -> None:
    """Dask hidden (as when the extra is not installed): one line telling the pip command, exit 2."""
    code = ("import sys; sys.modules['distributed'] = None\n"
            "from msprof_kit.cli import main\n"
            f"sys.exit(main(['cluster', '-dir', {str(tmp_path)!r}]))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "Error: Dask distributed is not installed: pip install 'msprof-kit[cluster]'\n"


def test_the_command_has_help(tmp_path) -> None:
    done = subprocess.run([sys.executable, "-m", "msprof_kit", "cluster", "--help"], capture_output=True, text=True,
                          cwd=tmp_path, timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("usage: msprof-kit cluster")
    assert "--scheduler ADDR" in done.stdout and "kit[cluster]'" in done.stdout


def test_the_command_refuses_a_bad_memory_limit(capsys) -> None:
    from msprof_kit import cli
    with pytest.raises(SystemExit) as caught:
        cli.main(["cluster", "-dir", ".", "--memory-limit", "lots"])
    assert caught.value.code == 2
    assert "expected a size such as 4GiB or 500MB, auto or none, not 'lots'" in capsys.readouterr().err


# --- the whole command on the golden job (needs the phase modules of clustercore and clusterdb) ------------------

TEXT_ALL = os.path.join(CASE, "msprof_analyze", "text_all")
OUTPUTS = ["cluster_step_trace_time.csv", "cluster_communication.json", "cluster_communication_matrix.json",
           "communication_group.json", "cluster_analysis.db", "slow_ranks.csv", "slow_links.csv"]


def same_json(ours: object, theirs: object, where: str = "") -> None:
    """The same keys at every level, numbers within 1e-6 relative, the rest equal."""
    if isinstance(theirs, dict):
        assert isinstance(ours, dict) and sorted(ours) == sorted(theirs), where
        for key in theirs:
            same_json(ours[key], theirs[key], f"{where}/{key}")
    elif isinstance(theirs, list):
        assert isinstance(ours, list) and len(ours) == len(theirs), where
        for index, (mine, other) in enumerate(zip(ours, theirs)):
            same_json(mine, other, f"{where}[{index}]")
    elif isinstance(theirs, (int, float)) and not isinstance(theirs, bool):
        assert ours == pytest.approx(theirs, rel=1e-6, abs=1e-9), where
    else:
        assert ours == theirs, where


def check_text_outputs(folder: str) -> None:
    """cluster_step_trace_time.csv rows matched by rank, µs within 1 µs; the JSON files as same_json."""
    import pandas
    ours = pandas.read_csv(os.path.join(folder, "cluster_step_trace_time.csv"))
    theirs = pandas.read_csv(os.path.join(TEXT_ALL, "cluster_step_trace_time.csv"))
    assert list(ours.columns) == list(theirs.columns)
    ours, theirs = (frame.sort_values(["Type", "Index"]).reset_index(drop=True) for frame in (ours, theirs))
    numeric = [c for c in theirs.columns if c not in ("Step", "Type", "Index") and theirs[c].dtype.kind == "f"]
    assert ours[["Type", "Index"]].equals(theirs[["Type", "Index"]])
    assert ((ours[numeric] - theirs[numeric]).abs() <= 1.0).all().all()
    for name in ("cluster_communication.json", "cluster_communication_matrix.json", "communication_group.json"):
        with open(os.path.join(folder, name)) as mine, open(os.path.join(TEXT_ALL, name)) as other:
            same_json(json.load(mine), json.load(other), name)


@needs_shared
def test_run_cluster_on_the_golden_job(tmp_path) -> None:
    """run_cluster on a LocalCluster of two workers: the msprof-analyze outputs equal text_all's, the slow
    rank and link of TRUTH.json first, one rank damaged (its device start_info not JSON) listed with its
    error while the other 7 are analysed; nothing but the output folder appears."""
    from msprof_kit.cluster.run import run_cluster
    profs = fresh_cluster(str(tmp_path / "in"))
    cluster = os.path.dirname(profs[0])
    diag = Diagnostics()
    written = run_cluster(cluster, workers=2, diag=diag)
    folder = os.path.join(cluster, "cluster_analysis_output")
    assert sorted(os.path.basename(p) for p in written) == sorted(OUTPUTS)
    assert sorted(os.listdir(folder)) == sorted(OUTPUTS)
    assert [n for n in os.listdir(cluster) if not n.startswith("PROF_")] == ["cluster_analysis_output"]
    check_text_outputs(folder)
    truth = json.load(open(os.path.join(CASE, "TRUTH.json")))
    import pandas
    assert pandas.read_csv(os.path.join(folder, "slow_ranks.csv"))["rank"].iloc[0] == truth["slow_rank"]
    assert pandas.read_csv(os.path.join(folder, "slow_links.csv"))["link"].iloc[0] == "%d-%d" % tuple(truth["slow_link"])
    assert diag.warnings == []

    [bad] = [p for p in profs if p.endswith("AHBRRNPN")]  # rank 7
    with open(os.path.join(bad, "device_7", "start_info.7"), "w") as out:
        out.write("garbage{")
    diag = Diagnostics()
    out_dir = str(tmp_path / "out")
    written = run_cluster(cluster, out_dir, workers=2, diag=diag)
    assert all(p.startswith(os.path.join(out_dir, "cluster_analysis_output") + os.sep) for p in written)
    assert diag.warnings == [f"rank 7 is left out of the cluster analysis: {bad}/device_7/start_info.7: offset 0: "
                             "not valid JSON (Expecting value at character 0); expected one JSON object"]


@needs_shared
def test_the_command_on_an_existing_scheduler(tmp_path, dask_cluster) -> None:
    """`msprof-kit cluster -dir CLUSTER --scheduler ADDR -o OUT`: the ranks read by the `dask worker`
    processes, the outputs in OUT/cluster_analysis_output/ equal to msprof-analyze's."""
    profs = fresh_cluster(str(tmp_path / "in"))
    out = str(tmp_path / "out")
    done = subprocess.run([sys.executable, "-m", "msprof_kit", "cluster", "-dir", os.path.dirname(profs[0]),
                           "--scheduler", dask_cluster, "-o", out], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    folder = os.path.join(out, "cluster_analysis_output")
    assert sorted(done.stdout.splitlines()) == sorted(f"Wrote {os.path.join(folder, name)}" for name in OUTPUTS)
    assert sorted(os.listdir(folder)) == sorted(OUTPUTS)
    check_text_outputs(folder)


@needs_shared
def test_no_readable_rank_is_an_error_and_writes_nothing(tmp_path) -> None:
    profs = fresh_cluster(str(tmp_path / "in"))
    for prof in profs:
        for info in glob.glob(os.path.join(prof, "device_*", "start_info.*")):
            with open(info, "w") as out:
                out.write("garbage{")
    cluster = os.path.dirname(profs[0])
    done = subprocess.run([sys.executable, "-m", "msprof_kit", "cluster", "-dir", cluster, "--workers", "2"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == NoData.exit_code and "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1].startswith(f"Error: {cluster}: none of the 8 ranks could be read (the first: ")
    assert [n for n in os.listdir(cluster) if not n.startswith("PROF_")] == []


@needs_shared
def test_sigterm_during_the_command_leaves_no_output(tmp_path) -> None:
    """SIGTERM while the ranks are read: exit 143 with `Terminated (SIGTERM)`, no output folder, no
    temporary folder, no worker process."""
    from conftest import stop_with_signal
    profs = fresh_cluster(str(tmp_path / "in"))
    cluster = os.path.dirname(profs[0])
    proc = subprocess.Popen([sys.executable, "-m", "msprof_kit", "cluster", "-dir", cluster, "--workers", "2",
                             "--progress"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    _, workers = workers_once_reading(proc)
    stop_with_signal(proc, "SIGTERM")
    time.sleep(0.5)
    assert not [pid for pid in workers if psutil.pid_exists(pid) and
                psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
    assert [n for n in os.listdir(cluster) if not n.startswith("PROF_")] == []
