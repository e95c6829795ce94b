"""recover: a tool's output that dropped every node's metadata gets each node's sources
back; a model that computes something else is refused; the inputs are never modified."""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx
import onnx_ir as ir
import pytest

from modelprov._cli._examples import optimized_export_bytes
from modelprov.errors import CorrespondenceError
from modelprov.onnx._lookup import node_sources
from modelprov.onnx.recover._recover import (
    Recovered,
    recover,
    recover_model,
    recover_with_report,
)


def _original() -> onnx.ModelProto:
    return onnx.load_from_string(optimized_export_bytes("mlp"))


def _stripped(proto: onnx.ModelProto, rename: bool) -> onnx.ModelProto:
    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    del copy.metadata_props[:]
    for index, node in enumerate(copy.graph.node):
        del node.metadata_props[:]
        if rename:
            node.name = f"tool_{index}"
    for info in [*copy.graph.input, *copy.graph.output, *copy.graph.value_info]:
        del info.metadata_props[:]
    return copy


@pytest.mark.parametrize("rename", [False, True])
def test_every_node_gets_its_sources_back(rename: bool) -> None:
    original = _original()
    optimized = _stripped(original, rename)
    kept = (original.SerializeToString(), optimized.SerializeToString())
    recovered, report = recover_with_report(original, optimized)
    assert isinstance(recovered, onnx.ModelProto)
    assert (original.SerializeToString(), optimized.SerializeToString()) == kept
    before = [sorted(s.id for s in found) for _, found in node_sources(ir.from_proto(original))]
    after = [sorted(s.id for s in found) for _, found in node_sources(ir.from_proto(recovered))]
    assert after == before
    assert report.nodes == len(original.graph.node)
    assert report.unattributed == () and report.lost_sources == ()
    assert report.correspondence.startswith("computed")


def test_a_model_computing_something_else_is_refused() -> None:
    original = _original()
    other = _stripped(original, rename=False)
    for tensor in other.graph.initializer:
        array = onnx.numpy_helper.to_array(tensor)
        if array.dtype == np.float32 and array.size > 1:
            tensor.CopyFrom(onnx.numpy_helper.from_array(array + 1.0, tensor.name))
    with pytest.raises(CorrespondenceError):
        recover(original, other)


def test_an_onnx_ir_model_comes_back_as_one() -> None:
    original = ir.from_proto(_original())
    recovered = recover(original, ir.from_proto(_stripped(_original(), rename=True)))
    assert isinstance(recovered, ir.Model)
    assert all(found for _, found in node_sources(recovered))


def _sources_by_node(model: ir.Model) -> list[list[str]]:
    return [sorted(s.id for s in found) for _, found in node_sources(model)]


@pytest.mark.parametrize("kind", ["proto", "ir"])
def test_recover_model_is_one_ir_pipeline_whose_provenance_is_what_the_model_says(
    kind: str,
) -> None:
    from modelprov.core._provenance import Provenance
    from modelprov.core._walks import all_nodes

    original = _original()
    optimized = _stripped(original, rename=True)
    given = (
        (original, optimized)
        if kind == "proto"
        else tuple(map(ir.from_proto, (original, optimized)))
    )
    kept = [
        ir.to_proto(m).SerializeToString() if isinstance(m, ir.Model) else m.SerializeToString()
        for m in given
    ]
    recovered = recover_model(*given)
    assert isinstance(recovered, Recovered) and isinstance(recovered.model, ir.Model)
    assert recovered.model is not given[1]
    with pytest.raises(dataclasses.FrozenInstanceError):
        recovered.report = recovered.report  # type: ignore[misc]
    after = [
        ir.to_proto(m).SerializeToString() if isinstance(m, ir.Model) else m.SerializeToString()
        for m in given
    ]
    assert after == kept  # neither input modified
    # The engine's provenance is the one the metadata says: a caller need not read it back.
    read = Provenance.read(recovered.model)
    held = recovered.provenance
    nodes = all_nodes(recovered.model.graph)
    assert [held.table.ids(held.node_sources.get(n, frozenset())) for n in nodes] == [
        read.table.ids(read.node_sources.get(n, frozenset())) for n in nodes
    ]
    assert _sources_by_node(recovered.model) == _sources_by_node(ir.from_proto(original))
    # recover_with_report gives the same metadata, on the kind it was given.
    model, report = recover_with_report(*given)
    assert report == recovered.report
    as_ir = model if isinstance(model, ir.Model) else ir.from_proto(model)
    assert isinstance(model, type(given[1]))
    assert [dict(n.metadata_props) for n in as_ir.graph.all_nodes()] == [
        dict(n.metadata_props) for n in recovered.model.graph.all_nodes()
    ]


def test_recover_model_repairs_the_tools_metadata_once_and_reports_it() -> None:
    original = _original()
    optimized = _stripped(original, rename=False)
    entry = optimized.graph.node[0].metadata_props.add()
    entry.key, entry.value = "custom.note", "a"
    entry = optimized.graph.node[0].metadata_props.add()
    entry.key, entry.value = "custom.note", "b"  # a key twice: merged by its policy
    recovered = recover_model(original, optimized)
    assert recovered.report.repaired == (f"node {optimized.graph.node[0].name!r}",)
    assert len(optimized.graph.node[0].metadata_props) == 2  # the input is untouched


def _note(value: ir.Value) -> object:
    return value.metadata_props["custom.note"]


@pytest.mark.parametrize("holder", ["graph input", "initializer", "graph output", "node output"])
def test_recover_model_repairs_non_text_metadata_on_every_value_of_an_ir_model(
    holder: str,
) -> None:
    original = _original()
    tool = ir.serde.deserialize_model(_stripped(original, rename=False))
    graph = tool.graph
    values = {
        "graph input": graph.inputs[0],
        "initializer": next(iter(graph.initializers.values())),
        "graph output": graph.outputs[0],
        "node output": graph.node(0).outputs[0],
    }
    value = values[holder]
    value.metadata_props["custom.note"] = b"bad \xff"  # type: ignore[assignment]
    recovered = recover_model(original, tool)
    assert f"value {value.name!r}" in recovered.report.repaired
    assert _note(value) == b"bad \xff"  # the input is untouched


def test_recover_model_reads_an_ir_original_whose_metadata_is_not_text() -> None:
    original = ir.serde.deserialize_model(_original())
    original.graph.inputs[0].metadata_props["custom.note"] = b"bad \xff"  # type: ignore[assignment]
    recovered = recover_model(original, _stripped(_original(), rename=False))
    assert recovered.report.unattributed == ()
    assert _note(original.graph.inputs[0]) == b"bad \xff"  # untouched
