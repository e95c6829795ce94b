"""StableHLO's modelprov.stack names the same user lines as the ONNX sources (issue 16)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import modelprov
from modelprov.onnx._lookup import node_sources
from modelprov.stablehlo import export_stablehlo
from tests.test_user_frames import _import_user_model

pytest.importorskip("jax")


def test_stablehlo_stack_and_onnx_sources_name_the_same_user_lines(tmp_path: Path) -> None:
    module = _import_user_model(tmp_path)
    net = module.Net().eval()
    args = (torch.randn(2, 16),)
    program = export_stablehlo(net, args)
    path = str(tmp_path / "user_net.py")
    stacks = {op.attributes.get("modelprov.stack", "") for op in program.ops if len(op.nodes) < 2}
    stacks.discard("")
    # A constant value several nodes use merges their stacks: each source names its line.
    shared = [op for op in program.ops if len(op.nodes) > 1]
    stacks |= {f"{s.file}:{s.line}" for op in shared for s in program.sources(op) if s.file}
    assert stacks and all(stack.startswith(path + ":") for stack in stacks), stacks
    onnx_model = modelprov.export(net, args, optimize=False).model
    onnx_lines = {
        f"{s.file}:{s.line}" for _, sources in node_sources(onnx_model) for s in sources if s.file
    }
    assert stacks == onnx_lines
