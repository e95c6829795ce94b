"""Intermediate values of an ONNX model: one onnxruntime run with chosen values exposed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import onnx
import onnx_ir as ir

from modelprov.errors import InvalidModelError

__all__ = ["graph_input_names", "run_exposing", "run_isolated"]


def graph_input_names(model: ir.Model) -> list[str]:
    """The inputs a caller feeds, in order (inputs with an initializer are optional)."""
    return [
        value.name or ""
        for value in model.graph.inputs
        if value.const_value is None and value.name not in model.graph.initializers
    ]


def run_exposing(
    model: ir.Model, values: Sequence[ir.Value], inputs: Sequence[np.ndarray], *, where: str
) -> dict[str, np.ndarray]:
    """Runs ``model`` once on CPU with every value of ``values`` also made a graph output;
    returns each exposed value's array by value name. The model itself is not changed
    (the outputs are added to its serialized copy)."""
    import onnxruntime as ort

    names = graph_input_names(model)
    if len(inputs) != len(names):
        raise InvalidModelError(
            f"{where}: the model takes {len(names)} inputs ({', '.join(names)}), "
            f"{len(inputs)} were given; pass one array per graph input, in order"
        )
    proto = ir.serde.serialize_model(model)
    present = {output.name for output in proto.graph.output}
    added = []
    for value in values:
        if value.name in present:
            continue
        present.add(value.name)
        added.append(ir.serde.serialize_value(value))
    proto.graph.output.extend(added)
    try:
        session = ort.InferenceSession(
            proto.SerializeToString(), providers=["CPUExecutionProvider"]
        )
        wanted = [output.name for output in proto.graph.output]
        arrays = session.run(wanted, dict(zip(names, inputs, strict=True)))
    except Exception as error:  # onnxruntime raises its own exception types
        raise InvalidModelError(
            f"{where}: onnxruntime cannot run the model with its intermediate values exposed "
            f"({str(error).splitlines()[0] if str(error) else type(error).__name__}); check "
            "that it runs on its own and that the inputs match its graph inputs"
        ) from error
    return {name: np.asarray(array) for name, array in zip(wanted, arrays, strict=True)}


def run_isolated(
    model: ir.Model,
    references: Mapping[str, np.ndarray],
    inputs: Sequence[np.ndarray],
    *,
    where: str,
) -> dict[str, np.ndarray]:
    """Runs ``model`` with every value named in ``references`` recomputed but not passed on:
    its readers get the reference array instead (fed as an extra graph input; each array
    already has the value's dtype and shape), so each value's error is what its own node(s)
    add. Returns each such value's candidate array."""
    import onnxruntime as ort

    names = graph_input_names(model)
    proto = ir.serde.serialize_model(model)
    graph = proto.graph
    fed: dict[str, str] = {}
    extra: dict[str, np.ndarray] = {}
    for name, array in references.items():
        replacement = f"{name}__modelprov_reference"
        fed[name] = replacement
        extra[replacement] = array
        graph.input.append(
            onnx.helper.make_tensor_value_info(
                replacement, onnx.helper.np_dtype_to_tensor_dtype(array.dtype), array.shape
            )
        )
    for node in graph.node:
        for position, name in enumerate(node.input):
            if name in fed:
                node.input[position] = fed[name]
    present = {output.name for output in graph.output}
    graph.output.extend(
        onnx.helper.make_empty_tensor_value_info(name) for name in fed if name not in present
    )
    try:
        session = ort.InferenceSession(
            proto.SerializeToString(), providers=["CPUExecutionProvider"]
        )
        wanted = list(fed)
        feeds = dict(zip(names, inputs, strict=True)) | extra
        arrays = session.run(wanted, feeds)
    except Exception as error:  # onnxruntime raises its own exception types
        raise InvalidModelError(
            f"{where}: onnxruntime cannot run the model with each layer fed the reference's "
            f"inputs ({str(error).splitlines()[0] if str(error) else type(error).__name__})"
        ) from error
    return {name: np.asarray(array) for name, array in zip(wanted, arrays, strict=True)}
