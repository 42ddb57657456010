"""Mutation test (issue 21): damaged copies of golden inputs and of a synthetic JOB, through the CLI.

Every kind of damage in `mutation.KINDS` is applied, with a seeded `random.Random`, to a fresh
copy of each input in `INPUTS`; then `import`, `export summary` and `export timeline` run as
subprocesses (own process group, timeout, memory cap). For every run:

* no command hangs (killed with its process group after TIMEOUT s), none dies of a signal, no
  stderr holds a traceback;
* the raw tree is byte-identical afterwards (every entry's type, mode and bytes or link target,
  following no link; the tool's outputs left out), and so is the folder outside the collection
  that a symlink points into;
* a command that fails exits > 0 with exactly one `Error: ` line naming a file (or the collection);
* when every command succeeds and the exported CSV/JSON differ from the undamaged run's, stderr
  holds a `Warning:` line the undamaged run did not print.

Knobs (environment): MSPROF_KIT_MUTATION_SEED (default 21), MSPROF_KIT_MUTATION_RUNS (runs per
kind and input, default 1), MSPROF_KIT_MUTATION_TIMEOUT (seconds per command, default 30),
MSPROF_KIT_MUTATION_REPORT (also write the summary JSON there), MSPROF_KIT_MUTATION_INPUTS
(comma-separated golden case names and `job`; default 910b_mixed,310p_hwts,job). The per-kind counts are printed
at the end of the session and written to <pytest basetemp>/mutation_summary.json.

`unreadable` (a mode-000 file) needs a reader that file permissions stop: see the fixture `run_as`.
"""
from __future__ import annotations

import json
import os
import random
import re
import shutil
import stat
import tempfile
from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Tuple

import pytest

import mutation
from conftest import GOLDEN, needs_shared
from synth_job import write_job
from users import RunAs, bound_by_permissions

SEED = int(os.environ.get("MSPROF_KIT_MUTATION_SEED", "21"))
RUNS = int(os.environ.get("MSPROF_KIT_MUTATION_RUNS", "1"))
TIMEOUT = float(os.environ.get("MSPROF_KIT_MUTATION_TIMEOUT", "30"))
#: golden inputs (910B STARS with sliced streams, tensor_info, aging and unaging host data; 310P HWTS)
#: and a synthetic JOB; any golden case by name
INPUTS = os.environ.get("MSPROF_KIT_MUTATION_INPUTS", "910b_mixed,310p_hwts,job").split(",")
OUTCOMES = ("error", "warning", "unchanged", "FAILED", "n/a")


@pytest.fixture()
def native_implementation() -> None:
    """Runs once (not once per native implementation): the CLI subprocesses take the default."""
    return None


# --- inputs and their undamaged runs -------------------------------------------------------------

def _copy(src: str, dest_parent: str) -> str:
    dest = os.path.join(dest_parent, os.path.basename(src))
    shutil.copytree(src, dest, symlinks=True)
    for base, dirs, files in os.walk(dest):
        for name in dirs + files:
            p = os.path.join(base, name)
            os.chmod(p, os.stat(p).st_mode | stat.S_IWUSR | stat.S_IRUSR)
    return dest


def _normalise(lines: List[str], coll: str) -> List[str]:
    work = os.path.dirname(coll)
    return sorted({re.sub(r"<WORK>/[^/:\s]+", "<WORK>/<DIR>", line.replace(work, "<WORK>")) for line in lines})


@dataclass
class Baseline:
    outputs: Dict[str, str]
    warnings: List[str]


