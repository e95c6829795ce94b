"""modelprov.quantize on real exports: PyTorch-side ranges decide onnxruntime's QDQ parameters.

Seed 003's MLP and a Conv-BN-ReLU CNN are calibrated with modelprov.calibrate, exported with
the ranges as annotations, and quantized. Each scale and zero point is checked against
onnxruntime's own compute_scale_zp for the PyTorch range and against the formula written out
here; onnxruntime runs the result; every node has sources; recall is 1.00.
"""

from __future__ import annotations

import functools
import json
import logging
import warnings
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
import torch
from onnxruntime.quantization.quant_utils import compute_scale_zp, get_qmin_qmax_for_qType

import modelprov
from modelprov._cli import _examples
from modelprov.errors import QuantizationError
from modelprov.onnx.quantize._int8_cpu import this_cpu
from modelprov.onnx.quantize._quantize import choose_reduce_range
from modelprov.onnx.recover._recover import CONFIDENCE_KEY

logging.getLogger("root").setLevel(logging.ERROR)

QTYPES = {
    "int8": onnx.TensorProto.INT8,
    "uint8": onnx.TensorProto.UINT8,
    "int16": onnx.TensorProto.INT16,
}


@functools.cache
def calibrated_export(name: str) -> tuple[onnx.ModelProto, tuple[tuple[torch.Tensor, ...], ...]]:
    """The example exported with its calibrated ranges, and the calibration batches."""
    model, args = _examples.EXAMPLES[name]()
    generator = torch.Generator().manual_seed(3)
    batches = tuple(
        tuple(torch.randn(a.shape, generator=generator) for a in args) for _ in range(6)
    )
    ranges = modelprov.calibrate(model, batches)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = modelprov.export(model, args, annotations=ranges, verbose=False)
    return ir.to_proto(program.model), batches


def float_ranges(model: onnx.ModelProto) -> dict[str, tuple[float, float]]:
    """custom.min / custom.max on the float export's value infos, by tensor name."""
    found: dict[str, tuple[float, float]] = {}
    for info in [*model.graph.value_info, *model.graph.output]:
        props = {entry.key: entry.value for entry in info.metadata_props}
        if "custom.min" in props:
            found[info.name] = (float(props["custom.min"]), float(props["custom.max"]))
    return found


