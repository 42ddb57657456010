"""msprof-analyze (PyPI `msprof-analyze`, Huawei's own analysis tool) reads our exports as it reads the
reference's:

- `cluster -m cann_api_sum` and `-m compute_op_sum` on our `msprof_{ts}.db` give the same tables as on
  the golden C++ `msprof.db`, every golden case being one rank of a cluster-shaped folder (the layout
  the tool scans: `PROF_*/device_<d>/info.json.<d>` and `PROF_*/msprof_<14 digits>.db`);
- `advisor all -d PROF` reads our `mindstudio_profiler_output/` without an error the reference's own
  files do not give, and reports what it reports on the reference's files.

The tool pins its own pandas and numpy, so it lives in a venv of its own: MSPROF_ANALYZE_BIN names its
`msprof-analyze` script (.ci/run installs it); without it these tests skip."""
from __future__ import annotations

import csv
import glob
import io
import json
import os
import re
import shutil
import stat
import subprocess
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, List, NamedTuple, Tuple

import pytest

from conftest import DEGRADED_CASES, GOLDEN, INTACT_CASES, needs_shared

from msprof_kit import cli, native_impl

pytestmark = needs_shared

ENV = "MSPROF_ANALYZE_BIN"
# Cases whose msprof.db the reference wrote in full: the recipes' tables must be equal.
EXACT_CASES = INTACT_CASES + ["910b_aicpu_freq_tx", "910b_hccl", "910b_memory", "910b_hccl_2ranks",
                              "910b_hccl_8ranks"]
# Damaged inputs: the reference's msprof.db lacks the TASK table where it dropped the device data, so
# compute_op_sum finds nothing in it while ours keeps the tasks (the golden cases' at-least rule).
AT_LEAST_DIFFERENCES = {("degraded_a", "compute_op_sum"), ("degraded_b", "compute_op_sum")}
MODES = ["cann_api_sum", "compute_op_sum"]
DB_NAME = "msprof_20231125090304.db"  # the tool takes msprof_<14 digits>.db only
TIMEOUT = 600  # s for one run of the tool


def _tool() -> str:
    path = os.environ.get(ENV) or shutil.which("msprof-analyze")
    if not path:
        pytest.skip(f"msprof-analyze is not installed: {ENV} names its script in a venv of its own "
                    "(.ci/run makes one; by hand: python3 -m venv /tmp/ma && /tmp/ma/bin/pip install "
                    f"msprof-analyze && export {ENV}=/tmp/ma/bin/msprof-analyze)")
    assert os.access(path, os.X_OK), f"{ENV}={path} is not an executable file"
    return path


@pytest.fixture(autouse=True)
def once(native_implementation):
    """The exports are made once for the module, with the C extension when it is built (the twins'
    parity is tested elsewhere); the Python-twin run repeats nothing."""
    if native_implementation == "python" and native_impl.available():
        pytest.skip("reads the module's exports, made once with the C extension")


def _run(tool: str, args: List[str], cwd: str) -> subprocess.CompletedProcess:
    return subprocess.run([tool, *args], cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT)


def _copy(src: str, dest: str) -> None:
    """A writable copy of a golden input folder."""
    shutil.copytree(src, dest)
    for root, dirs, files in os.walk(dest):
        for name in dirs + files:
            p = os.path.join(root, name)
            os.chmod(p, os.stat(p).st_mode | stat.S_IWUSR)


class Rank(NamedTuple):
    label: str      # case, or case/rankN for a cluster case
    case: str
    prof: str       # our exported PROF directory
    golden_db: str  # the reference's msprof.db for it


def _export_db(case: str, dest: str) -> List[Rank]:
    """Copy a case's input, export our msprof_{ts}.db; one Rank per PROF directory."""
    inputs = os.listdir(os.path.join(GOLDEN, case, "input"))
    assert len(inputs) == 1, inputs
    top = os.path.join(dest, inputs[0])
    _copy(os.path.join(GOLDEN, case, "input", inputs[0]), top)
    assert cli.main(["export", "db", "-dir", top]) == 0
    if inputs[0].startswith("PROF_"):
        return [Rank(case, case, top, os.path.join(GOLDEN, case, "cpp", "msprof.db"))]
    ranks = []
    for prof in sorted(glob.glob(os.path.join(top, "PROF_*"))):
        with open(_info_json(prof)[0], encoding="utf-8") as f:
            rank = json.load(f)["rank_id"]
        golden = [p for p in glob.glob(os.path.join(GOLDEN, case, f"*_rank{rank}", "msprof.db"))
                  if not os.path.basename(os.path.dirname(p)).startswith("python")]
        assert len(golden) == 1, golden
        ranks.append(Rank(f"{case}/rank{rank}", case, prof, golden[0]))
    return ranks


