"""modelprov.quantize: onnxruntime's static quantizer, driven by ranges measured in PyTorch.

Every activation's range is taken from the model's value-scoped ``custom.min`` /
``custom.max`` (what ``modelprov.export(annotations=modelprov.calibrate(...))`` writes) or from
``ranges=``, and is handed to onnxruntime.quantization.quantize_static as its calibration
data (a ``TensorsData`` calibration cache), so onnxruntime computes every scale and zero
point from exactly that range, as if its own calibrator had measured it. Tensors without a
range are measured by onnxruntime's calibrator on ``calibration_batches``; without batches
the call fails listing them.

Why not ``TensorQuantOverrides`` (rmin/rmax): onnxruntime removes a Relu/Clip after a
quantized producer after giving the producer's output the Relu's range; an rmin/rmax
override on that output keeps the negative part, so the Relu disappears without its
effect (QOperator CNN here: 98 output steps off). Calibration data goes through
onnxruntime's own range adjustments; overrides a caller passes in ``extra_options`` still
apply on top.

Names: ranges are keyed by ONNX tensor (value) names, as onnxruntime's calibration data and
``TensorQuantOverrides`` are; module paths are expanded to their output tensors first.
onnxruntime's ``quant_pre_process`` is not run: its optimizer drops node metadata and renames
the tensors the ranges are keyed on (run ``modelprov.optimize`` before instead).

The quantizer's output then gets provenance on every node (see ``_qdq_provenance``).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, TypeVar, overload

import numpy as np
import onnx
import onnx_ir as ir

from modelprov._model_io._convert import ModelInput, model_input
from modelprov._model_io._files import load_model_proto, save_model
from modelprov._model_io._ir_check import checked_clone
from modelprov._model_io._proto_check import read_proto
from modelprov.core._policy import Policies
from modelprov.errors import MissingDependencyError, QuantizationError, keyword
from modelprov.onnx.quantize._int8_cpu import this_cpu
from modelprov.onnx.quantize._qdq_provenance import attribute_quantized
from modelprov.onnx.quantize._quant_ranges import RANGE_MAX_KEY, RANGE_MIN_KEY, model_ranges

if TYPE_CHECKING:
    from torch.onnx import ONNXProgram

__all__ = ["QUANT_TYPES", "quantize"]

logger = logging.getLogger(__name__)

QUANT_TYPES = ("int8", "uint8", "int16", "uint16")
_FORMATS = ("qdq", "qoperator")

_T = TypeVar("_T")


def _ort() -> Any:
    try:
        from onnxruntime import quantization
    except ImportError as error:
        raise MissingDependencyError(
            f"modelprov.quantize needs onnxruntime ({error}); install it with "
            'pip install onnxruntime  (or pip install "modelprov[test]")'
        ) from None
    return quantization


def _quant_type(value: object, argument: str) -> Any:
    quant = _ort()
    if isinstance(value, quant.QuantType):
        return value
    names = {
        "int8": quant.QuantType.QInt8,
        "uint8": quant.QuantType.QUInt8,
        "int16": quant.QuantType.QInt16,
        "uint16": quant.QuantType.QUInt16,
    }
    if isinstance(value, str) and value.lower() in names:
        return names[value.lower()]
    raise QuantizationError(
        f"{argument}={value!r}: give one of {', '.join(QUANT_TYPES)} or an "
        "onnxruntime.quantization.QuantType"
    )


def _load(model: ModelInput) -> tuple[onnx.ModelProto | None, ir.Model]:
    """The model as (proto if given as one or a path, onnx_ir model), weights loaded;
    never modified."""
    found = model_input(model, where="quantize", path_as="proto", load_weights=True)
    if isinstance(found, ir.Model):
        return None, checked_clone(found)  # shares the weights; refuses a broken model
    where = os.fspath(model) if isinstance(model, str | os.PathLike) else "model"
    return found, read_proto(found, where)


class _Batches:
    """onnxruntime's CalibrationDataReader protocol over the caller's batches."""

    def __init__(self, batches: Iterable[Any], input_names: list[str]) -> None:
        self._input_names = input_names
        self._batches: Iterator[Any] = iter(batches)
        self.count = 0

    def get_next(self) -> dict[str, np.ndarray] | None:
        batch = next(self._batches, None)
        if batch is None:
            return None
        self.count += 1
        return _feed(batch, self._input_names, self.count)


def _array(item: Any, where: str) -> np.ndarray:
    if hasattr(item, "detach"):
        item = item.detach().cpu().numpy()
    if not isinstance(item, np.ndarray):
        raise QuantizationError(
            f"{where}: expected a numpy array or torch tensor, got {type(item).__name__}"
        )
    return item


def _feed(batch: Any, input_names: list[str], number: int) -> dict[str, np.ndarray]:
    where = f"calibration batch {number}"
    if isinstance(batch, Mapping):
        unknown = sorted(set(batch) - set(input_names))
        if unknown:
            raise QuantizationError(
                f"{where}: {unknown} are not graph inputs; the inputs are {input_names}"
            )
        return {name: _array(value, f"{where}[{name!r}]") for name, value in batch.items()}
    items = list(batch) if isinstance(batch, (tuple, list)) else [batch]
    if len(items) != len(input_names):
        raise QuantizationError(
            f"{where}: has {len(items)} arrays for {len(input_names)} graph inputs "
            f"{input_names}; give one per input, or a dict by input name"
        )
    return {
        name: _array(item, f"{where}[{index}]")
        for index, (name, item) in enumerate(zip(input_names, items, strict=True))
    }


def _tensors_to_calibrate(path: str, op_types: list[str]) -> set[str]:
    """The tensors onnxruntime's calibrator would measure for these op types."""
    quant = _ort()
    calibrator = quant.CalibraterBase(path, op_types)
    tensors, _ = calibrator.select_tensors_to_calibrate(calibrator.model)
    return set(tensors)


