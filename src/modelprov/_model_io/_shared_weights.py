"""An onnx_ir model over a caller's ModelProto that shares its weights and never writes into it.

``ir.from_proto`` wraps each TensorProto it reads (initializers and tensor attributes) in a
``TensorProtoTensor`` that reads the proto's data in place: no copy of the weights. Its
name, though, is the proto's: renaming the tensor (onnxscript's optimizer names Constant
values and fixes value names; renaming an initializer's value renames its tensor) writes
into the caller's proto. :func:`read_sharing_weights` gives every such tensor a name of its
own, so the caller's proto is never written, and :func:`write_sharing_weights` serializes
the model as ``ir.to_proto`` does (which copies each TensorProto's data once, into the
output) and then puts the names the tensors hold now into the output.

The result is the proto ``ir.to_proto`` makes of a model read from a copy of the input, at
the memory of onnxscript's own ``optimize(ModelProto)``: the input plus the output.
"""

from __future__ import annotations

from collections.abc import Callable

import onnx
import onnx_ir as ir

from modelprov.core._walks import attribute_dict, nodes_and_graphs

__all__ = ["SharedWeights", "read_sharing_weights", "write_sharing_weights"]


class _OwnNameTensor(ir.serde.TensorProtoTensor):
    """A TensorProtoTensor over the caller's proto, whose name is its own: renaming it
    leaves the proto alone (``None``: cleared, as the parent class clears the field)."""

    __slots__ = ("_own_name",)

    def __init__(self, proto: onnx.TensorProto) -> None:
        super().__init__(proto)
        self._own_name: str | None = proto.name if proto.HasField("name") else None

    @property
    def name(self) -> str:
        return self._own_name or ""

    @name.setter
    def name(self, value: str | None) -> None:
        self._own_name = value

    def renamed(self) -> bool:
        """True when the name differs from the proto's (in value or in being set)."""
        proto = self.raw
        if self._own_name is None:
            return bool(proto.HasField("name"))
        return not proto.HasField("name") or bool(proto.name != self._own_name)

    def name_into(self, proto: onnx.TensorProto) -> None:
        """Writes this tensor's name into ``proto``, a copy of its own proto."""
        if self._own_name is None:
            proto.ClearField("name")
        else:
            proto.name = self._own_name


class SharedWeights:
    """The tensors of a model read by :func:`read_sharing_weights` that read the caller's
    protos (what :func:`write_sharing_weights` needs to know)."""

    def __init__(self, tensors: list[_OwnNameTensor]) -> None:
        self.tensors = tensors

    def any_renamed(self) -> bool:
        """True when a tensor's name is no longer its proto's."""
        return any(tensor.renamed() for tensor in self.tensors)


def read_sharing_weights(model: ir.Model) -> SharedWeights:
    """Gives every tensor of ``model`` that reads a proto (``ir.from_proto``'s tensors, in
    initializers of every graph and in tensor attributes of nodes and functions) a name of
    its own, in place; the data stays shared with the proto. Returns those tensors."""
    tensors: list[_OwnNameTensor] = []

    def own(tensor: ir.TensorProtocol) -> ir.TensorProtocol:
        if type(tensor) is not ir.serde.TensorProtoTensor:
            return tensor
        found = _OwnNameTensor(tensor.raw)
        tensors.append(found)
        return found

    nodes, graphs = nodes_and_graphs(model.graph)
    for function in model.functions.values():
        function_nodes = list(ir.traversal.RecursiveGraphIterator(function))
        nodes.extend(function_nodes)
        graphs.extend(  # subgraphs of the function's nodes, for their initializers
            graph
            for node in function_nodes
            for attribute in node.attributes.values()
            for graph in _graphs_of(attribute)
        )
    for graph in graphs:
        for value in graph.initializers.values():
            if value.const_value is not None:
                value.const_value = own(value.const_value)
    for node in nodes:
        if attribute_dict(node):
            _own_attribute_tensors(node, own)
    return SharedWeights(tensors)


def _graphs_of(attribute: ir.Attr) -> list[ir.Graph]:
    if attribute.type == ir.AttributeType.GRAPH:
        return [attribute.value]
    if attribute.type == ir.AttributeType.GRAPHS:
        return list(attribute.value)
    return []


def _own_attribute_tensors(
    node: ir.Node, own: Callable[[ir.TensorProtocol], ir.TensorProtocol]
) -> None:
    for name, attribute in list(node.attributes.items()):
        if attribute.type == ir.AttributeType.TENSOR:
            tensor = own(attribute.value)
            if tensor is not attribute.value:
                node.attributes[name] = ir.AttrTensor(name, tensor, doc_string=attribute.doc_string)
        elif attribute.type == ir.AttributeType.TENSORS:
            tensors = [own(each) for each in attribute.value]
            if any(new is not old for new, old in zip(tensors, attribute.value, strict=True)):
                node.attributes[name] = ir.AttrTensors(
                    name, tensors, doc_string=attribute.doc_string
                )


def write_sharing_weights(model: ir.Model, shared: SharedWeights) -> onnx.ModelProto:
    """``ir.to_proto(model)`` with the names ``shared``'s tensors hold now (``to_proto``
    copies a TensorProtoTensor's proto, name and all)."""
    proto = ir.to_proto(model)
    if not shared.any_renamed():
        return proto
    _name_graph(model.graph, proto.graph)
    for function, function_proto in zip(model.functions.values(), proto.functions, strict=True):
        _name_nodes(function, function_proto.node)
    return proto


def _name_graph(graph: ir.Graph, proto: onnx.GraphProto) -> None:
    # ir.to_proto writes the initializers that hold a tensor, in the graph's order.
    held = [value.const_value for value in graph.initializers.values()]
    for tensor, tensor_proto in zip(
        [tensor for tensor in held if tensor is not None], proto.initializer, strict=True
    ):
        _name_tensor(tensor, tensor_proto)
    _name_nodes(graph, proto.node)


def _name_nodes(nodes: ir.Graph | ir.Function, protos: list[onnx.NodeProto]) -> None:
    for node, node_proto in zip(nodes, protos, strict=True):
        by_name = {attribute.name: attribute for attribute in node_proto.attribute}
        for name, attribute in node.attributes.items():
            found = by_name.get(name)
            if found is None:
                continue
            if attribute.type == ir.AttributeType.TENSOR:
                _name_tensor(attribute.value, found.t)
            elif attribute.type == ir.AttributeType.TENSORS:
                for tensor, tensor_proto in zip(attribute.value, found.tensors, strict=True):
                    _name_tensor(tensor, tensor_proto)
            elif attribute.type == ir.AttributeType.GRAPH:
                _name_graph(attribute.value, found.g)
            elif attribute.type == ir.AttributeType.GRAPHS:
                for graph, graph_proto in zip(attribute.value, found.graphs, strict=True):
                    _name_graph(graph, graph_proto)


def _name_tensor(tensor: ir.TensorProtocol, proto: onnx.TensorProto) -> None:
    if isinstance(tensor, _OwnNameTensor) and tensor.renamed():
        tensor.name_into(proto)
