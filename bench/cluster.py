"""Time `msprof-kit cluster` on N synthetic ranks on a LocalCluster of this machine, with the peak
memory of the client and of each Dask worker; with --ref, the reference msprof per rank plus
msprof-analyze on the same ranks.

    python bench/cluster.py [--ranks 8,64] [--tasks 20000] [--workers 2] [--seed 1] [--work DIR] [--keep]
                            [--ref | --ref-only] [--compare] [--phase1]
    python bench/cluster.py --compare-dirs OURS THEIRS

Each job is generated once under --work (default bench/out/cluster) with
`/work/shared/tools/mkprof.py OUT --case 910b_hccl_nranks --ranks N --seed S --n-ops K` (MKPROF to
use another copy): one PROF per rank, K compute ops plus the ring collectives, about K + 110 N tasks
a rank; K = --tasks - 110 N (at least 40), so that a rank has about --tasks tasks. A job already
under --work is reused; without --keep it is removed at the end.

msprof-kit: the whole command, `python -m msprof_kit cluster -dir CLUSTER --workers W` (find the ranks,
import each one as a Dask task, join, write the seven outputs), from raw data (the ranks' stores and
the output are removed before and after). It runs in a child process; a sampler reads the resident
memory (RSS) of that process (the client: the Dask scheduler runs in it too) and of each of its
descendants (the worker processes; multiprocessing's resource tracker left out) every 0.2 s, and keeps
each one's peak and the peak of their sum ("tree"). `--phase1` (the default only while the phase
modules are missing) times phase 1 alone: cluster.engine.map_ranks of a function importing each rank
(msprof_kit.importer, as rank_tables does) and returning its task count.

--ref: what a user does today, on a copy of the same raw ranks (made before, not counted, as the
reference writes into its input). Stage 1: the reference msprof (REF, default /work/ref/msprof-cpp) in
its C++ path (analysis/lib64/msprof_analysis.so, REF_LIBS=/work/ref/prefix/securec_shared on
LD_LIBRARY_PATH, as /work/ref/runref.sh runs it) on each rank, --workers ranks at a time, with the
commands msprof-analyze's text mode needs: `msprof.py import`, `export timeline`, `analyze --rule
communication,communication_matrix` (runref.sh's `export summary` and `export db` are left out:
msprof-analyze's text mode reads none of their files; runref.sh has no `analyze`). Then the layout
msprof-analyze accepts (golden/README.md: per PROF device_<d>/ without data/,
mindstudio_profiler_output/msprof_<ts>.json, analyze/communication*.json; no msprof_*.db, or it takes
db mode), as hard links. Stage 2: `msprof-analyze cluster -d LAYOUT/CLUSTER -m all -o OUT`
(MSPROF_ANALYZE, default /tmp/ma/bin/msprof-analyze). Each stage is measured as above. --ref-only
skips the msprof-kit run. A benchmark, not a test.

--compare (with --ref): msprof-kit's four text files are kept (under the job, kit_out/) and compared
with msprof-analyze's on the same ranks by compare_outputs, the rules of tests/test_cluster_core.py:
cluster_step_trace_time.csv with the same header and its rows matched by Index (rank), Step and Type
equal and every other column within 1 µs; the JSON files (cluster_communication.json,
cluster_communication_matrix.json, communication_group.json) with the same keys at every level, the
same strings and lists, numbers within 1e-6 relative. It prints `equal` or the differences (the
first 20 per file), and the run exits non-zero when there is one. --compare-dirs OURS THEIRS compares two such folders and does nothing else.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import csv
import glob
import importlib.util
import json
import math
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from typing import Any, Dict, List, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
MKPROF = os.environ.get("MKPROF", "/work/shared/tools/mkprof.py")
REF = os.environ.get("REF", "/work/ref/msprof-cpp")
REF_LIBS = os.environ.get("REF_LIBS", "/work/ref/prefix/securec_shared")
MSPROF_ANALYZE = os.environ.get("MSPROF_ANALYZE", "/tmp/ma/bin/msprof-analyze")
REF_COMMANDS = (["import"], ["export", "timeline"], ["analyze", "--rule", "communication,communication_matrix"])
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


def ref_rank(prof: str) -> float:
    """The reference's per-rank commands on prof (written into), in its C++ path; their wall time (s)."""
    env = dict(os.environ, LD_LIBRARY_PATH=":".join(x for x in (REF_LIBS, os.environ.get("LD_LIBRARY_PATH")) if x))
    t0 = time.perf_counter()
    for command in REF_COMMANDS:
        done = subprocess.run([sys.executable, "analysis/msprof/msprof.py", *command, "-dir", prof], cwd=REF, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if done.returncode:
            raise RuntimeError(f"{' '.join(command)} on {prof}: rc {done.returncode}\n{done.stderr[-2000:]}")
    return time.perf_counter() - t0


def ref_child(cluster: str, workers: int) -> None:
    """The child process of --ref's first stage: ref_rank over the ranks, `workers` at a time."""
    if not os.path.isfile(os.path.join(REF, "analysis", "lib64", "msprof_analysis.so")):
        sys.exit(f"the reference's C++ library is not built under {REF}")
    profs = sorted(glob.glob(os.path.join(cluster, "PROF_*")))
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        times = sorted(pool.map(ref_rank, profs))
    print(f"ranks {len(times)} exported and analysed; {times[0]:.1f}..{times[-1]:.1f} s a rank", file=sys.stderr)


def ref_layout(cluster: str, layout: str) -> str:
    """The text-mode layout msprof-analyze accepts (golden/README.md), as hard links into the reference's
    outputs under cluster; returns its CLUSTER folder."""
    top = os.path.join(layout, os.path.basename(cluster))
    for prof in sorted(glob.glob(os.path.join(cluster, "PROF_*"))):
        dst = os.path.join(top, os.path.basename(prof))
        for device in glob.glob(os.path.join(prof, "device_*")):
            os.makedirs(os.path.join(dst, os.path.basename(device)))
            for name in os.listdir(device):
                if os.path.isfile(os.path.join(device, name)):
                    os.link(os.path.join(device, name), os.path.join(dst, os.path.basename(device), name))
        timelines = sorted(glob.glob(os.path.join(prof, "mindstudio_profiler_output", "msprof_" + "[0-9]" * 14 + ".json")))
        analyzed = sorted(glob.glob(os.path.join(prof, "analyze", "communication*.json")))
        if not timelines or len(analyzed) != 2:
            raise SystemExit(f"{prof}: the reference left no msprof_<ts>.json or analyze/communication*.json")
        for src, sub in [(timelines[-1], "mindstudio_profiler_output")] + [(f, "analyze") for f in analyzed]:
            os.makedirs(os.path.join(dst, sub), exist_ok=True)
            os.link(src, os.path.join(dst, sub, os.path.basename(src)))
    return top

COMPARED_JSON = ("cluster_communication.json", "cluster_communication_matrix.json", "communication_group.json")
STEP_TRACE_CSV = "cluster_step_trace_time.csv"
CSV_TOLERANCE_US = 1.0
JSON_RELATIVE = 1e-6


def json_differences(ours: Any, theirs: Any, where: str = "") -> List[str]:
    """Differences between two JSON values: the same keys at every level, the same strings and lists,
    numbers within JSON_RELATIVE relative (two NaNs are equal)."""
    if isinstance(theirs, dict):
        if not isinstance(ours, dict):
            return [f"{where}: not an object"]
        out = [f"{where}: keys {sorted(set(ours) ^ set(theirs))} in one only"] if set(ours) != set(theirs) else []
        for key in theirs:
            if key in ours:
                out += json_differences(ours[key], theirs[key], f"{where}/{key}")
        return out
    if isinstance(theirs, list):
        if not isinstance(ours, list) or len(ours) != len(theirs):
            return [f"{where}: {ours!r} != {theirs!r}"]
        return [d for i, (a, b) in enumerate(zip(ours, theirs)) for d in json_differences(a, b, f"{where}[{i}]")]
    if isinstance(theirs, (int, float)) and not isinstance(theirs, bool):
        if isinstance(ours, (int, float)) and not isinstance(ours, bool):
            if ours == theirs or (math.isnan(ours) and math.isnan(theirs)):
                return []
            if abs(ours - theirs) <= JSON_RELATIVE * max(abs(theirs), abs(ours)):
                return []
        return [f"{where}: {ours!r} != {theirs!r}"]
    return [] if ours == theirs else [f"{where}: {ours!r} != {theirs!r}"]


def step_trace_differences(ours: str, theirs: str) -> List[str]:
    """Differences between two cluster_step_trace_time.csv files: the header, the ranks (rows matched
    by Index), Step and Type, every other column within CSV_TOLERANCE_US."""
    tables = []
    for path in (ours, theirs):
        with open(path, newline="", encoding="utf-8") as f:
            rows = list(csv.reader(f))
        tables.append((rows[0] if rows else [], {row[2]: row for row in rows[1:] if len(row) > 2}))
    (head, mine), (their_head, other) = tables
    if head != their_head:
        return [f"header {head} != {their_head}"]
    out = [f"Index {sorted(set(mine) ^ set(other), key=str)} in one only"] if set(mine) != set(other) else []
    for index in sorted(set(mine) & set(other), key=lambda x: (len(x), x)):
        for column, a, b in zip(head, mine[index], other[index]):
            if column in ("Step", "Type"):
                same = a == b
            else:
                try:
                    same = a == b or abs(float(a) - float(b)) <= CSV_TOLERANCE_US
                except ValueError:
                    same = False
            if not same:
                out.append(f"Index {index} {column}: {a!r} != {b!r}")
    return out


def compare_outputs(ours: str, theirs: str) -> Dict[str, List[str]]:
    """msprof-kit's text outputs in folder `ours` against msprof-analyze's in `theirs`: file name ->
    its differences (empty: equal; a file missing on either side is one difference)."""
    result: Dict[str, List[str]] = {}
    for name in (STEP_TRACE_CSV,) + COMPARED_JSON:
        missing = [side for side, folder in (("ours", ours), ("theirs", theirs))
                   if not os.path.isfile(os.path.join(folder, name))]
        if missing:
            result[name] = [f"missing in {' and '.join(missing)}"]
        elif name == STEP_TRACE_CSV:
            result[name] = step_trace_differences(os.path.join(ours, name), os.path.join(theirs, name))
        else:
            with open(os.path.join(ours, name), encoding="utf-8") as f, \
                    open(os.path.join(theirs, name), encoding="utf-8") as g:
                result[name] = json_differences(json.load(f), json.load(g))
    return result


def print_comparison(ours: str, theirs: str) -> bool:
    """compare_outputs, printed: one line per file (`equal`, or the count and the first 20
    differences); True when all are equal."""
    print(f"msprof-kit {ours}\n  against msprof-analyze {theirs}")
    found = compare_outputs(ours, theirs)
    for name, diffs in found.items():
        print(f"  {name}: {'equal' if not diffs else f'{len(diffs)} differences'}")
        for line in diffs[:20]:
            print(f"      {line}")
    return not any(found.values())


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


def measured(argv: List[str]) -> Tuple[float, float, float, int, str, float]:
    """Run argv; (wall s, the client's peak RSS MiB, the largest worker (descendant) peak RSS MiB, workers
    seen, stderr's last line, the peak of the whole tree's summed RSS MiB)."""
    import psutil
    peaks: Dict[int, int] = {}
    total = [0]
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
            now = 0
            for member in tree:
                try:
                    if member.pid != proc.pid and "resource_tracker" in " ".join(member.cmdline()):
                        continue
                    rss = member.memory_info().rss
                    peaks[member.pid] = max(peaks.get(member.pid, 0), rss)
                    now += rss
                except psutil.Error:
                    pass
            total[0] = max(total[0], now)
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
    return wall, peaks.get(proc.pid, 0) / MiB, max(workers, default=0) / MiB, len(workers), last, total[0] / MiB


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
    ap.add_argument("--ref", action="store_true",
                    help="also time the reference msprof per rank + msprof-analyze cluster on the same ranks")
    ap.add_argument("--ref-only", action="store_true", help="--ref without the msprof-kit run")
    ap.add_argument("--compare", action="store_true",
                    help="with --ref: compare msprof-kit's text outputs with msprof-analyze's (compare_outputs)")
    ap.add_argument("--compare-dirs", nargs=2, metavar=("OURS", "THEIRS"),
                    help="only compare two folders of text outputs, msprof-kit's and msprof-analyze's")
    ap.add_argument("--phase1-child", metavar="CLUSTER", help=argparse.SUPPRESS)
    ap.add_argument("--ref-child", metavar="CLUSTER", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.compare_dirs:
        sys.exit(0 if print_comparison(*args.compare_dirs) else 1)
    if args.compare and (not args.ref or args.phase1):
        ap.error("--compare needs --ref (and the whole command, not --phase1)")
    if args.phase1_child:
        phase1_child(args.phase1_child, args.workers)
        return
    if args.ref_child:
        ref_child(args.ref_child, args.workers)
        return
    what = "phase 1 (import every rank on Dask)" if args.phase1 else "msprof-kit cluster"
    print(f"{what}, {args.workers} workers, {os.cpu_count()} cores")
    equal = True
    for n in (int(x) for x in args.ranks.split(",")):
        cluster = generate(args.work, n, args.seed, max(40, args.tasks - HCCL_TASKS_PER_RANK * n))
        clean(cluster)
        raw = sum(os.path.getsize(os.path.join(root, f)) for root, _, files in os.walk(cluster) for f in files)
        if not args.ref_only:
            kit(args, cluster, n, raw)
        if args.ref or args.ref_only:
            equal = ref(args, cluster, n) and equal
        if not args.keep:
            shutil.rmtree(os.path.dirname(cluster), ignore_errors=True)
    if not equal:
        sys.exit("msprof-kit's text outputs differ from msprof-analyze's (above)")


def kit(args: argparse.Namespace, cluster: str, n: int, raw: int) -> None:
    """Time msprof-kit cluster (or phase 1) on cluster, from raw data; print one row."""
    if args.phase1:
        argv = [sys.executable, os.path.abspath(__file__), "--phase1-child", cluster, "--workers", str(args.workers)]
    else:
        argv = [sys.executable, "-m", "msprof_kit", "cluster", "-dir", cluster, "--workers", str(args.workers)]
    wall, client, worker, seen, last, tree = measured(argv)
    stores = sorted(glob.glob(os.path.join(cluster, "PROF_*", "sqlite", "msprof_kit.db")))
    counts = []
    for path in stores:
        with sqlite3.connect(path) as conn:
            counts.append(conn.execute("SELECT count(*) FROM TASK").fetchone()[0])
    print(f"{'ranks':>6} {'MiB raw':>8} {'tasks/rank':>13} {'wall s':>7} {'s/rank':>7} {'client MiB':>11} "
          f"{'worker MiB':>11} {'workers':>8} {'tree MiB':>9}")
    print(f"{n:>6} {raw / MiB:>8.0f} {min(counts):>6}-{max(counts):<6} {wall:>7.1f} {wall / n:>7.2f} {client:>11.0f} "
          f"{worker:>11.0f} {seen:>8} {tree:>9.0f}", flush=True)
    if last:
        print(f"       ({last})", flush=True)
    if not args.phase1:
        folder = os.path.join(cluster, "cluster_analysis_output")
        with open(os.path.join(folder, "cluster_step_trace_time.csv"), newline="") as f:
            rows = sum(1 for _ in f) - 1
        print(f"       outputs: {' '.join(sorted(os.listdir(folder)))}; {rows} ranks in cluster_step_trace_time.csv",
              flush=True)
        if rows != n:
            raise SystemExit(f"msprof-kit cluster read {rows} of the {n} ranks")
        if args.compare:
            kept = os.path.join(os.path.dirname(cluster), "kit_out")
            shutil.rmtree(kept, ignore_errors=True)
            shutil.copytree(folder, kept)
    clean(cluster)


def ref(args: argparse.Namespace, cluster: str, n: int) -> bool:
    """Time the reference per rank + msprof-analyze on a copy of cluster; print one row per stage; with
    --compare, compare the text outputs (print_comparison). False when they differ."""
    scratch = os.path.join(os.path.dirname(cluster), "ref")  # kept with --keep: raw/, text/, analyze_out/
    shutil.rmtree(scratch, ignore_errors=True)
    copy = os.path.join(scratch, "raw", os.path.basename(cluster))
    shutil.copytree(cluster, copy, symlinks=True)  # the reference writes into its input: not counted
    print(f"reference msprof ({REF}, C++ path) per rank, {args.workers} at a time, then msprof-analyze "
          f"cluster -m all")
    print(f"{'ranks':>6} {'stage':<24} {'wall s':>7} {'s/rank':>7} {'top MiB':>8} {'largest MiB':>12} "
          f"{'procs':>6} {'tree MiB':>9}")
    wall1, top, largest, seen, last, tree = measured(
        [sys.executable, os.path.abspath(__file__), "--ref-child", copy, "--workers", str(args.workers)])
    print(f"{n:>6} {'msprof per rank':<24} {wall1:>7.1f} {wall1 / n:>7.2f} {top:>8.0f} {largest:>12.0f} {seen:>6} "
          f"{tree:>9.0f}", flush=True)
    print(f"       ({last})", flush=True)
    t0 = time.perf_counter()
    top_dir = ref_layout(copy, os.path.join(scratch, "text"))
    wall2 = time.perf_counter() - t0
    print(f"{n:>6} {'layout (hard links)':<24} {wall2:>7.1f}", flush=True)
    out = os.path.join(scratch, "analyze_out")
    wall3, top, largest, seen, last, tree = measured([MSPROF_ANALYZE, "cluster", "-d", top_dir, "-m", "all", "-o", out])
    print(f"{n:>6} {'msprof-analyze cluster':<24} {wall3:>7.1f} {wall3 / n:>7.2f} {top:>8.0f} {largest:>12.0f} "
          f"{seen:>6} {tree:>9.0f}", flush=True)
    found = sorted(os.listdir(os.path.join(out, "cluster_analysis_output")))
    with open(os.path.join(out, "cluster_analysis_output", "cluster_step_trace_time.csv"), newline="") as f:
        rows = sum(1 for _ in f) - 1
    print(f"       outputs: {' '.join(found)}; {rows} ranks in cluster_step_trace_time.csv", flush=True)
    if rows != n:
        raise SystemExit(f"msprof-analyze read {rows} of the {n} ranks")
    total = wall1 + wall2 + wall3
    print(f"{n:>6} {'total':<24} {total:>7.1f} {total / n:>7.2f}", flush=True)
    equal = True
    if args.compare:
        kept = os.path.join(os.path.dirname(cluster), "kit_out")
        equal = print_comparison(kept, os.path.join(out, "cluster_analysis_output"))
        if not args.keep:
            shutil.rmtree(kept, ignore_errors=True)
    if not args.keep:
        shutil.rmtree(scratch, ignore_errors=True)
    return equal


if __name__ == "__main__":
    main()