# onnxruntime's QDQ handlers that give an op's output its input's quantization parameters
# (operators/direct_q8.py, gather.py, split.py, maxpool.py, resize.py): the output's own range
# is not used.
SHARES_INPUT_PARAMS = frozenset(
    {"Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "AveragePool", "Slice", "TopK"}
    | {"MaxPool", "Resize", "Gather", "GatherElements", "Split"}
)


def onnxruntime_adjusted(
    model: onnx.ModelProto, ranges: Mapping[str, tuple[float, float]]
) -> dict[str, tuple[float, float]]:
    """The ranges onnxruntime's documented rules make of ``ranges``.

    A Relu/Clip's only input takes the Relu's output range; an op in SHARES_INPUT_PARAMS
    gives its outputs its input's range (none when the input is a weight).
    """
    readers: dict[str, int] = {}
    for node in model.graph.node:
        for name in node.input:
            readers[name] = readers.get(name, 0) + 1
    adjusted = dict(ranges)
    for node in model.graph.node:
        source, target = (node.input[0], node.output[0]) if node.input else ("", "")
        if node.op_type in ("Relu", "Clip") and readers.get(source) == 1 and target in ranges:
            adjusted[source] = ranges[target]
    for node in model.graph.node:  # graph order is topological
        if node.op_type in SHARES_INPUT_PARAMS and node.input:
            for output in node.output:
                adjusted.pop(output, None)
                if node.input[0] in adjusted:
                    adjusted[output] = adjusted[node.input[0]]
    return adjusted


def quantized_params(model: onnx.ModelProto) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """(scale, zero point) of each activation QuantizeLinear, by the float tensor's name.

    onnxruntime renames a quantized graph output's float tensor to ``X_QuantizeLinear_Input``
    and gives ``X`` to the DequantizeLinear; the DQ's output name is used then.
    """
    initializers = {
        tensor.name: onnx.numpy_helper.to_array(tensor) for tensor in model.graph.initializer
    }
    readers: dict[str, list[onnx.NodeProto]] = {}
    for node in model.graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    graph_outputs = {value.name for value in model.graph.output}
    found: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for node in model.graph.node:
        if node.op_type != "QuantizeLinear" or node.input[0] in initializers:
            continue
        name = node.input[0]
        for reader in readers.get(node.output[0], []):
            if reader.op_type == "DequantizeLinear" and reader.output[0] in graph_outputs:
                name = reader.output[0]
        found[name] = (initializers[node.input[1]], initializers[node.input[2]])
    return found


def formula(
    rmin: float, rmax: float, qmin: int, qmax: int, symmetric: bool = False
) -> tuple[np.float32, int]:
    """Scale and zero point, written out: the range widened to hold 0 (and mirrored)."""
    low, high = min(np.float64(np.float32(rmin)), 0.0), max(np.float64(np.float32(rmax)), 0.0)
    if symmetric:
        low, high = -max(-low, high), max(-low, high)
    scale = (high - low) / (qmax - qmin)
    if symmetric:
        return np.float32(scale), int(np.round((qmin + qmax) / 2))
    zero_point = int(np.round(qmin - low / scale))
    return np.float32(scale), zero_point


def check_params(
    quantized: onnx.ModelProto,
    ranges: Mapping[str, tuple[float, float]],
    activation_type: str,
    symmetric: bool = False,
) -> set[str]:
    """Every quantized tensor with a range has exactly onnxruntime's parameters for it."""
    qtype = QTYPES[activation_type]
    qmin, qmax = get_qmin_qmax_for_qType(qtype, symmetric=symmetric)
    params = quantized_params(quantized)
    checked: set[str] = set()
    for name, (rmin, rmax) in ranges.items():
        if name not in params:
            continue
        scale, zero_point = params[name]
        zero_ort, scale_ort = compute_scale_zp(
            np.float32(rmin), np.float32(rmax), qmin, qmax, symmetric=symmetric
        )
        assert scale.dtype == np.float32 and scale == scale_ort, name
        assert zero_point == zero_ort and zero_point.dtype == zero_ort.dtype, name
        expected = formula(rmin, rmax, int(qmin), int(qmax), symmetric)
        assert (scale, int(zero_point)) == expected, name
        checked.add(name)
    return checked


def run(model: onnx.ModelProto, batch: tuple[torch.Tensor, ...]) -> np.ndarray:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [value.name for value in session.get_inputs()]
    feed = {name: tensor.numpy() for name, tensor in zip(names, batch, strict=True)}
    return np.asarray(session.run(None, feed)[0])


def output_step(float_model: onnx.ModelProto) -> float:
    """One step of an 8-bit grid over the output's PyTorch range (zero included)."""
    low, high = float_ranges(float_model)[float_model.graph.output[0].name]
    return (max(high, 0.0) - min(low, 0.0)) / 255


def worst_error_in_steps(
    float_model: onnx.ModelProto,
    quantized: onnx.ModelProto,
    batches: tuple[tuple[torch.Tensor, ...], ...],
) -> float:
    """Largest |quantized - float| output difference on the batches, in 8-bit output steps."""
    errors = [np.abs(run(float_model, b) - run(quantized, b)).max() for b in batches]
    return float(max(errors)) / output_step(float_model)


def input_range(batches: tuple[tuple[torch.Tensor, ...], ...]) -> tuple[float, float]:
    values = torch.cat([batch[0].flatten() for batch in batches])
    return float(values.min()), float(values.max())


# Observed here: at most ~2.5 steps (int8, 6 batches) for both models; 4 leaves margin while
# a range 50x too narrow on one layer (clipping) lands far above it (checked below).
MAX_ERROR_STEPS = 4.0


# reduce_range: None is the default chosen for this CPU; True (7-bit weights) never saturates,
# on any CPU. False saturates on x86 without VNNI (test_quantize_without_vnni measures it there).
@pytest.mark.parametrize("reduce_range", [None, True, False])
@pytest.mark.parametrize("name", ["mlp", "cnn"])
@pytest.mark.parametrize("activation_type", ["int8", "uint8"])
def test_scales_come_from_pytorch_ranges(
    name: str, activation_type: str, reduce_range: bool | None
) -> None:
    if reduce_range is False and this_cpu().reduce_range:
        pytest.skip(f"full 8-bit weights saturate on this {this_cpu().describe()}")
    float_model, batches = calibrated_export(name)
    before = float_model.SerializeToString()
    ranges = float_ranges(float_model)
    assert ranges, "the export carries no calibrated ranges"
    input_name = float_model.graph.input[0].name
    quantized = modelprov.quantize(
        float_model,
        ranges={input_name: input_range(batches)},
        activation_type=activation_type,
        reduce_range=reduce_range,
    )
    assert float_model.SerializeToString() == before, "the input model was modified"
    expected = onnxruntime_adjusted(float_model, {**ranges, input_name: input_range(batches)})
    checked = check_params(quantized, expected, activation_type)
    surviving = {value for node in quantized.graph.node for value in node.output}
    # Every ranged tensor that still exists is quantized with its range (after onnxruntime's
    # own rules); the only ones gone are activations folded into their producer (Relu/Clip).
    assert {name for name in ranges if name in surviving} | {input_name} <= checked
    gone = set(ranges) - surviving
    folded = {node.input[0] for node in float_model.graph.node if node.op_type in ("Relu", "Clip")}
    assert gone <= folded
    assert worst_error_in_steps(float_model, quantized, batches) <= MAX_ERROR_STEPS


@pytest.mark.parametrize("name", ["mlp", "cnn"])
def test_every_node_has_sources_and_recall_is_full(name: str) -> None:
    float_model, batches = calibrated_export(name)
    quantized = modelprov.quantize(
        float_model, ranges={float_model.graph.input[0].name: input_range(batches)}
    )
    for node in quantized.graph.node:
        assert modelprov.sources(quantized, node), f"{node.op_type} {node.name} has no sources"
        props = {entry.key: entry.value for entry in node.metadata_props}
        assert props.get(CONFIDENCE_KEY) in ("exact", "named", "inferred"), node.name
        assert props.get("namespace"), node.name
    report = modelprov.diff(float_model, quantized)
    assert report.fx_nodes.value == 1.0 and report.fx_nodes_dyn.value == 1.0
    assert report.source_lines.value == 1.0 and report.module_paths.value == 1.0
    assert not report.nodes_without_sources and not report.lost_sources
    assert not modelprov.audit(quantized).nodes_without_sources


def test_qdq_pairs_belong_to_the_producer_weights_to_the_consumer() -> None:
    float_model, batches = calibrated_export("mlp")
    quantized = modelprov.quantize(
        float_model, ranges={float_model.graph.input[0].name: input_range(batches)}
    )
    by_output = {out: node for node in quantized.graph.node for out in node.output}

    def fx_nodes(node: onnx.NodeProto) -> list[str]:
        return [source.fx_node for source in modelprov.sources(quantized, node)]

    def namespace(node: onnx.NodeProto) -> str:
        return {e.key: e.value for e in node.metadata_props}["namespace"]

    float_relu = next(node for node in float_model.graph.node if node.op_type == "Relu")
    quantize_relu = next(
        node
        for node in quantized.graph.node
        if node.op_type == "QuantizeLinear" and node.input[0] == "relu"
    )
    # The Relu is folded into the first Gemm; its output's Q/DQ pair is still the ReLU's.
    assert fx_nodes(quantize_relu) == ["relu"]
    assert namespace(quantize_relu) == namespace(float_relu)
    second_gemm = by_output["linear_1_QuantizeLinear_Input"]
    for slot in (1, 2):
        weight_dq = by_output[second_gemm.input[slot]]
        assert weight_dq.op_type == "DequantizeLinear"
        assert fx_nodes(weight_dq) == fx_nodes(second_gemm) == ["linear_1"]
    # The first Gemm absorbed the Relu (sources linear and relu); its weights, bias and input
    # chains belong to the Linear alone, in the Linear's namespace.
    first_gemm = by_output["relu"]
    assert fx_nodes(first_gemm) == ["linear", "relu"]
    float_linear = next(node for node in float_model.graph.node if node.output[0] == "linear")
    for slot in (0, 1, 2):
        dequantize = by_output[first_gemm.input[slot]]
        assert dequantize.op_type == "DequantizeLinear"
        assert fx_nodes(dequantize) == ["linear"], first_gemm.input[slot]
        assert namespace(dequantize) == namespace(float_linear)
    # Ranges stay on the tensors they describe, not on Q/DQ nodes.
    infos = {
        info.name: {e.key: e.value for e in info.metadata_props}
        for info in quantized.graph.value_info
    }
    assert float(infos["relu"]["custom.max"]) == float_ranges(float_model)["relu"][1]
    assert not any(
        entry.key.startswith("custom.")
        for node in quantized.graph.node
        if node.op_type == "QuantizeLinear"
        for entry in node.metadata_props
    )


@pytest.mark.parametrize(
    ("activation_type", "symmetric"), [("int8", True), ("uint8", True), ("int16", False)]
)
def test_symmetric_and_16_bit_activations(activation_type: str, symmetric: bool) -> None:
    float_model, batches = calibrated_export("cnn")
    ranges = float_ranges(float_model)
    input_name = float_model.graph.input[0].name
    quantized = modelprov.quantize(
        float_model,
        ranges={input_name: input_range(batches)},
        activation_type=activation_type,
        extra_options={"ActivationSymmetric": symmetric},
    )
    adjusted = onnxruntime_adjusted(float_model, ranges)
    checked = check_params(quantized, adjusted, activation_type, symmetric)
    assert len(checked) >= 3
    assert all(modelprov.sources(quantized, node) for node in quantized.graph.node)
    assert worst_error_in_steps(float_model, quantized, batches) <= MAX_ERROR_STEPS


def test_pytorch_ranges_agree_with_onnxruntime_calibration_on_the_same_batches(
    tmp_path: Path,
) -> None:
    """Same tensors, same zero points, scales within 2 ulp (torch vs onnxruntime kernels)."""
    from onnxruntime import quantization

    float_model, batches = calibrated_export("cnn")
    input_name = float_model.graph.input[0].name
    ours = modelprov.quantize(float_model, ranges={input_name: input_range(batches)})
    onnx.save(float_model, str(tmp_path / "cnn.onnx"))

    class Reader(quantization.CalibrationDataReader):  # type: ignore[misc]
        def __init__(self) -> None:
            self.feeds = iter([{input_name: batch[0].numpy()} for batch in batches])

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.feeds, None)

    quantization.quantize_static(str(tmp_path / "cnn.onnx"), str(tmp_path / "ort.onnx"), Reader())
    theirs = quantized_params(onnx.load(str(tmp_path / "ort.onnx")))
    mine = quantized_params(ours)
    assert sorted(mine) == sorted(theirs) and len(mine) >= 5
    for name, (scale, zero_point) in mine.items():
        assert zero_point == theirs[name][1], name
        assert abs(float(scale) / float(theirs[name][0]) - 1) <= 2.5e-7, name


