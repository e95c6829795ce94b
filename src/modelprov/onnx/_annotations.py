"""Put per-module user annotations on the nodes of a fresh torch.onnx export.

Each key becomes part of the metadata of every source (FX node) it applies to, so it merges
by its policy like any other key. Which keys apply is decided by ``core._scoping`` for both
backends (module-scoped keys on everything a module computes, value-scoped keys on the FX
nodes whose outputs leave the module, the innermost declaring module winning); this module
answers which FX nodes' outputs leave a module (read outside it, or returned). The policy
then writes a value-scoped key only on the node producing that tensor, and on its value info.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping

import onnx_ir as ir

from modelprov.core._policy import Policies
from modelprov.core._scoping import KeyScoping, within
from modelprov.core._sources import _literal_list, fx_node_name
from modelprov.core._walks import all_nodes
from modelprov.keys import NAME_SCOPES_KEY
from modelprov.onnx._source_nodes import SOURCE_NODE_KEY

__all__ = ["apply_annotations", "module_path_of"]


def module_path_of(node: ir.Node) -> str | None:
    """The qualified name of the module that made a node ('' root), None when unknown."""
    scopes = _literal_list(node.metadata_props.get(NAME_SCOPES_KEY, ""))
    return scopes[-2] if len(scopes) >= 2 else None


def _leaving_fx_nodes(model: ir.Model, module: str) -> set[str]:
    """FX nodes of ``module`` (or its submodules) whose outputs leave the module."""
    graph_outputs = set(model.graph.outputs)
    leaving: set[str] = set()
    for node in all_nodes(model.graph):
        path = module_path_of(node)
        fx_name = fx_node_name(node.metadata_props)
        if path is None or not fx_name or not within(path, module):
            continue
        for value in node.outputs:
            if value in graph_outputs:
                leaving.add(fx_name)
                continue
            for use in value.uses():
                consumer_path = module_path_of(use.node)
                if consumer_path is None or not within(consumer_path, module):
                    leaving.add(fx_name)
    return leaving


def _user_nodes(model: ir.Model) -> dict[str, set[str]]:
    """FX node -> the user-program nodes it came from and the ONNX values it made."""
    found: dict[str, set[str]] = {}
    for node in all_nodes(model.graph):
        fx_name = fx_node_name(node.metadata_props)
        if not fx_name:
            continue
        names = found.setdefault(fx_name, set())
        value = node.metadata_props.get(SOURCE_NODE_KEY, "")
        names.update(json.loads(value) if value.startswith("[") else [value] if value else [])
        names.update(output.name for output in node.outputs if output.name)
    return found


def apply_annotations(
    model: ir.Model,
    normalized: Mapping[str, Mapping[str, str]],
    fx_custom: Mapping[str, Mapping[str, str]],
    policies: Policies,
    output_nodes: Mapping[str, tuple[str, ...]] | None = None,
) -> None:
    """Writes the annotations onto the nodes of an unoptimized export, in place.

    Which keys apply to a node's source is :class:`KeyScoping`'s decision; this backend
    answers which FX nodes' outputs leave a module and which user-program nodes an FX node
    made. ``output_nodes`` (module path -> user-program nodes producing its outputs, in
    order) puts a per-output key (``custom.output1.max``) only on the node producing it.
    """
    scoping = KeyScoping(normalized, policies, output_nodes)
    made = _user_nodes(model) if output_nodes else {}
    leaving: dict[str, set[str]] = {}

    def leaves(fx_name: str, module: str) -> bool:
        if module not in leaving:
            leaving[module] = _leaving_fx_nodes(model, module)
        return fx_name in leaving[module]

    for node in all_nodes(model.graph):
        fx_name = fx_node_name(node.metadata_props)
        path = module_path_of(node)
        if path is not None:
            applied = scoping.source_keys(
                path,
                leaves=functools.partial(leaves, fx_name),
                made=made.get(fx_name, set()),
            )
            node.metadata_props.update({key: item.value for key, item in applied.items()})
        if fx_name:
            node.metadata_props.update(fx_custom.get(fx_name, {}))
