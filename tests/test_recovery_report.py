"""modelprov.recover_with_report: the report says what recover wrote on the nodes."""

from __future__ import annotations

import collections
import json

import onnx_ir as ir
import onnxscript.optimizer

import modelprov
from modelprov.keys import CONFIDENCE_KEY, RECOVER_REPORT_FORMAT
from tests.conftest import fresh_export


def test_report_counts_what_recover_wrote_on_the_nodes() -> None:
    original = fresh_export("cnn")
    stripped = onnxscript.optimizer.optimize(original.clone())
    for node in stripped.graph:
        node.metadata_props.clear()
    recovered, report = modelprov.recover_with_report(original, stripped)
    assert isinstance(recovered, ir.Model) and isinstance(report, modelprov.RecoveryReport)
    written = collections.Counter(
        node.metadata_props.get(CONFIDENCE_KEY) for node in recovered.graph
    )
    assert report.nodes == len(recovered.graph)
    assert (report.exact, report.named, report.inferred) == (
        written["exact"],
        written["named"],
        written["inferred"],
    )
    assert len(report.unattributed) == written[None]
    lost = modelprov.diff(original, recovered).fx_nodes.lost
    assert set(report.lost_sources) >= set(lost)
    document = json.loads(report.to_json())
    assert document == report.to_dict()
    assert document["format"] == RECOVER_REPORT_FORMAT and document["version"] == 1
    assert document["nodes"] == report.nodes
    assert report.to_text().startswith(f"recovered {report.nodes} nodes: {report.exact} exact")
    assert modelprov.recover(original, stripped).graph.num_nodes() == report.nodes
