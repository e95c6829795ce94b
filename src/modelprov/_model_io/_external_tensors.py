"""External tensors beyond the main graph's initializers: a Constant's value and other
attribute tensors anywhere, and initializers of subgraphs in function bodies.

``ir.external_data.set_base_dir`` reaches the graph and its subgraphs, not the functions;
``ir.save`` writes only initializers of the graph and its subgraphs to the data file and
keeps every other external tensor's location as it is, which names a file beside the
*input*. :func:`set_base_dir` reads all of them beside the model, and
:func:`embedded_external_tensors` holds the others in memory while a model is saved.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator

import onnx_ir as ir

from modelprov.errors import OutputError

__all__ = ["embedded_external_tensors", "set_base_dir"]


def _graph_likes(model: ir.Model) -> Iterator[ir.Graph | ir.Function]:
    yield model.graph
    yield from model.functions.values()


def set_base_dir(model: ir.Model, base_dir: str) -> None:
    """Reads every external tensor of ``model`` beside ``base_dir``: initializers and
    attribute tensors of the graph, its subgraphs and the functions' bodies."""
    for graph_like in _graph_likes(model):
        for tensor in _tensors_beyond_initializers(graph_like):
            if isinstance(tensor, ir.ExternalTensor):
                tensor.base_dir = base_dir
    ir.external_data.set_base_dir(model.graph, base_dir)


def _tensors_beyond_initializers(graph_like: ir.Graph | ir.Function) -> Iterator[ir.TensorProtocol]:
    for node in ir.traversal.RecursiveGraphIterator(graph_like):
        for attribute in node.attributes.values():
            if attribute.is_ref():
                continue
            if attribute.type == ir.AttributeType.TENSOR and attribute.value is not None:
                yield attribute.value
            elif attribute.type == ir.AttributeType.TENSORS and attribute.value is not None:
                yield from attribute.value
            for graph in _graphs_of(attribute):
                for value in graph.initializers.values():
                    if value.const_value is not None:
                        yield value.const_value


def _graphs_of(attribute: ir.Attr) -> list[ir.Graph]:
    if attribute.type == ir.AttributeType.GRAPH and attribute.value is not None:
        return [attribute.value]
    if attribute.type == ir.AttributeType.GRAPHS and attribute.value is not None:
        return list(attribute.value)
    return []


@contextlib.contextmanager
def embedded_external_tensors(model: ir.Model, *, limit: int) -> Iterator[None]:
    """Holds in memory, while the model is saved, every external tensor ``ir.save`` would
    write with its old location: attribute tensors (a Constant's value) and initializers
    of subgraphs in functions. Their locations name files beside the input, which may be
    missing, or another file, beside the output. Restored on exit; OutputError when they
    hold over ``limit`` bytes."""
    swaps: list[Callable[[], None]] = []
    embedded = 0
    try:
        for graph_like in _graph_likes(model):
            for node in ir.traversal.RecursiveGraphIterator(graph_like):
                for key, attribute in list(node.attributes.items()):
                    if attribute.is_ref():
                        continue
                    embedded += _embed_attribute(node, key, attribute, swaps)
                    if isinstance(graph_like, ir.Function):
                        for graph in _graphs_of(attribute):
                            embedded += _embed_initializers(graph, swaps)
                    if embedded > limit:
                        raise OutputError(
                            f"node {node.name!r}: the tensor attributes stored as external "
                            f"data hold over {limit} bytes, more than an ONNX file can "
                            "embed; store them as initializers"
                        )
        yield
    finally:
        for restore in reversed(swaps):
            restore()


def _embed_attribute(
    node: ir.Node, key: str, attribute: ir.Attr, swaps: list[Callable[[], None]]
) -> int:
    value = attribute.value
    if attribute.type == ir.AttributeType.TENSOR and isinstance(value, ir.ExternalTensor):
        (loaded,) = ir.external_data.convert_tensors_from_external([value])
        new = ir.Attr(key, attribute.type, loaded, doc_string=attribute.doc_string)
    elif attribute.type == ir.AttributeType.TENSORS and any(
        isinstance(t, ir.ExternalTensor) for t in value
    ):
        loaded_list = [
            ir.external_data.convert_tensors_from_external([t])[0]
            if isinstance(t, ir.ExternalTensor)
            else t
            for t in value
        ]
        new = ir.Attr(key, attribute.type, loaded_list, doc_string=attribute.doc_string)
    else:
        return 0
    node.attributes[key] = new
    swaps.append(lambda: node.attributes.__setitem__(key, attribute))
    values = [new.value] if new.type == ir.AttributeType.TENSOR else new.value
    return sum(tensor.nbytes for tensor in values)


def _embed_initializers(graph: ir.Graph, swaps: list[Callable[[], None]]) -> int:
    size = 0
    for value in graph.initializers.values():
        tensor = value.const_value
        if isinstance(tensor, ir.ExternalTensor):
            (loaded,) = ir.external_data.convert_tensors_from_external([tensor])
            value.const_value = loaded
            swaps.append(functools.partial(setattr, value, "const_value", tensor))
            size += loaded.nbytes
    return size