class Inputs:
    def __init__(self, folder: str) -> None:
        self.folder = folder
        self._baselines: Dict[str, Baseline] = {}

    def source(self, name: str) -> str:
        if name == "job":
            path = os.path.join(self.folder, "source_job", "JOB000001SYNTH")
            if not os.path.isdir(path):
                write_job(os.path.join(self.folder, "source_job"), n_tasks=40)
            return path
        parent = os.path.join(GOLDEN, name, "input")
        (prof,) = [os.path.join(parent, n) for n in os.listdir(parent) if n.startswith("PROF_")]
        return prof

    def baseline(self, name: str) -> Baseline:
        if name not in self._baselines:
            work = tempfile.mkdtemp(prefix=f"baseline_{name}_", dir=self.folder)
            coll = _copy(self.source(name), work)
            cmds = mutation.run_all(coll, TIMEOUT)
            for c in cmds:
                assert c.code == 0 and "Traceback" not in c.stderr, f"undamaged {name}: {c.argv}: {c.stderr}"
            self._baselines[name] = Baseline(
                mutation.outputs(coll), _normalise([w for c in cmds for w in mutation.warnings(c.stderr, coll)], coll))
            shutil.rmtree(work)
        return self._baselines[name]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Inputs:
    return Inputs(str(tmp_path_factory.mktemp("mutation_inputs")))


# --- the summary ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def summary(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[List[dict]]:
    runs: List[dict] = []
    yield runs
    counts: Dict[str, Dict[str, int]] = {}
    for r in runs:
        counts.setdefault(r["kind"], dict.fromkeys(OUTCOMES, 0))[r["outcome"]] += 1
    report = {"seed": SEED, "runs_per_kind_and_input": RUNS, "timeout_s": TIMEOUT, "counts": counts, "runs": runs}
    paths = [str(tmp_path_factory.getbasetemp() / "mutation_summary.json")]
    if os.environ.get("MSPROF_KIT_MUTATION_REPORT"):
        paths.append(os.environ["MSPROF_KIT_MUTATION_REPORT"])
    for p in paths:
        with open(p, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=1)
    request.config.pluginmanager.register(_Printer(counts, runs, paths[0]), "msprof_kit_mutation_summary")


class _Printer:
    """Prints the per-kind counts in pytest's terminal summary (after the captured output)."""

    def __init__(self, counts: Dict[str, Dict[str, int]], runs: List[dict], path: str) -> None:
        self.counts, self.runs, self.path = counts, runs, path

    def pytest_terminal_summary(self, terminalreporter) -> None:  # noqa: ANN001
        tr, counts = terminalreporter, self.counts
        if not self.runs:
            return
        tr.write_sep("=", f"mutation summary: seed {SEED}, {len(self.runs)} runs ({self.path})")
        tr.write_line(f"{'kind':<16}" + "".join(f"{o:>10}" for o in OUTCOMES))
        for kind in mutation.KINDS:
            if kind in counts:
                tr.write_line(f"{kind:<16}" + "".join(f"{counts[kind][o]:>10}" for o in OUTCOMES))
        tr.write_line(f"{'total':<16}" + "".join(f"{sum(c[o] for c in counts.values()):>10}" for o in OUTCOMES))
        for r in self.runs:
            if r["outcome"] == "FAILED":
                tr.write_line(f"FAILED {r['kind']} [{r['input']}] {r['damage']}: {'; '.join(r['problems'])}")


# --- 'unreadable' as another user ----------------------------------------------------------------

@pytest.fixture(scope="module")
def run_as() -> Iterator[Optional[RunAs]]:
    """Who runs the CLI for `unreadable`: one whom a mode-000 file stops (tests/users.py)."""
    def runs(who: RunAs) -> Tuple[bool, str]:
        probe = mutation.run_cli(["--help"], TIMEOUT, who, cwd="/")
        return probe.code == 0, probe.stderr

    with bound_by_permissions("mskm", runs) as who:
        yield who


# --- the test ------------------------------------------------------------------------------------

def _names_a_file(line: str, coll: str, names: List[str]) -> bool:
    return "/" in line or os.path.basename(coll) in line or any(n in line for n in names if len(n) >= 4)


def _last_line(text: str) -> str:
    lines = [x for x in text.splitlines() if x.strip()]
    return lines[-1] if lines else ""


