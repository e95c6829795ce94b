"""torch.onnx's own keys, read raw (tests/_raw_keys.py), never name less after modelprov.optimize
than after onnxscript's optimizer on the same export; the keys merged losslessly name all.

Layout keys (``namespace``, and the first list of ``name_scopes`` / ``class_hierarchy`` that
``ast.literal_eval`` reads) follow the producer of the node's output, which is where
onnxscript keeps its one value; ``fx_node``, ``stack_trace`` and every line of the scope lists
keep every source, so a reader of the raw keys recovers what ``modelprov.sources`` returns.
"""

from __future__ import annotations

import ast
import warnings

import onnx_ir as ir
import onnxscript.optimizer
import pytest
import torch
from hypothesis import given

import modelprov
from tests._raw_keys import ASPECTS, NAME_SCOPES, RawRecall, raw_recall
from tests._seeded import seeded
from tests._sourced_graphs import SourcedGraph, sourced_graphs
from tests.conftest import plain_export

LOSSLESS = [
    pair
    for pair in ASPECTS
    if pair[0] in ("pkg.torch.onnx.fx_node", "pkg.torch.onnx.stack_trace")
    or pair[1].endswith(" shown")
]
"""Aspects read from keys modelprov merges losslessly: every source's item is there."""


def _both(export: ir.Model) -> tuple[ir.Model, RawRecall, RawRecall]:
    ours = modelprov.optimize(export.clone())
    theirs = export.clone()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        onnxscript.optimizer.optimize_ir(theirs)
    return ours, raw_recall(export, ours), raw_recall(export, theirs)


def _check(export: ir.Model) -> tuple[ir.Model, RawRecall, RawRecall]:
    ours, mine, theirs = _both(export)
    below = {
        pair: (
            mine.value(pair),
            theirs.value(pair),
            sorted(set(mine.lost[pair]) - set(theirs.lost[pair]))[:4],
        )
        for pair in ASPECTS
        if mine.value(pair) < theirs.value(pair)
    }
    assert below == {}
    assert {pair: mine.lost[pair] for pair in LOSSLESS if mine.lost[pair]} == {}
    report = modelprov.diff(export, ours)
    assert report.fx_nodes.value == report.source_lines.value == report.module_paths.value == 1.0
    return ours, mine, theirs


@seeded(60)
@given(graph=sourced_graphs(max_blocks=6))
def test_generated_graphs_raw_keys_never_below_onnxscript(graph: SourcedGraph) -> None:
    _check(graph.model)


class _Layer(torch.nn.Module):  # type: ignore[misc]
    """Linear, GELU in its own module, dropout (a clone in eval) in the layer, Linear, and a
    residual Add in the layer (so the layer's module is named by a node of its own)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.act, self.fc2 = (
            torch.nn.Linear(8, 16),
            torch.nn.GELU(),
            torch.nn.Linear(16, 8),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = torch.nn.functional.dropout(self.act(self.fc1(x)), p=0.1, training=self.training)
        return x + self.fc2(hidden)  # type: ignore[no-any-return]


def _export(module: torch.nn.Module, args: tuple[torch.Tensor, ...]) -> ir.Model:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(module, args, dynamo=True, optimize=False, verbose=False)
    return program.model


def test_a_node_absorbing_the_clone_after_it_stays_in_the_module_computing_it() -> None:
    """The Gelu absorbs the eliminated clone (dropout in eval) that aliases its output: its
    layout keys name the GELU module, as onnxscript's do, and the scope lists still name
    the clone's module on a comment line."""
    torch.manual_seed(0)
    export = _export(torch.nn.Sequential(_Layer(), _Layer()).eval(), (torch.randn(2, 8),))
    ours, _, _ = _check(export)
    gelu = next(node for node in ours.graph if node.op_type == "Gelu")
    assert (
        gelu.metadata_props["namespace"].split("/")[-2] == "0.act: torch.nn.modules.activation.GELU"
    )
    scopes = gelu.metadata_props[NAME_SCOPES]
    assert ast.literal_eval(scopes) == ["", "0", "0.act", "gelu"]
    assert scopes.splitlines()[1:] == ["# ['', '0', 'clone']"]


class _ZeroBias(torch.nn.Module):  # type: ignore[misc]
    """A Linear whose bias is zero (onnxscript drops it from the Gemm), dropout, residual."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)
        torch.nn.init.zeros_(self.fc.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.nn.functional.dropout(self.fc(x), p=0.1, training=self.training)


def test_a_gemm_rebuilt_in_the_step_that_removed_the_clone_after_it_stays_in_its_linear() -> None:
    """One optimize_ir step rebuilds the Gemm (RemoveOptionalBiasFromGemm) and eliminates
    the clone (dropout in eval) after it: the new Gemm's output is the Linear's as well as the
    clone's, so its layout keys name the Linear (``0.fc``), as onnxscript's do."""
    torch.manual_seed(0)
    export = _export(torch.nn.Sequential(_ZeroBias(), _ZeroBias()).eval(), (torch.randn(2, 8),))
    ours, _, _ = _check(export)
    gemms = [node for node in ours.graph if node.op_type == "Gemm"]
    assert [ast.literal_eval(node.metadata_props[NAME_SCOPES])[-2] for node in gemms] == [
        "0.fc",
        "1.fc",
    ]
    assert all(
        node.metadata_props["pkg.onnxscript.rewriter.rule_name"] == "RemoveOptionalBiasFromGemm"
        for node in gemms
    )


def test_gpt2_raw_keys_never_below_onnxscript() -> None:
    """A transformers GPT2Model (2 layers, 64 wide, random weights)."""
    _check(plain_export("gpt2"))


@pytest.mark.slow
@pytest.mark.parametrize("case", ["llama", "opt"])
def test_zoo_decoder_raw_keys_never_below_onnxscript(case: str) -> None:
    """The zoo's LlamaModel (grouped-query attention) and OPTModel (2 layers, 32 wide, random
    weights). In OPT, one optimize_ir step (RemoveOptionalBiasFromGemm) rebuilds fc2's Gemm
    while the clone (dropout) after it is eliminated; the rebuilt Gemm's output is fc2's as
    well as the clone's, so its layout keys name fc2, as onnxscript's do."""
    from benchmarks import _zoo_cases

    torch.manual_seed(0)
    model, inputs = getattr(_zoo_cases, case)()
    _check(_export(model, inputs))