def test_kept_activations_follow_onnxruntime_range_rules() -> None:
    """With Relu kept, onnxruntime gives its input the Relu's range, as with its own calibration."""
    float_model, batches = calibrated_export("mlp")
    ranges = float_ranges(float_model)
    quantized = modelprov.quantize(
        float_model,
        ranges={"input": input_range(batches)},
        extra_options={"QDQKeepRemovableActivations": True},
    )
    assert any(node.op_type == "Relu" for node in quantized.graph.node)
    adjusted = onnxruntime_adjusted(float_model, ranges)
    assert adjusted["linear"] == ranges["relu"]
    assert {"linear", "relu", "linear_1"} <= check_params(quantized, adjusted, "int8")
    assert ranges["linear"][0] < 0 == ranges["relu"][0]


def test_error_bound_has_teeth() -> None:
    """A range 50x too narrow on the hidden layer clips it: the error leaves the bound."""
    float_model, batches = calibrated_export("mlp")
    low, high = float_ranges(float_model)["relu"]
    quantized = modelprov.quantize(
        float_model, ranges={"input": input_range(batches), "relu": (low / 50, high / 50)}
    )
    assert worst_error_in_steps(float_model, quantized, batches) > 10 * MAX_ERROR_STEPS


def test_missing_ranges_are_listed() -> None:
    float_model, _ = calibrated_export("mlp")
    with pytest.raises(QuantizationError, match=r"no range for 1 tensor\(s\).*: input;"):
        modelprov.quantize(float_model)


