"""recover decides correspondence by running both models: unrelated models sharing names,
shapes and op kinds are refused, tool outputs accepted, ``force`` obeyed, exit codes kept."""

from __future__ import annotations

import logging
import re
import warnings

import onnx
import onnx.helper as helper
import onnx_ir as ir
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import modelprov
from modelprov.errors import CorrespondenceError
from modelprov.onnx.recover import _correspondence_run
from modelprov.onnx.recover._correspondence_check import correspondence_problems
from modelprov.onnx.recover._tools import TOOLS
from tests._random_nets import FLOAT as _FLOAT
from tests._random_nets import random_net as _random_net
from tests._seeded import seeded

_TOOLS = [(s.tool, dict(s.options)) for s in TOOLS.settings()]


_SEEDS = st.integers(min_value=0, max_value=2**31)


@seeded(12)
@given(_SEEDS, _SEEDS)
def test_unrelated_models_with_one_signature_and_op_kinds_are_refused(a: int, b: int) -> None:
    original, other = _random_net(a), _random_net(b if b != a else a + 1)
    structure = correspondence_problems(ir.from_proto(original), ir.from_proto(other))
    assert structure == []  # names, shapes and op kinds agree: structure cannot tell
    before = other.SerializeToString()
    with pytest.raises(CorrespondenceError) as refused:
        modelprov.recover(original, other)
    message = str(refused.value)
    assert "its output 'y' differs from the original's by up to" in message
    assert re.search(r"\(tolerance [0-9.e-]+ for float32\)", message) and "force=True" in message
    assert other.SerializeToString() == before


@seeded(3)
@given(_SEEDS)
def test_every_tool_output_of_a_generated_net_is_accepted_by_running(seed: int) -> None:
    original = _random_net(seed)
    for tool, options in _TOOLS:
        optimized = TOOLS[tool].run(original, **options)
        _, report = modelprov.recover_with_report(original, optimized)
        assert report.correspondence.startswith("computed: "), (tool, options)


class _ResNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.conv = torch.nn.Conv2d(8, 8, 3, padding=1)
        self.head = torch.nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn(self.stem(x)))
        y = torch.relu(self.conv(y) + y)
        return self.head(y.mean((2, 3)))


class _ConvLinear(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.head = torch.nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.conv(x)).mean((2, 3)))


def _export(module: torch.nn.Module) -> onnx.ModelProto:
    torch.manual_seed(0)
    for parameter in module.parameters():  # reset after the seed: both nets start alike
        torch.nn.init.normal_(parameter, std=0.3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = modelprov.export(module.eval(), (torch.randn(1, 3, 8, 8),), verbose=False)
    return ir.to_proto(program.model)


def test_a_small_resnet_is_not_attributed_to_a_conv_linear_net() -> None:
    """The issue's pair: same input and output names, shapes and op kinds."""
    resnet, conv_linear = _export(_ResNet()), _export(_ConvLinear())
    assert [i.name for i in resnet.graph.input] == [i.name for i in conv_linear.graph.input]
    assert [o.name for o in resnet.graph.output] == [o.name for o in conv_linear.graph.output]
    for original, other in ((resnet, conv_linear), (conv_linear, resnet)):
        with pytest.raises(CorrespondenceError, match="its output 'linear' differs"):
            modelprov.recover(original, other)
    accepted = TOOLS["onnxruntime"].run(resnet, level="all")  # BN folded, Conv+ReLU fused
    _, report = modelprov.recover_with_report(resnet, accepted)
    assert report.correspondence.startswith("computed: run on the same random inputs, 1 output")


def _renamed_input(model: onnx.ModelProto, name: str) -> onnx.ModelProto:
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    old = copy.graph.input[0].name
    copy.graph.input[0].name = name
    for node in copy.graph.node:
        node.input[:] = [name if value == old else value for value in node.input]
    return copy


def test_force_overrides_every_refusal_and_says_what_it_forced(caplog, monkeypatch) -> None:
    original = _random_net(1)
    other = _renamed_input(_random_net(2), "pixels")
    with pytest.raises(CorrespondenceError, match="differs from the original's"):
        modelprov.recover(original, other)
    with caplog.at_level(logging.WARNING, logger="modelprov"):
        forced, report = modelprov.recover_with_report(original, other, force=True)
    assert "forced" in caplog.text and "computed check" in caplog.text
    assert report.correspondence.startswith("forced past the computed check")
    assert [i.name for i in forced.graph.input] == ["pixels"]
    assert all(modelprov.sources(forced, node) for node in forced.graph.node)
    # When the models cannot run, structure refuses the renamed input; force overrides it.
    monkeypatch.setattr(_correspondence_run, "MAX_WEIGHT_BYTES", 0)
    with pytest.raises(CorrespondenceError, match=r"graph inputs \['pixels'\] differ"):
        modelprov.recover(original, other)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="modelprov"):
        _, report = modelprov.recover_with_report(original, other, force=True)
    assert "structure check" in caplog.text and "graph inputs ['pixels']" in caplog.text
    assert report.correspondence.startswith("forced past the structure")
    # Fewer outputs, forced: recovered all the same.
    fewer = _random_net(3)
    fewer.graph.output.append(helper.make_tensor_value_info("pool", _FLOAT, None))
    _, report = modelprov.recover_with_report(fewer, original, force=True)
    assert "1 graph outputs, the original 2" in report.correspondence