def _info_json(prof: str) -> Tuple[str, str]:
    """The PROF's first device info.json.N, and where it goes in the cluster layout. A collection with
    no device folder (degraded_d) lends its host/info.json as device_0's: the tool takes a PROF only
    with one, and both sides get the same."""
    found = sorted(glob.glob(os.path.join(prof, "device_*", "info.json.*")))
    if found:
        return found[0], os.path.relpath(found[0], prof)
    return os.path.join(prof, "host", "info.json"), os.path.join("device_0", "info.json.0")


def _layout(ranks: List[Rank], side: str, root: str) -> str:
    """The cluster folder the tool scans: one PROF per rank holding its info.json (rank_id set to the
    rank's index) and the db, ours or the reference's."""
    os.makedirs(root)
    for index, r in enumerate(ranks):
        prof = os.path.join(root, f"PROF_{index:06d}_20231125090304544_RANK")
        src, rel = _info_json(r.prof)
        with open(src, encoding="utf-8") as f:
            info = json.load(f)
        info["rank_id"] = index
        os.makedirs(os.path.dirname(os.path.join(prof, rel)))
        with open(os.path.join(prof, rel), "w", encoding="utf-8") as f:
            json.dump(info, f)
        if side == "ours":
            dbs = glob.glob(os.path.join(r.prof, "msprof_*.db"))
            assert len(dbs) == 1, dbs
            db = dbs[0]
        else:
            db = r.golden_db
        shutil.copy(db, os.path.join(prof, DB_NAME))
    return root


Tables = Dict[str, Tuple[List[str], List[tuple]]]


def _tables(db: str) -> Tables:
    import sqlite3
    with sqlite3.connect(db) as c:
        out = {}
        for (name,) in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
            cols = [r[1] for r in c.execute(f'PRAGMA table_info("{name}")')]
            out[name] = (cols, c.execute(f'SELECT * FROM "{name}"').fetchall())
    return out


class Recipe(NamedTuple):
    tables: Tables
    log: str


class Clusters(NamedTuple):
    recipes: Dict[Tuple[str, str, str], Recipe]  # (group, side, mode) -> the recipe's output
    labels: Dict[str, List[str]]                 # group -> its ranks' labels, rank 0 first


@pytest.fixture(scope="module")
def clusters(tmp_path_factory) -> Clusters:
    """Each recipe run on two clusters per side ('ours', 'golden'): group 'exact' holds EXACT_CASES,
    'degraded' the damaged inputs."""
    tool = _tool()
    base = tmp_path_factory.mktemp("msprof_analyze")
    groups = {"exact": EXACT_CASES, "degraded": DEGRADED_CASES}
    ranks = {g: [r for case in cases for r in _export_db(case, str(base / "export" / case))]
             for g, cases in groups.items()}
    jobs = []
    for g in groups:
        for side in ("ours", "golden"):
            folder = _layout(ranks[g], side, str(base / g / side))
            for mode in MODES:
                jobs.append(((g, side, mode), folder, str(base / g / f"{side}_{mode}")))

    def one(job):
        key, folder, out = job
        res = _run(tool, ["cluster", "-d", folder, "-m", key[2], "-o", out], cwd=str(base))
        log = res.stdout + res.stderr
        assert res.returncode == 0, log
        n = len(ranks[key[0]])
        assert f"Finish allocate profiling data: {n} ranks, data type: db, profiling type: msprof" in log, log
        db = os.path.join(out, "cluster_analysis_output", "cluster_analysis.db")
        assert os.path.isfile(db), log
        return key, Recipe(_tables(db), log)

    with ThreadPoolExecutor(2) as pool:
        recipes = dict(pool.map(one, jobs))
    return Clusters(recipes, {g: [r.label for r in rs] for g, rs in ranks.items()})


