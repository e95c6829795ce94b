"""ONNX nodes and StableHLO ops of one model joined by the shared source id (user FX node)."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch

import modelprov
from modelprov.errors import UsageError
from tests.stablehlo import _downstream

pytest.importorskip("jax")

_SOURCE_NODE_KEY = "pkg.modelprov.source_node"


def _exports(name: str) -> tuple[Any, Any, Any]:
    model, args, kwargs = _downstream.MODELS[name]()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        onnx_program = modelprov.export(model, args, kwargs=kwargs, verbose=False)
    program = modelprov.export_stablehlo(model, args, kwargs)
    return onnx_program, program, torch.export.export(model, args, kwargs)


@pytest.mark.parametrize(
    "name",
    ["mlp", "transformer_encoder", "llama"],  # llama: ~14 s
)
def test_most_fx_nodes_are_found_on_both_sides(name: str) -> None:
    onnx_program, program, exported = _exports(name)
    joined = modelprov.join_sources(onnx_program, program)
    user_nodes = {n.name for n in exported.graph.nodes if n.op == "call_function"}
    assert set(joined.ids) <= user_nodes  # ids are names of the user's program's nodes
    assert joined.onnx_coverage >= 0.95, joined.onnx_only
    # Llama's same-dtype `to` casts, which torch.onnx's decomposition deletes, are named as
    # aliases on the ONNX node producing their value (171/172 ids on both sides, measured).
    assert joined.coverage >= 0.95, (joined.onnx_only, joined.stablehlo_only)
    # The join names real nodes and ops: both sides agree on the module of each id.
    onnx_modules = {
        source_id: source.module_path
        for node in onnx_program.model.graph
        for source in modelprov.sources(onnx_program.model, node)
        for source_id in [source.metadata.get(_SOURCE_NODE_KEY, "")]
    }
    for source_id in joined.both:
        op = program.ops[joined.stablehlo_ops[source_id][0]]
        modules = {s.module_path for s in program.sources(op) if s.id == source_id}
        if source_id in onnx_modules:
            assert onnx_modules[source_id] in modules, source_id


def test_join_works_from_mlir_text_after_iree() -> None:
    pytest.importorskip("iree.compiler")
    onnx_program, program, _ = _exports("transformer_encoder")
    direct = modelprov.join_sources(onnx_program, program)
    flow = _downstream.iree_flow(program)
    through_iree = modelprov.join_sources(onnx_program.model, flow)
    # IREE folds and fuses many ops away (34 of 70 ids remain at flow, measured); every id
    # still named joins the same ONNX nodes.
    assert set(through_iree.both) <= set(direct.both)
    assert len(through_iree.both) * 3 >= len(direct.both)
    for source_id in through_iree.both:
        assert through_iree.onnx_nodes[source_id] == direct.onnx_nodes[source_id]


def test_plain_and_optimized_onnx_name_the_same_ids() -> None:
    model, args, _ = _downstream.MODELS["transformer_encoder"]()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = modelprov.export(model, args, optimize=False, verbose=False)
        optimized = modelprov.export(model, args, verbose=False)
    program = modelprov.export_stablehlo(model, args)
    assert len(optimized.model.graph) < len(plain.model.graph)
    assert set(modelprov.join_sources(plain, program).onnx_nodes) == set(
        modelprov.join_sources(optimized, program).onnx_nodes
    )


def test_join_refuses_what_is_no_onnx_model() -> None:
    with pytest.raises(UsageError, match=r"join_sources\(onnx_model, \.\.\.\): got builtins.int"):
        modelprov.join_sources(42, "module {}")  # type: ignore[arg-type]
