"""Time `msprof-kit import` on synthetic 910B collections (PMU and tensor info on).

    python bench/bench_import.py [--tasks 100000,1000000] [--work DIR]

Builds each collection once under --work (default bench/out), then runs the import in a child
process and prints wall seconds, CPU seconds and the child's peak RSS. A benchmark, not a test.
"""
from __future__ import annotations

import argparse
import glob
import os
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))

import synth  # noqa: E402


def collection(work: str, n: int) -> str:
    folder = os.path.join(work, f"tasks_{n}")
    found = glob.glob(os.path.join(folder, "PROF_*"))
    if found:
        return found[0]
    os.makedirs(folder, exist_ok=True)
    return synth.write_collection(folder, chip="910B", n_tasks=n, pmu=True, tensors=True, model_fraction=0.1)


def run_import(prof: str) -> tuple:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "msprof_kit", "import", "-dir", prof], check=True,
                   stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, after.ru_maxrss / 1024


def bench_args(doc: str) -> argparse.Namespace:
    """--tasks (comma-separated sizes) and --work (where the synthetic collections live)."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--tasks", default="100000,1000000")
    ap.add_argument("--work", default=os.path.join(HERE, "out"))
    return ap.parse_args()


def main() -> None:
    args = bench_args(__doc__)
    print(f"{'tasks':>10} {'wall s':>8} {'cpu s':>8} {'peak MiB':>9}")
    for n in (int(x) for x in args.tasks.split(",")):
        prof = collection(args.work, n)
        wall, cpu, rss = run_import(prof)
        print(f"{n:>10} {wall:>8.2f} {cpu:>8.2f} {rss:>9.0f}", flush=True)


if __name__ == "__main__":
    main()
