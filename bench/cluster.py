"""Time `msprof-kit cluster` on N synthetic ranks on a LocalCluster of this machine, with the peak
memory of the client and of each Dask worker.

    python bench/cluster.py [--ranks 8,64] [--tasks 20000] [--workers 2] [--seed 1] [--work DIR] [--keep]

Each job is generated once under --work (default bench/out/cluster) with
`/work/shared/tools/mkprof.py OUT --case 910b_hccl_nranks --ranks N --seed S --n-ops K` (MKPROF to
use another copy): one PROF per rank, K compute ops plus the ring collectives, about K + 110 N tasks
a rank; K = --tasks - 110 N (at least 40), so that a rank has about --tasks tasks. Every run starts from raw data (the ranks' stores are removed first). The command runs in a
child process; a sampler reads the resident memory (RSS) of that process (the client: the Dask
scheduler runs in it too) and of each of its descendants (the worker processes; multiprocessing's
resource tracker left out) every 0.2 s, and keeps each one's peak.

Until the phase modules of `msprof-kit cluster` exist (cluster.ranks, rank_tables, join, ...),
`--phase1` (the default then) times phase 1 alone: cluster.engine.map_ranks over the ranks with a
function importing each rank (msprof_kit.importer, as rank_tables does) and returning its task
count: the heavy part of the command. A benchmark, not a test.
"""
from __future__ import annotations

import argparse
import glob
import importlib.util
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from typing import Dict, List, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
MKPROF = os.environ.get("MKPROF", "/work/shared/tools/mkprof.py")
MiB = 1 << 20
HCCL_TASKS_PER_RANK = 110  # a rank's communication tasks grow by about this much per rank of the job


def import_rank(prof: str) -> int:
    """Phase 1's work for one rank without the phase modules: import it (one process), return its task
    count (small, as RankTables is)."""
    from msprof_kit import importer, store
    from msprof_kit.errors import Diagnostics
    importer.import_path(prof, Diagnostics(), 1)
    with sqlite3.connect(store.store_path(prof)) as conn:
        return int(conn.execute("SELECT count(*) FROM TASK").fetchone()[0])


def phase1_child(cluster: str, workers: int) -> None:
    """The child process of --phase1: map import_rank over the ranks on a LocalCluster."""
    from msprof_kit.cluster.engine import map_ranks
    profs = sorted(glob.glob(os.path.join(cluster, "PROF_*")))
    results, failures = map_ranks(import_rank, profs, workers=workers)
    tasks = sorted(results.values())
    print(f"ranks {len(results)} read, {len(failures)} failed; tasks per rank {tasks[0]}..{tasks[-1]}",
          file=sys.stderr)
    if failures:
        sys.exit(1)


def generate(work: str, ranks: int, seed: int, n_ops: int) -> str:
    """The CLUSTER folder of that job under work (made once)."""
    parent = os.path.join(work, f"n{ranks}_s{seed}_ops{n_ops}")
    found = glob.glob(os.path.join(parent, "CLUSTER_*"))
    if found:
        return found[0]
    os.makedirs(parent, exist_ok=True)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, MKPROF, parent, "--case", "910b_hccl_nranks", "--ranks", str(ranks),
                    "--seed", str(seed), "--n-ops", str(n_ops), "--truth", os.path.join(parent, "TRUTH.json")],
                   check=True, stdout=subprocess.DEVNULL)
    print(f"generated {ranks} ranks in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return glob.glob(os.path.join(parent, "CLUSTER_*"))[0]


def clean(cluster: str) -> None:
    """Back to raw data: no store, no output."""
    for prof in glob.glob(os.path.join(cluster, "PROF_*")):
        shutil.rmtree(os.path.join(prof, "sqlite"), ignore_errors=True)
    shutil.rmtree(os.path.join(cluster, "cluster_analysis_output"), ignore_errors=True)


def measured(argv: List[str]) -> Tuple[float, float, float, int, str]:
    """Run argv; (wall s, the client's peak RSS MiB, the largest worker peak RSS MiB, workers seen, stderr's
    last line)."""
    import psutil
    peaks: Dict[int, int] = {}
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    top = psutil.Process(proc.pid)
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            try:
                tree = [top] + top.children(recursive=True)
            except psutil.NoSuchProcess:
                break
            for member in tree:
                try:
                    if member.pid != proc.pid and "resource_tracker" in " ".join(member.cmdline()):
                        continue
                    peaks[member.pid] = max(peaks.get(member.pid, 0), member.memory_info().rss)
                except psutil.Error:
                    pass
            time.sleep(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, err = proc.communicate()
    wall = time.perf_counter() - t0
    done.set()
    sampler.join()
    if proc.returncode:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}):\n{err}")
    workers = [rss for pid, rss in peaks.items() if pid != proc.pid]
    last = (err.strip().splitlines() or [""])[-1]
    return wall, peaks.get(proc.pid, 0) / MiB, max(workers, default=0) / MiB, len(workers), last


def main() -> None:
    whole = all(importlib.util.find_spec(f"msprof_kit.cluster.{name}") is not None
                for name in ("ranks", "rank_tables", "join", "text_outputs", "database", "slow"))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", default="8,64", help="comma-separated rank counts (default 8,64)")
    ap.add_argument("--tasks", type=int, default=20000, help="tasks per rank to aim at (default 20000)")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="Dask workers (default: cores)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--work", default=os.path.join(HERE, "out", "cluster"))
    ap.add_argument("--phase1", action="store_true", default=not whole,
                    help="time phase 1 alone (the default while the phase modules are missing)")
    ap.add_argument("--keep", action="store_true", help="keep the generated jobs")
    ap.add_argument("--phase1-child", metavar="CLUSTER", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.phase1_child:
        phase1_child(args.phase1_child, args.workers)
        return
    what = "phase 1 (import every rank on Dask)" if args.phase1 else "msprof-kit cluster"
    print(f"{what}, {args.workers} workers, {os.cpu_count()} cores")
    print(f"{'ranks':>6} {'MiB raw':>8} {'tasks/rank':>11} {'wall s':>7} {'s/rank':>7} {'client MiB':>11} "
          f"{'worker MiB':>11} {'workers':>8}")
    for n in (int(x) for x in args.ranks.split(",")):
        cluster = generate(args.work, n, args.seed, max(40, args.tasks - HCCL_TASKS_PER_RANK * n))
        clean(cluster)
        raw = sum(os.path.getsize(os.path.join(root, f)) for root, _, files in os.walk(cluster) for f in files)
        if args.phase1:
            argv = [sys.executable, os.path.abspath(__file__), "--phase1-child", cluster, "--workers",
                    str(args.workers)]
        else:
            argv = [sys.executable, "-m", "msprof_kit", "cluster", "-dir", cluster, "--workers", str(args.workers)]
        wall, client, worker, seen, last = measured(argv)
        stores = sorted(glob.glob(os.path.join(cluster, "PROF_*", "sqlite", "msprof_kit.db")))
        with sqlite3.connect(stores[0]) as conn:
            tasks = conn.execute("SELECT count(*) FROM TASK").fetchone()[0]
        print(f"{n:>6} {raw / MiB:>8.0f} {tasks:>11} {wall:>7.1f} {wall / n:>7.2f} {client:>11.0f} {worker:>11.0f} "
              f"{seen:>8}", flush=True)
        print(f"       ({last})", flush=True)
        clean(cluster)
        if not args.keep:
            shutil.rmtree(os.path.dirname(cluster), ignore_errors=True)


if __name__ == "__main__":
    main()
