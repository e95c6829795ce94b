"""functionize and inline keep provenance exact, checked by values (tests/_call_checks.py).

A call claims exactly the sources of what its body computes for it, all inside its value
region in the original; inlining gives every node back exactly its own sources.
"""

from __future__ import annotations

import functools
import json
import warnings
from typing import Literal

import numpy as np
import onnx_ir as ir
import pytest
import torch
from torch import nn

import modelprov
from modelprov.keys import NODE_SOURCES_KEY
from tests._call_checks import check_calls, inline_mismatches, node_sources
from tests.conftest import example_inputs, fresh_export

CASES = [
    ("cnn", True),
    ("mlp", True),
    ("transformer_encoder", True),
    ("gpt2", True),
    ("cnn", False),
    ("gpt2", False),
]
"""(example, optimized first as modelprov.export does, or the plain torch.onnx export)."""


@functools.cache
def _base(name: str, optimized: bool) -> ir.Model:
    export = fresh_export(name)
    return modelprov.optimize(export) if optimized else export


def _inputs(name: str) -> list[np.ndarray]:
    return [arg.numpy() for arg in example_inputs(name)]


@pytest.mark.parametrize("level", ["aten", "module"])
@pytest.mark.parametrize(("name", "optimized"), CASES)
def test_calls_claim_exactly_what_they_compute(
    name: str, optimized: bool, level: Literal["aten", "module"]
) -> None:
    base = _base(name, optimized)
    result = modelprov.functionize(base, level=level)
    found = check_calls(base, result, _inputs(name))
    assert found.regions.violations == []
    # A node functionize left as it was keeps what it had (a Constant of the plain export
    # names the op it was made for); no call claims an op only through a shared constant.
    calls = {node.name for node in result.graph if node.domain.startswith("pkg.torch.")}
    assert calls.isdisjoint(found.regions.shared_constants)
    assert found.wrong_claims == []
    assert found.wrong_find_calls == []
    if level == "aten" or name != "double_transpose":
        assert found.calls > 0


@pytest.mark.parametrize("level", ["aten", "module"])
@pytest.mark.parametrize(("name", "optimized"), CASES)
def test_inline_gives_each_node_back_its_own_sources(
    name: str, optimized: bool, level: Literal["aten", "module"]
) -> None:
    base = _base(name, optimized)
    back = modelprov.inline(modelprov.functionize(base, level=level))
    assert inline_mismatches(base, back, _inputs(name)) == []


def test_a_call_claiming_a_later_call_is_caught() -> None:
    base = _base("gpt2", True)
    result = modelprov.functionize(base, level="aten")
    calls = [node for node in result.graph if NODE_SOURCES_KEY in node.metadata_props]
    first, last = calls[0], calls[-1]
    foreign = json.loads(last.metadata_props[NODE_SOURCES_KEY])
    claimed = json.loads(first.metadata_props[NODE_SOURCES_KEY])
    first.metadata_props[NODE_SOURCES_KEY] = json.dumps(claimed + foreign)
    found = check_calls(base, result, _inputs("gpt2"))
    assert {source for label, source in found.regions.violations if label == first.name} == set(
        foreign
    ) - set(claimed)
    assert [label for label, _claims, _computes in found.wrong_claims] == [first.name]
    assert any(first.name in problem for problem in found.wrong_find_calls)


def test_sources_swapped_between_two_inlined_nodes_are_caught() -> None:
    """The same sources overall, on the wrong nodes: the node-by-node check sees it."""
    base = _base("transformer_encoder", True)
    back = modelprov.inline(modelprov.functionize(base, level="module"))
    ids = {node: {s.id for s in found} for node, found in node_sources(back)}
    first, second = next(
        (a, b)
        for a in back.graph
        for b in back.graph
        if a.op_type == b.op_type == "MatMul" and ids[a] and ids[b] and ids[a] != ids[b]
    )
    first_meta, second_meta = dict(first.metadata_props), dict(second.metadata_props)
    first.metadata_props.clear()
    first.metadata_props.update(second_meta)
    second.metadata_props.clear()
    second.metadata_props.update(first_meta)
    problems = inline_mismatches(base, back, _inputs("transformer_encoder"))
    assert len(problems) == 2, problems


class _ChannelsLastNorm(nn.Module):  # type: ignore[misc]
    """ConvNeXt's LayerNorm of channels-first input: permute, normalize, permute back."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


class _NormThenStage(nn.Module):  # type: ignore[misc]
    """The same norm module at depth 1 and, later in the graph, at depth 2: functionize
    makes the deeper call the function's body, so the first call inline meets has a record
    (the ReLU keeps onnxscript from cancelling the transposes between the two norms)."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = _ChannelsLastNorm(4)
        self.stage = nn.Sequential(_ChannelsLastNorm(4), nn.Conv2d(4, 4, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.stage(torch.relu(self.norm(x)))


class _Wrapped(nn.Module):  # type: ignore[misc]
    """One more level, so that every norm call is inside a function body."""

    def __init__(self) -> None:
        super().__init__()
        self.model = _NormThenStage()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)


def test_inline_restores_a_body_whose_call_comes_after_a_recorded_call() -> None:
    torch.manual_seed(0)
    module = _Wrapped().eval()
    x = torch.randn(1, 4, 5, 5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(module, (x,), dynamo=True, optimize=False, verbose=False)
    base = modelprov.optimize(program.model)
    result = modelprov.functionize(base, level="module")
    norms = [key for key in result.functions if key[1].startswith("_ChannelsLastNorm")]
    assert len(norms) == 1
    assert check_calls(base, result, [x.numpy()]).wrong_claims == []
    assert inline_mismatches(base, modelprov.inline(result), [x.numpy()]) == []


class _Pick(nn.Module):  # type: ignore[misc]
    """Indexes its input's middle dimension by a fixed index tensor (aten.index)."""

    def __init__(self, index: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("index", index)

    def forward(self, y: torch.Tensor) -> torch.Tensor:
        return y[:, self.index.clone()]


class _TwoPicks(nn.Module):  # type: ignore[misc]
    """Two indexings of one view: optimize's CSE merges their twin Transposes into one node
    that two calls (ATen or module) share, and inline's restored node order moves one call's
    body copies among the other's (so a call's expansion is no longer where the call was)."""

    def __init__(self, first: torch.Tensor, second: torch.Tensor) -> None:
        super().__init__()
        self.first = _Pick(first)
        self.second = _Pick(second)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x.view(2, 3, 4)
        return self.first(y) * 2 + self.second(y)


@pytest.mark.parametrize("level", ["aten", "module"])
@pytest.mark.parametrize("seed", range(3))
def test_calls_sharing_a_merged_twin_claim_what_they_compute(
    seed: int, level: Literal["aten", "module"]
) -> None:
    generator = torch.Generator().manual_seed(seed)
    first, second = (torch.randint(0, 3, (3,), generator=generator) for _ in range(2))
    module = _TwoPicks(first, second).eval()
    x = torch.randn(6, 4, generator=generator)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(module, (x,), dynamo=True, optimize=False, verbose=False)
    base = modelprov.optimize(program.model)
    # The merged twin: one node computing both aten.index calls.
    assert any(
        sum(source.target == "aten.index.Tensor" for source in found) == 2
        for _node, found in node_sources(base)
    )
    result = modelprov.functionize(base, level=level)
    found = check_calls(base, result, [x.numpy()])
    assert found.regions.violations == []
    assert found.wrong_claims == []
    assert found.wrong_find_calls == []
    assert inline_mismatches(base, modelprov.inline(result), [x.numpy()]) == []
