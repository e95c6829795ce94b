"""Layout keys follow the node's output: a merged node is drawn in the layer computing it."""

from __future__ import annotations

import functools
import re
import warnings

import onnx_ir as ir
import pytest
import torch

import modelprov
from modelprov._cli import _examples
from modelprov.onnx._lookup import node_sources
from modelprov.report._data import report_data

LAYERS = 12
_LAYER = re.compile(r"(?:^|\.)h\.(\d+)(?:\.|$)")
_LAYER_SCOPE = re.compile(r"/(?:[\w.]+\.)?h\.(\d+):")


def _layer_of_module(path: str) -> str | None:
    found = _LAYER.search(path)
    return found.group(1) if found else None


@functools.cache
def _gpt2() -> tuple[ir.Model, ir.Model]:
    module, args = _examples.gpt2(LAYERS, 24, sequence=8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(module, args, dynamo=True, optimize=False, verbose=False)
    return program.model, modelprov.optimize(program.model.clone())


def _computed_in(export: ir.Model, optimized: ir.Model) -> dict[int, str]:
    """Position of each optimized node -> the layer whose node produced its output value in
    the export (by value name: onnxscript keeps the names of the values it keeps)."""
    layer_of_value: dict[str, str | None] = {}
    for node, found in node_sources(export):
        layer = _layer_of_module(found[0].module_path or "") if found else None
        for value in node.outputs:
            layer_of_value[value.name or ""] = layer
    computed: dict[int, str] = {}
    for position, node in enumerate(optimized.graph):
        layers = {layer_of_value.get(value.name or "") for value in node.outputs}
        if len(layers) == 1 and None not in layers:
            computed[position] = layers.pop()  # type: ignore[assignment]
    return computed


@pytest.mark.slow
def test_no_node_computed_in_a_layer_is_grouped_outside_it():
    export, optimized = _gpt2()
    computed = _computed_in(export, optimized)
    assert len({*computed.values()}) == LAYERS
    merged = [n for n, found in node_sources(optimized) if len(found) > 1]
    assert merged, "the optimized model has merged nodes"
    data = report_data(optimized)
    nodes = list(optimized.graph)
    outside_report = []
    outside_overlay = []
    for position, layer in computed.items():
        group = data["groups"][data["nodes"][position]["group"]]["path"]
        if _layer_of_module(group) != layer:
            outside_report.append((nodes[position].name, layer, group))
        namespace = nodes[position].metadata_props.get("namespace", "")
        scope = _LAYER_SCOPE.search(namespace)
        if scope is None or scope.group(1) != layer:
            outside_overlay.append((nodes[position].name, layer, namespace[-80:]))
    assert outside_report == []
    assert outside_overlay == []
