"""Private torch / JAX / torchax modules are reached only through the compat modules."""

from __future__ import annotations

import ast
import pathlib

_PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "src" / "modelprov"
_UPSTREAM = ("torch", "jax", "jaxlib", "torchax", "onnxscript", "onnx_ir")


def _is_private(part: str) -> bool:
    return part.startswith("_") and not (part.startswith("__") and part.endswith("__"))


def _upstream_names(tree: ast.AST) -> dict[str, str]:
    """Each local name bound by an import of an upstream module, with the dotted path it names."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                root = alias.name.split(".")[0]
                if root in _UPSTREAM:
                    names[alias.asname or root] = alias.name if alias.asname else root
        elif (
            isinstance(node, ast.ImportFrom)
            and node.module
            and node.level == 0
            and node.module.split(".")[0] in _UPSTREAM
        ):
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return names


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
            if parts[0] in _UPSTREAM and any(_is_private(part) for part in parts[1:]):
                found.append(name)
    return found


def _private_attributes(tree: ast.AST) -> list[str]:
    """Attribute chains on an imported upstream name that pass a private part
    (``torch._C.foo``, ``jax._src.core``), each reported once, at its longest."""
    upstream = _upstream_names(tree)
    inner: set[int] = set()
    found: list[str] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or id(node) in inner:
            continue
        chain: list[str] = []
        current: ast.expr = node
        while isinstance(current, ast.Attribute):
            chain.append(current.attr)
            if current is not node:
                inner.add(id(current))
            current = current.value
        if isinstance(current, ast.Name) and current.id in upstream:
            dotted = upstream[current.id].split(".") + chain[::-1]
            if any(_is_private(part) for part in dotted[1:]):
                found.append(".".join(dotted))
    return found


def _offenders(check: object) -> dict[str, list[str]]:
    assert callable(check)
    return {
        str(path.relative_to(_PACKAGE)): found
        for path in sorted(_PACKAGE.rglob("*.py"))
        if not path.name.endswith(("_compat.py", "_test.py"))
        for found in [check(ast.parse(path.read_text("utf-8")))]
        if found
    }


def test_only_compat_modules_import_private_upstream_modules() -> None:
    offenders = _offenders(_private_imports)
    assert not offenders, f"private upstream imports outside the compat modules: {offenders}"


def test_only_compat_modules_reach_private_upstream_attributes() -> None:
    offenders = _offenders(_private_attributes)
    assert not offenders, f"private upstream attributes outside the compat modules: {offenders}"


def test_the_check_sees_a_private_import() -> None:
    tree = ast.parse("from jax._src.interpreters import mlir\nimport torch._dynamo\n")
    assert _private_imports(tree) == [
        "jax._src.interpreters",
        "jax._src.interpreters.mlir",
        "torch._dynamo",
    ]


def test_the_check_sees_a_private_attribute_through_any_import_form() -> None:
    source = (
        "import torch\nimport jax.numpy as jnp\nfrom torch import fx\n"
        "a = torch._C._get_tracing_state()\nb = jnp._src\nc = fx.graph._Namespace\n"
        "d = torch.__version__\ne = torch.nn.Module\n"
    )
    assert sorted(_private_attributes(ast.parse(source))) == [
        "jax.numpy._src",
        "torch._C._get_tracing_state",
        "torch.fx.graph._Namespace",
    ]
