"""Private torch / JAX / torchax modules are reached only through the compat modules."""

from __future__ import annotations

import ast
import pathlib

_PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "src" / "modelprov"
_UPSTREAM = ("torch", "jax", "jaxlib", "torchax", "onnxscript", "onnx_ir")


def _private_imports(tree: ast.AST) -> list[str]:
    found: list[str] = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] in _UPSTREAM and any(part.startswith("_") for part in parts[1:]):
                found.append(name)
    return found


def test_only_compat_modules_import_private_upstream_modules() -> None:
    offenders = {
        str(path.relative_to(_PACKAGE)): imports
        for path in sorted(_PACKAGE.rglob("*.py"))
        if not path.name.endswith(("_compat.py", "_test.py"))
        for imports in [_private_imports(ast.parse(path.read_text("utf-8")))]
        if imports
    }
    assert not offenders, f"private upstream imports outside the compat modules: {offenders}"


def test_the_check_sees_a_private_import() -> None:
    tree = ast.parse("from jax._src.interpreters import mlir\nimport torch._dynamo\n")
    assert _private_imports(tree) == [
        "jax._src.interpreters",
        "jax._src.interpreters.mlir",
        "torch._dynamo",
    ]