def test_calibration_batches_fill_the_gaps_and_pytorch_ranges_still_win() -> None:
    float_model, batches = calibrated_export("mlp")
    ranges = float_ranges(float_model)
    quantized = modelprov.quantize(float_model, calibration_batches=batches)
    assert {"relu", "linear_1"} <= check_params(quantized, ranges, "int8")
    assert "input" in quantized_params(quantized)


def test_module_paths_and_user_ranges_win_over_metadata() -> None:
    float_model, batches = calibrated_export("mlp")
    quantized = modelprov.quantize(
        float_model, ranges={"input": input_range(batches), "2": {"min": -1.0, "max": 1.0}}
    )
    scale, zero_point = quantized_params(quantized)["linear_1"]
    assert float(scale) == np.float32(2.0 / 255) and int(zero_point) == 0


def test_onnx_ir_in_onnx_ir_out_and_paths(tmp_path: object) -> None:
    float_model, batches = calibrated_export("mlp")
    model = ir.from_proto(float_model)
    result = modelprov.quantize(model, ranges={"input": input_range(batches)})
    assert isinstance(result, ir.Model)
    assert any(node.op_type == "QuantizeLinear" for node in result.graph)
    path = f"{tmp_path}/mlp.onnx"
    onnx.save(float_model, path)
    from_path = modelprov.quantize(path, ranges={"input": input_range(batches)})
    assert isinstance(from_path, onnx.ModelProto)


