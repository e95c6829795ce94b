"""What a pass may change in a model, captured cheaply, so a pass can tell whether it did.

onnx-ir's ``PassResult.modified`` must be true exactly when the model changed; passes that
run third-party pipelines (which report no such flag) compare the state before and after.
Tensor contents are compared by identity: passes replace tensors, they do not edit them.
Metadata is compared as a mapping: onnx-ir writes its keys sorted, so their order in memory
is no change.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator

import onnx_ir as ir

__all__ = ["model_state"]


def model_state(model: ir.Model) -> tuple[Hashable, ...]:
    """Everything of ``model`` but its tensor bytes: graph structure, names, types, shapes,
    attributes, metadata, functions, opsets. Equal states mean an unchanged model."""
    return (
        model.ir_version,
        tuple(sorted(model.opset_imports.items())),
        _props(model.metadata_props),
        tuple(_graph_state(model.graph)),
        tuple(
            (key, _props(function.metadata_props), tuple(_graph_state(function)))
            for key, function in model.functions.items()
        ),
    )


def _props(props: dict[str, str]) -> Hashable:
    return tuple(sorted(props.items()))


def _value(value: ir.Value | None) -> Hashable:
    if value is None:
        return None
    return (
        value.name or id(value),
        str(value.type),
        str(value.shape),
        _props(value.metadata_props),
        id(value.const_value) if value.const_value is not None else None,
    )


def _attribute(attribute: ir.Attr) -> Hashable:
    kind = attribute.type
    if kind in (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS):
        return (attribute.name, kind, attribute.ref_attr_name)  # nodes are walked separately
    if kind in (ir.AttributeType.TENSOR, ir.AttributeType.TENSORS):
        value = attribute.value
        tensors = value if isinstance(value, (list, tuple)) else [value]
        return (attribute.name, kind, tuple(id(tensor) for tensor in tensors))
    value = attribute.value
    if isinstance(value, list):
        value = tuple(str(item) for item in value)
    return (attribute.name, kind, attribute.ref_attr_name, str(value))


def _graph_state(graph: ir.Graph | ir.Function) -> Iterator[Hashable]:
    if isinstance(graph, ir.Graph):
        yield _props(graph.metadata_props)
        yield tuple(_value(value) for value in graph.initializers.values())
    yield tuple(_value(value) for value in graph.inputs)
    yield tuple(_value(value) for value in graph.outputs)
    for node in ir.traversal.RecursiveGraphIterator(graph):
        yield (
            node.domain,
            node.op_type,
            node.overload,
            node.name,
            tuple(value.name or id(value) if value else None for value in node.inputs),
            tuple(_value(value) for value in node.outputs),
            tuple(_attribute(attribute) for attribute in node.attributes.values()),
            _props(node.metadata_props),
        )
