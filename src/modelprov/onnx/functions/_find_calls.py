"""modelprov.find_calls: the call nodes of an ATen op or module class, with their functions.

A function's body may be shared by many calls (equal bodies share one function), so a call
inside a body is found once per call of that body: three GPT2Block calls sharing one body
give three GPT2Attention calls, each with its own name and metadata (those of the call's
``modelprov.inline`` record, the ones inline gives it back). A module whose ops were all
fused into a neighbour's node (Conv2d into BatchNorm2d's fused Conv) has no call of its
own; it is found as the innermost module call computing its sources.
"""

from __future__ import annotations

import collections
import os
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

import onnx
import onnx_ir as ir

from modelprov._model_io._convert import ModelInput, model_input
from modelprov._model_io._proto_check import read_proto
from modelprov.core._sources import _literal_list, own_source_id, parse_ids
from modelprov.keys import (
    ATEN_DOMAIN,
    ATEN_TARGET_KEY,
    CLASS_HIERARCHY_KEY,
    MODULE_CLASS_KEY,
    MODULE_DOMAIN,
    NAME_SCOPES_KEY,
    NODE_SOURCES_KEY,
)
from modelprov.onnx.functions._call_provenance import read_table
from modelprov.onnx.functions._inline import inline_record, metadata_at
from modelprov.onnx.functions._wrap import function_name

if TYPE_CHECKING:
    from torch.onnx import ONNXProgram

__all__ = ["FoundCall", "find_calls"]

NodeT = TypeVar("NodeT", ir.Node, onnx.NodeProto)
FunctionT = TypeVar("FunctionT", ir.Function, onnx.FunctionProto)


class FoundCall(tuple, Generic[NodeT, FunctionT]):  # type: ignore[type-arg]
    """One call found: unpacks as ``(node, function)``.

    ``node`` is the call node; inside a shared body it is the body's node, the same for
    every call of that body. ``callers`` are the call nodes from the main graph down to the
    body holding ``node`` (empty in the main graph); ``name`` and ``metadata`` are the
    call's own at this place (from its callers' ``modelprov.inline`` records).
    """

    callers: tuple[NodeT, ...]
    name: str
    metadata: dict[str, str]

    def __new__(
        cls,
        node: NodeT,
        function: FunctionT,
        callers: tuple[NodeT, ...] = (),
        name: str = "",
        metadata: Mapping[str, str] | None = None,
    ) -> FoundCall[NodeT, FunctionT]:
        found = super().__new__(cls, (node, function))
        found.callers = callers
        found.name = name
        found.metadata = dict(metadata or {})
        return found

    @property
    def node(self) -> NodeT:
        return self[0]  # type: ignore[no-any-return]

    @property
    def function(self) -> FunctionT:
        return self[1]  # type: ignore[no-any-return]


def _aten_match(function: ir.Function, what: str) -> bool:
    target = function.metadata_props.get(ATEN_TARGET_KEY, "")
    wanted = what if "::" in what else what.replace(".", "::", 1)
    if target == wanted or function.name == function_name(wanted):
        return True
    # Without an overload (``aten::linear``) every overload of the op matches.
    return "." not in wanted and target.partition(".")[0] == wanted


def _class_match(cls: str, what: str) -> bool:
    return what in (cls, cls.rpartition(".")[2])


def _matches(function: ir.Function, what: str) -> bool:
    if function.domain == ATEN_DOMAIN:
        return _aten_match(function, what)
    if function.domain == MODULE_DOMAIN:
        cls = function.metadata_props.get(MODULE_CLASS_KEY, "")
        return _class_match(cls, what) or what == function.name
    return False


class _Site:
    """One call at one place: the node, its callers, its name and metadata there."""

    __slots__ = ("callers", "function", "metadata", "name", "node")

    def __init__(
        self,
        node: ir.Node,
        function: ir.Function,
        callers: tuple[ir.Node, ...],
        name: str,
        metadata: Mapping[str, str],
    ) -> None:
        self.node, self.function, self.callers = node, function, callers
        self.name, self.metadata = name, metadata


def _sites(model: ir.Model) -> list[_Site]:
    """Every call of a model-local function, once per place it is reached from the main
    graph (breadth first: main graph, then bodies)."""
    functions = model.functions
    sites: list[_Site] = []
    pending: collections.deque[tuple[ir.Graph | ir.Function, tuple[ir.Node, ...], Any]] = (
        collections.deque([(model.graph, (), None)])
    )
    while pending:
        graph, callers, at = pending.popleft()
        nodes = list(graph) if isinstance(graph, ir.Function) else None
        for position, node in enumerate(
            nodes if nodes is not None else ir.traversal.RecursiveGraphIterator(graph)
        ):
            function = functions.get(node.op_identifier())
            if function is None:
                continue
            if at is None or nodes is None:
                name, metadata = node.name or "", node.metadata_props
            else:
                base, record = at
                entry = record[position]
                name, metadata = entry.get("name") or node.name or "", metadata_at(base, entry)
            sites.append(_Site(node, function, callers, name, metadata))
            record = inline_record(metadata, name, node.domain, node.op_type, len(function))
            pending.append(
                (function, (*callers, node), None if record is None else (metadata, record))
            )
    return sites


