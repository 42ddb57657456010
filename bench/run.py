"""Time msprof-kit's import, export timeline and export summary on synthetic 910B collections, and
optionally the reference msprof analysis on the same data.

    python bench/run.py [--tasks 100000,1000000,10000000] [--ref PATH] [--ref-python PY]
                        [--work DIR] [--impl c|python] [--no-sample] [--steps STEP,...]
                        [--mkprof CASE [--iters K] [--mkprof-script PATH]] [--hccl-ops N]

Each size is a synthetic 910B collection (tests/synth: two devices, the tasks split evenly
between them, AI Core PMU on, tensor info on, 10 % of the operators inside model executions),
built once under --work (default bench/out) and reused. Each step runs in a fresh process on a
collection cleared of every earlier output, after a sync (so that what was written or removed
before lands on the disk outside the step's time); the table gives wall seconds, CPU seconds (the
process and the workers it forked), `peak MiB`, the peak of the process tree's summed PSS sampled
every 0.1 s (what the step and its workers held at one time; pages a forked worker shares with its
parent count once), and `peaks sum`, the process's own peak RSS plus its largest worker's (an
upper bound, reached only if both peaked at once, which they rarely do). --no-sample skips the
sampling, which costs the steps a little time (`peak MiB` then shows '-'). Logs go to
--work/run.log.

--ref PATH runs the reference as it is, on a fresh copy of the same collection in the same run:
PATH is its `analysis/` folder (a checkout of github Ascend/msprof), the folder holding it, or a
CANN install (its tools/profiler/profiler_tool/analysis). The reference's own steps are `import`,
`export timeline`, `export summary` of analysis/msprof/msprof.py. A checkout has no
msprof_analysis.so, so the reference runs its Python path there; a CANN install uses its C++
library where it has one. The table then adds the reference's figures and the ratio of the wall
times (reference / msprof-kit). The C++ library needs its securec library on LD_LIBRARY_PATH
(libc_sec.so, built beside it: docs/benchmarks.md); a reference step that prints a traceback stops
the run (the reference exits 0 when its workers fail). A benchmark, not a test.

Both programs run from compiled bytecode, as a pip install leaves them: before the first step, the
Python sources of msprof-kit (and of the reference, with --ref) are compiled in place (their
__pycache__ folders), and the measured processes run without PYTHONDONTWRITEBYTECODE, which, where
the environment sets it, would make each process compile every module it imports again (about
0.15 s a command for msprof-kit).

--steps chooses the steps (comma-separated) among import, export timeline, export summary,
export db and analyze (the communication analysis); default the first three, `all` for the five.
--mkprof CASE measures a collection of the shared generator (../shared/tools/mkprof.py, a sibling
of the repository, or --mkprof-script) instead of tests/synth: each --tasks size is passed as its
--n-ops, --iters K as its --iters (910b_hccl: graph iterations, two all-reduces each), e.g.
`--mkprof 910b_hccl --tasks 1000000` against `--mkprof 910b_mixed --tasks 1000000`.
--hccl-ops N adds communication to tests/synth's collection: N all-reduce collectives of 11 HCCL tasks
each on device 0, after its compute tasks (write_collection's hccl_ops; on one device because analyze
covers one device's communication),
e.g. `--tasks 100000 --hccl-ops 100000` (1.2M device tasks, 1.1M of them HCCL) against `--tasks 1200000`.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.normpath(os.path.join(HERE, "..", "tests"))  # synth/, the collection writer

DEVICES = 2
STEPS = ("import", "export timeline", "export summary")  # the default --steps
ALL_STEPS = STEPS + ("export db", "analyze")
MKPROF = os.path.normpath(os.path.join(HERE, "..", "..", "shared", "tools", "mkprof.py"))
PSS_PERIOD = 0.1  # seconds between samples of the process tree's summed PSS
# what the steps write into a collection (ours and the reference's), removed before a run
OUTPUTS = ("sqlite", "mindstudio_profiler_output", "mindstudio_profiler_log", "analyze")
REF_CANDIDATES = ("msprof/msprof.py", "analysis/msprof/msprof.py",
                  "tools/profiler/profiler_tool/analysis/msprof/msprof.py")

# Runs in the measured process: at exit, its CPU seconds and peak RSS, with those of the workers
# it waited for, go to the file named by BENCH_STATS (workers end with os._exit, so only the
# measured process writes it). Its own peak is VmHWM: Linux's ru_maxrss of an exec'ed process also
# counts the RSS of the process it was forked from.
STATS = ("import atexit, json, os, resource\n"
         "def _peak_kib():\n"
         "    try:\n"
         "        with open('/proc/self/status') as f:\n"
         "            return next(int(l.split()[1]) for l in f if l.startswith('VmHWM:'))\n"
         "    except (OSError, StopIteration):\n"
         "        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
         "def _stats():\n"
         "    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)\n"
         "    with open(os.environ['BENCH_STATS'], 'w') as f:\n"
         "        json.dump({'cpu': s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime,\n"
         "                   'kib': _peak_kib() + c.ru_maxrss}, f)\n"
         "atexit.register(_stats)\n")
OURS = STATS + "import sys\nfrom msprof_kit import cli\nsys.argv[0] = 'msprof-kit'\ncli.entry()\n"  # as the script
REFERENCE = STATS + ("import runpy, sys\n"
                     "sys.argv = [sys.argv[1]] + sys.argv[2:]\n"
                     "runpy.run_path(sys.argv[0], run_name='__main__')\n")


@dataclass
class Measure:
    wall: float
    cpu: float
    mib: float  # the process's peak RSS plus its largest worker's (MiB): an upper bound
    pss: Optional[float] = None  # the sampled peak of the process tree's summed PSS (MiB); None: not sampled
    note: str = ""  # e.g. that analyze found no communication to analyze (its exit code 4)


def collection(work: str, n: int, hccl_ops: int = 0, npu_mem: int = 0) -> str:
    """The synthetic collection of n compute tasks, hccl_ops collectives and npu_mem memory samples
    per device (built the first time)."""
    folder = os.path.join(work, f"run_{n}" + (f"_hccl{hccl_ops}d0" if hccl_ops else "")
                          + (f"_npumem{npu_mem}" if npu_mem else ""))
    extra = (f" + {hccl_ops:,} collectives" if hccl_ops else "") + (f" + {npu_mem:,} npu_mem samples" if npu_mem else "")

    def build(tmp: str) -> None:
        # in a process of its own, so that this one stays small (its children start as copies of it)
        code = (f"import sys; sys.path.insert(0, {TESTS!r}); import synth; "
                f"synth.write_collection({tmp!r}, chip='910B', n_tasks={max(1, n // DEVICES)}, devices={DEVICES}, "
                "pmu=True, tensors=True, model_fraction=0.1"
                + (f", hccl_ops={hccl_ops}, hccl_devices=1" if hccl_ops else "")
                + (f", npu_mem_samples={npu_mem})" if npu_mem else ")"))
        subprocess.run([sys.executable, "-c", code], check=True)
    return _built_once(folder, build, f"{n:,} tasks{extra}")


def mkprof_collection(work: str, script: str, case: str, n: int, iters: Optional[int]) -> str:
    """The collection mkprof.py writes for `case` with --n-ops n (and --iters), built the first time."""
    folder = os.path.join(work, f"mkprof_{case}_{n}" + (f"_i{iters}" if iters is not None else ""))

    def build(tmp: str) -> None:
        argv = [sys.executable, script, tmp, "--case", case, "--n-ops", str(n)]
        if iters is not None:
            argv += ["--iters", str(iters)]
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    return _built_once(folder, build, f"{case} --n-ops {n:,}")


def _built_once(folder: str, build: Callable[[str], None], what: str) -> str:
    """The PROF_ folder under `folder`, written by `build(tmp)` into a partial folder and renamed into
    place the first time (a later run reuses it)."""
    found = sorted(d for d in os.listdir(folder) if d.startswith("PROF_")) if os.path.isdir(folder) else []
    if found:
        return os.path.join(folder, found[0])
    tmp = folder + ".partial"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    t0 = time.perf_counter()
    build(tmp)
    prof = next(d for d in os.listdir(tmp) if d.startswith("PROF_"))
    os.replace(tmp, folder)
    print(f"built {what} in {time.perf_counter() - t0:.0f} s: {_size(folder) / 2 ** 20:,.0f} MiB", flush=True)
    return os.path.join(folder, prof)


def _size(path: str) -> int:
    return sum(os.path.getsize(os.path.join(b, f)) for b, _, files in os.walk(path) for f in files)


def remove_unified_db(prof: str) -> None:
    """Remove the msprof_{ts}.db an export timeline / summary already wrote, so that export db writes it again."""
    for f in os.listdir(prof):
        if f.startswith("msprof_") and f.endswith(".db"):
            os.remove(os.path.join(prof, f))


def clear_outputs(prof: str) -> None:
    """Remove whatever an import or export wrote, so every run starts from the raw data."""
    for base, dirs, files in os.walk(prof):
        for d in [d for d in dirs if d in OUTPUTS]:
            shutil.rmtree(os.path.join(base, d))
            dirs.remove(d)
        if base == prof:
            for f in files:
                if f.startswith("msprof_") and f.endswith(".db"):
                    os.remove(os.path.join(base, f))


def _tree_pss_kib(pid: int) -> int:
    """The summed proportional set size of a process and its descendants (pages shared after a
    fork counted once), from /proc; 0 for what has already exited."""
    pids, total = [pid], 0
    while pids:
        p = pids.pop()
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    pids += [int(c) for c in f.read().split()]
            with open(f"/proc/{p}/smaps_rollup") as f:
                total += next(int(line.split()[1]) for line in f if line.startswith("Pss:"))
        except (OSError, StopIteration, ValueError):
            continue
    return total


def bytecode_env(log: str, sources: Sequence[Tuple[str, str]]) -> Dict[str, str]:
    """The environment of the measured processes: Python's own bytecode caching (without
    PYTHONDONTWRITEBYTECODE), the `sources` ((python, folder of Python files) pairs) compiled
    beforehand by the Python that runs them, as a pip install compiles what it installs. A folder
    that cannot be written, or a file that does not compile, is left to its process (compileall
    reports it in the log)."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    with open(log, "ab") as out:
        for python, folder in sources:
            subprocess.run([python, "-m", "compileall", "-q", folder], env=env, stdout=out, stderr=subprocess.STDOUT)
    return env


