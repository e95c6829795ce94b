"""Value checks for functionize and inline: a call claims what its body computes, and
inlining gives every node back exactly its own sources.

functionize: each call node of the main graph is checked by :func:`tests._regions.check_regions`
(its matched inputs and outputs are main-graph values). Which original nodes a call computes
is read from ``modelprov.inline`` of the functionized model without its recorded node order
(``modelprov.node_order``): inline then puts a call's body copies where the call was, in body
order, and drops the copies of external constants, so the
inlined graph is the main graph with each call replaced by its expansion. The union of the
expansion's sources must be exactly what the call names (``modelprov.sources`` of the call and
of each ``find_calls`` result).

inline: every node of the inlined model is matched to original nodes by values (same
domain and op, outputs of equal dtype, shape and contents, inputs matching where they
can be told apart) and must carry exactly the sources of one of them, each original node
used once.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence

import numpy as np
import onnx_ir as ir

import modelprov
from modelprov.keys import (
    ATEN_DOMAIN,
    ATEN_TARGET_KEY,
    CONSTANT_OF_KEY,
    INLINE_KEY,
    MODULE_CLASS_KEY,
    MODULE_DOMAIN,
    NODE_ORDER_KEY,
)
from modelprov.onnx._lookup import SourceIndex
from tests._regions import RegionResult, check_regions, run_every_value

_DOMAINS = (ATEN_DOMAIN, MODULE_DOMAIN)


@dataclasses.dataclass(frozen=True)
class CallResult:
    """What the functionize check found."""

    regions: RegionResult
    calls: int
    wrong_claims: list[tuple[str, set[str], set[str]]]
    """Call label, the sources it names, the sources its expansion computes (when unequal)."""
    wrong_find_calls: list[str]
    """find_calls results whose sources or target disagree with what the call computes."""


def node_sources(model: ir.Model) -> list[tuple[ir.Node, list[modelprov.Source]]]:
    """Every node's sources, read afresh (a cached index misses metadata edited in place)."""
    return [(node, found) for node, found in SourceIndex(model) if isinstance(node, ir.Node)]


def _is_call(node: ir.Node, model: ir.Model) -> bool:
    return node.domain in _DOMAINS and node.op_identifier() in model.functions


def _expansion_size(node: ir.Node, model: ir.Model, record: list[dict[str, object]] | None) -> int:
    """How many nodes inlining ``node`` leaves in the main graph."""
    if not _is_call(node, model):
        return 1
    function = model.functions[node.op_identifier()]
    total = 0
    for position, body in enumerate(function):
        entry = record[position] if record is not None else {}
        if CONSTANT_OF_KEY in body.metadata_props or "constant_of" in entry:
            continue
        total += _expansion_size(body, model, None)
    return total


def _record(call: ir.Node) -> list[dict[str, object]] | None:
    text = call.metadata_props.get(INLINE_KEY)
    return None if text is None else list(json.loads(text)["nodes"])


def check_calls(
    before: ir.Model, functionized: ir.Model, inputs: Sequence[np.ndarray]
) -> CallResult:
    """Region check of every call, and each call's sources against its inlined expansion."""
    regions = check_regions(before, functionized, inputs)
    inlined = _inline_in_place_of_calls(functionized)
    by_node = {node: {s.id for s in found} for node, found in node_sources(inlined)}
    inlined_sources = [by_node[node] for node in inlined.graph]
    claimed = {node: {s.id for s in found} for node, found in node_sources(functionized)}
    sizes = [_expansion_size(n, functionized, _record(n)) for n in functionized.graph]
    if sum(sizes) != len(inlined.graph):
        raise AssertionError(
            f"inline left {len(inlined.graph)} nodes, expansions add up to {sum(sizes)}"
        )
    computed: dict[ir.Node, set[str]] = {}
    start = 0
    for node, size in zip(functionized.graph, sizes, strict=True):
        if _is_call(node, functionized):
            computed[node] = set().union(*inlined_sources[start : start + size])
        start += size
    wrong = [
        (node.name or node.op_type, claimed[node], ids)
        for node, ids in computed.items()
        if claimed[node] != ids
    ]
    wrong_find: list[str] = []
    targets = {s.id: s.target for _node, found in node_sources(before) for s in found}
    for function in functionized.functions.values():
        if function.domain == ATEN_DOMAIN:
            what = function.metadata_props[ATEN_TARGET_KEY]
        elif function.domain == MODULE_DOMAIN:
            what = function.metadata_props[MODULE_CLASS_KEY]
        else:
            continue
        for call, _found in modelprov.find_calls(functionized, what):
            if call not in computed:
                continue  # a call inside a body: no main-graph values to check it by
            ids = {s.id for s in modelprov.sources(functionized, call)}
            label = f"{what} at {call.name}"
            if ids != computed[call]:
                wrong_find.append(
                    f"{label}: names {sorted(ids)}, computes {sorted(computed[call])}"
                )
            if function.domain == ATEN_DOMAIN and not any(
                targets.get(i, "").replace(".", "::", 1) == what for i in ids
            ):
                wrong_find.append(f"{label}: none of {sorted(ids)} has target {what}")
    return CallResult(regions, len(computed), wrong, wrong_find)


