"""The project's modules import each other without a cycle (issue #22), computed from the source
with `ast`. Every import counts, wherever it is (a function-level import is still an edge, and so
is one under TYPE_CHECKING), and so does a string naming a module (an `importlib.import_module`
target); a `-m MODULE` argument starts a process, not an import, and a `module:factory` registry
target is a plugin table, resolved by name as entry points are."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("sim", "conformance", "reference_impl", "reports", "sessiongate")


def modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _named(name: str, known: dict[str, Path]) -> str | None:
    """The project module `name` is (or is in: `pkg.mod.attr` is pkg.mod), or None."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def _targets(module: str, path: Path, tree: ast.Module) -> list[tuple[str, int]]:
    """(dotted name, line) of everything `module` imports or names as a module."""
    found: list[tuple[str, int]] = []
    minus_m: set[int] = set()  # ids of string nodes that follow a "-m" in a list or tuple
    for node in ast.walk(tree):
        if isinstance(node, ast.List | ast.Tuple):
            for before, item in zip(node.elts, node.elts[1:], strict=False):
                if isinstance(before, ast.Constant) and before.value == "-m":
                    minus_m.add(id(item))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
                package = package[: len(package) - node.level + 1]
                base = ".".join([*package, base] if base else package)
            found += [(f"{base}.{alias.name}", node.lineno) for alias in node.names]  # a submodule, or a name in base
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in minus_m
              and node.value.split(".")[0] in PACKAGES and node.value.replace(".", "").replace("_", "").isalnum()):
            found.append((node.value, node.lineno))
    return found


def import_graph() -> dict[str, set[str]]:
    known = modules()
    graph: dict[str, set[str]] = {}
    for module, path in known.items():
        edges = set()
        for name, _ in _targets(module, path, ast.parse(path.read_text(encoding="utf-8"))):
            target = _named(name, known)
            if target and target != module:
                edges.add(target)
        graph[module] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_project_imports_without_a_cycle() -> None:
    graph = import_graph()
    found = cycles(graph)
    described = ["; ".join(f"{m} -> {', '.join(sorted(graph[m] & set(c)))}" for m in c) for c in found]
    assert not found, "import cycles:\n" + "\n".join(described)


def test_every_project_import_names_a_module_of_the_tree() -> None:
    """A stale path (a module since moved) would import an installed copy, or fail late."""
    known = modules()
    stale = []
    for path in known.values():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and not node.level and node.module and node.module.split(".")[0] in PACKAGES:
                if node.module not in known:
                    stale.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.module}")
            elif isinstance(node, ast.Import):
                stale += [f"{path.relative_to(ROOT)}:{node.lineno}: {a.name}" for a in node.names
                          if a.name.split(".")[0] in PACKAGES and a.name not in known]
    assert not stale, "\n".join(stale)


def test_the_cycle_finder_finds_one() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
