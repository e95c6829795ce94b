"""modelprov.compare(torch, StableHLOProgram): torch's FX node values against XLA CPU's.

Rows must cover at least 95 % of the labelled FX nodes whose result is a tensor, a clean
export flags nothing at the default tolerances, and a bias changed in the program's weights
(or in the module after lowering) is the first divergence, in that layer, with nothing
upstream flagged.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import random
from typing import Any

import numpy as np
import pytest
import torch

import modelprov
from modelprov._cli import _examples
from modelprov.errors import InvalidModelError, UsageError
from modelprov.numerics import NumericsReport, compare
from tests._small_models import relu_gelu_mlp

pytest.importorskip("jax")
pytestmark = pytest.mark.filterwarnings("ignore")


def _models() -> dict[str, tuple[torch.nn.Module, tuple[Any, ...], dict[str, Any]]]:
    mlp = relu_gelu_mlp()
    cnn, cnn_args = _examples.cnn()
    models = {
        "mlp": (mlp, (torch.randn(2, 16),), {}),
        "cnn": (cnn.eval(), tuple(cnn_args), {}),
    }
    return models


def _gpt2() -> tuple[torch.nn.Module, tuple[Any, ...], dict[str, Any]]:
    import transformers

    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, n_positions=16, vocab_size=64)
    model = transformers.GPT2Model(config).eval()
    with torch.no_grad():  # GPT-2 starts with zero biases; make each one tell apart
        for name, parameter in model.named_parameters():
            if name.endswith(".bias"):
                parameter.normal_(0.0, 0.1)
    return model, (torch.randint(0, 64, (1, 8)),), {"use_cache": False}


@functools.cache
def _exported(
    name: str,
) -> tuple[torch.nn.Module, modelprov.StableHLOProgram, tuple[Any, ...], dict[str, Any]]:
    model, args, kwargs = _gpt2() if name == "gpt2" else _models()[name]
    return model, modelprov.export_stablehlo(model, args, kwargs), args, kwargs


def _tensor_nodes(program: modelprov.StableHLOProgram) -> set[str]:
    """Labelled FX nodes whose value (as torch.export traced it) is one tensor."""
    labelled = {node for op in program.ops for node in op.nodes}
    return {
        node.name
        for node in program.exported_program.graph.nodes
        if node.name in labelled and isinstance(node.meta.get("val"), torch.Tensor)
    }


def _with_weight(
    program: modelprov.StableHLOProgram, reference: torch.Tensor
) -> tuple[modelprov.StableHLOProgram, int]:
    """The program with the weight equal to ``reference`` changed by more than its scale."""
    target = reference.detach().numpy()
    found = [
        i
        for i, weight in enumerate(program.weights)
        if np.shape(weight) == target.shape and np.array_equal(np.asarray(weight), target)
    ]
    assert len(found) == 1, f"{len(found)} weights equal to the bias"
    array = np.array(program.weights[found[0]], copy=True)
    array.flat[0] += 1.0 + 4.0 * float(np.abs(array).max())
    weights = list(program.weights)
    weights[found[0]] = array
    return dataclasses.replace(program, weights=tuple(weights)), found[0]


def _assert_localized(report: NumericsReport, layer: str) -> None:
    first = report.first_divergence
    assert first is not None, report.to_text()
    assert any(path == layer or path.startswith(layer + ".") for path in first.node_modules), (
        f"planted in {layer}, first divergence in {first.node_modules}\n{report.to_text()}"
    )
    flagged = [row for row in report.rows if row.starts_divergence]
    assert flagged == [first], [row.module_path for row in flagged]


def _check(name: str) -> None:
    model, program, args, kwargs = _exported(name)
    clean = compare(model, program, args, kwargs=kwargs)
    wanted = _tensor_nodes(program)
    covered = {row.source.fx_node for row in clean.rows} & wanted
    assert len(covered) >= 0.95 * len(wanted), sorted(wanted - covered)
    assert clean.coverage >= 0.95, clean.to_text()
    assert not clean.diverges and clean.first_divergence is None, clean.to_text()
    assert all(row.node.startswith(("stablehlo.", "chlo.", "func.")) for row in clean.rows)
    biases = sorted(n for n, p in model.named_parameters() if n.endswith(".bias"))
    for bias in random.Random(name).sample(biases, min(3, len(biases))):
        broken, _ = _with_weight(program, model.get_parameter(bias))
        report = compare(model, broken, args, kwargs=kwargs)
        _assert_localized(report, bias.removesuffix(".bias"))
        assert report.rows[-1].diverges or any(r.diverges for r in report.rows)


@pytest.mark.parametrize("name", ["mlp", "cnn"])
def test_torch_against_xla_covers_every_node_and_finds_a_planted_bias(name: str) -> None:
    _check(name)


@pytest.mark.slow
def test_gpt2_torch_against_xla_covers_its_nodes_and_finds_a_planted_bias() -> None:
    _check("gpt2")


def test_a_module_changed_after_lowering_diverges_in_that_layer() -> None:
    model, program, args, _ = _exported("mlp")
    edited = _models()["mlp"][0]
    edited.load_state_dict(model.state_dict())
    with torch.no_grad():
        edited[2].bias[0] += 3.0
    report = compare(edited, program, args)
    _assert_localized(report, "2")
    assert compare(torch.export.export(model, args), program, args).first_divergence is None


def test_rows_follow_the_def_use_graph_and_round_trip_as_json() -> None:
    model, program, args, _ = _exported("mlp")
    report = compare(model, program, args)
    names = [row.source.fx_node for row in report.rows]
    relu = names.index("relu")
    assert [names[i] for i in report.rows[relu].upstream] == ["addmm"]
    again = NumericsReport.from_json(report.to_json())
    assert again.rows == tuple(
        dataclasses.replace(row, source=again.rows[i].source) for i, row in enumerate(report.rows)
    )
    assert json.loads(report.to_json())["candidate"] == "candidate StableHLOProgram"


def test_wrong_references_and_options_get_one_line_errors() -> None:
    model, program, args, _ = _exported("mlp")
    onnx_program = modelprov.export(model, args)
    with pytest.raises(UsageError, match="reference must be the torch module"):
        compare(onnx_program.model, program, args)
    with pytest.raises(UsageError, match="isolate=True"):
        compare(model, program, args, isolate=True)
    other = torch.nn.Sequential(torch.nn.Linear(16, 8))
    with pytest.raises(InvalidModelError, match=r"'0\.weight'"):
        compare(other, program, args)


def test_a_program_with_symbolic_shapes_is_refused() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(4, 3)).eval()
    x = torch.randn(2, 4)
    batch = torch.export.Dim("batch", min=1, max=16)
    program = modelprov.export_stablehlo(model, (x,), dynamic_shapes=({0: batch},))
    with pytest.raises(UsageError, match="static shapes"):
        compare(model, program, (x,))


class _RandomNet(torch.nn.Module):
    """A random chain of layers (linear, norm, activations, residual adds) from ``seed``."""

    def __init__(self, seed: int) -> None:
        super().__init__()
        rng = random.Random(seed)
        self.kinds = [rng.choice(["linear", "norm", "gelu", "tanh", "residual"]) for _ in range(6)]
        self.kinds.append("linear")
        self.layers = torch.nn.ModuleList(
            torch.nn.LayerNorm(8) if kind == "norm" else torch.nn.Linear(8, 8)
            for kind in self.kinds
        )
        with torch.no_grad():
            for layer in self.layers:
                layer.bias.normal_(0.0, 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for kind, layer in zip(self.kinds, self.layers, strict=True):
            if kind in ("linear", "norm"):
                x = layer(x)
            elif kind == "gelu":
                x = torch.nn.functional.gelu(layer(x))
            elif kind == "tanh":
                x = torch.tanh(layer(x))
            else:
                x = x + layer(x)
        return x


@pytest.mark.parametrize("seed", range(3))
def test_random_chains_are_covered_and_a_planted_bias_is_found(seed: int) -> None:
    torch.manual_seed(seed)
    model = _RandomNet(seed).eval()
    args = (torch.randn(3, 8),)
    program = modelprov.export_stablehlo(model, args)
    clean = compare(model, program, args)
    wanted = _tensor_nodes(program)
    assert wanted <= {row.source.fx_node for row in clean.rows}, clean.skipped
    assert clean.first_divergence is None, clean.to_text()
    layer = random.Random(seed).randrange(len(model.layers))
    broken, _ = _with_weight(program, model.layers[layer].bias)
    _assert_localized(compare(model, broken, args), f"layers.{layer}")


class _Norms(torch.nn.Module):  # type: ignore[misc]
    """LayerNorms with one eps between Linears: export shares the eps splat among them."""

    def __init__(self, count: int, width: int) -> None:
        super().__init__()
        self.norms = torch.nn.ModuleList(torch.nn.LayerNorm(width) for _ in range(count))
        self.linears = torch.nn.ModuleList(torch.nn.Linear(width, width) for _ in range(count))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for norm, linear in zip(self.norms, self.linears, strict=True):
            x = linear(norm(x))
        return x


@pytest.mark.parametrize(("count", "sequence", "width"), [(2, 4, 8), (3, 8, 16), (4, 2, 4)])
def test_constants_shared_by_layer_norms_are_no_layers_value(
    count: int, sequence: int, width: int
) -> None:
    """A constant the layers share (an eps splat, which export may make a call for XLA's
    names) is joined with none of the tuple a layer norm computes: a clean export flags
    nothing."""
    torch.manual_seed(count * 100 + sequence)
    model = _Norms(count, width).eval()
    x = torch.randn(1, sequence, width)
    program = modelprov.export_stablehlo(model, (x,))
    report = compare(model, program, (x,))
    assert not report.diverges and report.first_divergence is None, report.to_text()
    norms = {row.source.fx_node for row in report.rows if row.source.module_path[:6] == "norms."}
    assert len(norms) >= count, report.to_text()