def measure(argv: Sequence[str], env: Dict[str, str], log: str, pss: bool = True,
            accept: Optional[Dict[int, str]] = None) -> Measure:
    """Run one command in a fresh process; its output goes to `log`. `pss`: sample the summed PSS
    of its process tree every PSS_PERIOD seconds (reading it costs the process some time).
    `accept`: exit codes other than 0 that are no failure, with the note the row gets. The disk
    is synced before the command starts."""
    fd, stats = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    peak = 0
    if hasattr(os, "sync"):  # what earlier steps and clearings wrote or removed goes to the disk first,
        os.sync()            # not in this step's time (a removal's discards, a write's writeback)
    try:
        t0 = time.perf_counter()
        with open(log, "ab") as out:
            proc = subprocess.Popen(list(argv), env={**env, "BENCH_STATS": stats}, stdout=out,
                                    stderr=subprocess.STDOUT)
            while pss and proc.poll() is None:
                peak = max(peak, _tree_pss_kib(proc.pid))
                time.sleep(PSS_PERIOD)
            proc.wait()
        wall = time.perf_counter() - t0
        accept = accept or {}
        if proc.returncode != 0 and proc.returncode not in accept:
            raise SystemExit(f"{' '.join(argv[3:])} failed (exit code {proc.returncode}); see {log}")
        with open(stats) as f:
            got = json.load(f)
    finally:
        os.remove(stats)
    # (no sample: the process ended before the first one was read)
    return Measure(wall, got["cpu"], got["kib"] / 1024, peak / 1024 if pss and peak else None,
                   accept.get(proc.returncode, ""))


