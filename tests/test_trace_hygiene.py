"""Stack-trace hygiene through export: relative paths and a per-node budget."""

from __future__ import annotations

import os
import warnings

import modelprov
from modelprov._cli import _examples


def _export(**kwargs):
    module, args = _examples.transformer_encoder()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return modelprov.export(module, args, verbose=False, **kwargs).model


def test_paths_relative_to_root_in_nodes_and_table():
    import torch

    root = os.path.dirname(os.path.dirname(torch.__file__))
    model = _export(trace_options=modelprov.TraceOptions(root=root))
    traces = [n.metadata_props.get("pkg.torch.onnx.stack_trace", "") for n in model.graph]
    assert any('File "torch/nn/modules/' in trace for trace in traces)
    assert not any(root in trace for trace in traces)
    for node in model.graph:
        for source in modelprov.sources(model, node):
            assert root not in source.stack_trace
            assert source.file is None or not source.file.startswith(root)


def test_budget_elides_visibly_and_the_table_stays_complete():
    model = _export(trace_options=modelprov.TraceOptions(max_bytes=400))
    elided = 0
    for node in model.graph:
        trace = node.metadata_props.get("pkg.torch.onnx.stack_trace", "")
        assert len(trace.encode()) <= 400
        if "to fit 400 bytes" in trace:
            elided += 1
            sources = modelprov.sources(model, node)
            assert sum(len(source.stack_trace.encode()) for source in sources) > 400
            assert all("[modelprov" not in source.stack_trace for source in sources)
    assert elided > 0
    report = modelprov.diff(_export(optimize=False), model)
    assert report.source_lines.value == 1.0
