"""Put per-module user annotations on the nodes of a fresh torch.onnx export.

Each key becomes part of the metadata of every source (FX node) it applies to, so it merges
by its policy like any other key. Module-scoped keys apply to every FX node computed by the
module or its submodules (a child's own value overrides its parent's). Value-scoped keys
(policy ``from_output`` or declared value-scoped) apply to the FX nodes whose outputs leave
the module (read outside it, or returned); the policy then writes them only on the node that
produces that tensor, and on the tensor's value info.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import onnx_ir as ir

from modelprov.annotation import effective_annotations
from modelprov.core._correspond import all_nodes
from modelprov.core._scoping import applies_to_output, module_scoped_keys, value_scoped_keys, within
from modelprov.core._sources import _literal_list, fx_node_name
from modelprov.core.keys import NAME_SCOPES_KEY
from modelprov.core.policy import Policies
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

    ``output_nodes`` (module path -> user-program nodes producing its outputs, in order) puts
    a per-output key (``custom.output1.max``) only on the node producing that output.
    """
    value_scoped: dict[str, dict[str, str]] = {}
    outputs = output_nodes or {}
    made = _user_nodes(model) if outputs else {}
    # Outer modules first, so an inner module's value for the same tensor wins.
    for module in sorted(normalized, key=lambda path: (path != "", path.count("."), path)):
        scoped = value_scoped_keys(normalized[module], policies)
        if not scoped:
            continue
        for fx_name in _leaving_fx_nodes(model, module):
            value_scoped.setdefault(fx_name, {}).update(
                {
                    key: value
                    for key, value in scoped.items()
                    if applies_to_output(key, outputs.get(module), made.get(fx_name, set()))
                }
            )
    module_scoped = module_scoped_keys(normalized, policies)
    for node in all_nodes(model.graph):
        fx_name = fx_node_name(node.metadata_props)
        path = module_path_of(node)
        if path is not None:
            node.metadata_props.update(effective_annotations(module_scoped, path))
        if fx_name:
            node.metadata_props.update(value_scoped.get(fx_name, {}))
            node.metadata_props.update(fx_custom.get(fx_name, {}))
