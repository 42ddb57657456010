"""Time `msprof-kit export summary` and `export timeline` on synthetic 910B collections.

    python bench/bench_export.py [--tasks 100000,1000000] [--work DIR]

Uses the collections bench_import.py builds (same --work; built here if missing), imports each
once, then runs each export in a child process and prints wall seconds and peak RSS. A
benchmark, not a test.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from bench_import import bench_args, collection  # noqa: E402


def child(argv) -> tuple:
    """Wall seconds and peak RSS (MiB) of one msprof-kit command in a fresh process."""
    t0 = time.perf_counter()
    code = ("import resource, sys; from msprof_kit import cli; rc = cli.main(sys.argv[1:]); "
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr); sys.exit(rc)")
    res = subprocess.run([sys.executable, "-c", code, *argv], check=True, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    return time.perf_counter() - t0, int(res.stderr.strip().splitlines()[-1]) / 1024


def main() -> None:
    args = bench_args(__doc__)
    print(f"{'tasks':>10} {'summary s':>10} {'MiB':>6} {'timeline s':>11} {'MiB':>6} {'both s':>7}")
    for n in (int(x) for x in args.tasks.split(",")):
        prof = collection(args.work, n)
        subprocess.run([sys.executable, "-m", "msprof_kit", "import", "-dir", prof], check=True,
                       stdout=subprocess.DEVNULL)
        s, s_rss = child(["export", "summary", "-dir", prof])
        t, t_rss = child(["export", "timeline", "-dir", prof])
        print(f"{n:>10} {s:>10.2f} {s_rss:>6.0f} {t:>11.2f} {t_rss:>6.0f} {s + t:>7.2f}", flush=True)


if __name__ == "__main__":
    main()
