"""The import graph follows the data flow (DESIGN.md "Data flow"; issue 24): every module of
msprof_kit/, parsers/ and collectors/ sits in one room, and a module imports only from its own
room and the rooms below it, never upwards, never sideways, and never in a circle. Imports inside
functions count as much as those at the top of a file.

    cli, __main__                                       everything below
    views       show, plot, compare                     cluster, sources, exporters, store, base
    cluster     cluster/ (msprof-kit cluster's phases)  ingest, sources, exporters, layout, store, base
    sources     sources/                                exporters, layout, store, base
    exporters   exporters/                              store, base
    ingest      importer, ingest/                       layout, store, parsers, base
    collectors  collectors/                             layout, base
    layout      layout (where a collection's files      parsers (its file helpers), base
                are: discovery, control files)
    store       store, store/ (paths, columns, writer,  base
                read, unified, pages, before_start)
    parsers     parsers/ (bytes -> columns)             base
    base        errors, progress, arrays, intervals, ... base

Run this file as a script to print every edge with its rooms and what is wrong with it."""
from __future__ import annotations

import ast
import os
import sys
from typing import Dict, FrozenSet, Iterator, List, Optional, Set, Tuple

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# setup.py's package_dir: the folders below ROOT and the packages they install as
PACKAGE_DIRS = {"msprof_kit": "msprof_kit", "parsers": "msprof_kit.parsers", "collectors": "msprof_kit.collectors"}
EXTENSIONS = {"msprof_kit._native"}  # compiled modules (native/_native.c), no .py file

# Each module's room, by name below msprof_kit (a name ending in ".*" takes a whole package). A
# module in no room fails the test: place a new module deliberately.
ROOMS: Dict[str, Tuple[str, ...]] = {
    "base": ("", "_native", "errors", "progress", "interrupt", "arrays", "intervals", "schema", "losses", "memory",
             "timebase", "metrics", "native_impl", "forked", "spill", "files", "cxx_order"),
    "parsers": ("parsers", "parsers.*"),
    "store": ("store", "store.*"),
    "layout": ("layout",),
    "ingest": ("ingest", "ingest.*", "importer"),
    "exporters": ("exporters", "exporters.*"),
    "sources": ("sources", "sources.*"),
    "cluster": ("cluster", "cluster.*"),
    "views": ("show", "show_options", "plot", "plot.*", "compare"),
    "cluster": ("cluster", "cluster.*"),
    "collectors": ("collectors", "collectors.*"),
    "cli": ("cli", "__main__"),
}
# The rooms a room's modules may import from (its own included).
MAY_IMPORT: Dict[str, FrozenSet[str]] = {
    "base": frozenset({"base"}),
    "parsers": frozenset({"parsers", "base"}),
    "store": frozenset({"store", "base"}),
    "layout": frozenset({"layout", "parsers", "base"}),
    "ingest": frozenset({"ingest", "layout", "store", "parsers", "base"}),
    "exporters": frozenset({"exporters", "store", "base"}),
    "sources": frozenset({"sources", "exporters", "layout", "store", "base"}),
    "views": frozenset({"views", "cluster", "sources", "exporters", "store", "base"}),
    "cluster": frozenset({"cluster", "ingest", "sources", "exporters", "layout", "store", "base"}),
    "collectors": frozenset({"collectors", "layout", "base"}),
    "cli": frozenset(ROOMS),
}
# Groups of modules that must not import each other, named as in ROOMS (".*" takes a package): the
# two ingest pipelines, the PROF build and the legacy JOB one, share what they share through the
# shared ingest modules (and the rooms below), not through each other. A module of a pipeline that
# moves or splits is named here by its new name.
APART: Tuple[Tuple[Tuple[str, ...], Tuple[str, ...]], ...] = (
    (("ingest.assemble", "ingest.host", "ingest.names", "ingest.association", "ingest.tensors", "ingest.api_windows",
      "ingest.device", "ingest.pairing", "ingest.matching", "ingest.pmu", "ingest.pmu_blocks",
      "ingest.overlap"),  # the PROF build's
     ("ingest.job", "ingest.job_links")),  # the legacy JOB pipeline's
)

# Edges that break the rules for a while, each with why and what removes it: (importer, imported) ->
# reason. An entry whose edge is gone fails the test, so that it leaves with the edge. None today.
ALLOWED: Dict[Tuple[str, str], str] = {}

Edge = Tuple[str, str]


def module_files() -> Dict[str, str]:
    """Module name (below msprof_kit, '' for msprof_kit itself) -> its file."""
    out: Dict[str, str] = {}
    for folder, package in PACKAGE_DIRS.items():
        top = os.path.join(ROOT, folder)
        for base, dirs, files in os.walk(top):
            dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__pycache__")))
            for name in sorted(files):
                if not name.endswith(".py"):
                    continue
                parts = os.path.relpath(os.path.join(base, name[:-3]), top).split(os.sep)
                if parts[-1] == "__init__":
                    parts = parts[:-1]
                full = ".".join([package] + [p for p in parts if p != "."])
                out[_short(full)] = os.path.join(base, name)
    return out


