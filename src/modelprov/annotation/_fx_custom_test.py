import logging

import pytest
import torch
import torch.fx.traceback as fx_traceback
from torch import nn

from modelprov.annotation._fx_custom import fx_custom_metadata


class _Annotated(nn.Module):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        metadata = {
            "bits": 8,
            "name": "fc",
            "scale": 0.5,
            "signed": True,
            "shape": [1, 2],
            "opaque": object(),
        }
        with fx_traceback.annotate(metadata):
            y = self.fc(x)
        return torch.relu(y)


def _op_nodes(program: torch.export.ExportedProgram, target: object) -> list[str]:
    return [str(n.name) for n in program.graph.nodes if n.target is target]


def test_reads_torch_fx_traceback_annotate(caplog: pytest.LogCaptureFixture) -> None:
    # Non-strict export (the default) records node.meta["custom"] only under
    # preserve_node_meta() in torch 2.13.
    with fx_traceback.preserve_node_meta():
        program = torch.export.export(_Annotated().eval(), (torch.randn(2, 4),))
    with caplog.at_level(logging.WARNING, logger="modelprov.annotation._fx_custom"):
        metadata = fx_custom_metadata(program)

    (linear,) = _op_nodes(program, torch.ops.aten.linear.default)
    (relu,) = _op_nodes(program, torch.ops.aten.relu.default)
    assert metadata[linear] == {
        "bits": "8",
        "name": "fc",
        "scale": "0.5",
        "signed": "true",
        "shape": "[1,2]",
    }
    # The relu is outside the block; torch's private "_torchdynamo_*" keys are not reported.
    assert relu not in metadata
    assert set(metadata) == {linear}
    assert "'opaque'" in caplog.text
    assert "object" in caplog.text


class _StrictAnnotated(nn.Module):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with fx_traceback.annotate({"bits": 4, "shape": [3]}):
            y = self.fc(x)
        return torch.relu(y)


def test_strict_export_reports_op_nodes_only() -> None:
    # Strict export also copies the dict to the parameter placeholders; those are not ops.
    # (It runs in the test process: strict export keeps working after torchax's import.)
    program = torch.export.export(_StrictAnnotated().eval(), (torch.randn(2, 4),), strict=True)
    (linear,) = _op_nodes(program, torch.ops.aten.linear.default)
    assert fx_custom_metadata(program) == {linear: {"bits": "4", "shape": "[3]"}}


def test_no_annotations_gives_empty_mapping() -> None:
    program = torch.export.export(nn.Linear(2, 2).eval(), (torch.randn(1, 2),))
    assert fx_custom_metadata(program) == {}