def _default_op_types() -> list[str]:
    from onnxruntime.quantization.registry import QDQRegistry, QLinearOpsRegistry

    return sorted(set(QLinearOpsRegistry) | set(QDQRegistry))


_CALIBRATION_OPTIONS = {
    "CalibTensorRangeSymmetric": "symmetric",
    "CalibMovingAverage": "moving_average",
    "CalibMovingAverageConstant": "averaging_constant",
    "CalibMaxIntermediateOutputs": "max_intermediate_outputs",
    "CalibPercentile": "percentile",
}


def _calibrate_with_ort(
    path: str,
    augmented_path: str,
    op_types: list[str],
    reader: _Batches,
    method: Any,
    extra_options: Mapping[str, Any],
    ort_options: Mapping[str, Any],
) -> dict[str, Any]:
    """onnxruntime's own calibration of every tensor it would quantize, by tensor name."""
    from pathlib import Path

    quant = _ort()
    calibrator = quant.create_calibrator(
        Path(path),
        op_types,
        augmented_model_path=augmented_path,
        calibrate_method=method,
        use_external_data_format=bool(ort_options.get("use_external_data_format", False)),
        providers=ort_options.get("calibration_providers"),
        extra_options={
            ours: extra_options[theirs]
            for theirs, ours in _CALIBRATION_OPTIONS.items()
            if theirs in extra_options
        },
    )
    calibrator.collect_data(reader)
    return dict(calibrator.compute_data().items())


