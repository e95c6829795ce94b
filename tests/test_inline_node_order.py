"""functionize → inline gives back the export's node order, not only its nodes (issue 24).

A submodule called on two independent paths (transformers' Phi: one ``resid_dropout`` after
the attention and after the parallel MLP) is one region spanning the other path; its call
sits at the region's last node, so before the order record inline returned the first
path's nodes after the second's.
"""

from __future__ import annotations

import warnings

import numpy as np
import onnx_ir as ir
import onnxruntime
import pytest
import torch
from torch import nn

import modelprov
from modelprov.errors import MetadataError
from modelprov.onnx.functions._node_order import NODE_ORDER_KEY


class _Scale(nn.Module):  # type: ignore[misc]
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 0.5 + 1.0


class _SharedOnParallelPaths(nn.Module):  # type: ignore[misc]
    """``paths`` linear layers on the same input, each output through one shared module."""

    def __init__(self, paths: int, width: int) -> None:
        super().__init__()
        self.branches = nn.ModuleList(nn.Linear(width, width) for _ in range(paths))
        self.shared = _Scale()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        outputs = [self.shared(branch(x)).tanh() for branch in self.branches]
        return torch.stack(outputs).sum(0)


def _export(paths: int, width: int) -> tuple[ir.Model, nn.Module, torch.Tensor]:
    torch.manual_seed(paths * 10 + width)
    model = _SharedOnParallelPaths(paths, width).eval()
    x = torch.randn(2, width)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(model, (x,), dynamo=True, optimize=False, verbose=False)
    return program.model, model, x


def _run(model: ir.Model, x: torch.Tensor) -> np.ndarray:
    session = onnxruntime.InferenceSession(
        ir.to_proto(model).SerializeToString(), providers=["CPUExecutionProvider"]
    )
    (output,) = session.run(None, {session.get_inputs()[0].name: x.numpy()})
    return np.asarray(output)


@pytest.mark.parametrize(("paths", "width"), [(2, 4), (3, 3), (4, 5)])
@pytest.mark.parametrize("level", ["aten", "module"])
def test_inline_restores_the_exports_node_order(paths: int, width: int, level: str) -> None:
    exported, model, x = _export(paths, width)
    original = [node.name for node in exported.graph]
    functionized = modelprov.functionize(ir.from_proto(ir.to_proto(exported)), level=level)
    assert NODE_ORDER_KEY in functionized.metadata_props
    inlined = modelprov.inline(functionized)
    assert [node.name for node in inlined.graph] == original
    assert NODE_ORDER_KEY not in inlined.metadata_props
    np.testing.assert_allclose(_run(inlined, x), model(x).detach().numpy(), atol=1e-6, rtol=0)


def test_a_node_order_that_is_no_list_of_names_is_an_error() -> None:
    exported, _, _ = _export(2, 4)
    functionized = modelprov.functionize(exported, level="module")
    functionized.metadata_props[NODE_ORDER_KEY] = '{"not": "a list"}'
    with pytest.raises(MetadataError, match=NODE_ORDER_KEY):
        modelprov.inline(functionized)


def test_a_record_missing_a_node_still_gives_a_valid_graph() -> None:
    exported, model, x = _export(3, 3)
    functionized = modelprov.functionize(ir.from_proto(ir.to_proto(exported)), level="module")
    names = [node.name for node in exported.graph]
    renamed = names[len(names) // 2]
    kept = [name for name in names if name != renamed]
    functionized.metadata_props[NODE_ORDER_KEY] = str(kept).replace("'", '"')
    inlined = modelprov.inline(functionized)
    assert sorted(node.name for node in inlined.graph) == sorted(names)
    assert NODE_ORDER_KEY not in inlined.metadata_props
    np.testing.assert_allclose(_run(inlined, x), model(x).detach().numpy(), atol=1e-6, rtol=0)
