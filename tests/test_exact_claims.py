"""Every source a node claims is an operation it computes (docs/metadata-format.md, rule 1)."""

from __future__ import annotations

import functools
import warnings

import numpy as np
import onnx
import onnx_ir as ir
import pytest
import torch
from torch import nn

import modelprov
from modelprov.onnx._lookup import node_sources
from modelprov.onnx.recover import _tools
from tests._checks import region_violations, run
from tests.conftest import example_inputs, plain_export
from tests.test_layout_follows_output import _LAYER_SCOPE, _computed_in, _layer_of_module


class _Stem(nn.Module):  # type: ignore[misc]
    """Bias-free Conv + BatchNorm blocks, as in ResNet: torch's exporter creates one zero
    bias constant for the first convolution and shares it with the later ones."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.Conv2d(c, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8))
            for c in (3, 8, 8, 8)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = torch.relu(block(x))
        return x


@functools.cache
def _stem() -> tuple[ir.Model, np.ndarray]:
    torch.manual_seed(0)
    module = _Stem().eval()
    for bn in module.modules():
        if isinstance(bn, nn.BatchNorm2d):
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 1.5)
    x = torch.randn(1, 3, 8, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(module, (x,), dynamo=True, optimize=False, verbose=False)
    return program.model, x.numpy()


def test_each_fused_conv_names_only_its_own_conv_and_batch_norm():
    base, x = _stem()
    optimized = modelprov.optimize(base.clone())
    convs = [(n, found) for n, found in node_sources(optimized) if n.op_type == "Conv"]
    assert len(convs) == 4
    for index, (_node, found) in enumerate(convs):
        modules = {source.module_path for source in found}
        assert modules == {f"blocks.{index}.0", f"blocks.{index}.1"}, (index, modules)
    assert region_violations(base, optimized, [x])[0] == []
    assert modelprov.diff(base, optimized).fx_nodes.value == 1.0


@pytest.mark.parametrize("tool", ["onnxslim", "onnxsim"])
def test_a_node_the_tool_left_unchanged_keeps_exactly_its_sources(tool):
    base, x = _stem()
    original = ir.to_proto(base)
    output = _tools.TOOLS[tool].run(original)
    result = ir.from_proto(modelprov.recover(original, output))
    before = {node.name: (node, found) for node, found in node_sources(base)}
    unchanged = 0
    for node, found in node_sources(result):
        old = before.get(node.name)
        if old is None or not _same(old[0], node):
            continue
        unchanged += 1
        assert [s.id for s in found] == [s.id for s in old[1]], node.name
        assert node.metadata_props["modelprov.confidence"] == "exact", node.name
    assert unchanged > 0
    assert region_violations(base, result, [x])[0] == []


def _same(old: ir.Node, new: ir.Node) -> bool:
    """Same op, attributes, input and output names."""
    return (
        old.op_type == new.op_type
        and [v.name if v else None for v in old.inputs]
        == [v.name if v else None for v in new.inputs]
        and [v.name for v in old.outputs] == [v.name for v in new.outputs]
        and {k: str(a) for k, a in old.attributes.items()}
        == {k: str(a) for k, a in new.attributes.items()}
    )


def test_a_folded_shape_does_not_claim_what_computed_its_input():
    """transformer_encoder: a Reshape whose shape was folded from Shape(view) claimed view."""
    base = plain_export("transformer_encoder")
    optimized = modelprov.optimize(base.clone())
    for node, found in node_sources(optimized):
        if node.op_type == "Reshape" and node.name in ("node_Reshape_67", "node_Reshape_149"):
            assert not {"view_5", "view_14"} & {s.id for s in found}, node.name


def test_kept_for_recall_is_marked_and_documented_ids():
    """Sources a node keeps only for recall are listed on it and are among its sources."""
    base, _x = _stem()
    optimized = ir.to_proto(modelprov.optimize(base.clone()))
    for node in optimized.graph.node:
        props = {entry.key: entry.value for entry in node.metadata_props}
        if "modelprov.kept_for_recall" in props:
            ids = set(modelprov.sources(optimized, node))
            assert props["modelprov.kept_for_recall"].startswith("[")
            assert ids


def test_layout_follows_output_in_a_small_gpt2():
    export = plain_export("gpt2")
    optimized = modelprov.optimize(export.clone())
    computed = _computed_in(export, optimized)
    assert len(set(computed.values())) == 2
    from modelprov.report._data import report_data

    data = report_data(optimized)
    nodes = list(optimized.graph)
    for position, layer in computed.items():
        group = data["groups"][data["nodes"][position]["group"]]["path"]
        assert _layer_of_module(group) == layer, (nodes[position].name, group)
        scope = _LAYER_SCOPE.search(nodes[position].metadata_props.get("namespace", ""))
        assert scope is not None and scope.group(1) == layer, nodes[position].name


def test_recovered_ort_model_is_valid():
    base, _x = _stem()
    original = ir.to_proto(modelprov.optimize(base.clone()))
    result = modelprov.optimize_with("onnxruntime", original, level="extended")
    onnx.checker.check_model(result, full_check=True)


def test_recover_after_onnxscript_ort_fusions_claims_only_what_nodes_compute():
    """optimize_for_ort's com.microsoft fusions (SkipLayerNormalization here) run in
    onnxruntime; recover's claims stay in each fused node's value region. (Not GPT-2: there
    onnxscript 0.7.2's MultiHeadAttention fusion feeds its 3-D output to a Gemm that read the
    2-D Reshape it replaced, and onnxruntime refuses the Gemm; see benchmarks/bench_zoo.py.)"""
    from onnxscript.rewriter.ort_fusions import optimize_for_ort

    base = plain_export("transformer_encoder")
    data = ir.to_proto(modelprov.optimize(base.clone())).SerializeToString()
    # optimize_for_ort renames the tensors of its input (and of the proto it was read from).
    fused, counts = optimize_for_ort(
        ir.from_proto(onnx.load_from_string(data)), clear_metadata=True
    )
    assert sum(counts.values()) > 0
    assert any(node.domain == "com.microsoft" for node in fused.graph)
    original = ir.from_proto(onnx.load_from_string(data))
    result = ir.from_proto(modelprov.recover(onnx.load_from_string(data), ir.to_proto(fused)))
    inputs = [arg.numpy() for arg in example_inputs("transformer_encoder")]
    for expected, actual in zip(run(original, inputs), run(result, inputs), strict=True):
        np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-5)
    violations, checked = region_violations(original, result, inputs)
    assert violations == []
    assert checked == len(result.graph)
    assert modelprov.diff(base, result).fx_nodes.value == 1.0
