"""The demo: export bundled examples with torch.onnx alone and with modelprov, compare."""

from __future__ import annotations

import logging
import os
import tempfile
import warnings
from collections.abc import Callable
from typing import TextIO

import onnx_ir as ir
import torch

from modelprov._cli import _examples
from modelprov._model_io._files import save_model
from modelprov.audit import diff
from modelprov.core._stack_trace import display_location
from modelprov.keys import STACK_TRACE_KEY
from modelprov.onnx._lookup import sources
from modelprov.onnx.export._export import export
from modelprov.report import write_report

__all__ = ["run_demo"]

_DEMO_MODELS = ("double_transpose", "transformer_encoder")


def _quiet_export(model: torch.nn.Module, args: tuple[object, ...], optimize: bool) -> ir.Model:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(model, args, dynamo=True, optimize=optimize, verbose=False)
    model_ir: ir.Model = program.model
    return model_ir


def run_demo(
    out: TextIO, *, folder: str | None = None, wrote: Callable[[str, str], None] | None = None
) -> str:
    """Runs the demo, writes what it finds to ``out``, returns the folder with the models;
    ``wrote(path, what)`` is told of each file written."""
    told = wrote or (lambda path, what: None)
    logging.getLogger("torch").setLevel(logging.ERROR)
    folder = folder or tempfile.mkdtemp(prefix="modelprov-demo-")
    os.makedirs(folder, exist_ok=True)
    out.write("modelprov demo: what survives optimization, torch.onnx alone vs modelprov\n\n")
    for name in _DEMO_MODELS:
        module, args = _examples.EXAMPLES[name]()
        plain = _quiet_export(module, args, optimize=False)
        torch_optimized = _quiet_export(module, args, optimize=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            path = os.path.join(folder, f"{name}.onnx")
            program = export(module, args, path, verbose=False)
            ours = program.model
        out.write(f"== {name}: {len(plain.graph)} nodes exported\n")
        for label, model in (("torch.onnx optimize=True", torch_optimized), ("modelprov", ours)):
            report = diff(plain, model)
            out.write(
                f"  {label:<25} {len(model.graph):>4} nodes  FX-node recall "
                f"{report.fx_nodes.value:.2f} (dyn {report.fx_nodes_dyn.value:.2f})  "
                f"source lines {report.source_lines.value:.2f}  "
                f"nodes without sources {len(report.nodes_without_sources)}\n"
            )
            for fx, where in list(report.lost_sources.items())[:3]:
                out.write(f"      lost {fx} ({display_location(where) if where else '?'})\n")
        merged = [node for node in ours.graph if len(sources(ours, node)) > 1]
        if merged:
            node = merged[0]
            out.write(
                f"  a fused node, {node.op_type} {node.name!r}, now says where it came from:\n"
            )
            for source in sources(ours, node):
                where = display_location(f"{source.file}:{source.line}") if source.file else "?"
                out.write(f"      {source.fx_node:<28} {where}\n")
            trace = node.metadata_props.get(STACK_TRACE_KEY, "")
            out.write("    its stack_trace metadata:\n")
            out.write("".join(f"      | {line}\n" for line in trace.split("\n")[:12]))
        out.write(f"  saved: {path}\n")
        told(path, f"{name} exported with modelprov")
        plain_path = os.path.join(folder, f"{name}.plain.onnx")
        save_model(plain, plain_path)
        told(plain_path, f"{name} exported with torch.onnx alone, unoptimized")
        report_path = write_report(
            path, os.path.join(folder, f"{name}.report.html"), before=plain_path
        )
        told(report_path, f"{name}'s provenance report")
        out.write(f"  provenance report (open in a browser, works offline): {report_path}\n\n")
    _numerics_demo(out, folder, program, args)
    return folder


def _numerics_demo(
    out: TextIO, folder: str, program: torch.onnx.ONNXProgram, args: tuple[object, ...]
) -> None:
    """A wrong bias planted in one layer of the last model, found by modelprov.compare."""
    from modelprov.numerics import compare

    biases = sorted(
        name
        for name, value in program.model.graph.initializers.items()
        if name.endswith(".bias") and value.const_value is not None
    )
    if not biases:
        return
    planted = biases[len(biases) // 2]
    broken = ir.from_proto(ir.to_proto(program.model))
    value = broken.graph.initializers[planted]
    array = value.const_value.numpy().copy()  # type: ignore[union-attr]
    array.flat[0] += 1.0
    value.const_value = ir.tensor(array, name=planted)
    out.write(f"== which layer differs: {planted} changed by 1.0 in the ONNX file\n")
    report = compare(program, broken, args)
    first = report.first_divergence
    if first is not None:
        out.write(
            f"  modelprov.compare: {sum(r.diverges for r in report.rows)} of {len(report.rows)} "
            f"values diverge; the first is node {first.node} computing "
            f"{', '.join(path or '<root>' for path in first.node_modules)} (max rel error "
            f"{first.max_rel_error:.2g}); everything it reads is within tolerance\n"
        )
    path = os.path.join(folder, "planted.onnx")
    save_model(broken, path)
    report_path = write_report(path, os.path.join(folder, "planted.report.html"), numerics=report)
    out.write(f"  nodes coloured by error: {report_path}\n\n")
