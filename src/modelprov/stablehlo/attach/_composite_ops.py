"""Composite ops after lowering: their locations, schemas, and shared decompositions.

Runs on the module ``export_stablehlo(..., composites=True)`` lowered (``_composites``):

- before ``_attach`` (:func:`locate_composites`): JAX puts a composite in the scope of its
  group's first FX node; it returns the values of the group's output nodes, so its
  location names those;
- after it (:func:`finish_composites`): ``modelprov.aten_schema`` on each decomposition,
  then one function per distinct body (:func:`share_decompositions`): decompositions with
  the same ops, operand wiring, types and attributes (locations and ``modelprov.*``
  attributes aside; user keys count, so bodies whose ops carry different user keys stay
  apart) become one, the same structural idea as ONNX functions (``functionize``). Each op
  of a shared body carries the provenance of every call using it, merged by the policies
  (a fused location, ``modelprov.*`` merged), as an op lowered from several FX nodes does.

:func:`decomposition_callers` tells ``_attach`` that what a decomposition returns leaves
through its composites, so value-scoped keys follow the composite's users.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import logging
import types
from collections.abc import Mapping, Sequence
from typing import Any

from modelprov.core._policy import MergeContext, Policies
from modelprov.core._sources import Source
from modelprov.keys import STABLEHLO_ATEN_SCHEMA_KEY, STABLEHLO_FRONTEND_ATTRIBUTES
from modelprov.stablehlo._records import OpRecord, provenance_attributes
from modelprov.stablehlo.attach._frontend_attributes import frontend_text
from modelprov.stablehlo.attach._helper_functions import function_returns
from modelprov.stablehlo.lower._composites import CompositePlan
from modelprov.stablehlo.read._location_keys import with_keys
from modelprov.stablehlo.read._locations import (
    location_label,
    name_and_child,
    provenance_location,
    with_aliases,
)
from modelprov.stablehlo.read._op_walk import STRUCTURAL_OPS, pre_order

__all__ = [
    "COMPOSITE_OP",
    "Shared",
    "decomposition_callers",
    "finish_composites",
    "locate_composites",
    "set_schemas",
    "share_decompositions",
]

_LOG = logging.getLogger(__name__)

COMPOSITE_OP = "stablehlo.composite"
_PROVENANCE_PREFIX = "modelprov."


def _walk(module: Any) -> list[Any]:
    from jaxlib.mlir import ir

    return pre_order(ir, module)


def _symbol(operation: Any) -> str:
    from jaxlib.mlir import ir

    return str(ir.StringAttr(operation.attributes["sym_name"]).value)


def _decomposition_name(operation: Any) -> str:
    from jaxlib.mlir import ir

    return str(ir.FlatSymbolRefAttr(operation.attributes["decomposition"]).value)


def decomposition_callers(operations: Sequence[Any]) -> dict[Any, list[Any]]:
    """Each decomposition's ``func.return`` -> the composite ops calling that function
    (whose results are what the return hands on)."""
    callers: dict[str, list[Any]] = {}
    for op in operations:
        if op.name == COMPOSITE_OP:
            callers.setdefault(_decomposition_name(op), []).append(op)
    return function_returns(operations, callers)


def set_schemas(module: Any, targets: Mapping[str, str]) -> None:
    """Put ``modelprov.aten_schema`` (the torch schema of the composite's name) on each
    decomposition function; ``targets`` maps composite names to schema text."""
    from jaxlib.mlir import ir

    operations = _walk(module)
    functions = {_symbol(op): op for op in operations if op.name == "func.func"}
    for op in operations:
        if op.name != COMPOSITE_OP:
            continue
        name = str(ir.StringAttr(op.attributes["name"]).value)
        schema = targets.get(name)
        function = functions.get(_decomposition_name(op))
        if schema is not None and function is not None:
            function.attributes[STABLEHLO_ATEN_SCHEMA_KEY] = ir.StringAttr.get(schema)


def _frontend_user_entries(attribute: Any) -> list[tuple[str, str]]:
    from jaxlib.mlir import ir

    entries = ir.DictAttr(attribute)
    return [
        (str(entries[i].name), str(entries[i].attr))
        for i in range(len(entries))
        if not str(entries[i].name).startswith(_PROVENANCE_PREFIX)
    ]


def _body_key(function: Any) -> str:
    """Structural key of a function body: op names, operand wiring, types, attributes;
    locations and ``modelprov.*`` attributes aside (user keys count)."""
    numbering: dict[Any, int] = {}
    lines: list[str] = [str(function.attributes["function_type"])]
    if STABLEHLO_ATEN_SCHEMA_KEY in function.attributes:  # the same ops for another ATen op
        lines.append(str(function.attributes[STABLEHLO_ATEN_SCHEMA_KEY]))

    def number(value: Any) -> int:
        found = numbering.get(value)
        if found is None:
            found = numbering[value] = len(numbering)
        return found

    def visit_region(region: Any, depth: int) -> None:
        for block in region.blocks:
            arguments = [str(number(argument)) for argument in block.arguments]
            lines.append(f"{depth}^" + ",".join(arguments))
            for op in block.operations:
                visit_op(op.operation, depth)

    def visit_op(op: Any, depth: int) -> None:
        attributes: list[str] = []
        for i in range(len(op.attributes)):
            named = op.attributes[i]
            name = str(named.name)
            if name.startswith(_PROVENANCE_PREFIX):
                continue
            if name == STABLEHLO_FRONTEND_ATTRIBUTES:
                attributes.append(f"{name}={_frontend_user_entries(named.attr)}")
                continue
            attributes.append(f"{name}={named.attr}")
        operands = ",".join(str(number(value)) for value in op.operands)
        results = ",".join(f"{number(result)}:{result.type}" for result in op.results)
        lines.append(f"{depth} {op.name}({operands})->{results} {sorted(attributes)}")
        for region in op.regions:
            visit_region(region, depth + 1)

    for region in function.regions:
        visit_region(region, 0)
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def _body_operations(function: Any) -> list[Any]:
    """The ops of ``function`` in pre-order, as ``_walk`` lists them (structural ops too)."""
    from jaxlib.mlir import ir

    return pre_order(ir, function)[1:]  # the function itself aside


@dataclasses.dataclass(frozen=True)
class Shared:
    """What :func:`share_decompositions` did: distinct bodies kept, functions removed."""

    records: tuple[OpRecord, ...]
    functions: int
    removed: int


def share_decompositions(
    module: Any,
    records: Sequence[OpRecord],
    infos: Mapping[str, Source],
    aliases: Mapping[str, tuple[Source, ...]],
    policies: Policies,
) -> Shared:
    """One decomposition function per distinct body; the records of the module after it.

    ``records`` are ``_attach``'s (one per non-structural op, in pre-order walk). Must run
    inside the module's MLIR context.
    """
    from jaxlib.mlir import ir

    operations = _walk(module)
    labelled = [op for op in operations if op.name not in STRUCTURAL_OPS]
    if len(labelled) != len(records):
        raise AssertionError("records do not match the module's ops")
    # ir.Operation hashes change once an attribute is set: look everything up first.
    position_of = {op: n for n, op in enumerate(labelled)}
    functions = {_symbol(op): op for op in operations if op.name == "func.func"}
    callers: dict[str, list[Any]] = {}
    for op in operations:
        if op.name == COMPOSITE_OP:
            callers.setdefault(_decomposition_name(op), []).append(op)
    groups: dict[str, list[str]] = {}
    for name in callers:
        if name in functions:
            groups.setdefault(_body_key(functions[name]), []).append(name)
    shared = [names for names in groups.values() if len(names) > 1]
    bodies = {
        name: [position_of[op] for op in _body_operations(functions[name]) if op in position_of]
        for names in shared
        for name in names
    }

    removed: set[int] = set()
    replaced: dict[int, OpRecord] = {}
    order = {name: n for n, name in enumerate(infos)}
    for names in shared:
        kept, others = names[0], names[1:]
        for slot, position in enumerate(bodies[kept]):
            copies = [records[bodies[name][slot]] for name in names]
            merged = _merged(ir, labelled[position], copies, infos, aliases, policies, order)
            if merged is not None:
                replaced[position] = merged
        state = ir.AsmState(functions[kept])
        for position in bodies[kept]:
            if position in replaced:
                text = _first_line(labelled[position], state)
                replaced[position] = dataclasses.replace(replaced[position], text=text)
        symbol = ir.FlatSymbolRefAttr.get(kept)
        for name in others:
            for op in callers[name]:
                op.attributes["decomposition"] = symbol
            removed.update(bodies[name])
    for names in shared:
        for name in names[1:]:
            functions[name].erase()
    return Shared(
        records=_renumbered(records, replaced, removed),
        functions=len(groups),
        removed=sum(len(names) - 1 for names in shared),
    )


def _merged(
    ir: Any,
    operation: Any,
    copies: Sequence[OpRecord],
    infos: Mapping[str, Source],
    aliases: Mapping[str, tuple[Source, ...]],
    policies: Policies,
    order: Mapping[str, int],
) -> OpRecord | None:
    """Give ``operation`` (the kept copy) the provenance of all ``copies``; its record
    (None: it already has it). ``order``: FX node name -> its position in the graph."""
    nodes = tuple(sorted({n for copy in copies for n in copy.nodes}, key=order.__getitem__))
    first = copies[0]
    if not nodes or nodes == first.nodes:
        return None
    values: dict[str, list[tuple[str, str]]] = {}
    for name in nodes:
        for key, value in provenance_attributes(infos[name]).items():
            values.setdefault(key, []).append((name, value))
    attributes: dict[str, str | int | float] = {
        key: value
        for key, value in first.attributes.items()
        if not key.startswith(_PROVENANCE_PREFIX)
    }
    for key, candidates in values.items():
        distinct = {value for _, value in candidates}
        if len(distinct) == 1:
            attributes[key] = candidates[0][1]
            continue
        context = MergeContext(
            key=key,
            node=f"{operation.name}#{first.index}",
            from_output=tuple(True for _ in candidates),
            source_ids=tuple(name for name, _ in candidates),
        )
        merged = policies.merge(key, [value for _, value in candidates], context)
        if merged is not None:
            attributes[key] = merged
    for name in list(operation.attributes):
        if name.startswith(_PROVENANCE_PREFIX):
            del operation.attributes[name]
    frontend: dict[str, Any] = {}
    if STABLEHLO_FRONTEND_ATTRIBUTES in operation.attributes:
        existing = ir.DictAttr(operation.attributes[STABLEHLO_FRONTEND_ATTRIBUTES])
        for i in range(len(existing)):
            if not str(existing[i].name).startswith(_PROVENANCE_PREFIX):
                frontend[str(existing[i].name)] = existing[i].attr
    for key, written in attributes.items():
        if key.startswith(_PROVENANCE_PREFIX):
            operation.attributes[key] = ir.StringAttr.get(str(written))
            frontend[key] = ir.StringAttr.get(frontend_text(written))
    if frontend:
        operation.attributes[STABLEHLO_FRONTEND_ATTRIBUTES] = ir.DictAttr.get(frontend)
    user_keys = {
        key: operation.attributes[key]
        for key in attributes
        if not key.startswith(_PROVENANCE_PREFIX)
    }
    location = provenance_location(ir, with_aliases(nodes, infos, aliases))
    operation.location = with_keys(ir, location, user_keys)
    return dataclasses.replace(
        first,
        nodes=nodes,
        attributes=types.MappingProxyType(attributes),
        location=location_label(nodes, infos, aliases),
    )


def _renumbered(
    records: Sequence[OpRecord], replaced: Mapping[int, OpRecord], removed: set[int]
) -> tuple[OpRecord, ...]:
    """The records of the ops left, re-indexed in walk order."""
    kept = [n for n in range(len(records)) if n not in removed]
    new_position = {old: new for new, old in enumerate(kept)}
    result: list[OpRecord] = []
    for new, old in enumerate(kept):
        record = replaced.get(old, records[old])
        parent = new_position.get(record.parent) if record.parent is not None else None
        result.append(dataclasses.replace(record, index=new, parent=parent))
    return tuple(result)


def _first_line(operation: Any, state: Any) -> str:
    buffer = io.StringIO()
    operation.print(state, file=buffer)
    return buffer.getvalue().split("\n", 1)[0]


def locate_composites(module: Any, plan: CompositePlan, root: str) -> None:
    """Give each composite op the location of the nodes whose values it returns (before
    ``_attach``).

    JAX places the op in the scope of the group's first node (``<root>/<first>/composite``);
    its results are the values of the group's output nodes, so its location names those
    (the ops of its decomposition name every node of the group).
    """
    from jaxlib.mlir import ir

    for op in _walk(module):
        if op.name != COMPOSITE_OP:
            continue
        name, child = name_and_child(ir, op.location)
        parts = name.split("/") if name else []
        group = plan.groups.get(parts[1]) if len(parts) >= 2 and parts[0] == root else None
        if group is None:
            continue
        tail = "/".join(parts[2:])
        located = [
            ir.Location.name(f"{root}/{node}/{tail}", childLoc=child) for node in group.outputs
        ]
        op.location = located[0] if len(located) == 1 else ir.Location.fused(located)


def finish_composites(
    module: Any,
    plan: CompositePlan,
    attached: Any,
    infos: Mapping[str, Source],
    policies: Policies,
) -> tuple[OpRecord, ...]:
    """After ``_attach``: schemas on the decompositions, then shared bodies; the records.

    ``attached`` is the ``AttachResult``.
    """
    set_schemas(module, {group.name: group.schema for group in plan.groups.values()})
    shared = share_decompositions(module, attached.ops, infos, attached.aliases, policies)
    _LOG.info(
        "composites: %d of %d ATen calls; %d distinct decompositions, %d shared copies removed",
        sum(1 for op in shared.records if op.op_name == COMPOSITE_OP),
        plan.calls,
        shared.functions,
        shared.removed,
    )
    return shared.records