def _module_path(name: str, known: Mapping[str, object]) -> str:
    """The module path of a call named ``call_<path>`` (``_2``… when the name was taken)."""
    path = name.removeprefix("call_")
    if path in known:
        return path
    return re.sub(r"_\d+$", "", path)


def _source_ids(site: _Site) -> set[str]:
    listed = site.metadata.get(NODE_SOURCES_KEY)
    if listed is not None:
        return set(parse_ids(listed, where=f"node {site.name!r}"))
    return {own_source_id(site.name, site.metadata)}


def _instances(model: ir.Model, what: str) -> dict[str, set[str]]:
    """Per module path of class ``what``: the ids of the sources computed inside it."""
    instances: dict[str, set[str]] = {}
    for source in read_table(model):
        scopes = _literal_list(source.metadata.get(NAME_SCOPES_KEY, ""))
        classes = _literal_list(source.metadata.get(CLASS_HIERARCHY_KEY, ""))
        if len(scopes) != len(classes):
            continue
        for path, cls in list(zip(scopes, classes, strict=True))[1:]:
            if _class_match(cls, what):
                instances.setdefault(path, set()).add(source.id)
    return instances


def _fused_into(model: ir.Model, what: str, sites: list[_Site]) -> set[int]:
    """Positions (in ``sites``) of the innermost module calls computing a module of class
    ``what`` that has no call of its own."""
    modules = [site for site in sites if site.function.domain == MODULE_DOMAIN]
    if not modules:
        return set()
    instances = _instances(model, what)
    if not instances:
        return set()
    paths = {_module_path(site.name, instances) for site in modules}
    sources = {id(site): _source_ids(site) for site in modules}
    index = {id(site): position for position, site in enumerate(sites)}
    found: set[int] = set()
    for path, ids in instances.items():
        if path in paths:
            continue
        computing = [site for site in modules if sources[id(site)] & ids]
        places = {(*site.callers, site.node) for site in computing}
        for site in computing:
            place = (*site.callers, site.node)
            if not any(other[: len(place)] == place and other != place for other in places):
                found.add(index[id(site)])
    return found


@overload
def find_calls(
    model: ir.Model | ONNXProgram | str | os.PathLike[str], what: str
) -> list[FoundCall[ir.Node, ir.Function]]: ...
@overload
def find_calls(
    model: onnx.ModelProto, what: str
) -> list[FoundCall[onnx.NodeProto, onnx.FunctionProto]]: ...
def find_calls(
    model: ModelInput, what: str
) -> list[FoundCall[ir.Node, ir.Function]] | list[FoundCall[onnx.NodeProto, onnx.FunctionProto]]:
    """Every call of ``what`` with the function it calls, main graph first, then bodies;
    a call inside a shared body once per call of that body (module docstring).

    Args:
        model: a functionized model (onnx_ir.Model, onnx.ModelProto, a path, read as an
            onnx_ir.Model, or a torch.onnx.ONNXProgram: its onnx_ir.Model).
        what: an ATen qualified name (``"aten::addmm.default"``, also ``aten.addmm.default``;
            without the overload, ``"aten::linear"``, every overload of the op), or a module
            class (``"GPT2Block"`` or its qualified name). Names are those of the exported
            graph: ``nn.Linear`` is ``aten::linear`` (torch.onnx keeps it undecomposed). A
            module fused into a neighbour's node is found as the innermost call computing it
            (a fused Conv+BN is found as ``Conv2d`` and as ``BatchNorm2d``).

    Returns:
        :class:`FoundCall` (``(call node, function)`` pairs, with ``callers``, ``name`` and
        ``metadata``) of the same kind as ``model``.
    """
    model = model_input(model, where="find_calls")
    if isinstance(model, onnx.ModelProto):
        return _as_protos(model, find_calls(read_proto(model), what))
    sites = _sites(model)
    chosen = {position for position, site in enumerate(sites) if _matches(site.function, what)}
    if "::" not in what and not what.startswith("aten."):
        chosen |= _fused_into(model, what, sites)
    return [
        FoundCall(site.node, site.function, site.callers, site.name, site.metadata)
        for position, site in enumerate(sites)
        if position in chosen
    ]


def _as_protos(
    model: onnx.ModelProto, found: list[FoundCall[ir.Node, ir.Function]]
) -> list[FoundCall[onnx.NodeProto, onnx.FunctionProto]]:
    functions = {(f.domain, f.name, f.overload): f for f in model.functions}
    nodes: dict[tuple[str, str], onnx.NodeProto] = {}
    for node in _proto_nodes(model):
        nodes.setdefault((node.name, node.op_type), node)

    def proto(node: ir.Node) -> onnx.NodeProto:
        return nodes[(node.name or "", node.op_type)]

    return [
        FoundCall(
            proto(call.node),
            functions[call.function.identifier()],
            tuple(proto(caller) for caller in call.callers),
            call.name,
            call.metadata,
        )
        for call in found
    ]


def _proto_nodes(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    nodes = list(model.graph.node)
    for function in model.functions:
        nodes.extend(function.node)
    return nodes