def test_qoperator_format_keeps_every_source() -> None:
    float_model, batches = calibrated_export("cnn")
    quantized = modelprov.quantize(
        float_model, calibration_batches=batches[:2], format="qoperator", activation_type="uint8"
    )
    assert any(node.op_type == "QLinearConv" for node in quantized.graph.node)
    assert all(modelprov.sources(quantized, node) for node in quantized.graph.node)
    assert modelprov.diff(float_model, quantized).fx_nodes.value == 1.0
    assert worst_error_in_steps(float_model, quantized, batches) <= MAX_ERROR_STEPS


@pytest.mark.parametrize(
    ("ranges", "message"),
    [
        ({"nowhere": (0, 1)}, "no tensor and no module"),
        ({"input": (2, 1)}, "min 2.0 is larger than max 1.0"),
        ({"input": (0, float("nan"))}, "not finite"),
        ({"input": "0..1"}, "give \\(min, max\\)"),
        ({"0.weight": (0, 1)}, "is a weight"),
    ],
)
def test_bad_ranges_are_refused(ranges: dict[str, object], message: str) -> None:
    float_model, _ = calibrated_export("mlp")
    with pytest.raises(QuantizationError, match=message):
        modelprov.quantize(float_model, ranges=ranges)


def test_bad_options_are_refused() -> None:
    float_model, batches = calibrated_export("mlp")
    with pytest.raises(QuantizationError, match="activation_type='int4'"):
        modelprov.quantize(float_model, activation_type="int4")
    with pytest.raises(QuantizationError, match="format='qint'"):
        modelprov.quantize(float_model, format="qint")
    with pytest.raises(QuantizationError, match="2 arrays for 1 graph inputs"):
        modelprov.quantize(float_model, calibration_batches=[(batches[0][0], batches[0][0])])
    with pytest.raises(QuantizationError, match="empty"):
        modelprov.quantize(float_model, calibration_batches=[])


def weight_codes(model: onnx.ModelProto) -> np.ndarray:
    """Every integer of the int8 weight initializers (the inputs of weight DequantizeLinears)."""
    initializers = {tensor.name: tensor for tensor in model.graph.initializer}
    codes = [
        onnx.numpy_helper.to_array(initializers[node.input[0]]).ravel()
        for node in model.graph.node
        if node.op_type == "DequantizeLinear"
        and node.input[0] in initializers
        and initializers[node.input[0]].data_type == onnx.TensorProto.INT8
    ]
    assert codes, "no int8 weights"
    return np.concatenate(codes).astype(np.int32)


@pytest.mark.parametrize("name", ["mlp", "cnn"])
@pytest.mark.parametrize("per_channel", [False, True])
def test_reduce_range_quantizes_weights_to_7_bits(name: str, per_channel: bool) -> None:
    """True: every weight in [-64, 64]; False: the full [-127, 127] is used."""
    float_model, batches = calibrated_export(name)
    ranges = {float_model.graph.input[0].name: input_range(batches)}
    reduced, full = (
        weight_codes(
            modelprov.quantize(
                float_model, ranges=ranges, reduce_range=value, per_channel=per_channel
            )
        )
        for value in (True, False)
    )
    assert np.abs(reduced).max() == 64 and np.abs(full).max() == 127
    assert len(reduced) == len(full)