def _multiset(rows: List[tuple]) -> List[str]:
    return sorted(map(repr, rows))


@pytest.mark.parametrize("mode", MODES)
def test_cluster_recipe_tables_equal_the_reference(mode, clusters):
    """Every table of the recipe, all ranks together and per rank, row for row (in any order: rows of
    equal totals sort by the STRING_IDS ids, which differ between the two databases)."""
    ours = clusters.recipes[("exact", "ours", mode)].tables
    gold = clusters.recipes[("exact", "golden", mode)].tables
    assert sorted(ours) == sorted(gold) and ours
    n_ranks = len(clusters.labels["exact"])
    for name in gold:
        cols, rows = ours[name]
        gcols, grows = gold[name]
        assert cols == gcols, name
        assert rows, f"{mode} {name}: no rows"
        assert _multiset(rows) == _multiset(grows), f"{mode} {name}: {len(rows)} rows here, {len(grows)} golden"
        rank_col = [i for i, c in enumerate(cols) if c.lower() == "rank"]
        if rank_col:
            assert len({r[rank_col[0]] for r in rows}) == n_ranks, f"{mode} {name}: a rank has no rows"


def _per_rank(recipe: Recipe) -> Dict[str, Dict[int, List[tuple]]]:
    out: Dict[str, Dict[int, List[tuple]]] = {}
    for name, (cols, rows) in recipe.tables.items():
        rank_col = [i for i, c in enumerate(cols) if c.lower() == "rank"]
        if rank_col:
            by_rank: Dict[int, List[tuple]] = defaultdict(list)
            for r in rows:
                by_rank[int(r[rank_col[0]])].append(r)
            out[name] = by_rank
    return out


@pytest.mark.parametrize("mode", MODES)
def test_cluster_recipe_on_damaged_inputs_keeps_at_least_the_reference(mode, clusters):
    """Per rank, the same rows as on the reference's db, except where the reference's db lost a
    table our export keeps (AT_LEAST_DIFFERENCES, listed exactly)."""
    labels = clusters.labels["degraded"]
    ours = _per_rank(clusters.recipes[("degraded", "ours", mode)])
    gold = _per_rank(clusters.recipes[("degraded", "golden", mode)])
    assert ours.keys() == gold.keys() and ours
    differ = set()
    for name in ours:
        for index, label in enumerate(labels):
            mine, theirs = ours[name].get(index, []), gold[name].get(index, [])
            if _multiset(mine) != _multiset(theirs):
                assert not theirs and mine, f"{mode} {name} {label}: {len(mine)} rows here, {len(theirs)} golden"
                differ.add((label, mode))
    assert differ == {d for d in AT_LEAST_DIFFERENCES if d[1] == mode}


# ------------------------------------------------------------------------------------------------
# advisor

ADVISOR_CASES = INTACT_CASES
# The reference's C++ CSV writer does not quote a comma in an op name (docs/exports.md): the row gets
# an extra column, the advisor reads a task type as the duration, and its Vector analysis stops. Our
# report equals the reference's with those rows quoted, and these are the cases that have one.
UNQUOTED_COMMA_CASES = {"910b_mixed": ["model/ffn,gate/ReduceSum_17"],
                        "910b_straddle": ["model/ffn,gate/LayerNorm_2"]}
_LOG_PREFIX = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\]")