def ours(prof: str, impl: Optional[str], log: str, pss: bool = True,
         steps: Sequence[str] = STEPS, env: Optional[Dict[str, str]] = None) -> List[Measure]:
    env = dict(os.environ if env is None else env)
    if impl:
        env["MSPROF_KIT_NATIVE"] = impl
    clear_outputs(prof)
    out = []
    for step in steps:
        if step == "export db":
            remove_unified_db(prof)
        accept = {4: "no HCCL data"} if step == "analyze" else {}  # analyze's exit code when nothing to analyze
        out.append(measure([sys.executable, "-c", OURS, *step.split(), "-dir", prof], env, log, pss, accept))
    clear_outputs(prof)
    return out


def find_reference(path: str) -> str:
    """analysis/msprof/msprof.py of a checkout or a CANN install."""
    path = os.path.abspath(path)
    if os.path.isfile(path):
        return path
    for rel in REF_CANDIDATES:
        if os.path.isfile(os.path.join(path, rel)):
            return os.path.join(path, rel)
    for base, dirs, files in os.walk(path):
        if base.endswith(os.path.join("analysis", "msprof")) and "msprof.py" in files:
            return os.path.join(base, "msprof.py")
        if base[len(path):].count(os.sep) >= 6:
            dirs.clear()
    raise SystemExit(f"{path}: no analysis/msprof/msprof.py below it; expected a checkout of the reference's "
                     "analysis/ folder or a CANN install")