def test_a_renamed_input_computing_the_same_is_accepted() -> None:
    original = _random_net(5)
    _, report = modelprov.recover_with_report(original, _renamed_input(original, "pixels"))
    assert report.correspondence.startswith("computed: ")


def test_weights_beside_files_are_run_weights_elsewhere_fall_back_to_structure(tmp_path) -> None:
    from modelprov._model_io._files import load_model_proto

    original, other = _random_net(7), _random_net(8)
    paths = []
    for name, model in (("original", original), ("other", other)):
        path = tmp_path / f"{name}.onnx"
        onnx.save(
            model, path, save_as_external_data=True, location=f"{name}.data", size_threshold=0
        )
        paths.append(path)
    with pytest.raises(CorrespondenceError, match="its output 'y' differs"):
        modelprov.recover(*paths)
    graphs_only = [load_model_proto(path, load_weights=False) for path in paths]
    _, report = modelprov.recover_with_report(*graphs_only)  # no folder: cannot run
    assert report.correspondence.startswith(
        "structure (the models could not run: the original model's weights are stored outside"
    )
    assert report.correspondence.endswith("interface, op kinds and size agree")


def test_the_command_line_refuses_with_exit_2_and_obeys_force(tmp_path, capsys) -> None:
    from modelprov.cli import main

    original, other = tmp_path / "o.onnx", tmp_path / "u.onnx"
    onnx.save(_random_net(11), original, save_as_external_data=True, size_threshold=0)
    onnx.save(_renamed_input(_random_net(12), "image"), other)
    out = tmp_path / "out.onnx"
    args = ["recover", str(original), str(other), "-o", str(out)]
    assert main(args) == 2 and not out.exists()
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "its output 'y' differs" in error[0] and "--force" in error[0]
    assert main([*args, "--force", "--json"]) == 0 and out.exists()
    captured = capsys.readouterr()
    assert "warning: recover forced" in captured.err
    assert '"correspondence": "forced past the computed check' in captured.out
    same = tmp_path / "same.onnx"
    onnx.save(TOOLS["onnxruntime"].run(onnx.load(original), level="all"), same)
    assert main(["recover", str(original), str(same), "-o", str(out), "--json"]) == 0
    assert '"correspondence": "computed: ' in capsys.readouterr().out


def test_symbolic_dimensions_take_one_size_and_static_ones_win() -> None:
    dynamic, static = _random_net(21), _random_net(21, batch=3)
    _, report = modelprov.recover_with_report(dynamic, static)
    assert report.correspondence.startswith("computed: ")
    with pytest.raises(CorrespondenceError, match="differs"):
        modelprov.recover(dynamic, _random_net(22, batch=3))
