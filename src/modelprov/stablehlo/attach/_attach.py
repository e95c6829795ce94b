"""Match StableHLO ops to FX nodes by their locations and set provenance and user attributes.

Correspondence: ``_lower`` runs every FX node inside ``jax.named_scope(<node>)``, so an op's
location is a NameLoc ``"jit(forward)/<node>/<primitive>"`` (wrapping the Python call site).
The second path component names the node. A FusedLoc names every node of its parts. Ops in
nested regions (reduce bodies, while/case branches) are walked and labelled the same way; a
region terminator without a node name takes its parent op's nodes for data-flow purposes.
A constant JAX hoists with ``loc(unknown)`` (and an op fed only by such constants) takes the
nodes of every op using it (``_constant_chains``; identical constant values are one op by
then, ``_constant_values``); a constant value several nodes use gets their provenance, not
their user keys. Ops whose location still names no node (constants no node uses, the shape
checks of a dynamic-shape wrapper) are reported, never guessed. With symbolic shapes JAX
wraps the lowered function in a ``main`` that checks the input shapes and calls it; its ops
are marked ``in_wrapper``.

Attributes (discardable, formats in docs/metadata-format.md): ``modelprov.node``,
``modelprov.source_node`` (only when it differs), ``modelprov.module``,
``modelprov.module_type``, ``modelprov.target``, ``modelprov.stack`` (``StringAttr``\\ s),
and the user's keys: strings, or ``f64`` / ``i64`` numbers for numeric keys (``_numbers``);
the same again in ``mhlo.frontend_attributes`` (for XLA, ``_frontend_attributes``; all
strings there, numbers in their string form), and the user keys, typed as on the op, in the
op's location (``_location_keys``).

Scoping is ``core._scoping.KeyScoping``'s, shared with the ONNX exporter: a module-scoped key
(the default) goes on every op of its module and its submodules; a value-scoped key
(``policies.is_value_scoped``) only on ops that produce an output of the module that declares
it; per FX node, the innermost declaring module's value wins. This module answers which ops
hand a value out of a module: an op one of whose results is used by an op outside that module
or returned by the function. Constants never do (JAX shares one constant op among all nodes
that use the value). When an op lowered from several FX nodes gets several values for a key,
``policies.merge`` combines them.

``ir.Operation`` hashes change once an attribute is set, so every op is collected and every
value computed first, and attributes are written last.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import logging
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from modelprov.core._policy import MergeContext, Policies
from modelprov.core._scoping import KeyScoping, within
from modelprov.core._sources import Source
from modelprov.stablehlo._records import OpRecord, provenance_attributes
from modelprov.stablehlo.attach._composite_ops import decomposition_callers
from modelprov.stablehlo.attach._constant_chains import ChainOp, adopted_nodes, constant_only
from modelprov.stablehlo.attach._frontend_attributes import add_frontend_attributes
from modelprov.stablehlo.attach._helper_functions import call_returns, label_helper_functions
from modelprov.stablehlo.attach._numbers import attribute_value
from modelprov.stablehlo.lower._control_flow import node_component
from modelprov.stablehlo.read._location_keys import with_keys
from modelprov.stablehlo.read._locations import (
    location_label,
    relocate,
    walk_names,
)
from modelprov.stablehlo.read._op_walk import STRUCTURAL_OPS, pre_order

__all__ = ["AttachResult", "attach"]

_LOG = logging.getLogger(__name__)

# Ops that hand values out of a function: a use by one of them leaves every module.
_FUNCTION_EXITS = frozenset({"func.return", "func.call"})
_PROVENANCE_PREFIX = "modelprov."


@dataclasses.dataclass(frozen=True)
class AttachResult:
    """The labelled ops of one module, in printing order (see OpRecord).

    ``aliases``: FX node -> the nodes without ops of their own whose output its ops
    produce (``_aliases``); they are in the ops' locations too.
    ``exits``: source id (a node of the user's program, ``Source.shared_ids``) -> the
    modules declaring value-scoped keys whose output some op of that source makes; what
    ``StableHLOProgram.sources`` scopes the keys of a source by; ``scoping`` the key
    scoping the attributes were chosen by.
    """

    ops: tuple[OpRecord, ...]
    aliases: Mapping[str, tuple[Source, ...]] = dataclasses.field(default_factory=dict)
    exits: Mapping[str, frozenset[str]] = dataclasses.field(default_factory=dict)
    scoping: KeyScoping | None = None


@dataclasses.dataclass
class _Op:
    operation: Any
    index: int
    parent: int | None  # index of the enclosing op, None at function level
    function: int | None  # index of the enclosing func.func
    nodes: tuple[str, ...]
    location: str
    adopted: bool = False  # nodes taken from its consumers (_constant_chains)
    shared_value: bool = False  # a constant-only op several FX nodes use (_constant_values)


def _location_nodes(location: Any, root: str, known: Mapping[str, object]) -> tuple[list[str], str]:
    """The FX node names a location names, and the location's name for display."""
    from jaxlib.mlir import ir

    def node_of(name: str) -> str | None:
        parts = name.split("/")
        return node_component(parts, known) if parts[0] == root else None

    def names_node(name: str, child: Any) -> bool:
        return node_of(name) is not None

    names: dict[str, None] = {}
    label = ""
    for name, _, stopped, _ in walk_names(ir, location, names_node):
        label = label or name
        node = node_of(name) if stopped else None
        if node is not None:
            names[node] = None
    return list(names), label or str(location)[:200]


def _collect(module: Any, root: str, known: Mapping[str, Source]) -> list[_Op]:
    from jaxlib.mlir import ir

    operations = pre_order(ir, module)
    index_of = {op: i for i, op in enumerate(operations)}
    order = {name: n for n, name in enumerate(known)}
    collected: list[_Op] = []
    for i, op in enumerate(operations):
        parent_op = op.parent
        raw_parent = index_of.get(parent_op.operation) if parent_op is not None else None
        parent, function = raw_parent, None
        if raw_parent is not None:
            parent_name = operations[raw_parent].name
            function = raw_parent if parent_name == "func.func" else collected[raw_parent].function
            if parent_name in STRUCTURAL_OPS:
                parent = None
        if op.name in STRUCTURAL_OPS:
            nodes: tuple[str, ...] = ()
            label = ""
        else:
            found, label = _location_nodes(op.location, root, known)
            nodes = tuple(sorted(found, key=order.__getitem__))
        collected.append(_Op(op, i, parent, function, nodes, label))
    return collected


class _Flow:
    """Answers 'does this op hand a value out of module m / node n?' from result uses."""

    def __init__(self, ops: Sequence[_Op], infos: Mapping[str, Source]) -> None:
        self._ops = ops
        self._infos = infos
        self._index_of = {op.operation: op.index for op in ops}
        self._users: dict[int, list[int | None]] = {}
        # A decomposition's return hands its values on to its composites' users, a called
        # function's to its calls' users.
        operations = [op.operation for op in ops]
        self._returns = {
            self._index_of[ret]: [self._index_of[c] for c in callers]
            for ret, callers in (
                decomposition_callers(operations) | call_returns(operations)
            ).items()
        }

    def _owner_nodes(self, index: int | None) -> tuple[str, ...]:
        while index is not None:
            op = self._ops[index]
            if op.nodes:
                return op.nodes
            if op.operation.name in _FUNCTION_EXITS:
                return ()
            index = op.parent
        return ()

    def users(self, op: _Op) -> list[int | None]:
        """Indices of the ops using ``op``'s results (None: not found in the module)."""
        cached = self._users.get(op.index)
        if cached is None:
            cached = []
            for result in op.operation.results:
                cached.extend(self._result_users(result))
            self._users[op.index] = cached
        return cached

    def _result_users(self, result: Any) -> list[int | None]:
        found: list[int | None] = []
        for use in result.uses:
            owner = use.owner
            owner = getattr(owner, "operation", owner)
            index = self._index_of.get(owner)
            composites = self._returns.get(index) if index is not None else None
            if composites is None:
                found.append(index)
                continue
            for composite in composites:
                value = self._ops[composite].operation.results[use.operand_number]
                found.extend(self._result_users(value))
        return found

    def leaves_module(self, op: _Op, module: str) -> bool:
        """True when a result of ``op`` is used outside ``module`` or leaves the function."""
        for user in self.users(op):
            nodes = self._owner_nodes(user)
            if not nodes:
                return True
            if not all(within(self._infos[name].module_path, module) for name in nodes):
                return True
        return False

    def leaves_node(self, op: _Op, node: str) -> bool:
        """True when a result of ``op`` is used by an op not made by ``node``."""
        return any(self._owner_nodes(user) != (node,) for user in self.users(op))


@dataclasses.dataclass
class _Candidate:
    value: str
    source: str
    from_output: bool


def _op_values(
    op: _Op,
    flow: _Flow,
    infos: Mapping[str, Source],
    scoping: KeyScoping,
    exits: dict[str, set[str]],
) -> dict[str, list[_Candidate]]:
    """Every candidate value of every key of ``op``; records in ``exits`` (FX node ->
    modules) which module outputs the op makes for each of its nodes."""
    candidates: dict[str, list[_Candidate]] = {}

    def add(key: str, value: str, source: str, from_output: bool) -> None:
        candidates.setdefault(key, []).append(_Candidate(value, source, from_output))

    # JAX caches constants and reuses one across nodes, so a constant used outside its
    # first node's module is no module output: never value-scope constant-only ops.
    is_constant = op.shared_value or op.adopted or op.operation.name == "stablehlo.constant"

    def leaves(name: str, module: str) -> bool:
        if is_constant or not flow.leaves_module(op, module):
            return False
        exits.setdefault(name, set()).add(module)
        return True

    # A constant value several nodes use is no module's own: their provenance, not their keys.
    shared_value = (op.shared_value or op.adopted) and len(op.nodes) > 1
    for name in op.nodes:
        info = infos[name]
        node_output = len(op.nodes) == 1 or flow.leaves_node(op, name)
        for key, value in provenance_attributes(info).items():
            add(key, value, name, node_output)
        if shared_value:
            continue
        applied = scoping.source_keys(
            info.module_path,
            leaves=functools.partial(leaves, name),
            made=info.shared_ids(),
            produces_output=node_output,
        )
        for key, item in applied.items():
            add(key, item.value, name, item.from_output)
    return candidates


def _merge(key: str, candidates: Sequence[_Candidate], op: _Op, policies: Policies) -> str | None:
    if len(candidates) == 1:
        return candidates[0].value
    ctx = MergeContext(
        key=key,
        node=f"{op.operation.name}#{op.index}",
        from_output=tuple(c.from_output for c in candidates),
        source_ids=tuple(c.source for c in candidates),
    )
    return policies.merge(key, [c.value for c in candidates], ctx)


def attach(
    module: Any,
    root: str,
    infos: Mapping[str, Source],
    annotations: Mapping[str, Mapping[str, str]],
    policies: Policies,
    *,
    relocate_ops: bool = True,
    aliases_for: Callable[[set[str]], Mapping[str, tuple[Source, ...]]] | None = None,
    output_nodes: Mapping[str, tuple[str, ...]] | None = None,
    number_kinds: Mapping[str, type[int] | type[float]] | None = None,
) -> AttachResult:
    """Label every op of ``module`` (an ``ir.Module``, edited in place) and return its records.

    ``root`` is the first location path component (``ROOT_SCOPE``); ``infos`` the FX nodes
    by name in graph order; ``annotations`` normalized ``{module_path: {key: str}}``. Must be
    called inside the module's MLIR context. With ``relocate_ops`` every labelled op's
    location becomes its provenance (``_locations``): module path, source node, user frames.
    ``aliases_for`` gets the names of the nodes some op was lowered from and returns, per
    such node, the nodes without ops whose output it produces (added to its locations).
    ``output_nodes`` (module path -> user-program nodes producing its outputs, in order) puts a
    per-output key (``custom.output1.max``) only on the ops producing that output.
    ``number_kinds`` (user key -> int or float, ``_numbers.number_kinds``) writes those keys
    as ``i64`` / ``f64`` attributes; the others, and every key without it, are strings.
    """
    from jaxlib.mlir import ir

    ops = _collect(module, root, infos)
    label_helper_functions(ops, {name: n for n, name in enumerate(infos)})
    flow = _Flow(ops, infos)
    _adopt_constant_chains(ops, flow, infos)
    scoping = KeyScoping(annotations, policies, output_nodes)
    node_exits: dict[str, set[str]] = {}
    kinds = number_kinds or {}
    planned: list[tuple[_Op, dict[str, str | int | float]]] = []
    for op in ops:
        if op.operation.name in STRUCTURAL_OPS:
            continue
        attributes: dict[str, str | int | float] = {}
        values = _op_values(op, flow, infos, scoping, node_exits)
        for key, candidates in values.items():
            merged = _merge(key, candidates, op, policies)
            if merged is not None:
                attributes[key] = attribute_value(key, merged, kinds)
        planned.append((op, attributes))

    i64 = ir.IntegerType.get_signless(64)
    for op, attributes in planned:
        for key, value in attributes.items():
            if isinstance(value, str):
                op.operation.attributes[key] = ir.StringAttr.get(value)
            elif isinstance(value, int):
                op.operation.attributes[key] = ir.IntegerAttr.get(i64, value)
            else:
                op.operation.attributes[key] = ir.FloatAttr.get_f64(value)
        add_frontend_attributes(ir, op.operation, attributes)
    with_ops = {name for op in ops for name in op.nodes}
    aliases = dict(aliases_for(with_ops)) if aliases_for is not None else {}
    if relocate_ops:
        relocate(((op.operation, op.nodes) for op in ops), infos, aliases)
        for op, attributes in planned:
            if op.nodes:
                op.location = location_label(op.nodes, infos, aliases)
                user_keys = {
                    key: op.operation.attributes[key]
                    for key in attributes
                    if not key.startswith(_PROVENANCE_PREFIX)
                }
                op.operation.location = with_keys(ir, op.operation.location, user_keys)

    wrappers = _wrapper_functions(ops)
    records = _records(module, ops, planned, wrappers)
    unattributed = sum(1 for record in records if not record.nodes)
    _LOG.debug("labelled %d ops, %d unattributed", len(records) - unattributed, unattributed)
    exits = _source_exits(node_exits, infos, aliases)
    return AttachResult(ops=records, aliases=aliases, exits=exits, scoping=scoping)


def _adopt_constant_chains(ops: Sequence[_Op], flow: _Flow, infos: Mapping[str, Source]) -> None:
    """Ops from no FX node fed only by constants take their consumers' nodes."""
    index_of = {op.operation: op.index for op in ops}

    def producer(value: Any) -> int | None:
        owner = value.owner
        operation = getattr(owner, "operation", None)
        return index_of.get(operation) if operation is not None else None

    chain_ops = [
        ChainOp(
            index=op.index,
            parent=op.parent,
            nodes=op.nodes,
            producers=tuple(producer(value) for value in op.operation.operands),
            users=tuple(flow.users(op)) if not op.nodes else (),
            labellable=op.operation.name not in STRUCTURAL_OPS | _FUNCTION_EXITS
            or _reads_nothing(op),
        )
        for op in ops
    ]
    for index in constant_only(chain_ops):
        ops[index].shared_value = len(ops[index].nodes) > 1
    order = {name: n for n, name in enumerate(infos)}
    for index, nodes in adopted_nodes(chain_ops, order).items():
        ops[index].nodes = nodes
        ops[index].adopted = True


def _reads_nothing(op: _Op) -> bool:
    """A call without operands (a small splat's, ``_splat_calls``): a constant value."""
    return op.operation.name == "func.call" and not len(op.operation.operands)


def _source_exits(
    node_exits: Mapping[str, set[str]],
    infos: Mapping[str, Source],
    aliases: Mapping[str, tuple[Source, ...]],
) -> dict[str, frozenset[str]]:
    """Per source id, the module outputs its FX nodes' ops make (a node without ops of its
    own, an alias, shares those of the node whose ops make its output)."""
    found: dict[str, set[str]] = {}
    for name, modules in node_exits.items():
        for source_id in infos[name].shared_ids():
            found.setdefault(source_id, set()).update(modules)
        for alias in aliases.get(name, ()):
            for source_id in alias.shared_ids():
                found.setdefault(source_id, set()).update(modules)
    return {source_id: frozenset(modules) for source_id, modules in found.items()}


def _wrapper_functions(ops: Sequence[_Op]) -> set[int | None]:
    """Functions that only call another one (JAX's dynamic-shape ``main`` with its checks)."""
    calls = {op.function for op in ops if op.operation.name == "func.call"}
    labelled = {op.function for op in ops if op.nodes}
    return calls - labelled


def _records(
    module: Any,
    ops: Sequence[_Op],
    planned: Sequence[tuple[_Op, dict[str, str | int | float]]],
    wrappers: set[int | None],
) -> tuple[OpRecord, ...]:
    from jaxlib.mlir import ir

    # One AsmState per function: SSA names then match the printed module, and printing
    # each op stays cheap (a fresh state per op would re-number the whole function).
    states: dict[int | None, Any] = {}
    records: list[OpRecord] = []
    position_of = {op.index: position for position, (op, _) in enumerate(planned)}
    for position, (op, attributes) in enumerate(planned):
        operation = op.operation
        state = states.get(op.function)
        if state is None:
            scope = ops[op.function].operation if op.function is not None else module.operation
            state = states[op.function] = ir.AsmState(scope)
        buffer = io.StringIO()
        operation.print(state, file=buffer)
        text = buffer.getvalue().split("\n", 1)[0]
        records.append(
            OpRecord(
                index=position,
                op_name=operation.name,
                nodes=op.nodes,
                attributes=types.MappingProxyType(attributes),
                text=text,
                location=op.location,
                parent=position_of.get(op.parent) if op.parent is not None else None,
                in_wrapper=op.function in wrappers,
            )
        )
    return tuple(records)
