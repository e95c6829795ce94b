"""Checks a ModelProto before modelprov reads it: text is UTF-8, values are defined once.

protobuf hands a string field that is not valid UTF-8 over as ``bytes``; onnx_ir then fails
deep inside (or writes a model it cannot serialize). A node input no one produces, or a
value produced twice, makes onnx_ir fail or log half-way through; so do model-local
functions defined twice or calling themselves (``_proto_structure``). These checks find
such models first and say where, as a ModelprovError (exit 2 on the command line).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import onnx
import onnx_ir as ir

from modelprov._model_io._proto_structure import dataflow_problem, function_problem
from modelprov._model_io._proto_walk import attribute_graphs
from modelprov.errors import InvalidModelError, MetadataError

__all__ = ["check_proto", "is_plain_and_valid", "read_proto", "text_problems"]

_REPAIR = "fix it, or run modelprov recover, which replaces invalid metadata text"


def _metadata(entries: Iterable[onnx.StringStringEntryProto], where: str) -> Iterator[str]:
    for entry in entries:
        if not isinstance(entry.key, str):
            yield f"{where}: metadata key {entry.key!r:.60} is not valid UTF-8"
        elif not isinstance(entry.value, str):
            yield f"{where}: the value of metadata key {entry.key!r} is not valid UTF-8"


def _texts(fields: Iterable[tuple[str, object]], where: str) -> Iterator[str]:
    for field, value in fields:
        if not isinstance(value, str):
            yield f"{where}: its {field} {value!r:.60} is not valid UTF-8"


def _value_infos(infos: Iterable[onnx.ValueInfoProto], where: str) -> Iterator[str]:
    for info in infos:
        yield from _texts([("value name", info.name), ("doc_string", info.doc_string)], where)
        yield from _metadata(info.metadata_props, f"{where}, value {info.name!r}")


def _graph_text(graph: onnx.GraphProto, where: str, metadata: bool) -> Iterator[str]:
    yield from _texts([("graph name", graph.name), ("doc_string", graph.doc_string)], where)
    for index, node in enumerate(graph.node):
        label = f"{where}node {node.name if isinstance(node.name, str) else index!r}"
        yield from _node_text(node, label, metadata)
    yield from _value_infos([*graph.input, *graph.output, *graph.value_info], where or "graph")
    for tensor in graph.initializer:
        yield from _texts([("initializer name", tensor.name)], where or "graph")


def _node_text(node: onnx.NodeProto, label: str, metadata: bool) -> Iterator[str]:
    yield from _texts(
        [
            ("name", node.name),
            ("op_type", node.op_type),
            ("domain", node.domain),
            ("doc_string", node.doc_string),
            *(("input name", name) for name in node.input),
            *(("output name", name) for name in node.output),
            *(("attribute name", attribute.name) for attribute in node.attribute),
        ],
        label,
    )
    if metadata:
        yield from _metadata(node.metadata_props, label)
    for attribute in node.attribute:
        for graph in attribute_graphs(attribute):
            yield from _graph_text(graph, f"{label}/", metadata)


def text_problems(proto: onnx.ModelProto, *, metadata: bool = True) -> Iterator[str]:
    """Every place where the model holds text that is not UTF-8 (metadata only when
    ``metadata``), described."""
    yield from _texts([("producer_name", proto.producer_name), ("domain", proto.domain)], "model")
    if metadata:
        yield from _metadata(proto.metadata_props, "model")
    yield from _graph_text(proto.graph, "", metadata)
    yield from _function_text(proto, metadata)


def _model_text_problems(proto: onnx.ModelProto, *, metadata: bool) -> Iterator[str]:
    """:func:`text_problems` outside the main graph."""
    yield from _texts([("producer_name", proto.producer_name), ("domain", proto.domain)], "model")
    if metadata:
        yield from _metadata(proto.metadata_props, "model")
    yield from _function_text(proto, metadata)


def _function_text(proto: onnx.ModelProto, metadata: bool) -> Iterator[str]:
    for function in proto.functions:
        label = f"function {function.name!r:.60}"
        yield from _texts([("name", function.name), ("domain", function.domain)], label)
        if metadata:
            yield from _metadata(function.metadata_props, label)
        for index, node in enumerate(function.node):
            yield from _node_text(node, f"{label}, node {node.name or index!r}", metadata)


def _dataflow_problem(graph: onnx.GraphProto, where: str) -> str:
    """A node input no one produces before it, or a value produced twice, in the main graph
    or its subgraphs (:func:`modelprov._model_io._proto_structure.dataflow_problem`)."""
    return dataflow_problem(graph, where)


def _texts_clean(texts: Iterable[object]) -> bool:
    return all(type(text) is str for text in texts)


def _entries_clean(entries: Iterable[onnx.StringStringEntryProto]) -> bool:
    for entry in entries:
        if type(entry.key) is not str or type(entry.value) is not str:
            return False
    return True


def _graph_clean(graph: onnx.GraphProto, metadata: bool) -> bool:
    """True when every text :func:`text_problems` reads in the graph is UTF-8: the same
    fields, read in plain loops (the described walk runs only when this finds a problem)."""
    if not _texts_clean((graph.name, graph.doc_string)):
        return False
    for node in graph.node:
        if not _node_clean(node, metadata):
            return False
    if not _value_infos_clean(graph, _entries_clean):
        return False
    return _texts_clean([tensor.name for tensor in graph.initializer])


def _value_infos_clean(
    graph: onnx.GraphProto, entries_clean: Callable[[Iterable[onnx.StringStringEntryProto]], bool]
) -> bool:
    """True when the graph's inputs, outputs and value infos have text names and doc
    strings, and metadata that ``entries_clean`` accepts."""
    for infos in (graph.input, graph.output, graph.value_info):
        for info in infos:
            if type(info.name) is not str or type(info.doc_string) is not str:
                return False
            if info.metadata_props and not entries_clean(info.metadata_props):
                return False
    return True


def _node_clean(node: onnx.NodeProto, metadata: bool) -> bool:
    if not _texts_clean((node.name, node.op_type, node.domain, node.doc_string)):
        return False
    if not _texts_clean(node.input) or not _texts_clean(node.output):
        return False
    if metadata and not _entries_clean(node.metadata_props):
        return False
    for attribute in node.attribute:
        if type(attribute.name) is not str:
            return False
        for graph in attribute_graphs(attribute):
            if not _graph_clean(graph, metadata):
                return False
    return True


def _entries_clean_once(entries: Iterable[onnx.StringStringEntryProto]) -> bool:
    """UTF-8 keys and values, no key twice."""
    keys: set[object] = set()
    for entry in entries:
        key = entry.key
        if type(key) is not str or type(entry.value) is not str or key in keys:
            return False
        keys.add(key)
    return True


def _main_graph_plain(graph: onnx.GraphProto) -> bool:
    """One walk over the main graph for what :func:`check_proto` and the duplicate-key scan
    read: UTF-8 text, no metadata key twice, no subgraph, no attribute tensor stored
    outside the file, and a dataflow without an undefined input or a value defined twice."""
    if not _texts_clean((graph.name, graph.doc_string)):
        return False
    defined = {value.name for value in graph.input}
    defined.update(tensor.name for tensor in graph.initializer)
    if graph.sparse_initializer:
        return False
    if not _texts_clean(defined):
        return False
    external = onnx.TensorProto.EXTERNAL
    for node in graph.node:
        if type(node.name) is not str or type(node.op_type) is not str:
            return False
        if type(node.domain) is not str or type(node.doc_string) is not str:
            return False
        for name in node.input:
            if type(name) is not str or (name and name not in defined):
                return False
        for name in node.output:
            if type(name) is not str or (name and name in defined):
                return False
            defined.add(name)
        metadata = node.metadata_props
        if metadata and not _entries_clean_once(metadata):
            return False
        for attribute in node.attribute:
            if type(attribute.name) is not str:
                return False
            if attribute.HasField("g") or attribute.graphs:
                return False
            if attribute.HasField("t") and attribute.t.data_location == external:
                return False
            if any(tensor.data_location == external for tensor in attribute.tensors):
                return False
    if not _value_infos_clean(graph, _entries_clean_once):
        return False
    return all(output.name in defined for output in graph.output)


def is_plain_and_valid(proto: onnx.ModelProto) -> bool:
    """True when the model passes :func:`check_proto`, names no metadata key twice
    anywhere, has no subgraph in its main graph and stores no main-graph attribute tensor
    outside the file: read in one walk over the main graph. False says only that the full
    checks must run (they find and describe the problem, if there is one)."""
    if not _main_graph_plain(proto.graph):
        return False
    if not _entries_clean_once(proto.metadata_props):
        return False
    for function in proto.functions:
        if not _entries_clean_once(function.metadata_props):
            return False
        for node in function.node:
            if node.metadata_props and not _entries_clean_once(node.metadata_props):
                return False
            if any(a.HasField("g") or a.graphs for a in node.attribute):
                return False
    if any(_model_text_problems(proto, metadata=True)):
        return False
    return not function_problem(proto)


def check_proto(proto: onnx.ModelProto, where: str, *, metadata: bool = True) -> None:
    """Raises a ModelprovError naming ``where`` and the place when the model holds text
    that is not UTF-8 (metadata included when ``metadata``) or its main graph's dataflow is
    broken (an input no one produces, a value produced twice, also in subgraphs), or its
    model-local functions are defined twice, recursive or read undefined values."""
    if is_plain_and_valid(proto):  # one walk for the common case
        return
    if not _graph_clean(proto.graph, metadata):
        for problem in text_problems(proto, metadata=metadata):
            raise MetadataError(f"{where}: {problem}; {_REPAIR}")
    else:
        # The main graph is clean: the rest is small.
        for problem in _model_text_problems(proto, metadata=metadata):
            raise MetadataError(f"{where}: {problem}; {_REPAIR}")
    problem = _dataflow_problem(proto.graph, "") or function_problem(proto)
    if problem:
        raise InvalidModelError(f"{where}: {problem}")


def read_proto(proto: onnx.ModelProto, where: str = "model", *, check: bool = True) -> ir.Model:
    """``ir.from_proto`` after :func:`check_proto` (skipped when ``check`` is False: the
    caller checked this proto already); onnx_ir's own failures become InvalidModelError
    naming ``where``."""
    if check:
        check_proto(proto, where)
    try:
        return ir.from_proto(proto)
    except Exception as error:
        text = " ".join(str(error).split())[:300]
        raise InvalidModelError(
            f"{where}: onnx_ir cannot read the model ({type(error).__name__}: {text})"
        ) from None
