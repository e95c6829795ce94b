"""Metadata keys and format names are declared once, documented, and need no torch."""

from __future__ import annotations

import ast
import os
import pathlib
import re
import subprocess
import sys
import textwrap

import onnx_ir as ir
import pytest

from modelprov import keys
from modelprov.core._sources import node_label
from tests.conftest import fresh_export

_SRC = pathlib.Path(__file__).resolve().parents[1] / "src"
_PACKAGE = _SRC / "modelprov"
_DOCS = _SRC.parent / "docs" / "metadata-format.md"
_KEY_LIKE = re.compile(r"^(?:modelprov|pkg\.(?:torch|modelprov|onnxscript))\.[\w.*\[\]-]+$")
_IN_MEMORY_ONLY = {"INLINE_OUTPUTS_META"}
_ALSO_THE_PACKAGE_PREFIX = "modelprov."


def _key_values() -> dict[str, str]:
    """Every string (and string-tuple element) constant of modelprov.keys, by value."""
    values: dict[str, str] = {}
    for name in keys.__all__:
        constant = getattr(keys, name)
        for item in constant if isinstance(constant, tuple) else (constant,):
            values.setdefault(item, name)
    return values


def _string_constants() -> dict[pathlib.Path, set[str]]:
    """The string literals of every non-test module of src/ (docstrings included)."""
    found: dict[pathlib.Path, set[str]] = {}
    for path in sorted(_PACKAGE.rglob("*.py")):
        if path.name.endswith("_test.py"):
            continue
        tree = ast.parse(path.read_text("utf-8"))
        found[path] = {
            node.value
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
        }
    return found


def test_every_key_literal_is_declared_in_exactly_one_module() -> None:
    constants = _string_constants()
    for value, name in _key_values().items():
        if value == _ALSO_THE_PACKAGE_PREFIX:  # also how code tells modelprov's own modules
            continue
        modules = [path.name for path, strings in constants.items() if value in strings]
        assert modules == ["keys.py"], f"{name} = {value!r} is spelled in {modules}"


def test_no_module_declares_a_key_of_its_own() -> None:
    declared = set(_key_values())
    module_names = {
        ".".join(path.relative_to(_SRC).with_suffix("").parts).removesuffix(".__init__")
        for path in _PACKAGE.rglob("*.py")
    }
    for path, strings in _string_constants().items():
        if path.name == "keys.py":
            continue
        stray = {
            text
            for text in strings
            if _KEY_LIKE.match(text)
            and text not in declared
            and text.removesuffix(".") not in module_names
        }
        assert not stray, f"{path.relative_to(_SRC)} spells keys {stray}: declare them in keys.py"


def test_the_format_document_mentions_every_key() -> None:
    text = _DOCS.read_text("utf-8")
    missing: list[str] = []
    for value, name in _key_values().items():
        if name in _IN_MEMORY_ONLY or "[" in value:
            continue
        if not re.search(f'[`"]{re.escape(value)}', text):
            missing.append(f"{name} ({value})")
    assert not missing, f"docs/metadata-format.md does not mention {missing}"


def test_node_label_names_unnamed_nodes_by_position() -> None:
    assert node_label("conv1", "Conv", 3) == "conv1"
    assert node_label("", "Conv", 3) == "Conv@3"
    assert node_label(None, "Relu", 0) == "Relu@0"


def test_the_core_loads_no_heavy_library() -> None:
    code = "import sys, modelprov.core; "
    code += "print(sorted(m for m in ('torch', 'jax', 'onnxscript') if m in sys.modules))"
    assert _run(code) == "[]"


@pytest.mark.filterwarnings("ignore")
def test_graph_commands_run_without_torch(tmp_path: pathlib.Path) -> None:
    import modelprov

    exported = fresh_export("mlp")
    original = tmp_path / "original.onnx"
    functionized = tmp_path / "functionized.onnx"
    stripped = tmp_path / "stripped.onnx"
    ir.save(exported, original)
    ir.save(modelprov.functionize(exported.clone()), functionized)
    bare = exported.clone()
    for node in bare.graph:
        node.metadata_props.clear()
    ir.save(bare, stripped)
    code = textwrap.dedent(
        f"""
        import sys, onnx_ir as ir, modelprov
        original = ir.load({str(original)!r})
        assert modelprov.find_calls(ir.load({str(functionized)!r}), "aten::linear.default")
        modelprov.audit(original).to_json()
        recovered = modelprov.recover(original, ir.load({str(stripped)!r}))
        modelprov.diff(original, recovered).to_json()
        modelprov.report(recovered, before=original)
        modelprov.overlay(recovered, coverage=True)
        print(sorted(m for m in ("torch", "jax") if m in sys.modules))
        """
    )
    assert _run(code) == "[]"


def _run(code: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(_SRC)}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().splitlines()[-1]