@needs_shared
@pytest.mark.parametrize("rep", range(RUNS))
@pytest.mark.parametrize("source", INPUTS)
@pytest.mark.parametrize("kind", list(mutation.KINDS))
def test_damaged_input(kind: str, source: str, rep: int, inputs: Inputs, summary: List[dict],
                       request: pytest.FixtureRequest, tmp_path) -> None:
    who: Optional[RunAs] = request.getfixturevalue("run_as") if kind == "unreadable" else None
    user = who if who is not None and who.uid is not None else None
    base = inputs.baseline(source)
    if user is not None:  # a folder the other user can reach (pytest's basetemp is 0700)
        work = tempfile.mkdtemp(prefix="msprof_kit_mutation_")
        request.addfinalizer(lambda: shutil.rmtree(work, ignore_errors=True))
        os.chmod(work, 0o755)
    else:
        work = str(tmp_path)
    outside = os.path.join(work, "outside")
    os.mkdir(outside)
    coll = _copy(inputs.source(source), work)
    if user is not None:
        for b, dirs, files in os.walk(work):
            for n in [b] + [os.path.join(b, x) for x in dirs + files]:
                os.lchown(n, user.uid, user.gid)
    rng = random.Random(f"{SEED}:{kind}:{source}:{rep}")
    damage = mutation.Damage(coll, outside, rng, mutation.classify(coll))
    record = {"kind": kind, "input": source, "rep": rep, "damage": "", "outcome": "n/a", "problems": [],
              "commands": []}
    try:
        record["damage"] = mutation.KINDS[kind](damage)
    except mutation.NotApplicable as exc:
        summary.append(record)
        pytest.skip(f"{kind} does not apply to {source}: {exc}")
    coll = damage.new_root or coll
    record["target"] = damage.target
    names = sorted({os.path.basename(k) for k in mutation.snapshot(coll)} | {os.path.basename(coll)})
    before, outside_before = mutation.snapshot(coll), mutation.snapshot(outside)

    cmds = mutation.run_all(coll, TIMEOUT, who, work if user else None)

    problems: List[str] = []
    for c in cmds:
        what = " ".join(c.argv[:2] if c.argv[0] == "export" else c.argv[:1])
        record["commands"].append({"command": f"python -m msprof_kit {' '.join(c.argv[:-1])} {c.argv[-1]!r}",
                                   "exit": c.code, "seconds": round(c.seconds, 2),
                                   "last_stderr_line": _last_line(c.stderr),
                                   "stderr_tail": c.stderr.splitlines()[-16:]})
        if c.code is None:
            problems.append(f"{what}: hung, killed after {TIMEOUT:g} s")
        elif c.code < 0:
            problems.append(f"{what}: killed by signal {-c.code}")
        if "Traceback" in c.stderr:
            problems.append(f"{what}: traceback: {_last_line(c.stderr)}")
        elif c.code is not None and c.code > 0:
            errors = [x for x in c.stderr.splitlines() if x.startswith("Error: ")]
            if len(errors) != 1:
                problems.append(f"{what}: exit {c.code} with {len(errors)} 'Error: ' lines: {_last_line(c.stderr)}")
            elif not _names_a_file(errors[0], coll, names):
                problems.append(f"{what}: the error names no file: {errors[0]}")
    changed = (mutation.tree_diff(before, mutation.snapshot(coll))
               + mutation.tree_diff(outside_before, mutation.snapshot(outside)))
    if changed:
        problems.append(f"raw tree changed: {'; '.join(changed[:5])}")
    outcome = "FAILED" if problems else "unchanged"
    if not problems and any(c.code for c in cmds):
        outcome = "error"
    elif not problems:
        got = mutation.outputs(coll)
        if got != base.outputs:
            differ = sorted(k for k in set(got) | set(base.outputs) if got.get(k) != base.outputs.get(k))
            new = sorted(set(_normalise([w for c in cmds for w in mutation.warnings(c.stderr, coll)], coll)) -
                         set(base.warnings))
            if new:
                outcome = "warning"
                stem = mutation.SLICE.sub(r"\g<stem>", os.path.basename(damage.target))
                record["new_warnings"] = new[:5]
                record["a_warning_names_the_damaged_file"] = bool(stem) and any(stem in w for w in new)
            else:
                outcome = "FAILED"
                problems.append(f"output differs from the undamaged run ({', '.join(differ)}) without a new Warning")
    record["outcome"] = outcome
    record["problems"] = problems
    summary.append(record)
    assert not problems, (f"{kind} on {source}: {record['damage']}\n" + "\n".join(problems) + "\n" +
                          json.dumps(record["commands"], indent=1))
