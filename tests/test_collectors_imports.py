"""The collectors sit at the start of the pipeline (collect -> parse -> store -> export): read from
their source, no module under collectors/ imports the import pipeline, the store, the exporters or
the commands above them (the CLI composes `collect --all`), their imports among themselves form no
cycle, and none of them is imported lazily from inside a function, the way a cycle gets hidden."""
from __future__ import annotations

import ast
import os
from typing import Dict, Iterator, List, Optional, Set, Tuple

COLLECTORS = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "collectors")
PACKAGE = "msprof_kit.collectors"  # setup.py maps collectors/ to this name
# msprof_kit modules and packages a collector must not import: what comes after collecting
FORBIDDEN = ("importer", "exporters", "store", "tables", "ingest", "sources", "show", "plot",
             "compare", "cli")

Import = Tuple[str, int, bool]  # (absolute module name, line, inside a function)


def _modules() -> Dict[str, str]:
    """Module name -> file, for every .py file under collectors/."""
    found: Dict[str, str] = {}
    for root, dirs, files in os.walk(COLLECTORS):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__pycache__")))
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            rel = os.path.relpath(os.path.join(root, name), COLLECTORS)[:-len(".py")].split(os.sep)
            if rel[-1] == "__init__":
                rel = rel[:-1]
            found[".".join([PACKAGE, *rel])] = os.path.join(root, name)
    return found


def _resolve(module: str, is_package: bool, level: int, target: Optional[str]) -> str:
    """The absolute name of a `from ...target import` written in `module`."""
    if level == 0:
        return target or ""
    parts = module.split(".")
    base = parts if is_package else parts[:-1]
    base = base[:len(base) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def _imports(module: str, path: str) -> Iterator[Import]:
    """Every module `module` imports, anywhere in the file (TYPE_CHECKING blocks and functions too).
    `from package import name` counts as importing package.name (which may be a module) and the
    package itself, unless that is a package `module` is part of."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    is_package = os.path.basename(path) == "__init__.py"

    def visit(node: ast.AST, in_function: bool) -> Iterator[Import]:
        for child in ast.iter_child_nodes(node):
            inside = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                for alias in child.names:
                    yield alias.name, child.lineno, inside
            elif isinstance(child, ast.ImportFrom):
                base = _resolve(module, is_package, child.level, child.module)
                if not (module + ".").startswith(base + "."):  # its own package, initialised first anyway
                    yield base, child.lineno, inside
                for alias in child.names:  # a submodule, or a name in `base` (harmless either way)
                    yield f"{base}.{alias.name}", child.lineno, inside
            yield from visit(child, inside)

    yield from visit(tree, False)


def _graph() -> Tuple[Dict[str, str], Dict[str, List[Import]]]:
    modules = _modules()
    return modules, {name: list(_imports(name, path)) for name, path in modules.items()}


def _forbidden(name: str) -> Optional[str]:
    for room in FORBIDDEN:
        full = f"msprof_kit.{room}"
        if name == full or name.startswith(full + "."):
            return full
    return None


def _cycle(edges: Dict[str, Set[str]]) -> Optional[List[str]]:
    """One import cycle among the modules of `edges`, as a path that ends where it starts, or None."""
    state: Dict[str, int] = {}  # 1: on the current path, 2: done
    path: List[str] = []

    def walk(node: str) -> Optional[List[str]]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = walk(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(edges):
        if start not in state:
            found = walk(start)
            if found:
                return found
    return None


def test_the_folder_is_read() -> None:
    modules, graph = _graph()
    assert {f"{PACKAGE}.acl_codes", f"{PACKAGE}.acljson", f"{PACKAGE}.local", f"{PACKAGE}.infer.run"} <= set(modules)
    assert f"{PACKAGE}.acl_codes" in {name for name, _, _ in graph[f"{PACKAGE}.acljson"]}


def test_no_collector_imports_what_comes_after_collecting() -> None:
    modules, graph = _graph()
    bad = [f"{os.path.relpath(modules[m], os.path.dirname(COLLECTORS))}:{line} imports {name}"
           for m, imports in graph.items() for name, line, _ in imports if _forbidden(name)]
    assert bad == [], "collectors must not import the import pipeline, the store, the exporters or the CLI " \
                      "(the CLI runs collect --all):\n" + "\n".join(bad)


def test_collector_imports_form_no_cycle() -> None:
    modules, graph = _graph()
    edges = {m: {name for name, _, _ in imports if name in modules and name != m} for m, imports in graph.items()}
    assert _cycle(edges) is None, "import cycle: " + " -> ".join(_cycle(edges) or [])


def test_no_collector_is_imported_lazily_by_another() -> None:
    modules, graph = _graph()
    lazy = [f"{os.path.relpath(modules[m], os.path.dirname(COLLECTORS))}:{line} imports {name} inside a function"
            for m, imports in graph.items() for name, line, inside in imports if inside and name in modules]
    assert lazy == [], "\n".join(lazy)


def test_the_checks_catch_what_they_look_for() -> None:
    assert _forbidden("msprof_kit.importer") and _forbidden("msprof_kit.exporters.run")
    assert _forbidden("msprof_kit.store") and _forbidden("msprof_kit.ingest.assemble") and _forbidden("msprof_kit.ingest.job")
    assert not _forbidden("msprof_kit.errors") and not _forbidden("msprof_kit.storehouse")
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None
    assert _resolve(f"{PACKAGE}.local", False, 2, "importer") == "msprof_kit.importer"
    assert _resolve(f"{PACKAGE}.infer", True, 1, "run") == f"{PACKAGE}.infer.run"
    assert _resolve(f"{PACKAGE}.infer.run", False, 2, "acl_runtime") == f"{PACKAGE}.acl_runtime"