def reference(script: str, python: str, prof: str, scratch: str, log: str,
              steps: Sequence[str] = STEPS, pss: bool = True, env: Optional[Dict[str, str]] = None) -> List[Measure]:
    """The reference's three steps on a fresh copy of the collection (removed afterwards)."""
    env = dict(os.environ if env is None else env)
    copy = os.path.join(scratch, os.path.basename(prof))
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(prof, copy)
    clear_outputs(copy)
    try:
        out = []
        for step in steps:
            start = os.path.getsize(log) if os.path.exists(log) else 0
            out.append(measure([python, "-c", REFERENCE, script, *step.split(), "-dir", copy], env, log,
                               pss))
            _reference_succeeded(step, log, start)
        return out
    finally:
        shutil.rmtree(copy, ignore_errors=True)


def _reference_succeeded(step: str, log: str, start: int) -> None:
    """Stop when the reference's step printed a traceback (from `start` of its log): it exits 0 when
    its worker processes fail (its C++ library not found: LD_LIBRARY_PATH must reach libc_sec.so),
    and its time would be that of a failure."""
    with open(log, "rb") as f:
        f.seek(start)
        text = f.read().decode("utf-8", "replace")
    if "Traceback (most recent call last)" in text:
        last = [line for line in text.splitlines() if "Error" in line][-1:] or ["a traceback"]
        raise SystemExit(f"the reference's {step} failed ({last[0].strip()}); see {log}")


def machine() -> str:
    mem = ""
    if os.path.exists("/proc/meminfo"):
        with open("/proc/meminfo") as f:
            kib = int(f.readline().split()[1])
        mem = f", {kib / 2 ** 20:.0f} GiB"
    import numpy
    import pandas
    return (f"{os.cpu_count()} cores{mem}, {platform.system()} {platform.machine()}, Python {platform.python_version()}, "
            f"numpy {numpy.__version__}, pandas {pandas.__version__}")


def _mib(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.0f}"


def row(label: str, m: Measure, r: Optional[Measure]) -> str:
    text = f"{label:<17} {m.wall:>8.2f} {m.cpu:>8.2f} {_mib(m.pss):>8} {m.mib:>9.0f}"
    if r is not None:
        text += f" {r.wall:>10.2f} {r.cpu:>9.2f} {_mib(r.pss):>8} {r.mib:>9.0f} {r.wall / m.wall:>7.1f}x"
    return text + (f"  ({m.note})" if m.note else "")