def test_default_reduce_range_is_this_cpus(caplog: pytest.LogCaptureFixture) -> None:
    """The default is the CPU check's answer (tested on fake CPUs in _int8_cpu_test), logged."""
    float_model, batches = calibrated_export("mlp")
    ranges = {"input": input_range(batches)}
    needed = this_cpu().reduce_range
    with caplog.at_level(logging.INFO, logger="modelprov.onnx.quantize._quantize"):
        default = modelprov.quantize(float_model, ranges=ranges)
    assert f"quantize: reduce_range={needed} ({this_cpu().describe()}: " in caplog.text
    assert f"reduce_range={not needed} overrides" in caplog.text
    explicit = modelprov.quantize(float_model, ranges=ranges, reduce_range=needed)
    assert np.array_equal(weight_codes(default), weight_codes(explicit))
    # Only int8 weights with 8-bit activations can saturate: nothing else is reduced.
    for activation, weight in [("int8", "int8"), ("uint8", "int8")]:
        assert choose_reduce_range(activation, weight).value is needed
    for activation, weight in [("uint8", "uint8"), ("int16", "int8"), ("int16", "int16")]:
        assert choose_reduce_range(activation, weight).value is False
    assert choose_reduce_range("int8", "int8", True).text() == "reduce_range=True (as given)"
    with pytest.raises(QuantizationError, match="reduce_range='yes': give True, False or None"):
        modelprov.quantize(float_model, ranges=ranges, reduce_range="yes")  # type: ignore[arg-type]


# --- the command line ------------------------------------------------------------------------


