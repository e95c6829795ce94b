"""audit: the same report for a model as a ModelProto, an onnx_ir.Model or a file; bytes
counted once by scope; bad metadata reported where it is, never trusted."""

from __future__ import annotations

import pathlib

import onnx
import onnx_ir as ir

from modelprov._cli._examples import optimized_export_bytes
from modelprov.audit._audit import audit, metadata_bytes


def _proto() -> onnx.ModelProto:
    return onnx.load_from_string(optimized_export_bytes("mlp"))


def test_every_model_kind_gets_the_same_report(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "m.onnx"
    path.write_bytes(optimized_export_bytes("mlp"))
    reports = [audit(_proto()), audit(ir.from_proto(_proto())), audit(path)]
    assert reports[0].to_dict() == reports[1].to_dict() == reports[2].to_dict()
    report = reports[0]
    assert report.nodes == len(_proto().graph.node)
    assert report.nodes_without_sources == ()
    assert {"linear", "relu"} <= set(report.fx_nodes)


def test_metadata_bytes_are_the_sum_of_every_entry_by_scope() -> None:
    proto = _proto()
    counted = metadata_bytes(proto)
    node_bytes = sum(
        len(e.key.encode()) + len(e.value.encode())
        for n in proto.graph.node
        for e in n.metadata_props
    )
    model_bytes = sum(len(e.key.encode()) + len(e.value.encode()) for e in proto.metadata_props)
    assert counted["nodes"] == node_bytes
    assert counted["model"] == model_bytes
    assert counted["total"] == sum(v for k, v in counted.items() if k != "total")
    assert metadata_bytes(ir.from_proto(proto)) == counted
    assert audit(proto).metadata_bytes == counted["total"]


def test_a_node_whose_metadata_is_stripped_is_listed_without_sources() -> None:
    proto = _proto()
    stripped = proto.graph.node[0]
    del stripped.metadata_props[:]
    report = audit(proto)
    assert len(report.nodes_without_sources) == 1
    assert stripped.name in report.nodes_without_sources[0]


def test_a_duplicate_key_is_reported_where_it_is() -> None:
    proto = _proto()
    node = proto.graph.node[1]
    node.metadata_props.add(key="custom.k", value="1")
    node.metadata_props.add(key="custom.k", value="2")
    problems = [(p.key, p.problem) for p in audit(proto).invalid_metadata]
    assert problems == [("custom.k", "duplicate key (2 entries)")]
    assert node.name in audit(proto).invalid_metadata[0].where
