"""No import circle anywhere in reference_server/: its modules read top-down.

The graph is built from the source with `ast` (nothing is imported, so it costs milliseconds):
one node per module of the package (a package is its `__init__.py`), one edge per import of
another module of the package. What counts as an import, and why:

- every `import` and `from ... import` statement of a module, wherever it is: at module level,
  inside a function, and under `if TYPE_CHECKING:`. A circle that only the type checker or a
  late call walks is still a circle: the two modules cannot be read, tested or moved one
  without the other, and the next runtime import along it breaks at import time. (Both circles
  this test was written for hid behind `if TYPE_CHECKING:`.)
- relative imports (`from .x import y`, `from . import x`) resolve against the importer's
  package; `from p import name` is an edge to the submodule `p.name` when there is one, else
  to `p` itself (a name its `__init__.py` defines or re-exports).
- importing `a.b.c` runs `a/__init__.py` and `a/b/__init__.py` first: those are edges too,
  except for the packages the importer itself belongs to (they are already being initialised
  when it runs, so a package's `__init__.py` re-exporting its submodules is no circle).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from itertools import pairwise
from pathlib import Path

PACKAGE = "reference_server"
ROOT = Path(__file__).resolve().parents[2]

Graph = Mapping[str, Mapping[str, int]]  # module -> {imported module: line of the import}


def modules(root: Path, package: str) -> dict[str, tuple[Path, bool]]:
    """Every module of `package` by dotted name: its file, and whether it is a package."""
    found: dict[str, tuple[Path, bool]] = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return found


def _imported(node: ast.Import | ast.ImportFrom, here: str, known: Mapping[str, object]) -> Iterable[str]:
    """The modules of the package that one import statement names."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
        return
    if node.level:  # relative: `here` is the importer's package
        parts = here.split(".")[: len(here.split(".")) - node.level + 1]
        base = ".".join([*parts, *([node.module] if node.module else [])])
    else:
        base = node.module or ""
    for alias in node.names:
        submodule = f"{base}.{alias.name}"
        yield submodule if submodule in known else base


def import_graph(root: Path = ROOT, package: str = PACKAGE) -> dict[str, dict[str, int]]:
    known = modules(root, package)

    def owner(name: str) -> str | None:  # the longest known module `name` is in
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, dict[str, int]] = {}
    for name, (path, is_package) in known.items():
        here = name if is_package else name.rpartition(".")[0]
        edges: dict[str, int] = {}
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            for target in filter(None, map(owner, _imported(node, here, known))):
                edges.setdefault(target, node.lineno)
                parent = target
                while "." in parent:  # the packages above the target run first
                    parent = parent.rpartition(".")[0]
                    if parent in known and not f"{name}.".startswith(f"{parent}."):
                        edges.setdefault(parent, node.lineno)
        edges.pop(name, None)
        graph[name] = edges
    return graph


def cycles(graph: Graph) -> list[list[str]]:
    """One shortest circle through each strongly connected group of modules (Tarjan's
    algorithm, then a breadth-first search inside the group)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in graph.get(node, {}):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = set()
            while (member := stack.pop()) != node:
                group.add(member)
            groups.append(group | {node})

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [_shortest_circle(graph, group) for group in groups if len(group) > 1]


def _shortest_circle(graph: Graph, group: set[str]) -> list[str]:
    """A shortest circle from the group's first module back to it, inside the group."""
    start = min(group)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        reached = []
        for node in frontier:
            for target in sorted(graph[node]):
                if target == start:
                    return [*paths[node], start]
                if target in group and target not in paths:
                    paths[target] = [*paths[node], target]
                    reached.append(target)
        frontier = reached
    raise AssertionError(f"{sorted(group)} is no strongly connected group")


def shown(cycle: list[str], graph: Graph) -> str:
    steps = [f"{a} -> {b} (line {graph[a][b]} of {a})" for a, b in pairwise(cycle)]
    return "\n  ".join(steps)


def test_the_graph_sees_every_kind_of_import():
    graph = import_graph()
    engine = "reference_server.engine"
    assert "reference_server.assembly" in graph["reference_server.serving"]  # absolute
    assert "reference_server.server_tools.citing" in graph["reference_server.server_tools.loop"]  # relative
    assert f"{engine}.tiny_vlm" in graph[f"{engine}.vision_worker"]  # inside a function
    assert f"{engine}.tokenizer" in graph[f"{engine}.constraint"]  # under `if TYPE_CHECKING:`
    assert engine in graph["reference_server.serving"]  # engine/__init__.py runs before engine.base
    assert engine not in graph[f"{engine}.jobs"]  # ... but is already running for its own modules


def test_cycles_are_found_and_shown():
    graph = {"a": {"b": 1}, "b": {"c": 2}, "c": {"a": 3, "d": 4}, "d": {}, "e": {"e.f": 5}, "e.f": {}}
    assert cycles(graph) == [["a", "b", "c", "a"]]
    assert shown(["a", "b", "c", "a"], graph).splitlines()[0] == "a -> b (line 1 of a)"
    assert cycles({"a": {"b": 1}, "b": {}}) == []


def test_no_import_circle_in_the_reference_server():
    graph = import_graph()
    found = cycles(graph)
    assert not found, "import circles in reference_server/:\n  " + "\n\n  ".join(
        shown(cycle, graph) for cycle in found
    )
