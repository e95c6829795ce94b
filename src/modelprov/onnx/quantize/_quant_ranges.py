"""Which range each tensor of an ONNX model gets when it is quantized.

Ranges come from two places, the second winning over the first:

* the model's own value-scoped ``custom.min`` / ``custom.max`` (written by
  ``modelprov.export(annotations=modelprov.calibrate(...))``): on the tensor's value info, or
  on the node producing it when that node has a single output;
* ``ranges=`` given by the caller, keyed by tensor name or by module path (a module path
  stands for the tensors leaving that module: read outside it, or graph outputs).

A tensor made from a ranged tensor by an op that only moves values (Reshape, Flatten,
Squeeze, Unsqueeze, Transpose, Identity: the same values, rearranged) has exactly that
range; it is filled in when it has none of its own (e.g. ``x.view(...)`` in ``forward``,
which no module's output covers).

Metadata is text from a file: it is parsed with ``float`` only, never evaluated.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

import onnx_ir as ir

from modelprov.core._scoping import within
from modelprov.core._walks import all_nodes
from modelprov.errors import QuantizationError, keyword
from modelprov.keys import RANGE_MAX_KEY, RANGE_MIN_KEY
from modelprov.onnx._annotations import module_path_of

__all__ = [
    "RANGE_MAX_KEY",
    "RANGE_MIN_KEY",
    "RangeSpec",
    "TensorRange",
    "annotated_ranges",
    "model_ranges",
    "propagate_ranges",
    "resolve_ranges",
]


RangeSpec = tuple[float, float] | list[float] | Mapping[str, object]
"""``(min, max)``, or a mapping with ``min``/``max`` (or ``custom.min``/``custom.max``)."""


@dataclasses.dataclass(frozen=True)
class TensorRange:
    """The real range ``[minimum, maximum]`` of one tensor and where it was read."""

    minimum: float
    maximum: float
    origin: str
    """``metadata`` (custom.min/custom.max), ``ranges`` (the caller's) or ``propagated``."""


def _number(text: object, where: str) -> float:
    if isinstance(text, bool) or not isinstance(text, (int, float, str)):
        raise QuantizationError(f"{where}: expected a number, got {type(text).__name__}")
    try:
        number = float(text)
    except ValueError:
        raise QuantizationError(f"{where}: {text!r} is not a number") from None
    if not math.isfinite(number):
        raise QuantizationError(f"{where}: {text!r} is not finite; give a finite range")
    return number


def _checked(minimum: float, maximum: float, origin: str, where: str) -> TensorRange:
    if minimum > maximum:
        raise QuantizationError(f"{where}: min {minimum} is larger than max {maximum}")
    return TensorRange(minimum, maximum, origin)


def _named_nodes(model: ir.Model) -> list[ir.Node]:
    return [node for node in all_nodes(model.graph) if node.graph is model.graph]


def annotated_ranges(model: ir.Model) -> dict[str, TensorRange]:
    """Ranges the model carries as value-scoped custom.min / custom.max, by tensor name."""
    found: dict[str, TensorRange] = {}
    candidates: list[tuple[ir.Value, Mapping[str, str], str]] = []
    for value in model.graph.inputs:
        candidates.append((value, value.metadata_props, f"value {value.name!r}"))
    for node in _named_nodes(model):
        for value in node.outputs:
            props: Mapping[str, str] = value.metadata_props
            where = f"value {value.name!r}"
            if RANGE_MIN_KEY not in props and len(node.outputs) == 1:
                props, where = node.metadata_props, f"node {node.name!r}"
            candidates.append((value, props, where))
    for value, props, where in candidates:
        if not value.name or (RANGE_MIN_KEY not in props and RANGE_MAX_KEY not in props):
            continue
        if RANGE_MIN_KEY not in props or RANGE_MAX_KEY not in props:
            raise QuantizationError(
                f"{where}: has only one of {RANGE_MIN_KEY} and {RANGE_MAX_KEY}; give both, "
                f"or pass the tensor's range in {keyword('ranges')}"
            )
        minimum = _number(props[RANGE_MIN_KEY], f"{where}, key {RANGE_MIN_KEY}")
        maximum = _number(props[RANGE_MAX_KEY], f"{where}, key {RANGE_MAX_KEY}")
        found[value.name] = _checked(minimum, maximum, "metadata", where)
    return found


def _spec_bounds(key: str, spec: object) -> tuple[float, float]:
    where = _entry(key)
    if isinstance(spec, Mapping):
        for low, high in (("min", "max"), (RANGE_MIN_KEY, RANGE_MAX_KEY)):
            if low in spec and high in spec:
                return _number(spec[low], where + f"[{low!r}]"), _number(
                    spec[high], where + f"[{high!r}]"
                )
        raise QuantizationError(
            f"{where}: a mapping needs 'min' and 'max' (or {RANGE_MIN_KEY!r} and "
            f"{RANGE_MAX_KEY!r}), got keys {sorted(map(str, spec))}"
        )
    if isinstance(spec, (tuple, list)) and len(spec) == 2:
        return _number(spec[0], where + "[0]"), _number(spec[1], where + "[1]")
    raise QuantizationError(f"{where}: give (min, max) or {{'min': ..., 'max': ...}}, got {spec!r}")


def _module_outputs(model: ir.Model, module: str) -> list[str]:
    """Names of the tensors leaving ``module``: read outside it, or graph outputs."""
    graph_outputs = set(model.graph.outputs)
    names: list[str] = []
    for node in _named_nodes(model):
        path = module_path_of(node)
        if path is None or not within(path, module):
            continue
        for value in node.outputs:
            if value.name and (value in graph_outputs or _read_outside(value, module)):
                names.append(value.name)
    return names


def _read_outside(value: ir.Value, module: str) -> bool:
    for use in value.uses():
        path = module_path_of(use.node)
        if path is None or not within(path, module):
            return True
    return False


def _tensor_names(model: ir.Model) -> set[str]:
    names = {value.name for value in model.graph.inputs if value.name}
    for node in _named_nodes(model):
        names.update(value.name for value in node.outputs if value.name)
    return names


def _entry(key: object) -> str:
    """``ranges[key]`` in a message (on the command line: the --ranges file's key)."""
    return keyword("ranges", f"ranges[{key!r}]", command_line_suffix=f", key {key!r}")


def resolve_ranges(model: ir.Model, ranges: Mapping[str, object]) -> dict[str, TensorRange]:
    """The caller's ranges by tensor name; module-path keys expand to the module's outputs.

    A key naming a tensor (graph input or node output) is that tensor; otherwise it must be
    the path of a module of the export (``''`` is the whole model). Anything else raises
    QuantizationError naming the key.
    """
    tensors = _tensor_names(model)
    initializers = set(model.graph.initializers)
    resolved: dict[str, TensorRange] = {}
    by_module: list[tuple[str, TensorRange]] = []
    for key, spec in ranges.items():
        if not isinstance(key, str):
            raise QuantizationError(
                f"{keyword('ranges', 'ranges')}: keys are tensor names or module paths, got {key!r}"
            )
        minimum, maximum = _spec_bounds(key, spec)
        checked = _checked(minimum, maximum, "ranges", _entry(key))
        if key in initializers:
            raise QuantizationError(
                f"{_entry(key)}: {key!r} is a weight; weights are quantized from their "
                "values, give ranges for activations (tensor names or module paths)"
            )
        if key in tensors:
            resolved[key] = checked
        else:
            by_module.append((key, checked))
    # A tensor named explicitly wins over the module it leaves.
    for key, checked in by_module:
        outputs = _module_outputs(model, key)
        if not outputs:
            raise QuantizationError(
                f"{_entry(key)}: no tensor and no module of the model has this name; keys "
                "are tensor names (see the model's value names) or module paths such as '0' "
                "or 'encoder.layer.0'"
            )
        for name in outputs:
            resolved.setdefault(name, checked)
    return resolved


_VALUE_MOVING_OPS = frozenset(
    {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Identity"}
)


def propagate_ranges(model: ir.Model, found: Mapping[str, TensorRange]) -> dict[str, TensorRange]:
    """``found`` plus the ranges of tensors that value-moving ops make from ranged tensors."""
    result = dict(found)
    for node in _named_nodes(model):  # graph order is topological
        if node.op_type not in _VALUE_MOVING_OPS or node.domain not in ("", "ai.onnx"):
            continue
        source = node.inputs[0] if node.inputs else None
        target = node.outputs[0]
        if source is None or not source.name or not target.name or target.name in result:
            continue
        known = result.get(source.name)
        if known is not None:
            result[target.name] = TensorRange(known.minimum, known.maximum, "propagated")
    return result


def model_ranges(
    model: ir.Model, ranges: Mapping[str, object] | None = None
) -> dict[str, TensorRange]:
    """The model's annotated ranges, overridden by the caller's, then propagated."""
    found = annotated_ranges(model)
    if ranges:
        found.update(resolve_ranges(model, ranges))
    return propagate_ranges(model, found)
