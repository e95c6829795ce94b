"""modelprov.overlay: Model Explorer node data, checked against model-explorer-onnx itself."""

from __future__ import annotations

import json
import os

import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper

import modelprov
from modelprov._cli import _examples
from modelprov.core._walks import all_nodes
from modelprov.errors import MetadataError
from modelprov.report import STATE_COLORS, overlay, write_overlay
from tests.conftest import example_inputs, plain_export

onnx_adapter = pytest.importorskip(
    "model_explorer_onnx.main", reason="model-explorer-onnx is not installed (test extra)"
)
node_data_builder = pytest.importorskip(
    "model_explorer.node_data_builder", reason="ai-edge-model-explorer is not installed"
)
dacite = pytest.importorskip("dacite", reason="dacite comes with ai-edge-model-explorer")


def explorer_graphs(path: str) -> dict[str, set[str]]:
    """Graph id -> ids of the op nodes Model Explorer's ONNX adapter makes of a file."""
    graphs = onnx_adapter.ONNXAdapter().convert(path, {})["graphs"]
    return {g.id: {n.id for n in g.nodes if not n.id.startswith("[value] ")} for g in graphs}


def check_schema(document: dict[str, object]) -> None:
    """The checks Model Explorer applies to a dropped or loaded node-data file, and its types.

    The web app takes a file as per-graph data when it has no top-level ``results`` and
    some value has ``results`` (its drop handler); each graph's data must be a
    ``GraphNodeData`` (checked strictly with dacite against the package's dataclasses).
    """
    assert "results" not in document
    assert any(isinstance(v, dict) and "results" in v for v in document.values())
    config = dacite.Config(strict=True)
    for graph in document.values():
        parsed = dacite.from_dict(node_data_builder.GraphNodeData, graph, config=config)
        assert parsed.results
        for result in parsed.results.values():
            assert isinstance(result, node_data_builder.NodeDataResult)
            assert isinstance(result.value, int | float)
    model_data = node_data_builder.ModelNodeData(
        graphsData={
            graph_id: dacite.from_dict(node_data_builder.GraphNodeData, graph, config=config)
            for graph_id, graph in document.items()
        }
    )
    assert set(json.loads(model_data.to_json_string())) == set(document)


@pytest.fixture(scope="module")
def cnn_file(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("cnn") / "cnn.onnx")
    ir.save(modelprov.optimize(plain_export("cnn")), path)
    return path


def test_cnn_coverage_names_every_node_as_model_explorer_does(cnn_file: str) -> None:
    document = overlay(cnn_file, coverage=True)
    check_schema(document)
    graphs = explorer_graphs(cnn_file)
    assert set(document) == set(graphs) == {"main_graph"}
    results = document["main_graph"]["results"]
    assert set(results) == graphs["main_graph"]
    model = ir.load(cnn_file)
    assert len(results) == len(model.graph)
    # Conv fused with BatchNorm: two sources, drawn as merged.
    conv = next(n for n in model.graph if n.op_type == "Conv")
    assert results[conv.name] == {"value": 2, "bgColor": STATE_COLORS["merged"]}
    assert {r["bgColor"] for r in results.values()} <= set(STATE_COLORS.values())


def test_overlay_of_model_object_equals_file(cnn_file: str, tmp_path: str) -> None:
    model = ir.load(cnn_file)
    assert overlay(model) == overlay(cnn_file) == overlay(onnx.load(cnn_file))
    out = os.path.join(tmp_path, "overlay.json")
    assert write_overlay(model, out) == out
    with open(out, encoding="utf-8") as stream:
        assert json.load(stream) == overlay(model)


def test_numeric_key_overlay_for_calibrated_cnn(tmp_path: str) -> None:
    module, args = _examples.cnn()
    ranges = modelprov.calibrate(module, [example_inputs("cnn")[0]])
    path = os.path.join(tmp_path, "cnn_ranges.onnx")
    modelprov.export(module, args, path, annotations=ranges, verbose=False)
    document = overlay(path, key="custom.max")
    check_schema(document)
    results = document["main_graph"]["results"]
    graphs = explorer_graphs(path)
    assert set(results) <= graphs["main_graph"]
    model = ir.load(path)
    carrying = {
        n.name: float(n.metadata_props["custom.max"])
        for n in model.graph
        if "custom.max" in n.metadata_props
    }
    assert carrying and {k: v["value"] for k, v in results.items()} == carrying
    assert document["main_graph"]["gradient"][0]["stop"] == 0


def test_key_errors(cnn_file: str) -> None:
    with pytest.raises(MetadataError, match="custom.nothing"):
        overlay(cnn_file, key="custom.nothing")
    with pytest.raises(MetadataError, match="not numbers"):
        overlay(cnn_file, key="pkg.torch.onnx.fx_node")
    with pytest.raises(ValueError, match="not both"):
        overlay(cnn_file, key="custom.max", coverage=True)


def _if_model() -> onnx.ModelProto:
    """Unnamed and duplicate node names, an If (embedded by the adapter) and a Loop body."""
    meta = [onnx.StringStringEntryProto(key="pkg.torch.onnx.fx_node", value="%relu : [] = x")]
    relu = helper.make_node("Relu", ["x"], ["r"])  # unnamed
    relu.metadata_props.extend(meta)
    then_graph = helper.make_graph(
        [helper.make_node("Neg", ["r"], ["t"], name="dup")],
        "then",
        [],
        [helper.make_tensor_value_info("t", TensorProto.FLOAT, [2])],
    )
    else_graph = helper.make_graph(
        [helper.make_node("Abs", ["r"], ["e"], name="dup")],
        "else",
        [],
        [helper.make_tensor_value_info("e", TensorProto.FLOAT, [2])],
    )
    cond = helper.make_node("ReduceSum", ["r"], ["s"], name="dup", keepdims=0)
    gt = helper.make_node("Greater", ["s", "zero"], ["c"], name="gt")
    branch = helper.make_node(
        "If", ["c"], ["y"], name="branch", then_branch=then_graph, else_branch=else_graph
    )
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"], name="keep"),
            helper.make_node("Add", ["acc", "y"], ["acc_out"]),  # unnamed
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("acc", TensorProto.FLOAT, [2]),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, [2]),
        ],
    )
    loop = helper.make_node("Loop", ["n", "", "y"], ["z"], name="loop", body=body)
    graph = helper.make_graph(
        [relu, cond, gt, branch, loop],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2])],
        initializer=[
            helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0]),
            helper.make_tensor("n", TensorProto.INT64, [], [3]),
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def test_node_ids_follow_the_adapter_for_unnamed_nodes_if_and_loop(tmp_path: str) -> None:
    proto = _if_model()
    onnx.checker.check_model(proto)
    path = os.path.join(tmp_path, "control_flow.onnx")
    onnx.save(proto, path)
    document = overlay(path)
    check_schema(document)
    graphs = explorer_graphs(path)
    # The adapter adds its own "(Phi)" nodes for If outputs and capture nodes for values a
    # subgraph reads from outside; every other node must match.
    assert {g: set(d["results"]) for g, d in document.items()} == {
        g: {n for n in ids if not n.endswith(("_phi", "_capture"))} for g, ids in graphs.items()
    }
    assert sum(len(d["results"]) for d in document.values()) == len(
        all_nodes(ir.from_proto(proto).graph)
    )