def _short(full: str) -> str:
    return "" if full == "msprof_kit" else full[len("msprof_kit."):]


def _full(short: str) -> str:
    return "msprof_kit" + ("." + short if short else "")


def imports_of(short: str, path: str, known: Set[str]) -> Iterator[Tuple[str, int]]:
    """(imported module, line) of every import of a msprof_kit module in a file, at any depth."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), filename=path)
    package = _full(short) if path.endswith("__init__.py") else _full(short).rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [(a.name, None) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            targets = [(module, a.name) for a in node.names]
        else:
            continue
        for module, name in targets:
            top = module.split(".")[0]
            if top in ("parsers", "collectors"):
                yield f"<top-level {top}: import msprof_kit.{module} instead>", node.lineno
                continue
            if top != "msprof_kit":
                continue
            if name is not None and _short(f"{module}.{name}") in known:  # from package import submodule
                module = f"{module}.{name}"
            target = _short(module) if module != "msprof_kit" else ""
            while target and target not in known:  # a name inside a module: the module
                target = target.rpartition(".")[0]
            if target != short:
                yield target, node.lineno


def import_graph() -> Dict[Edge, List[str]]:
    """Every edge (importer, imported) with the places (file:line) it is made."""
    files = module_files()
    known = set(files) | {_short(e) for e in EXTENSIONS}
    edges: Dict[Edge, List[str]] = {}
    for short, path in sorted(files.items()):
        for target, line in imports_of(short, path, known):
            edges.setdefault((short, target), []).append(f"{os.path.relpath(path, ROOT)}:{line}")
    return edges


def named(short: str, patterns: Tuple[str, ...]) -> bool:
    """Whether a module is one of `patterns` (a name, or a package's modules: "ingest.*")."""
    return any(short == p or (p.endswith(".*") and short.startswith(p[:-1])) for p in patterns)


def room_of(short: str) -> Optional[str]:
    for room, names in ROOMS.items():
        if named(short, names):
            return room
    return None


def kept_apart(a: str, b: str) -> bool:
    """Whether `a` and `b` sit on the two sides of one APART pair."""
    return any((named(a, one) and named(b, two)) or (named(a, two) and named(b, one)) for one, two in APART)


def _name(short: str) -> str:
    return short or "msprof_kit"


def wrong(edge: Edge) -> Optional[str]:
    """What is wrong with an edge by the rooms' rules, or None."""
    a, b = edge
    if b.startswith("<"):
        return b[1:-1]
    ra, rb = room_of(a), room_of(b)
    if ra is None or rb is None:
        return f"{_name(a if ra is None else b)} is in no room (tests/test_layering.py ROOMS)"
    if rb not in MAY_IMPORT[ra]:
        return f"{ra} may not import {rb}"
    if kept_apart(a, b):
        return f"{_name(a)} and {_name(b)} share code through shared modules, not each other"
    return None


def circled(edges: Set[Edge]) -> List[List[str]]:
    """The modules that import each other in a circle: the strongly connected sets (Tarjan), sorted."""
    succ: Dict[str, List[str]] = {}
    for a, b in sorted(edges):
        succ.setdefault(a, []).append(b)
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on: Set[str] = set()
    found: List[List[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in succ.get(v, []):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(succ):
        if v not in index:
            visit(v)
    return sorted(found)


def cycles(edges: Set[Edge]) -> List[List[str]]:
    """One import circle through each set of modules that import each other in a circle."""
    succ: Dict[str, List[str]] = {}
    for a, b in sorted(edges):
        succ.setdefault(a, []).append(b)
    return [_circle(group, succ) for group in circled(edges)]


def in_circle(edges: Set[Edge]) -> Set[Edge]:
    """The edges between two modules of one circle."""
    groups = {m: i for i, group in enumerate(circled(edges)) for m in group}
    return {(a, b) for a, b in edges if a in groups and groups.get(b) == groups[a]}


def _circle(group: List[str], succ: Dict[str, List[str]]) -> List[str]:
    """A shortest path from the group's first module back to itself, inside the group."""
    start, inside = group[0], set(group)
    came: Dict[str, str] = {}
    todo = [start]
    while todo:
        v = todo.pop(0)
        for w in succ.get(v, []):
            if w == start:
                path = [v]
                while path[-1] != start:
                    path.append(came[path[-1]])
                return path[::-1] + [start]
            if w in inside and w not in came:
                came[w] = v
                todo.append(w)
    return group


GRAPH = import_graph()


def test_every_module_has_a_room():
    unplaced = sorted(_name(m) for m in module_files() if room_of(m) is None)
    assert not unplaced, f"modules in no room (add them to ROOMS in tests/test_layering.py): {unplaced}"


def test_no_import_goes_upwards_or_sideways():
    bad = [f"{_name(a)} -> {_name(b)}: {why} ({', '.join(GRAPH[(a, b)])})"
           for (a, b) in sorted(GRAPH) for why in [wrong((a, b))] if why and (a, b) not in ALLOWED]
    assert not bad, "imports against the layering:\n" + "\n".join(bad)


def test_no_import_circle():
    kept = {e for e in GRAPH if e not in ALLOWED}
    found = cycles(kept)
    assert not found, "import circles:\n" + "\n".join(" -> ".join(_name(m) for m in c) for c in found)


def test_the_allow_list_is_current():
    """An allowed edge that is gone is taken off the list; one that breaks no rule is not on it."""
    stale = [f"{_name(a)} -> {_name(b)}" for (a, b) in sorted(ALLOWED) if (a, b) not in GRAPH]
    assert not stale, "remove these entries from ALLOWED in tests/test_layering.py:\n" + "\n".join(stale)
    closing = in_circle(set(GRAPH))
    needless = [f"{a} -> {b}" for (a, b) in sorted(ALLOWED) if wrong((a, b)) is None and (a, b) not in closing]
    assert not needless, f"allowed edges that break no rule and close no circle: {needless}"


# parsers/ is bytes -> columns: the modules that reach files, and the calls that open or read one
FILE_MODULES = frozenset({"os", "io", "pathlib", "mmap", "glob", "shutil", "tempfile", "fileinput", "sqlite3"})
FILE_CALLS = frozenset({"open", "fdopen", "fromfile", "memmap", "load", "loadtxt", "genfromtxt", "read_bytes",
                        "read_text", "readinto"})


def file_access(path: str) -> List[str]:
    """Where (file:line) a module imports a file-reaching module or calls something that opens or
    reads a file (`open(...)`, `os.open`, `io.open`, `np.fromfile`, `f.readinto`, ...)."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), filename=path)
    where = os.path.relpath(path, ROOT)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [f"{where}:{node.lineno}: import {a.name}" for a in node.names
                      if a.name.split(".")[0] in FILE_MODULES]
        elif isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] in FILE_MODULES:
            found.append(f"{where}:{node.lineno}: from {node.module} import ...")
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if name in FILE_CALLS:
                found.append(f"{where}:{node.lineno}: {name}(...)")
    return found


def test_parsers_open_no_file():
    """parsers/ decodes bytes it is given; reading files is the ingest's (ingest/streams.py)."""
    found = [hit for short, path in sorted(module_files().items()) if room_of(short) == "parsers"
             for hit in file_access(path)]
    assert not found, "parsers/ reaches files (move the reading to msprof_kit/ingest/):\n" + "\n".join(found)


def test_file_access_is_seen(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("import os\nfrom io import BytesIO\nx = open('f')\ny = np.fromfile(f)\nz = b.split()\n")
    assert [hit.split(": ", 1)[1] for hit in file_access(str(sample))] == [
        "import os", "from io import ...", "open(...)", "fromfile(...)"]


@pytest.mark.parametrize("edges, circle", [
    ({("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")}, ["a", "b", "c", "a"]),
    ({("a", "b"), ("b", "c")}, None),
])
def test_cycles_finds_a_circle(edges, circle):
    assert cycles(edges) == ([circle] if circle else [])


def test_the_rules_catch_a_backward_import():
    assert wrong(("store", "ingest.assemble")) == "store may not import ingest"
    assert wrong(("exporters.run", "importer")) == "exporters may not import ingest"
    assert wrong(("sources.loading", "importer")) == "sources may not import ingest"
    assert wrong(("ingest.host", "exporters.summary")) == "ingest may not import exporters"
    assert wrong(("ingest.job", "ingest.assemble")) == \
        "ingest.job and ingest.assemble share code through shared modules, not each other"
    assert wrong(("ingest.device", "ingest.job_links")) == \
        "ingest.device and ingest.job_links share code through shared modules, not each other"
    assert wrong(("ingest.job", "ingest.tasks")) is None and wrong(("ingest.assemble", "ingest.streams")) is None
    assert wrong(("ingest.assemble", "store")) is None and wrong(("exporters.scope", "exporters.context")) is None


if __name__ == "__main__":
    closing = in_circle(set(GRAPH))
    for (a, b) in sorted(GRAPH):
        why = wrong((a, b)) or ("in a circle" if (a, b) in closing else "")
        tag = f"  [{why}{'; allowed: ' + ALLOWED[(a, b)] if (a, b) in ALLOWED else ''}]" if why else ""
        print(f"{_name(a)} ({room_of(a)}) -> {_name(b)} ({room_of(b)}){tag}")
    sys.exit(0)
