"""One metadata-bytes count: audit, its JSON and the HTML report's summary agree."""

from __future__ import annotations

import pathlib

import onnx_ir as ir

import modelprov
from modelprov.report._data import report_data
from tests.conftest import fresh_export


def test_audit_and_report_count_the_same_bytes(tmp_path: pathlib.Path) -> None:
    plain = fresh_export("cnn")
    model = modelprov.functionize(modelprov.optimize(plain))  # nodes, values, table, functions
    model.graph.metadata_props["user.note"] = "graph-level ✓"
    audited = modelprov.audit(model)
    by_scope = audited.metadata_bytes_by_scope
    assert all(by_scope[scope] > 0 for scope in ("nodes", "values", "model", "graphs", "functions"))
    expected = {"total": audited.metadata_bytes, **by_scope}
    assert report_data(model)["summary"]["metadata_bytes"] == expected
    assert report_data(model, before=plain)["summary"]["before"]["metadata_bytes"] == {
        "total": modelprov.audit(plain).metadata_bytes,
        **modelprov.audit(plain).metadata_bytes_by_scope,
    }
    path = tmp_path / "model.onnx"
    ir.save(model, path)
    assert modelprov.audit(str(path)).metadata_bytes == audited.metadata_bytes
    assert modelprov.audit(ir.to_proto(model)).to_dict()["metadata_bytes"] == expected
