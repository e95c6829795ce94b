"""After onnxruntime's ``all`` level (NCHWc), compare sees no divergence in generated CNNs.

Blocked Convs hold their values in another element order; recover attributes them for the
claims but must not say they are the original value's tensor, or compare would pair them
with torch's and report a layer that does not differ.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import modelprov
from modelprov.numerics import compare
from tests._seeded import seeded

pytestmark = pytest.mark.filterwarnings("ignore")


class _Cnn(torch.nn.Module):
    def __init__(self, widths: list[int], kernels: list[int], residual: list[bool]) -> None:
        super().__init__()
        layers: list[torch.nn.Module] = []
        channels = 3
        for width, kernel in zip(widths, kernels, strict=True):
            layers.append(
                torch.nn.Sequential(
                    torch.nn.Conv2d(channels, width, kernel, padding=kernel // 2),
                    torch.nn.BatchNorm2d(width),
                    torch.nn.ReLU(),
                )
            )
            channels = width
        self.blocks = torch.nn.ModuleList(layers)
        self.residual = residual
        self.pool = torch.nn.MaxPool2d(2)
        self.head = torch.nn.Linear(channels * 4 * 4, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block, residual in zip(self.blocks, self.residual, strict=True):
            y = block(x)
            x = y + x if residual and y.shape == x.shape else y
        return self.head(torch.flatten(self.pool(x), 1))


@st.composite
def _cnns(draw: st.DrawFn) -> _Cnn:
    depth = draw(st.integers(1, 3))
    widths = draw(st.lists(st.sampled_from([8, 16, 24, 32]), min_size=depth, max_size=depth))
    kernels = draw(st.lists(st.sampled_from([1, 3]), min_size=depth, max_size=depth))
    residual = draw(st.lists(st.booleans(), min_size=depth, max_size=depth))
    torch.manual_seed(draw(st.integers(0, 2**16)))
    model = _Cnn(widths, kernels, residual)
    for module in model.modules():
        if isinstance(module, torch.nn.BatchNorm2d):
            module.running_mean.uniform_(-0.5, 0.5)
            module.running_var.uniform_(0.5, 1.5)
    return model.eval()


@seeded(6)
@given(model=_cnns())
def test_blocked_values_are_not_compared_as_torch_tensors(model: _Cnn) -> None:
    args = (torch.randn(2, 3, 8, 8),)
    plain = modelprov.export(model, args, optimize=False)
    recovered = modelprov.optimize_with("onnxruntime", plain.model, level="all")
    report = compare(plain, recovered, args)
    assert report.rows
    assert not report.diverges, report.to_text()
