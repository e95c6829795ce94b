"""Architectures that once failed to lower (issue 24): each lowers, runs like torch on XLA CPU
for generated inputs, and every op it lowered names an FX node."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from modelprov.stablehlo import StableHLOProgram, export_stablehlo
from tests.stablehlo import _breadth_models

pytest.importorskip("jax")

_FAST = sorted(set(_breadth_models.CASES) - {"efficientnet_block"})
_CASES = [
    *_FAST,
    pytest.param("efficientnet_block", marks=pytest.mark.slow),  # ~15 s export
]


@pytest.fixture(scope="module", params=_CASES)
def exported(request: pytest.FixtureRequest) -> tuple[str, _breadth_models.Case, StableHLOProgram]:
    case = _breadth_models.CASES[request.param]()
    model, args, dynamic_shapes, _ = case
    return request.param, case, export_stablehlo(model, args, dynamic_shapes=dynamic_shapes)


def _as_tuple(value: object) -> tuple[np.ndarray, ...]:
    values = value if isinstance(value, tuple | list) else (value,)
    return tuple(np.asarray(v.detach() if isinstance(v, torch.Tensor) else v) for v in values)


def test_runs_like_torch_on_generated_inputs(
    exported: tuple[str, _breadth_models.Case, StableHLOProgram],
) -> None:
    _, (model, _, _, make_inputs), program = exported
    generator = torch.Generator().manual_seed(7)
    for _ in range(4):
        inputs = make_inputs(generator)
        with torch.no_grad():
            expected = _as_tuple(model(*inputs))
        actual = _as_tuple(program.run(*inputs))
        assert len(actual) == len(expected)
        for got, want in zip(actual, expected, strict=True):
            assert got.shape == want.shape
            np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)


def test_every_lowered_op_names_an_fx_node(
    exported: tuple[str, _breadth_models.Case, StableHLOProgram],
) -> None:
    _, _, program = exported
    for op in program.unattributed_ops:
        assert op.is_constant or op.in_wrapper, op.text
    lowered = [op for op in program.ops if not op.is_constant and not op.in_wrapper]
    assert lowered and all("modelprov.node" in op.attributes for op in lowered)


def test_cond_lowers_to_case_whose_branch_ops_name_their_branch_nodes() -> None:
    model, args, _, _ = _breadth_models.cond_model()
    program = export_stablehlo(model, args)
    (case,) = [op for op in program.ops if op.op_name == "stablehlo.case"]
    inside = [op for op in program.ops if _is_inside(program, op, case.index)]
    computing = [op for op in inside if op.op_name != "stablehlo.return" and not op.is_constant]
    branch_nodes = {str(op.attributes["modelprov.node"]) for op in computing}
    # Both branches, each node by its own name: the linear's addmm, relu / tanh, mul.
    assert {"true_graph_0__addmm", "true_graph_0__relu"} <= branch_nodes
    assert {"false_graph_0__addmm", "false_graph_0__tanh", "false_graph_0__mul"} <= branch_nodes
    for op in computing:
        assert program.sources(op), op.text
        assert str(op.attributes["modelprov.target"]).startswith("aten."), op.text
    assert case.attributes["modelprov.node"] == "cond"


def _is_inside(program: StableHLOProgram, op: object, ancestor: int) -> bool:
    by_index = {record.index: record for record in program.ops}
    parent = getattr(op, "parent", None)
    while parent is not None:
        if parent == ancestor:
            return True
        parent = by_index[parent].parent if parent in by_index else None
    return False


def test_while_loop_lowers_and_runs_like_torch() -> None:
    from tests import _factories

    model, args = _factories.while_loop_model()
    program = export_stablehlo(model, args)
    assert any(op.op_name == "stablehlo.while" for op in program.ops)
    generator = torch.Generator().manual_seed(3)
    for _ in range(3):
        x = torch.randn(args[0].shape, generator=generator)
        with torch.no_grad():
            expected = _as_tuple(model(x))
        for got, want in zip(_as_tuple(program.run(x)), expected, strict=True):
            np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)
    loop = next(op for op in program.ops if op.op_name == "stablehlo.while")
    body = {
        str(op.attributes["modelprov.node"])
        for op in program.ops
        if _is_inside(program, op, loop.index) and op.op_name != "stablehlo.return"
    }
    assert body == {
        "while_loop_cond_graph_0__lt",
        "while_loop_body_graph_0__add",
        "while_loop_body_graph_0__mul",
    }


class _Helpers(torch.nn.Module):  # type: ignore[misc]
    """cumsum twice on equal shapes (JAX emits one private @cumsum, called from both nodes)
    and argmax (a private @argmax)."""

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x.cumsum(1) * y.cumsum(1) + x.argmax(1, keepdim=True).float()


def test_ops_in_private_helper_functions_carry_their_callers_nodes() -> None:
    generator = torch.Generator().manual_seed(5)
    x, y = (torch.randn(3, 5, generator=generator) for _ in range(2))
    program = export_stablehlo(_Helpers(), (x, y))
    assert "func.func private @cumsum" in program.text
    assert "func.func private @argmax" in program.text
    lowered = [op for op in program.ops if not op.is_constant and not op.in_wrapper]
    assert all("modelprov.node" in op.attributes for op in lowered)
    by_function: dict[str, set[str]] = {}
    for op in lowered:
        if op.op_name == "stablehlo.reduce_window":  # cumsum's body, in the shared helper
            by_function.setdefault("cumsum", set()).update(op.nodes)
        if op.op_name == "stablehlo.iota":  # argmax's body
            by_function.setdefault("argmax", set()).update(op.nodes)
    assert by_function == {"cumsum": {"cumsum", "cumsum_1"}, "argmax": {"argmax"}}
    (got,) = program.run(x, y)
    np.testing.assert_allclose(got, _Helpers()(x, y).numpy(), atol=1e-5, rtol=0)
