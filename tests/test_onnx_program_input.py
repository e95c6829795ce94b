"""Every public function of the README's API table that reads an ONNX model takes the
``torch.onnx.ONNXProgram`` modelprov.export returns, through the one conversion at the edge
(``onnx/_convert.model_input``); other kinds are a UsageError naming the type and the kinds
accepted. And the program's own ``.optimize()`` (torch.onnx's documented pattern after
``optimize=False``) keeps every FX node.
"""

from __future__ import annotations

import pathlib
import re
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir
import pytest
import torch

import modelprov
from modelprov._cli import _examples
from modelprov.errors import UsageError

_README = pathlib.Path(__file__).resolve().parents[1] / "README.md"

_NOT_ONNX_MODEL_READERS = {
    # torch modules, programs or files of other kinds, and values that are no functions
    "export",
    "annotate",
    "annotations",
    "calibrate",
    "export_stablehlo",
    "stablehlo.exported_program_to_stablehlo",
    "stablehlo.read_mlir_sources",
    "stablehlo.read_hlo_sources",
    "stablehlo.restore_attributes",
    "stablehlo.FxNodeInfo",
    "Policies",
    "DEFAULT_POLICIES",
    "policy.*",
    "policy.load_policies",
    "keys.*",
    "TraceOptions",
    # an onnx-ir pass: called by a PassManager on the onnx_ir.Model, in place
    "OptimizeProvenancePass",
}


def _api_table_names() -> set[str]:
    """The ``modelprov.*`` names of the first cells of the README's API table."""
    names = set()
    for line in _README.read_text(encoding="utf-8").splitlines():
        if not line.startswith("| `"):
            continue
        first_cell = line.split("|")[1]
        names.update(re.findall(r"`modelprov\.([A-Za-z_.*]+)", first_cell))
    return names


def _batches() -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    return [torch.randn(4, 784, generator=generator) for _ in range(2)]


_CALLS: dict[str, Callable[[Any, pathlib.Path], Any]] = {
    "optimize": lambda m, _: modelprov.optimize(m),
    "sources": lambda m, _: modelprov.sources(m, _first_node(m)),
    "SourceIndex": lambda m, _: modelprov.SourceIndex(m).sources(_first_node(m)),
    "recover": lambda m, _: modelprov.recover(m, m),
    "recover_with_report": lambda m, _: modelprov.recover_with_report(m, m)[1],
    "optimize_with": lambda m, _: modelprov.optimize_with("onnxruntime", m, level="basic"),
    "functionize": lambda m, _: modelprov.functionize(m, level="module"),
    "inline": lambda m, _: modelprov.inline(m),
    "structural_hash": lambda m, _: modelprov.structural_hash(m),
    "find_calls": lambda m, _: modelprov.find_calls(m, "aten::linear"),
    "audit": lambda m, _: modelprov.audit(m),
    "report": lambda m, _: modelprov.report(m, before=m, source_code=False),
    "write_report": lambda m, tmp: modelprov.write_report(m, tmp / "r.html", source_code=False),
    "overlay": lambda m, _: modelprov.overlay(m),
    "write_overlay": lambda m, tmp: modelprov.write_overlay(m, tmp / "o.json"),
    "diff": lambda m, _: modelprov.diff(m, m),
    "quantize": lambda m, _: modelprov.quantize(m, calibration_batches=_batches()),
    "join_sources": lambda m, _: modelprov.join_sources(m, "module {}"),
    "compare": lambda m, _: modelprov.compare(m, m, _examples.mlp()[1]),
}


def _first_node(model: Any) -> ir.Node:
    """The program's first node (a node of no model for what is no program)."""
    if isinstance(model, torch.onnx.ONNXProgram):
        return next(iter(model.model.graph))
    return ir.Node("", "Relu", [ir.Value(name="x")])


@pytest.fixture(scope="module")
def program() -> torch.onnx.ONNXProgram:
    model, args = _examples.mlp()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return modelprov.export(model, args, verbose=False)


def test_every_model_reader_of_the_api_table_is_checked() -> None:
    names = _api_table_names()
    assert {"audit", "diff", "quantize", "join_sources"} <= names  # the table was read
    assert names - _NOT_ONNX_MODEL_READERS == set(_CALLS)


