"""Inlining model-local functions without losing their body nodes' provenance.

onnxscript's optimizer inlines every model-local function first. A body node's metadata is
its own source (a user function built with provenance, or a module exported as a function),
which the optimizer would otherwise replace by the call's. Here calls are inlined before the
optimizer runs: calls of modelprov's own functions (``functionize``) by ``modelprov.inline``,
which restores each call's nodes exactly; other functions by onnx_ir's ``InlinePass`` (what
onnxscript runs), tracked like any step, and each inlined node also gets the source its body
node stood for.
"""

from __future__ import annotations

from collections.abc import Sequence

import onnx_ir as ir
import onnx_ir.passes.common as common_passes

from modelprov.core._provenance import Provenance, node_label
from modelprov.core._sources import Source, original_metadata, own_source_id
from modelprov.core._walks import all_nodes
from modelprov.keys import ATEN_DOMAIN, MODULE_DOMAIN

__all__ = [
    "add_body_sources",
    "calls_functions",
    "inline_modelprov_calls",
    "inline_user_functions",
]


def calls_functions(model: ir.Model, nodes: Sequence[ir.Node] | None = None) -> bool:
    """True when some node of the model calls one of its local functions (``nodes``, when
    given, is ``all_nodes(model.graph)``)."""
    functions = model.functions
    return bool(functions) and any(
        node.op_identifier() in functions
        for node in (nodes if nodes is not None else all_nodes(model.graph))
    )


def inline_modelprov_calls(model: ir.Model) -> bool:
    """Inlines calls of functionize's functions exactly (``modelprov.inline``), in place."""
    from modelprov.onnx.functions._inline import InlineProvenancePass

    if not any(key[0] in (ATEN_DOMAIN, MODULE_DOMAIN) for key in model.functions):
        return False
    return InlineProvenancePass()(model).modified


def inline_user_functions(model: ir.Model) -> None:
    """onnx_ir's inliner, the one onnxscript's optimizer starts with."""
    common_passes.InlinePass()(model)


def add_body_sources(
    provenance: Provenance, model: ir.Model, before: set[ir.Node], calls: list[dict[str, str]]
) -> int:
    """Gives each node the inliner made the source of its body node; returns how many.

    The inliner writes ``{**call metadata, **body node metadata}`` on each copy: a copy
    whose metadata is not just a call's carries its body node's own source, which joins the
    call's sources the step already gave it.
    """
    added = 0
    for position, node in enumerate(all_nodes(model.graph)):
        if node in before:
            continue
        metadata = original_metadata(dict(node.metadata_props))
        if not metadata or any(metadata == original_metadata(call) for call in calls):
            continue
        source_id = own_source_id(node_label(node, position), metadata)
        base, count = source_id, 1
        while (
            source_id in provenance.table
            and dict(provenance.table.by_id(source_id).metadata) != metadata
        ):
            count += 1
            source_id = f"{base}#{count}"
        if source_id not in provenance.table:
            provenance.table.add(Source.from_metadata(source_id, metadata))
        index = provenance.table.index_of(source_id)
        provenance.node_sources[node] = provenance.node_sources.get(node, frozenset()) | {index}
        added += 1
    return added
