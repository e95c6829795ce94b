"""find_calls by module class finds every module call: once per call of a shared body, and a
module fused into a neighbour's node (Conv+BN) under both classes."""

from __future__ import annotations

import collections
import functools
import json
import logging
import warnings

import onnx_ir as ir
import pytest
import torch

import modelprov
from modelprov.keys import NODE_SOURCES_KEY
from modelprov.onnx.functions._call_provenance import read_table
from modelprov.onnx.functions._find_calls import FoundCall
from modelprov.onnx.functions._inline import inline

logging.getLogger("torch").setLevel(logging.ERROR)


def _called(module: torch.nn.Module, args: tuple[object, ...], kwargs: dict[str, object]) -> dict:
    """How many module instances of each class a forward pass calls (by forward hooks)."""
    seen: dict[str, set[str]] = collections.defaultdict(set)

    def hook_for(path: str, cls: str) -> object:
        return lambda *_: seen[cls].add(path)

    hooks = [
        child.register_forward_hook(hook_for(path, type(child).__name__))
        for path, child in module.named_modules()
        if path
    ]
    with torch.no_grad():
        module(*args, **kwargs)
    for hook in hooks:
        hook.remove()
    return {cls: len(paths) for cls, paths in seen.items()}


def _functionized(module: torch.nn.Module, args: tuple, kwargs: dict | None = None) -> ir.Model:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = modelprov.export(module.eval(), args, kwargs=kwargs, verbose=False)
    return modelprov.functionize(program.model, level="module")


@functools.cache
def _gpt2() -> tuple[ir.Model, dict[str, int]]:
    import transformers

    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=3, n_embd=32, n_head=2, n_positions=16, vocab_size=64)
    model = transformers.GPT2Model(config).eval()
    ids = torch.randint(0, 64, (1, 8))
    kwargs = {"use_cache": False}
    return _functionized(model, (ids,), kwargs), _called(model, (ids,), kwargs)


class _Leaf(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.linear(x))


class _Inner(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first, self.second = _Leaf(), _Leaf()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.second(self.first(x)) * x


class _Outer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = _Inner(), _Inner()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(self.a(x)) + x


def _nested() -> tuple[ir.Model, dict[str, int]]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(_Outer(), _Outer(), _Outer())
    x = torch.randn(2, 8)
    return _functionized(model, (x,)), _called(model, (x,), {})


def _cnn() -> tuple[ir.Model, dict[str, int]]:
    torch.manual_seed(0)
    blocks = [
        torch.nn.Sequential(
            torch.nn.Conv2d(c, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU()
        )
        for c in (3, 8, 8)
    ]
    for block in blocks:  # running statistics of a trained net
        block[1].running_mean.uniform_(-1, 1)
        block[1].running_var.uniform_(0.5, 2)
    model = torch.nn.Sequential(*blocks)
    x = torch.randn(1, 3, 8, 8)
    return _functionized(model, (x,)), _called(model, (x,), {})


def _counts_match(model: ir.Model, called: dict[str, int], classes: list[str]) -> None:
    for cls in classes:
        found = modelprov.find_calls(model, cls)
        assert len(found) == called[cls], (cls, [call.name for call in found])
        names = [call.name for call in found]
        assert len(set(names)) == len(names), names  # each call once, with its own name
        as_proto = modelprov.find_calls(ir.to_proto(model), cls)
        assert [call.name for call in as_proto] == names


def test_gpt2_every_module_call_is_found_once_per_instance() -> None:
    model, called = _gpt2()
    assert called["GPT2Attention"] == 3
    classes = ["GPT2Block", "GPT2Attention", "GPT2MLP", "Conv1D", "LayerNorm"]
    _counts_match(model, called, classes)
    attention = modelprov.find_calls(model, "GPT2Attention")
    assert [call.name for call in attention] == [f"call_h.{i}.attn" for i in range(3)]
    assert [[c.name for c in call.callers] for call in attention] == [
        [f"call_h.{i}"] for i in range(3)
    ]
    # One shared body: the same node, each call with its own sources.
    assert len({id(call.node) for call in attention}) == 1
    assert len({call.metadata["modelprov.sources"] for call in attention}) == 3


def test_nested_custom_modules_in_shared_bodies() -> None:
    model, called = _nested()
    assert (called["_Outer"], called["_Inner"], called["_Leaf"]) == (3, 6, 12)
    _counts_match(model, called, ["_Outer", "_Inner", "_Leaf"])
    leaves = modelprov.find_calls(model, "_Leaf")
    assert all(len(call.callers) == 2 for call in leaves)
    assert leaves[-1].name == "call_2.b.second"


def test_fused_conv_bn_is_found_as_conv2d_and_as_batchnorm2d() -> None:
    model, called = _cnn()
    _counts_match(model, called, ["Conv2d", "BatchNorm2d", "ReLU"])
    table = read_table(model)
    convs = modelprov.find_calls(model, "Conv2d")
    norms = modelprov.find_calls(model, "BatchNorm2d")
    for call in convs:
        ids = json.loads(call.metadata[NODE_SOURCES_KEY])
        modules = {table.by_id(i).module_type.rpartition(".")[2] for i in ids}
        assert {"Conv2d", "BatchNorm2d"} <= modules, (call.name, modules)
    assert [call.name for call in convs] == [call.name for call in norms]
    # Nothing of the graph changed for it: inline gives the fused flat graph back.
    assert not any(node.domain for node in inline(model).graph)


@pytest.mark.parametrize("what", ["GPT2Attention", "aten::addmm"])
def test_found_calls_unpack_as_pairs(what: str) -> None:
    model, _ = _gpt2()
    aten = modelprov.functionize(inline(model))
    found = modelprov.find_calls(model if what[0] == "G" else aten, what)
    assert found and all(isinstance(call, FoundCall) for call in found)
    node, function = found[0]
    assert node is found[0].node and function is found[0].function
    assert function.identifier() == node.op_identifier()
