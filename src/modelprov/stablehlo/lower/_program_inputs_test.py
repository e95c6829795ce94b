"""The lowered function's states follow the placeholders; dynamic dims share one scope."""

from __future__ import annotations

import pytest
import torch
from torch.export.graph_signature import InputKind

from modelprov.stablehlo.lower._program_inputs import program_states, user_input_avals

pytest.importorskip("jax")


def _placeholder_values(program: torch.export.ExportedProgram) -> list[torch.Tensor]:
    values = []
    for spec in program.graph_signature.input_specs:
        if spec.kind == InputKind.USER_INPUT:
            continue
        table = program.state_dict if spec.target in program.state_dict else program.constants
        values.append(table[spec.target])
    return values


class _Picks(torch.nn.Module):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.tensor([0.5, -1.0]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x[:, [2, 0]] * self.weight  # the index list becomes a lifted constant


class _Scales(torch.nn.Module):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("scale", torch.tensor([2.0, 3.0]), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.scale


class _PicksThenScales(torch.nn.Module):  # type: ignore[misc]
    """A constant in a module registered before a buffer's (like transformers' Falcon)."""

    def __init__(self) -> None:
        super().__init__()
        self.picks = _Picks()
        self.scales = _Scales()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.scales(self.picks(x))


def test_states_follow_the_placeholders_when_constants_precede_buffers() -> None:
    from modelprov.stablehlo.lower._lower import decompose

    program = decompose(torch.export.export(_PicksThenScales(), (torch.randn(2, 3),)))
    kinds = [spec.kind for spec in program.graph_signature.input_specs]
    # The case torchax's helper gets wrong: a lifted constant before a buffer.
    assert kinds.index(InputKind.CONSTANT_TENSOR) < kinds.index(InputKind.BUFFER)
    states = program_states(program)
    expected = _placeholder_values(program)
    assert len(states) == len(expected)
    for state, value in zip(states, expected, strict=True):
        assert state is value


def test_states_of_parameters_and_buffers() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4)).eval()
    program = torch.export.export(model, (torch.randn(2, 3),))
    states = program_states(program)
    signature = program.graph_signature
    names = [*signature.parameters, *signature.buffers]
    assert len(states) == len(names)
    for name, state in zip(names, states, strict=True):
        assert torch.equal(state, program.state_dict[name])


def test_symbolic_dimensions_share_one_scope_with_their_ranges() -> None:
    class Add(torch.nn.Module):  # type: ignore[misc]
        def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return (x + y).sum(1)

    batch = torch.export.Dim("batch", min=2, max=9)
    length = torch.export.Dim("length", max=40)
    program = torch.export.export(
        Add(),
        (torch.randn(3, 5), torch.randn(3, 5)),
        dynamic_shapes=({0: batch, 1: length}, {0: batch, 1: length}),
    )
    first, second = user_input_avals(program)
    assert first.shape == second.shape
    symbols = [d for d in first.shape if not isinstance(d, int)]
    assert len(symbols) == 2
    (scope,) = {d.scope for d in symbols}
    text = str(scope)
    assert "<= 9" in text and "<= 40" in text
