"""Bad input: an op torchax cannot lower, an unknown annotation path, missing torchax."""

from __future__ import annotations

import sys

import pytest
import torch

from modelprov.errors import AnnotationError, MissingDependencyError, StableHLOError
from modelprov.stablehlo import export_stablehlo

pytest.importorskip("jax")


@torch.library.custom_op("modelprov_test::mystery", mutates_args=())  # type: ignore[untyped-decorator]
def mystery(x: torch.Tensor) -> torch.Tensor:
    """An op with no torchax lowering."""
    return x * 2


@mystery.register_fake  # type: ignore[untyped-decorator]
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


class _Mysterious(torch.nn.Module):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return mystery(self.fc(x))  # the line the error must name


def _line_of(text: str) -> int:
    with open(__file__, encoding="utf-8") as handle:
        source = handle.read().split("\n")
    return next(i for i, line in enumerate(source, start=1) if text in line and "def " not in line)


def test_unsupported_op_names_the_fx_node_and_its_source_line() -> None:
    with pytest.raises(StableHLOError) as raised:
        export_stablehlo(_Mysterious(), (torch.randn(2, 4),))
    message = str(raised.value)
    assert "FX node 'mystery'" in message
    assert "modelprov_test.mystery.default" in message
    assert f"test_stablehlo_errors.py:{_line_of('return mystery(self.fc(x))')}" in message


def test_unknown_annotation_path_suggests_close_matches() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    model.add_module("head", torch.nn.Linear(4, 2))
    with pytest.raises(AnnotationError, match=r"'heda'.*Did you mean 'head'"):
        export_stablehlo(model, (torch.randn(1, 4),), annotations={"heda": {"custom.max": 1.0}})


def test_missing_torchax_gives_install_guidance(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == "torchax" or m.startswith("torchax.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "torchax", None)
    model = torch.nn.Linear(2, 2)
    with pytest.raises(MissingDependencyError, match=r'pip install "modelprov\[stablehlo\]"'):
        export_stablehlo(model, (torch.randn(1, 2),))


class _MysteriousInside(torch.nn.Module):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.block = _Mysterious()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.block(x) + 1


def test_unsupported_op_names_its_module_and_a_workaround_that_works() -> None:
    model, x = _MysteriousInside().eval(), torch.randn(2, 4)
    with pytest.raises(StableHLOError) as raised:
        export_stablehlo(model, (x,))
    message = str(raised.value)
    assert "in module 'block' (_Mysterious)" in message
    assert "run_decompositions({torch.ops.modelprov_test.mystery.default: " in message
    # The workaround the message gives lowers the model, and it runs like torch.
    program = export_stablehlo(
        torch.export.export(model, (x,)).run_decompositions(
            {torch.ops.modelprov_test.mystery.default: lambda t: t * 2}
        )
    )
    (got,) = program.run(x)
    torch.testing.assert_close(torch.from_numpy(got.copy()), model(x).detach(), atol=1e-5, rtol=0)