def _inline_in_place_of_calls(functionized: ir.Model) -> ir.Model:
    """inline without the node order functionize recorded: the expansions stay where their
    calls were, so they can be read off by position (the order inline gives back moves a body
    copy among the nodes around it, e.g. merged twins of two calls; inline_mismatches checks
    the reordered graph by values)."""
    order = functionized.metadata_props.pop(NODE_ORDER_KEY, None)
    try:
        return modelprov.inline(functionized)
    finally:
        if order is not None:
            functionized.metadata_props[NODE_ORDER_KEY] = order


def _close(a: np.ndarray, b: np.ndarray) -> bool:
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    return bool(
        np.array_equal(a, b)
        or (np.issubdtype(a.dtype, np.floating) and np.allclose(a, b, rtol=1e-4, atol=1e-5))
    )


def _constant_array(value: ir.Value) -> np.ndarray | None:
    tensor = value.const_value
    return None if tensor is None else tensor.numpy()


def inline_mismatches(
    before: ir.Model, inlined: ir.Model, inputs: Sequence[np.ndarray]
) -> list[str]:
    """Nodes of ``inlined`` that get other sources than the original node they match."""
    arrays_before = run_every_value(before, inputs)
    arrays_after = run_every_value(inlined, inputs)
    sources_before = {
        n: {s.id for s in f} for n, f in node_sources(before) if n.graph is before.graph
    }
    sources_after = {
        n: {s.id for s in f} for n, f in node_sources(inlined) if n.graph is inlined.graph
    }
    mapped: dict[ir.Value, ir.Value] = dict(
        zip(inlined.graph.inputs, before.graph.inputs, strict=True)
    )

    def array(value: ir.Value, arrays: dict[str, np.ndarray]) -> np.ndarray | None:
        found = arrays.get(value.name or "")
        return found if found is not None else _constant_array(value)

    def same_value(after: ir.Value | None, original: ir.Value | None) -> bool:
        if after is None or original is None:
            return after is original
        if after in mapped:
            return mapped[after] is original
        a, b = array(after, arrays_after), array(original, arrays_before)
        return a is not None and b is not None and _close(a, b)

    def same_output(after: ir.Value, original: ir.Value) -> bool | None:
        # None: neither is a tensor (a sequence), so contents cannot tell; inputs must.
        a, b = array(after, arrays_after), array(original, arrays_before)
        if a is None and b is None:
            return None
        return a is not None and b is not None and _close(a, b)

    by_op: dict[tuple[str, str], list[ir.Node]] = {}
    for node in before.graph:
        by_op.setdefault((node.domain, node.op_type), []).append(node)
    used: set[ir.Node] = set()
    problems: list[str] = []
    if len(inlined.graph) != len(before.graph):
        problems.append(f"{len(inlined.graph)} nodes after inline, {len(before.graph)} before")
    for position, node in enumerate(inlined.graph):
        label = node.name or f"{node.op_type}@{position}"
        found: list[tuple[ir.Node, bool]] = []
        for old in by_op.get((node.domain, node.op_type), ()):
            if old in used or len(old.outputs) != len(node.outputs):
                continue
            told = [same_output(a, b) for a, b in zip(node.outputs, old.outputs, strict=True)]
            if False not in told:
                found.append((old, True in told))
        wired = [
            old
            for old, _ in found
            if len(old.inputs) == len(node.inputs)
            and all(same_value(a, b) for a, b in zip(node.inputs, old.inputs, strict=True))
        ]
        candidates = wired or [old for old, by_contents in found if by_contents]
        if not candidates:
            problems.append(f"{label}: matches no original node by values")
            continue
        exact = [old for old in candidates if sources_before[old] == sources_after[node]]
        if not exact:
            problems.append(
                f"{label}: sources {sorted(sources_after[node])}, original "
                f"{sorted(sources_before[candidates[0]])}"
            )
            continue
        chosen = exact[0]
        used.add(chosen)
        mapped.update(zip(node.outputs, chosen.outputs, strict=True))
    return problems
