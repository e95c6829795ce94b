"""No-op nodes torch.onnx's decomposition deletes are named on the node producing their value."""

from __future__ import annotations

import warnings
from typing import Any

import torch

import modelprov
from modelprov.core._sources import shared_id_list
from modelprov.keys import SOURCE_NODE_KEY
from modelprov.onnx.export._capture import capture_program


class _SameDtypeCast(torch.nn.Module):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = self.proj(x).to(torch.float32)  # a no-op cast, as in Llama's RMSNorm
        return torch.relu(hidden) * 2


def _export(model: torch.nn.Module | torch.export.ExportedProgram) -> torch.onnx.ONNXProgram:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return modelprov.export(model, (torch.randn(2, 4),), optimize=False, verbose=False)


def _ids_by_op(program: torch.onnx.ONNXProgram) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for node in program.model.graph:
        for source_id in shared_id_list(node.metadata_props.get(SOURCE_NODE_KEY, "")):
            found.setdefault(source_id, []).append(node.op_type)
    return found


def test_deleted_cast_is_named_on_the_node_producing_its_value() -> None:
    model = _SameDtypeCast().eval()
    user_nodes = [
        n.name
        for n in torch.export.export(model, (torch.randn(2, 4),)).graph.nodes
        if n.op == "call_function" and n.meta.get("val") is not None  # no value: no node
    ]
    assert any(name.startswith("to") for name in user_nodes)  # the cast is in the program
    ids = _ids_by_op(_export(model))
    assert set(ids) == set(user_nodes)  # every node of the user's program is named
    cast = next(name for name in user_nodes if name.startswith("to"))
    assert ids[cast] == ["Gemm"]  # the node producing the cast's input (and output)
    assert ids["linear"] == ["Gemm"]


def test_a_user_program_gets_the_same_aliases() -> None:
    model = _SameDtypeCast().eval()
    exported = torch.export.export(model, (torch.randn(2, 4),))
    assert _ids_by_op(_export(exported)) == _ids_by_op(_export(model))


def test_capture_leaves_dynamic_axes_to_torch_onnx() -> None:
    model = _SameDtypeCast().eval()
    args = (torch.randn(2, 4),)
    exported = torch.export.export(model, args)
    assert capture_program(exported, args, {}) is exported
    assert capture_program(model, args, {"dynamic_axes": {"x": {0: "batch"}}}) is None
    for batch in (torch.export.Dim("batch"), "batch"):  # a str is torch.onnx's named Dim.DYNAMIC
        dynamic = capture_program(model, args, {"dynamic_shapes": ({0: batch},)})
        assert dynamic is not None
        placeholder = next(n for n in dynamic.graph.nodes if n.name == "x")
        assert isinstance(placeholder.meta["val"].shape[0], torch.SymInt)
    assert capture_program(model, (torch.randn(3, 5),), {}) is None  # torch.export refuses
    captured = capture_program(model, args, {})
    assert captured is not None
    assert _node_names(captured) == _node_names(exported)


def _node_names(program: Any) -> list[str]:
    return [node.name for node in program.graph.nodes]