def _main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    from modelprov.cli import main

    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_cli_export_calibrate_quantize(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Seed 003 on the command line: calibrate, export, quantize, run."""
    out = tmp_path / "mlp.onnx"
    code, _, err = _main(
        capsys,
        "export",
        "tests._factories:mlp",
        "--onnx",
        str(out),
        "--calibrate",
        "3",
        "--quantize",
    )
    assert code == 0, err
    float_model = onnx.load(str(out))
    quantized = onnx.load(str(tmp_path / "mlp.quant.onnx"))
    assert check_params(quantized, float_ranges(float_model), "int8") >= {"relu", "linear_1"}
    assert all(modelprov.sources(quantized, node) for node in quantized.graph.node)
    inputs = {value.name: value for value in quantized.graph.input}
    props = {entry.key: entry.value for entry in inputs["input"].metadata_props}
    assert float(props["custom.min"]) < 0 < float(props["custom.max"])
    # The batches the command calibrated on (seeded): within their ranges the error is bounded.
    from modelprov.annotation._random_batches import random_batches
    from tests._factories import mlp

    batches = tuple(tuple(b) for b in random_batches(3, mlp()[1], {}))
    assert worst_error_in_steps(float_model, quantized, batches) <= MAX_ERROR_STEPS
    assert sorted(path.name for path in tmp_path.iterdir()) == ["mlp.onnx", "mlp.quant.onnx"]


def test_cli_quantize_prints_ranges_and_scales(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    float_model, batches = calibrated_export("mlp")
    source = tmp_path / "mlp.onnx"
    onnx.save(float_model, str(source))
    before = source.read_bytes()
    code, _, err = _main(capsys, "quantize", str(source), "-o", str(tmp_path / "q.onnx"))
    assert code == 2 and "no range for 1 tensor(s)" in err and ": input;" in err
    assert not (tmp_path / "q.onnx").exists()
    files = []
    for index, batch in enumerate(batches[:2]):
        files.append(str(tmp_path / f"batch{index}.npz"))
        np.savez(files[-1], input=batch[0].numpy())
    code, out, err = _main(
        capsys,
        "quantize",
        str(source),
        "-o",
        str(tmp_path / "q.onnx"),
        "--json",
        "--calibrate-from",
        *files,
    )
    assert code == 0, err
    assert source.read_bytes() == before
    table = {item["tensor"]: item for item in json.loads(out)["tensors"]}
    quantized = onnx.load(str(tmp_path / "q.onnx"))
    params = quantized_params(quantized)
    ranges = float_ranges(float_model)
    for name in ("relu", "linear_1"):
        assert table[name]["range"] == list(ranges[name])
        assert table[name]["scale"] == [float(params[name][0])]
        assert table[name]["zero_point"] == [int(params[name][1])]
    assert table["input"]["kind"] == "activation" and table["input"]["range"] is not None
    assert sum(item["kind"] == "weight" for item in table.values()) == 4


def test_cli_reduce_range_flags_and_the_printed_choice(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    float_model, batches = calibrated_export("mlp")
    source, ranges = tmp_path / "mlp.onnx", tmp_path / "ranges.json"
    onnx.save(float_model, str(source))
    ranges.write_text(json.dumps({"input": list(input_range(batches))}))
    common = ("quantize", str(source), "--ranges", str(ranges), "-o")
    code, _, err = _main(capsys, *common, str(tmp_path / "default.onnx"))
    assert code == 0, err
    chosen = "--reduce-range" if this_cpu().reduce_range else "--no-reduce-range"
    other = "--no-reduce-range" if this_cpu().reduce_range else "--reduce-range"
    assert f"int8 weights, {chosen} ({this_cpu().describe()}" in err
    assert f"{other} overrides)" in err
    code, _, err = _main(capsys, *common, str(tmp_path / "7bit.onnx"), "--reduce-range")
    assert code == 0 and "int8 weights, --reduce-range (as given)" in err
    assert np.abs(weight_codes(onnx.load(str(tmp_path / "7bit.onnx")))).max() == 64
    out = tmp_path / "export.onnx"
    args = ("export", "tests._factories:mlp", "--onnx", str(out), "--calibrate", "2")
    code, _, err = _main(capsys, *args, "--quantize", "--no-reduce-range")
    assert code == 0 and "--no-reduce-range (as given)" in err
    assert np.abs(weight_codes(onnx.load(str(tmp_path / "export.quant.onnx")))).max() == 127


def test_report_shows_range_scale_and_zero_point_on_qdq_nodes() -> None:
    from modelprov.report._data import report_data

    float_model, batches = calibrated_export("mlp")
    quantized = modelprov.quantize(float_model, ranges={"input": input_range(batches)})
    params = quantized_params(quantized)
    nodes = report_data(ir.from_proto(quantized))["nodes"]
    shown = {
        entry["keys"]["quantizes"].split(" ")[0]: entry["keys"]
        for entry in nodes
        if entry["op"] == "QuantizeLinear"
    }
    low, high = float_ranges(float_model)["relu"]
    assert shown["relu"]["range"] == f"[{low:.6g}, {high:.6g}]"
    assert shown["relu"]["scale"] == f"{float(params['relu'][0]):.6g}"
    assert shown["relu"]["zero point"] == str(int(params["relu"][1]))
    assert all("scale" in e["keys"] for e in nodes if e["op"] == "DequantizeLinear")


def test_a_model_without_provenance_is_quantized_from_its_value_ranges() -> None:
    """Ranges on value infos are enough: no export, no sources needed (none are invented)."""
    text = """
    <ir_version: 10, opset_import: ["" : 18]>
    g (float[2, 4] x) => (float[2, 3] y)
      <float[4, 3] w = {0.5, -1, 2, 0.25, 1, -0.5, 0.1, 0.2, -2, 1.5, -0.75, 0.3}> {
      h = MatMul(x, w)
      y = Relu(h)
    }
    """
    model = ir.from_proto(onnx.parser.parse_model(text))
    for value, (low, high) in zip(
        [model.graph.inputs[0], model.graph.outputs[0]], [(-3.0, 3.0), (0.0, 7.5)], strict=True
    ):
        value.metadata_props.update({"custom.min": repr(low), "custom.max": repr(high)})
    before = ir.to_proto(model).SerializeToString()
    with pytest.raises(QuantizationError, match=r"tensor\(s\) onnxruntime quantizes: h;"):
        modelprov.quantize(model)
    quantized = modelprov.quantize(model, ranges={"h": (-7.5, 7.5)})
    assert ir.to_proto(model).SerializeToString() == before
    proto = ir.to_proto(quantized)
    checked = check_params(proto, {"x": (-3.0, 3.0), "y": (0.0, 7.5)}, "int8")
    assert checked == {"x", "y"}
    batch = (torch.rand(2, 4) * 6 - 3,)
    float_out, quantized_out = run(ir.to_proto(model), batch), run(proto, batch)
    assert np.abs(float_out - quantized_out).max() <= MAX_ERROR_STEPS * 7.5 / 255


def _without_metadata(model: onnx.ModelProto) -> onnx.ModelProto:
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    del copy.metadata_props[:]
    for node in copy.graph.node:
        del node.metadata_props[:]
    for info in [*copy.graph.input, *copy.graph.output, *copy.graph.value_info]:
        del info.metadata_props[:]
    return copy


def test_a_calibrate_result_gives_the_ranges_as_numbers() -> None:
    """calibrate returns floats; as ranges= by module path they give the exported ranges."""
    model, _ = _examples.EXAMPLES["mlp"]()
    float_model, batches = calibrated_export("mlp")
    stats = modelprov.calibrate(model, batches)
    assert all(type(v) is float for keys in stats.values() for v in keys.values())
    bare = onnx.ModelProto()
    bare.CopyFrom(float_model)
    for item in [*bare.graph.node, *bare.graph.value_info, *bare.graph.output]:
        kept = [e for e in item.metadata_props if not e.key.startswith("custom.")]
        del item.metadata_props[:]
        item.metadata_props.extend(kept)
    assert not float_ranges(bare)  # no custom.min/max left: only ranges= decides
    with pytest.raises(QuantizationError, match="no range for"):
        modelprov.quantize(bare, ranges={"input": input_range(batches)})
    quantized = modelprov.quantize(bare, ranges={**stats, "input": input_range(batches)})
    assert {"relu", "linear_1"} <= check_params(quantized, float_ranges(float_model), "int8")


@pytest.mark.parametrize("reduce_range", [False, True])
def test_only_metadata_differs_from_onnxruntime_alone(tmp_path: Path, reduce_range: bool) -> None:
    """Without PyTorch ranges, the graph is exactly what quantize_static writes by itself."""
    from onnxruntime import quantization

    float_model, batches = calibrated_export("cnn")
    bare = _without_metadata(float_model)
    input_name = bare.graph.input[0].name
    onnx.save(bare, str(tmp_path / "cnn.onnx"))

    class Reader(quantization.CalibrationDataReader):  # type: ignore[misc]
        def __init__(self) -> None:
            self.feeds = iter([{input_name: batch[0].numpy()} for batch in batches])

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.feeds, None)

    quantization.quantize_static(
        str(tmp_path / "cnn.onnx"), str(tmp_path / "ort.onnx"), Reader(), reduce_range=reduce_range
    )
    theirs = onnx.load(str(tmp_path / "ort.onnx"))
    ours = modelprov.quantize(bare, calibration_batches=batches, reduce_range=reduce_range)
    assert _without_metadata(ours).graph.node == _without_metadata(theirs).graph.node
    assert sorted(ours.graph.initializer, key=lambda t: t.name) == sorted(
        theirs.graph.initializer, key=lambda t: t.name
    )
    for batch in batches[:2]:
        assert np.array_equal(run(ours, batch), run(theirs, batch))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["transformer_encoder", "gpt2"])
def test_transformers_keep_every_source(name: str) -> None:
    """Attention, LayerNorm, Softmax, GELU: every node of the QDQ model has sources, recall 1."""
    model, args = _examples.EXAMPLES[name]()
    generator = torch.Generator().manual_seed(5)

    def like(tensor: torch.Tensor) -> torch.Tensor:
        if tensor.dtype.is_floating_point:
            return torch.randn(tensor.shape, generator=generator)
        return torch.randint(0, 100, tensor.shape, generator=generator, dtype=tensor.dtype)

    batches = [tuple(like(a) for a in args) for _ in range(4)]
    ranges = modelprov.calibrate(model, batches)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        float_model = ir.to_proto(modelprov.export(model, args, annotations=ranges).model)
    quantized = modelprov.quantize(float_model, calibration_batches=batches)
    assert sum(node.op_type == "QuantizeLinear" for node in quantized.graph.node) > 20
    assert all(modelprov.sources(quantized, node) for node in quantized.graph.node)
    report = modelprov.diff(float_model, quantized)
    assert report.fx_nodes.value == 1.0 and report.module_paths.value == 1.0
    expected = onnxruntime_adjusted(float_model, float_ranges(float_model))
    assert len(check_params(quantized, expected, "int8")) >= 5
