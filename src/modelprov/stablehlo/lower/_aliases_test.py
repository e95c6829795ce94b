"""Nodes without ops of their own are sources of the op producing their output value."""

from __future__ import annotations

import pytest
import torch
from torch import nn

pytest.importorskip("jax")


class _Block(nn.Module):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.drop = nn.Dropout(0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.fc(x)).contiguous() * 3


def test_dropout_and_contiguous_name_the_op_producing_their_value() -> None:
    import modelprov

    torch.manual_seed(0)
    program = modelprov.export_stablehlo(_Block().eval(), (torch.randn(2, 4),))
    user_nodes = {
        n.name
        for n in torch.export.export(_Block().eval(), (torch.randn(2, 4),)).graph.nodes
        if n.op == "call_function"
    }
    named = {s.id for op in program.ops for s in program.sources(op)}
    assert named == user_nodes  # dropout and contiguous included
    # The ops of the FX node producing the Linear's output value (addmm) produce dropout's.
    aliased = [op for op in program.ops if "dropout" in {s.id for s in program.sources(op)}]
    assert {op.nodes for op in aliased} == {("addmm",)}
    last = aliased[-1]
    assert last.op_name == "stablehlo.add"  # the bias add: the value dropout passes on
    sources = program.sources(last)
    assert [s.id for s in sources][:2] == ["linear", "dropout"]
    assert [s.module_path for s in sources][:2] == ["fc", "drop"]
    assert last.location.startswith("fc/linear;drop/dropout")
    assert 'loc("drop/dropout"' in program.text_with_locations
    # Attributes stay the op's own node's: the aliases are sources, not attribute values.
    assert last.attributes["modelprov.source_node"] == "linear"