def _largest(values: Iterable[Optional[float]]) -> Optional[float]:
    got = [v for v in values if v is not None]
    return max(got) if got else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", default="100000,1000000", help="device tasks per collection, comma-separated")
    ap.add_argument("--ref", metavar="PATH", help="the reference analysis/ folder, or a CANN install")
    ap.add_argument("--ref-python", default=sys.executable, help="the Python that runs the reference")
    ap.add_argument("--work", default=os.path.join(HERE, "out"), help="where the collections are kept")
    ap.add_argument("--no-sample", dest="sample", action="store_false",
                    help="do not sample the process tree's summed PSS (its sampling costs the steps a little time)")
    ap.add_argument("--pss", action="store_true", help=argparse.SUPPRESS)  # the sampling, now the default
    ap.add_argument("--impl", choices=("c", "python"), help="msprof-kit's formatting implementation "
                    "(default: the C extension when it is built)")
    ap.add_argument("--steps", default=",".join(STEPS),
                    help=f"steps to time, comma-separated, among {', '.join(ALL_STEPS)}; 'all' for the five")
    ap.add_argument("--mkprof", metavar="CASE", help="measure mkprof.py's CASE (--n-ops = each --tasks size) "
                    "instead of tests/synth's collection")
    ap.add_argument("--iters", type=int, help="with --mkprof: its --iters (910b_hccl: graph iterations)")
    ap.add_argument("--hccl-ops", type=int, default=0, help="tests/synth: also this many all-reduce "
                    "collectives of 11 HCCL tasks each")
    ap.add_argument("--npu-mem-samples", type=int, default=0, help="tests/synth: also this many npu_mem "
                    "samples per device (half Device, half APP)")
    ap.add_argument("--mkprof-script", default=MKPROF, help=f"the generator (default {MKPROF})")
    args = ap.parse_args()
    steps = list(ALL_STEPS) if args.steps == "all" else [s.strip() for s in args.steps.split(",") if s.strip()]
    unknown = [s for s in steps if s not in ALL_STEPS]
    if unknown:
        ap.error(f"unknown step(s) {', '.join(unknown)}; choose among {', '.join(ALL_STEPS)}")
    if args.mkprof and not os.path.isfile(args.mkprof_script):
        ap.error(f"{args.mkprof_script}: no such generator (--mkprof-script)")
    script = find_reference(args.ref) if args.ref else None
    sizes = [int(x) for x in args.tasks.split(",")]
    os.makedirs(args.work, exist_ok=True)
    log = os.path.join(args.work, "run.log")
    import msprof_kit
    from msprof_kit import native_impl, parsers
    impl = args.impl or native_impl.current()
    sources = [(sys.executable, os.path.dirname(msprof_kit.__file__)), (sys.executable, os.path.dirname(parsers.__file__))]
    if script:  # the reference's analysis/ folder
        sources.append((args.ref_python, os.path.dirname(os.path.dirname(script))))
    env = bytecode_env(log, sources)
    print(f"machine: {machine()}; msprof-kit formatting: {impl}")
    if script:
        print(f"reference: {script} (run by {args.ref_python})")
    head = f"{'step':<17} {'wall s':>8} {'cpu s':>8} {'peak MiB':>8} {'peaks sum':>9}"
    if script:
        head += f" {'ref wall s':>10} {'ref cpu s':>9} {'ref peak':>8} {'ref p.sum':>9} {'ratio':>8}"
    for n in sizes:
        if args.mkprof:
            prof = mkprof_collection(args.work, args.mkprof_script, args.mkprof, n, args.iters)
            what = f"mkprof {args.mkprof} --n-ops {n:,}" + (f" --iters {args.iters:,}" if args.iters is not None else "")
        else:
            prof = collection(args.work, n, args.hccl_ops, args.npu_mem_samples)
            what = f"{n:,} tasks" + (f" + {args.hccl_ops:,} collectives x 11 HCCL tasks" if args.hccl_ops else "")
            what += f" + {args.npu_mem_samples:,} npu_mem samples per device" if args.npu_mem_samples else ""
            what += f" ({DEVICES} devices"
        mine = ours(prof, args.impl, log, args.sample, steps, env)  # (the raw size below: with the outputs cleared)
        what += f"{', ' if not args.mkprof else ' ('}{_size(prof) / 2 ** 20:,.0f} MiB raw)"
        theirs = reference(script, args.ref_python, prof, args.work, log, steps, args.sample, env) if script else None
        print(f"\n{what}")
        print(head)
        for i, step in enumerate(steps):
            print(row(step, mine[i], theirs[i] if theirs else None))
        total = Measure(sum(m.wall for m in mine), sum(m.cpu for m in mine), max(m.mib for m in mine),
                        _largest(m.pss for m in mine))
        ref_total = Measure(sum(m.wall for m in theirs), sum(m.cpu for m in theirs),
                            max(m.mib for m in theirs), _largest(m.pss for m in theirs)) if theirs else None
        print(row("all three" if len(steps) == 3 else f"all {len(steps)}", total, ref_total), flush=True)


if __name__ == "__main__":
    main()