@overload
def quantize(
    model: ir.Model | ONNXProgram,
    *,
    ranges: Mapping[str, object] | None = ...,
    format: str = ...,
    activation_type: object = ...,
    weight_type: object = ...,
    per_channel: bool = ...,
    calibration_batches: Iterable[Any] | None = ...,
    policies: Policies | None = ...,
    reduce_range: bool | None = ...,
    **ort_options: Any,
) -> ir.Model: ...
@overload
def quantize(
    model: onnx.ModelProto | str | os.PathLike[str],
    *,
    ranges: Mapping[str, object] | None = ...,
    format: str = ...,
    activation_type: object = ...,
    weight_type: object = ...,
    per_channel: bool = ...,
    calibration_batches: Iterable[Any] | None = ...,
    policies: Policies | None = ...,
    reduce_range: bool | None = ...,
    **ort_options: Any,
) -> onnx.ModelProto: ...
def quantize(
    model: ModelInput,
    *,
    ranges: Mapping[str, object] | None = None,
    format: str = "qdq",
    activation_type: object = "int8",
    weight_type: object = "int8",
    per_channel: bool = False,
    calibration_batches: Iterable[Any] | None = None,
    policies: Policies | None = None,
    reduce_range: bool | None = None,
    **ort_options: Any,
) -> onnx.ModelProto | ir.Model:
    """Quantizes with onnxruntime.quantization.quantize_static, ranges from PyTorch.

    Args:
        model: the float model (ModelProto, onnx_ir.Model, path or torch.onnx.ONNXProgram);
            never modified.
        ranges: ``{tensor name or module path: (min, max)}`` (or ``{"min":, "max":}``, so a
            :func:`modelprov.calibrate` result works); wins over the model's own
            ``custom.min``/``custom.max``. A module path stands for the tensors leaving it.
        format: ``"qdq"`` (QuantizeLinear/DequantizeLinear pairs) or ``"qoperator"``.
        activation_type, weight_type: ``"int8"``, ``"uint8"``, ``"int16"``, ``"uint16"`` or
            an onnxruntime QuantType (onnxruntime's defaults: int8 for both).
        per_channel: per-channel weight quantization.
        calibration_batches: batches (arrays/tensors, tuples of them by graph input, or
            dicts by input name) onnxruntime calibrates the tensors without a range from.
        policies: merge policies for the provenance (default modelprov.DEFAULT_POLICIES).
        reduce_range: 7-bit weights. None (default): chosen for this CPU, True for int8
            weights with 8-bit activations on x86 without VNNI (where onnxruntime's u8s8
            kernels saturate full 8-bit weights), else False; the choice is logged (INFO).
        ort_options: passed to quantize_static (``extra_options``, ``op_types_to_quantize``,
            ``nodes_to_exclude``, ``calibrate_method``...);
            ``extra_options["TensorQuantOverrides"]`` applies on top of the ranges.

    Returns:
        The quantized model, each node (Q/DQ included) with its sources; an onnx_ir.Model
        when ``model`` is one, else an onnx.ModelProto.

    Raises:
        QuantizationError: a tensor onnxruntime quantizes has no range and there are no
            calibration batches (the message lists them), a range is invalid, or
            onnxruntime refused the model.
    """
    quant = _ort()
    if format not in _FORMATS:
        raise QuantizationError(f"format={format!r}: give 'qdq' or 'qoperator'")
    activation = _quant_type(activation_type, "activation_type")
    weight = _quant_type(weight_type, "weight_type")
    reduced = choose_reduce_range(activation, weight, reduce_range)
    logger.info("quantize: %s", reduced.text())
    for reserved in ("model_input", "model_output", "calibration_data_reader", "quant_format"):
        if reserved in ort_options:
            raise QuantizationError(f"{reserved} is set by modelprov.quantize; do not pass it")
    batches = None if calibration_batches is None else list(calibration_batches)
    if batches is not None and not batches:
        raise QuantizationError(
            f"{keyword('calibration_batches', 'calibration_batches')} is empty; give at least "
            "one batch"
        )
    proto, float_model = _load(model)
    known = model_ranges(float_model, ranges)
    extra_options = dict(ort_options.pop("extra_options", None) or {})
    op_types = list(ort_options.pop("op_types_to_quantize", None) or _default_op_types())
    with tempfile.TemporaryDirectory(prefix="modelprov-quantize-") as folder:
        float_path = os.path.join(folder, "float.onnx")
        quantized_path = os.path.join(folder, "quantized.onnx")
        if proto is not None:
            save_model(ir.from_proto(proto), float_path)
        else:
            save_model(float_model, float_path)
        wanted = _tensors_to_calibrate(float_path, op_types)
        missing = sorted(wanted - set(known))
        if missing and batches is None:
            raise QuantizationError(
                f"no range for {len(missing)} tensor(s) onnxruntime quantizes: "
                f"{', '.join(missing)}; give them with "
                f"{keyword('ranges', 'ranges={name: (min, max)}')} (tensor names or module "
                "paths), calibrate the export "
                f"({keyword('calibrate', 'annotations=modelprov.calibrate(...)')}), or pass "
                f"{keyword('calibration_batches')} so onnxruntime calibrates them"
            )
        method = ort_options.pop("calibrate_method", quant.CalibrationMethod.MinMax)
        measured: dict[str, Any] = {}
        if missing:
            measured = _ort_call(
                "calibration (calibration_batches)",
                _calibrate_with_ort,
                float_path,
                os.path.join(folder, "augmented.onnx"),
                op_types,
                _Batches(batches or [], _feed_names(float_model)),
                method,
                extra_options,
                ort_options,
            )
        for name in wanted & set(known):
            measured[name] = quant.TensorData(
                lowest=np.float32(known[name].minimum), highest=np.float32(known[name].maximum)
            )
        used = _used_ranges(measured)
        cache = os.path.join(folder, "ranges.json")
        quant.save_tensors_data(quant.TensorsData(method, measured), cache)
        _ort_call(
            "quantize_static",
            quant.quantize_static,
            float_path,
            quantized_path,
            None,
            quant_format=quant.QuantFormat.QDQ if format == "qdq" else quant.QuantFormat.QOperator,
            per_channel=per_channel,
            activation_type=activation,
            weight_type=weight,
            op_types_to_quantize=op_types,
            calibrate_method=method,
            calibration_cache_path=cache,
            reduce_range=reduced.value,
            extra_options=extra_options,
            **ort_options,
        )
        quantized = ir.from_proto(load_model_proto(quantized_path, load_weights=True))
    report = attribute_quantized(float_model, quantized, policies=policies)
    for value in quantized.graph.inputs:
        if value.name in used and RANGE_MIN_KEY not in value.metadata_props:
            value.metadata_props[RANGE_MIN_KEY] = repr(used[value.name][0])
            value.metadata_props[RANGE_MAX_KEY] = repr(used[value.name][1])
    if report.unattributed:
        logger.warning(
            "quantize: %d node(s) without sources: %s",
            len(report.unattributed),
            ", ".join(report.unattributed[:10]),
        )
    if proto is None:  # an onnx_ir.Model or an ONNXProgram
        return quantized
    return ir.to_proto(quantized)


