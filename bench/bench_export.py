"""Time `msprof-kit export summary` and `export timeline` on synthetic 910B collections.

    python bench/bench_export.py [--tasks 100000,1000000] [--work DIR]

Uses the collections bench_import.py builds (same --work; built here if missing), imports each
once, then runs each export in a child process and prints wall seconds and peak RSS. A
benchmark, not a test.
"""
from __future__ import annotations

import glob
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from bench_import import bench_args, collection  # noqa: E402


def child(argv) -> tuple:
    """Wall seconds and peak memory (MiB) of one msprof-kit command in a fresh process. The export
    forks a worker (the unified DB, or the timeline's device layers), so the memory is the sum of
    the two processes' peaks: an upper bound of what they held at once."""
    t0 = time.perf_counter()
    code = ("import resource, sys; from msprof_kit import cli; rc = cli.main(sys.argv[1:]); "
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "
            "resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(rc)")
    res = subprocess.run([sys.executable, "-c", code, *argv], check=True, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    own, children = (int(x) for x in res.stderr.strip().splitlines()[-1].split())
    return time.perf_counter() - t0, (own + children) / 1024


def main() -> None:
    args = bench_args(__doc__)
    print(f"{'tasks':>10} {'summary s':>10} {'MiB':>6} {'timeline s':>11} {'MiB':>6} {'both s':>7}")
    for n in (int(x) for x in args.tasks.split(",")):
        prof = collection(args.work, n)
        subprocess.run([sys.executable, "-m", "msprof_kit", "import", "-dir", prof], check=True,
                       stdout=subprocess.DEVNULL)
        for old in glob.glob(os.path.join(prof, "msprof_*.db")):  # each run writes the unified DB anew
            os.remove(old)
        s, s_rss = child(["export", "summary", "-dir", prof])
        t, t_rss = child(["export", "timeline", "-dir", prof])
        print(f"{n:>10} {s:>10.2f} {s_rss:>6.0f} {t:>11.2f} {t_rss:>6.0f} {s + t:>7.2f}", flush=True)


if __name__ == "__main__":
    main()
