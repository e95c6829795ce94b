"""The house's shape, read from the source: the import graph has no circle and no import
from a lower layer to a higher one (the layers of docs/architecture.md), and no folder holds
more than 14 modules. Imports inside functions count; those under ``if TYPE_CHECKING:``
(annotations only) do not."""

from __future__ import annotations

import ast
import pathlib

import pytest

import modelprov

PACKAGE = pathlib.Path(modelprov.__file__).parent

LAYERS: tuple[tuple[str, ...], ...] = (
    ("modelprov.errors", "modelprov.keys", "modelprov._base"),
    ("modelprov._torch",),
    ("modelprov.core",),
    ("modelprov._model_io", "modelprov.annotation"),
    ("modelprov.onnx",),
    ("modelprov.stablehlo",),
    ("modelprov.audit", "modelprov.numerics"),
    ("modelprov.report",),
    ("modelprov", "modelprov.policy"),
    ("modelprov._cli",),
    ("modelprov.cli",),
)
"""From the bottom up; a module belongs to the layer of its longest listed prefix."""


def _modules() -> dict[str, pathlib.Path]:
    found: dict[str, pathlib.Path] = {}
    for path in PACKAGE.rglob("*.py"):
        if path.name.endswith("_test.py"):
            continue
        parts = ["modelprov", *path.relative_to(PACKAGE).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _annotation_only(tree: ast.Module) -> set[int]:
    """ids of the nodes under ``if TYPE_CHECKING:``."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for statement in node.body:
                skipped.update(id(inner) for inner in ast.walk(statement))
    return skipped


def import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports (a name of a package resolves to the
    module it names when there is one, else to the package)."""
    modules = _modules()

    def resolve(name: str) -> str:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name

    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        skipped = _annotation_only(tree)
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [resolve(alias.name) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join([*parts, *([base] if base else [])])
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    targets.append(full if full in modules else resolve(base))
            graph[name].update(t for t in targets if t and t != name)
    return graph


def _layer(module: str) -> int:
    best, level = -1, -1
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, level = len(prefix), index
    return level


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (iterative Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
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


def test_every_module_has_a_layer() -> None:
    assert [name for name in _modules() if _layer(name) < 0] == []


def test_the_import_graph_has_no_circle() -> None:
    assert _circles(import_graph()) == []


def test_no_import_runs_from_a_lower_layer_to_a_higher_one() -> None:
    graph = import_graph()
    upward = sorted(
        f"{module} -> {target}"
        for module, targets in graph.items()
        for target in targets
        if _layer(target) > _layer(module)
    )
    assert upward == []


@pytest.mark.parametrize(
    ("edges", "circle"),
    [({"a": {"b"}, "b": {"c"}, "c": {"a"}}, [["a", "b", "c"]]), ({"a": {"b"}, "b": set()}, [])],
)
def test_the_circle_finder_finds_circles(edges: dict[str, set[str]], circle: list[str]) -> None:
    assert _circles(edges) == circle


def test_the_graph_sees_imports_inside_functions() -> None:
    graph = import_graph()
    # _cli/_commands.py imports recover inside its command handler.
    assert "modelprov.onnx.recover._recover" in graph["modelprov._cli._commands"]


def test_no_folder_holds_more_than_14_modules() -> None:
    """As docs/architecture.md counts them: ``.py`` files directly in a folder,
    ``__init__.py`` included and ``*_test.py`` left out."""
    counts: dict[str, int] = {}
    for path in PACKAGE.rglob("*.py"):
        if not path.name.endswith("_test.py"):
            folder = str(path.parent.relative_to(PACKAGE.parent))
            counts[folder] = counts.get(folder, 0) + 1
    assert {folder: n for folder, n in counts.items() if n > 14} == {}
    assert max(counts.values()) >= 2  # the walk saw the package