@dataclasses.dataclass(frozen=True)
class ReduceRange:
    """Whether weights are quantized to 7 bits, and why (what the CLI and the log print)."""

    value: bool
    reason: str
    chosen: bool
    """True when modelprov chose it for this CPU, False when the caller gave it."""

    def text(self, *, cli: bool = False) -> str:
        """``reduce_range=True (reason; reduce_range=False overrides)``; with ``cli``, flags."""
        if cli:
            setting = "--reduce-range" if self.value else "--no-reduce-range"
            override = "--no-reduce-range" if self.value else "--reduce-range"
        else:
            setting, override = f"reduce_range={self.value}", f"reduce_range={not self.value}"
        hint = f"; {override} overrides" if self.chosen else ""
        return f"{setting} ({self.reason}{hint})"


def choose_reduce_range(
    activation_type: object, weight_type: object, reduce_range: bool | None = None
) -> ReduceRange:
    """The caller's ``reduce_range``, or the one this CPU's integer kernels need."""
    if reduce_range is not None:
        if not isinstance(reduce_range, bool):
            raise QuantizationError(
                f"reduce_range={reduce_range!r}: give True, False or None (chosen for this CPU)"
            )
        return ReduceRange(reduce_range, "as given", chosen=False)
    quant = _ort()
    activation = _quant_type(activation_type, "activation_type")
    weight = _quant_type(weight_type, "weight_type")
    cpu = this_cpu()
    if weight != quant.QuantType.QInt8 or activation not in (
        quant.QuantType.QInt8,
        quant.QuantType.QUInt8,
    ):
        return ReduceRange(False, "only int8 weights with 8-bit activations saturate", chosen=True)
    if cpu.reduce_range:
        return ReduceRange(
            True,
            f"{cpu.describe()}: onnxruntime's 8-bit kernels saturate full 8-bit weights, "
            "7-bit ones do not",
            chosen=True,
        )
    return ReduceRange(False, f"{cpu.describe()}: 8-bit weights do not saturate", chosen=True)


def _used_ranges(measured: Mapping[str, Any]) -> dict[str, tuple[float, float]]:
    """The range each tensor is quantized from, as Python floats."""
    used: dict[str, tuple[float, float]] = {}
    for name, data in measured.items():
        try:
            low, high = data.range_value
        except AttributeError:
            continue
        used[name] = (float(np.asarray(low).reshape(-1)[0]), float(np.asarray(high).reshape(-1)[0]))
    return used


class _WithoutPreprocessAdvice(logging.Filter):
    """Drops onnxruntime's advice to run quant_pre_process (logged on the root logger)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Please consider")


def _ort_call(what: str, function: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
    """Runs an onnxruntime.quantization step; its failures become QuantizationError."""
    advice = _WithoutPreprocessAdvice()
    root = logging.getLogger()
    root.addFilter(advice)
    try:
        return function(*args, **kwargs)
    except QuantizationError:
        raise
    except Exception as error:  # onnxruntime raises plain and pybind11 exceptions alike
        raise QuantizationError(
            f"onnxruntime.quantization {what} failed: {type(error).__name__}: {error}"
        ) from error
    finally:
        root.removeFilter(advice)


def _feed_names(model: ir.Model) -> list[str]:
    initializers = set(model.graph.initializers)
    return [value.name or "" for value in model.graph.inputs if value.name not in initializers]