def _check(name: str, result: Any, program: torch.onnx.ONNXProgram) -> None:
    """What each function gives for the MLP's program: its own model, read for real."""
    nodes = len(program.model.graph)
    if name in {"optimize", "recover", "optimize_with", "inline"}:
        assert isinstance(result, ir.Model) and len(result.graph) == nodes
    elif name == "functionize":
        assert isinstance(result, ir.Model) and result.functions
        assert len(modelprov.find_calls(result, "Linear")) == 2
    elif name in {"sources", "SourceIndex"}:
        assert result and result[0].fx_node
    elif name == "recover_with_report":
        assert result.nodes == nodes and not result.unattributed
    elif name == "structural_hash":
        assert result == modelprov.structural_hash(program.model)
    elif name == "find_calls":
        assert result == []  # not functionized: no calls, but read
    elif name == "compare":
        assert result.rows and not result.diverges and result.coverage == 1.0
    elif name == "audit":
        assert result.nodes == nodes and result.nodes_without_sources == ()
    elif name == "report":
        assert result.startswith("<!DOCTYPE html>") and "modelprov" in result
    elif name in {"write_report", "write_overlay"}:
        assert pathlib.Path(result).stat().st_size > 0
    elif name == "overlay":
        assert result
    elif name == "diff":
        assert result.fx_nodes.value == 1.0 and result.nodes_after == nodes
    elif name == "quantize":
        assert isinstance(result, ir.Model)
        assert any(node.op_type == "QuantizeLinear" for node in result.graph)
    elif name == "join_sources":
        assert len(result.onnx_only) > 0 and not result.both
    else:
        raise AssertionError(f"no check for {name}")


@pytest.mark.parametrize("name", sorted(_CALLS))
def test_takes_the_program_modelprov_export_returns(
    name: str, program: torch.onnx.ONNXProgram, tmp_path: pathlib.Path
) -> None:
    before = ir.to_proto(program.model).SerializeToString()
    _check(name, _CALLS[name](program, tmp_path), program)
    assert ir.to_proto(program.model).SerializeToString() == before  # never modified


@pytest.mark.parametrize("name", sorted(_CALLS))
@pytest.mark.parametrize("bad", [42, b"model.onnx", {"graph": []}], ids=["int", "bytes", "dict"])
def test_other_kinds_name_the_type_and_what_is_accepted(
    name: str, bad: object, tmp_path: pathlib.Path
) -> None:
    kind = type(bad).__name__
    accepted = (
        r"onnx_ir\.Model, an onnx\.ModelProto(, a path to an \.onnx file)? or the torch\.onnx"
    )
    with pytest.raises(UsageError, match=rf"got builtins\.{kind}; pass an {accepted}"):
        _CALLS[name](bad, tmp_path)


def test_program_optimize_keeps_every_fx_node() -> None:
    """``export(optimize=False)`` then ``program.optimize()``: modelprov's optimizer, the same
    graph as torch's ONNXProgram.optimize, every FX node still referenced."""
    model, args = _examples.double_transpose()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = modelprov.export(model, args, optimize=False, verbose=False)
        plain = torch.onnx.export(model, args, dynamo=True, optimize=False, verbose=False)
    before = program.model.clone()
    program.optimize()
    assert modelprov.diff(before, program).fx_nodes.value == 1.0
    plain.optimize()  # torch's own: the lossy path this replaces
    assert modelprov.diff(before, plain.model).fx_nodes.value < 1.0
    assert [n.op_type for n in program.model.graph] == [n.op_type for n in plain.model.graph]
    (output,) = program(*args)  # a session on the optimized model
    with torch.no_grad():
        np.testing.assert_allclose(output.numpy(), model(*args).numpy(), rtol=1e-5, atol=1e-6)


def test_a_path_is_read_by_the_copying_entry_points(
    program: torch.onnx.ONNXProgram, tmp_path: pathlib.Path
) -> None:
    path = tmp_path / "m.onnx"
    program.save(path)
    optimized = modelprov.optimize(path)
    assert isinstance(optimized, onnx.ModelProto)
    assert len(optimized.graph.node) == len(program.model.graph)