def _golden_outputs(case: str, prof: str) -> List[str]:
    """The reference's exports put back under their msprof names into prof/mindstudio_profiler_output;
    returns the op_summary rows that had to be re-quoted."""
    out = os.path.join(prof, "mindstudio_profiler_output")
    os.makedirs(out)
    repaired = []
    for src in sorted(glob.glob(os.path.join(GOLDEN, case, "cpp", "*"))):
        name = os.path.basename(src)
        stem, ext = os.path.splitext(name)
        if name == "msprof.db":
            continue
        dest = os.path.join(out, name if name == "README.txt" else f"{stem}_20231125090304{ext}")
        if stem != "op_summary":
            shutil.copy(src, dest)
            continue
        with open(src, encoding="utf-8", newline="") as f:
            lines = f.read().splitlines(keepends=True)
        width = len(next(csv.reader(lines[:1])))
        fixed = []
        for line in lines:
            row = next(csv.reader([line]))
            if len(row) == width + 1:  # the op name (column 5) split at its comma
                row[4:6] = [row[4] + "," + row[5]]
                buf = io.StringIO()
                csv.writer(buf, lineterminator=line[len(line.rstrip("\r\n")):]).writerow(row)
                line = buf.getvalue()
                repaired.append(row[4])
            fixed.append(line)
        with open(dest, "w", encoding="utf-8", newline="") as f:
            f.write("".join(fixed))
    return repaired


def _report(out: str) -> List[str]:
    """The advisor's HTML report as its lines of text (no time stamps or paths in it)."""
    import html
    pages = glob.glob(os.path.join(out, "mstt_advisor_*.html"))
    assert len(pages) == 1, os.listdir(out)
    with open(pages[0], encoding="utf-8") as f:
        text = html.unescape(re.sub(r"<[^>]+>", "\n", f.read()))
    return [line.strip() for line in text.splitlines() if line.strip()]


class Advice(NamedTuple):
    prof: str
    report: List[str]
    errors: List[str]  # ERROR lines of the console, time stamps removed
    log: str


class Advised(NamedTuple):
    reports: Dict[Tuple[str, str], Advice]  # (case, side) -> the advisor on our ('ours') or the reference's exports
    repaired: Dict[str, List[str]]          # case -> the op names of the reference's rows that were re-quoted


@pytest.fixture(scope="module")
def advised(tmp_path_factory) -> Advised:
    tool = _tool()
    base = tmp_path_factory.mktemp("advisor")
    jobs = []
    repaired: Dict[str, List[str]] = {}
    for case in ADVISOR_CASES:
        for side in ("ours", "golden"):
            dest = base / side / case
            _copy(os.path.join(GOLDEN, case, "input"), str(dest))
            prof = glob.glob(os.path.join(str(dest), "PROF_*"))[0]
            if side == "ours":
                assert cli.main(["export", "summary", "-dir", prof]) == 0
                assert cli.main(["export", "timeline", "-dir", prof]) == 0
            else:
                repaired[case] = _golden_outputs(case, prof)
            out = base / f"{side}_out" / case
            out.mkdir(parents=True)
            jobs.append(((case, side), prof, str(out)))

    def one(job):
        key, prof, out = job
        # cwd: the advisor also writes operator_tuning_file_*.cfg into the current directory
        res = _run(tool, ["advisor", "all", "-d", prof, "-o", out, "-pt", "msprof"], cwd=out)
        log = res.stdout + res.stderr
        assert res.returncode == 0, log
        assert "Traceback" not in log, log
        errors = sorted(_LOG_PREFIX.sub("", line) for line in log.splitlines() if "[ERROR]" in line)
        return key, Advice(prof, _report(out), errors, log)

    with ThreadPoolExecutor(2) as pool:
        return Advised(dict(pool.map(one, jobs)), repaired)


def _op_names(prof: str) -> set:
    files = glob.glob(os.path.join(prof, "mindstudio_profiler_output", "op_summary_*.csv"))
    assert len(files) == 1, files
    with open(files[0], encoding="utf-8", newline="") as f:
        return {row["Op Name"] for row in csv.DictReader(f)}


@pytest.mark.parametrize("case", ADVISOR_CASES)
def test_advisor_reads_our_exports_as_the_reference_s(case, advised):
    ours, gold = advised.reports[(case, "ours")], advised.reports[(case, "golden")]
    # no error of its own on our files: those it logs, it logs on the reference's files too
    assert set(ours.errors) <= set(gold.errors), ours.errors
    # it read our op_summary: its AI Core analysis names our operators
    assert "AI Core Performance Analysis" in ours.report
    assert _op_names(ours.prof) & set(ours.report)
    assert ours.report == gold.report


def test_the_reference_s_unquoted_commas_are_the_only_repair(advised):
    assert {case: rows for case, rows in advised.repaired.items() if rows} == UNQUOTED_COMMA_CASES
