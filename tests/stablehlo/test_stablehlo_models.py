"""Five model families with a dynamic batch: numerics vs torch, coverage, module attribution."""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pytest
import torch
from torch import nn

from modelprov.core._sources import shared_id_list
from modelprov.stablehlo import StableHLOProgram, export_stablehlo

pytest.importorskip("jax")


class _CNN(nn.Module):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.relu = nn.ReLU()
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(8 * 8 * 8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(self.relu(self.bn(self.conv(x)))), 1))


class _LSTM(nn.Module):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(16, 32, batch_first=True)
        self.head = nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y, _ = self.lstm(x)
        return self.head(y[:, -1])


class _Embedding(nn.Module):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(100, 16)
        self.fc = nn.Linear(16, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.emb(x).mean(1))


def _mlp() -> tuple[nn.Module, Callable[[int], torch.Tensor]]:
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 10))
    return model, lambda b: torch.randn(b, 784)


def _cnn() -> tuple[nn.Module, Callable[[int], torch.Tensor]]:
    model = _CNN()
    with torch.no_grad():
        model.bn.running_mean.uniform_(-1, 1)
        model.bn.running_var.uniform_(0.5, 2)
    return model, lambda b: torch.randn(b, 3, 16, 16)


def _transformer() -> tuple[nn.Module, Callable[[int], torch.Tensor]]:
    layer = nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True)
    model = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
    return model, lambda b: torch.randn(b, 10, 64)


def _lstm() -> tuple[nn.Module, Callable[[int], torch.Tensor]]:
    return _LSTM(), lambda b: torch.randn(b, 5, 16)


def _embedding() -> tuple[nn.Module, Callable[[int], torch.Tensor]]:
    return _Embedding(), lambda b: torch.randint(0, 100, (b, 7))


MODELS = {
    "mlp": _mlp,
    "cnn": _cnn,
    "transformer": _transformer,
    "lstm": _lstm,
    "embedding": _embedding,
}


@pytest.fixture(scope="module", params=sorted(MODELS))
def exported(
    request: pytest.FixtureRequest,
) -> tuple[str, nn.Module, Callable[[int], torch.Tensor], StableHLOProgram]:
    torch.manual_seed(0)
    model, make_input = MODELS[request.param]()
    model.eval()
    batch = torch.export.Dim("batch", min=1, max=64)
    program = export_stablehlo(model, (make_input(2),), dynamic_shapes=({0: batch},))
    return request.param, model, make_input, program


def test_runs_like_torch_at_several_batch_sizes(
    exported: tuple[str, nn.Module, Callable[[int], torch.Tensor], StableHLOProgram],
) -> None:
    _, model, make_input, program = exported
    for batch in (1, 3, 5):
        x = make_input(batch)
        with torch.no_grad():
            expected = model(x).numpy()
        (actual,) = program.run(x)
        assert actual.shape == expected.shape
        np.testing.assert_allclose(actual, expected, atol=1e-5, rtol=0)


def test_at_least_95_percent_of_non_constant_ops_name_their_fx_node(
    exported: tuple[str, nn.Module, Callable[[int], torch.Tensor], StableHLOProgram],
) -> None:
    _, _, _, program = exported
    lowered = [op for op in program.ops if not op.is_constant and not op.in_wrapper]
    labelled = [op for op in lowered if "modelprov.node" in op.attributes]
    assert len(labelled) / len(lowered) >= 0.95
    assert program.coverage == len(labelled) / len(lowered)
    # What has no node is a constant JAX hoisted or the dynamic-shape wrapper; never guessed.
    for op in program.unattributed_ops:
        assert op.is_constant or op.in_wrapper, op.text
        assert op.attributes == {}


def test_module_attribute_matches_nn_module_stack(
    exported: tuple[str, nn.Module, Callable[[int], torch.Tensor], StableHLOProgram],
) -> None:
    _, model, _, program = exported
    stacks = {
        node.name: list(node.meta["nn_module_stack"].values())
        for node in program.exported_program.graph.nodes
        if node.op == "call_function" and "nn_module_stack" in node.meta
    }
    paths = {path for path, _ in model.named_modules()}
    # The same keys are in each op's mhlo.frontend_attributes dictionary (for XLA): skip it.
    text = re.sub(r"mhlo\.frontend_attributes = \{[^}]*\}, ", "", program.text)
    printed = re.findall(r'modelprov\.module = "([^"]*)".*?modelprov\.node = "([^"]*)"', text)
    # The pretty printer's compact reduce form ("applies stablehlo.add") hides its body ops.
    hidden = [
        op
        for op in program.ops
        if op.parent is not None and " applies " in program.ops[op.parent].text
    ]
    assert len(printed) == sum(1 for op in program.ops if op.nodes) - len(hidden)
    for module, node in printed:
        if node.startswith("[\\22"):
            continue  # a constant value several nodes use: checked below
        path, _ = stacks[node][-1]
        assert module == path
        assert module in paths
    for op in program.ops:
        if len(op.nodes) == 1:
            (node,) = op.nodes
            assert op.attributes["modelprov.module_type"] == str(stacks[node][-1][1])
            assert op.attributes["modelprov.target"].startswith(("aten.", "_operator."))
        elif op.nodes:  # named by every node using it: their modules (the union policy)
            modules = {str(stacks[node][-1][0]) for node in op.nodes}
            assert set(shared_id_list(op.attributes["modelprov.module"])) == modules
            assert modules <= paths


def test_ops_in_regions_are_labelled_and_sources_resolve(
    exported: tuple[str, nn.Module, Callable[[int], torch.Tensor], StableHLOProgram],
) -> None:
    name, _, _, program = exported
    nested = [op for op in program.ops if op.in_region]
    assert all(op.nodes for op in nested)
    if name == "cnn":  # max pooling's reduce_window body
        assert any(op.module == "pool" for op in nested)
    op = next(op for op in program.ops if len(op.nodes) == 1)
    source = program.sources(op)[0]  # then nodes without ops whose output it makes, if any
    assert source.fx_node == op.nodes[0]
    assert source.module_path == op.module
    assert source.line is not None and source.file
    assert all(op in program.ops_for("") for op in program.ops if op.nodes)
