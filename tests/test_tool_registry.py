"""A new black-box tool is one registration: optimize_with, the tool settings the tests
and the zoo run, and optimize_with's error for an unknown tool all know it from the
registry alone."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import onnx
import onnx_ir as ir
import pytest

import modelprov
from modelprov.errors import UsageError
from modelprov.onnx.recover._tools import TOOLS, ToolSetting, register_tool
from tests._black_box import apply_tool
from tests.conftest import fresh_export


@pytest.fixture
def gemm_fuser() -> Iterator[list[dict[str, Any]]]:
    """A tool that fuses MatMul+Add into Gemm and renames every node (metadata dropped,
    as black-box tools drop it), registered for one test; records the options it got."""
    calls: list[dict[str, Any]] = []

    @register_tool("gemm-fuser", ("gemm-fuser", {}), ("gemm-fuser-seed-1", {"seed": 1}))
    def _run(proto: onnx.ModelProto, seed: int = 0) -> onnx.ModelProto:
        calls.append({"seed": seed})
        output, _, _ = apply_tool(
            proto, ["fuse_gemm", "rename_nodes"], seed, keep_model_metadata=False
        )
        return output

    try:
        yield calls
    finally:
        TOOLS.unregister("gemm-fuser")


def test_optimize_with_runs_a_registered_tool(gemm_fuser: list[dict[str, Any]]) -> None:
    model = modelprov.optimize(fresh_export("mlp"))
    result = modelprov.optimize_with("gemm-fuser", model, seed=1)
    assert gemm_fuser == [{"seed": 1}]
    assert isinstance(result, ir.Model)
    assert all(modelprov.sources(result, node) for node in result.graph)
    assert modelprov.diff(model, result).fx_nodes.value == 1.0


def test_settings_and_errors_list_a_registered_tool(gemm_fuser: list[dict[str, Any]]) -> None:
    labels = [setting.label for setting in TOOLS.settings()]
    assert labels[-2:] == ["gemm-fuser", "gemm-fuser-seed-1"]
    assert TOOLS.settings()[-1] == ToolSetting("gemm-fuser-seed-1", "gemm-fuser", {"seed": 1})
    with pytest.raises(UsageError, match=r"choose one of .*onnxoptimizer, gemm-fuser$"):
        modelprov.optimize_with("no-such-tool", fresh_export("mlp"))


def test_unregistered_tool_is_unknown_again() -> None:
    assert "gemm-fuser" not in TOOLS
    with pytest.raises(UsageError, match="unknown tool 'gemm-fuser'"):
        modelprov.optimize_with("gemm-fuser", fresh_export("mlp"))


def test_a_tool_name_is_registered_once() -> None:
    with pytest.raises(ValueError, match="'onnxsim' is registered already"):
        register_tool("onnxsim")(lambda proto: proto)


def test_the_built_in_tools_and_their_settings() -> None:
    assert list(TOOLS) == ["onnxruntime", "onnxsim", "onnxslim", "onnxoptimizer"]
    portable = [(s.label, s.tool, dict(s.options)) for s in TOOLS.settings(portable_only=True)]
    assert portable == [
        ("ort-basic", "onnxruntime", {"level": "basic"}),
        ("ort-extended", "onnxruntime", {"level": "extended"}),
        ("onnxsim", "onnxsim", {}),
        ("onnxslim", "onnxslim", {}),
        ("onnxoptimizer", "onnxoptimizer", {}),
    ]
    assert [s.label for s in TOOLS.settings() if not s.portable] == ["ort-all"]
