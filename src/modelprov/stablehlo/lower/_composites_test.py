"""Which ATen calls become composites, and their attribute forms."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from modelprov.stablehlo.lower._composites import NotComposite, _attribute, plan_composites

pytest.importorskip("jax")


@pytest.mark.parametrize(
    ("kind", "value", "expected"),
    [
        ("bool", True, True),
        ("int", 3, 3),
        ("float", 2, 2.0),  # an integer for a float argument is a float
        ("Scalar", 2, 2),  # a Scalar keeps its value's type
        ("Optional[float]", 0.5, 0.5),
        ("List[int]", [1, -1], [1, -1]),
        ("str", "tanh", "tanh"),
        ("Optional[ScalarType]", torch.float16, "torch.float16"),
        ("Optional[MemoryFormat]", torch.contiguous_format, "torch.contiguous_format"),
        ("Optional[Device]", torch.device("cpu"), "cpu"),
        ("Optional[int]", None, None),
    ],
)
def test_attribute_forms(kind: str, value: object, expected: object) -> None:
    converted = _attribute("x", kind, value)
    assert converted == expected and type(converted) is type(expected)


def test_a_list_holding_none_has_no_attribute_form() -> None:
    with pytest.raises(NotComposite, match="'x' is a list holding None"):
        _attribute("x", "List[Optional[int]]", [1, None])


class _Reshape(nn.Module):  # type: ignore[misc]
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x).reshape(x.shape[0], -1) * 2


def _plan(model: nn.Module, x: torch.Tensor, **export: object):  # type: ignore[no-untyped-def]
    from modelprov.stablehlo.lower._lower import decompose

    program = torch.export.export(model, (x,), **export)  # type: ignore[arg-type]
    return program, plan_composites(decompose(program).graph, program.graph)


def test_every_computing_call_of_a_static_program_is_planned() -> None:
    program, plan = _plan(_Reshape(), torch.randn(2, 3, 4))
    calls = [n for n in program.graph.nodes if isinstance(n.target, torch._ops.OpOverload)]
    assert {group.source for group in plan.groups.values()} == {n.name for n in calls}
    assert plan.calls == len(calls) and not plan.skipped
    reshape = next(g for g in plan.groups.values() if g.name.startswith("aten.reshape"))
    assert reshape.attributes == {"shape": [2, -1]} and len(reshape.operands) == 1


def test_a_symbolic_size_leaves_the_call_without_a_composite() -> None:
    batch = torch.export.Dim("batch", min=2, max=64)
    program, plan = _plan(_Reshape(), torch.randn(2, 3, 4), dynamic_shapes=({0: batch},))
    reasons = {program_node: why for program_node, why in plan.skipped.items()}
    reshape = next(n.name for n in program.graph.nodes if str(n.target).startswith("aten.reshape"))
    assert "'shape' is computed" in reasons[reshape]
    relu = next(n.name for n in program.graph.nodes if str(n.target) == "aten.relu.default")
    assert relu in {group.source for group in plan.groups.values()}
