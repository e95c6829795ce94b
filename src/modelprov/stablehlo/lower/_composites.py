"""ATen calls as ``stablehlo.composite`` ops: which calls, and their lowering.

``export_stablehlo(..., composites=True)``: each ATen call of the user's ``torch.export``
program becomes one ``stablehlo.composite "<ATen name>"`` (``aten.linear.default``). Its
``decomposition`` is a private function holding exactly the ops modelprov emits without
composites: the torchax lowerings of the decomposed FX nodes made from that call
(``node.meta["from_node"]``; ``linear`` gives ``permute`` + ``addmm``), each op in its
node's name scope, so ``_attach`` labels them as usual. JAX's own ``jax.lax.composite``
emits the op (:func:`lower_group`, called by ``_lower``'s interpreter at the group's first
node); nothing is computed differently.

- operands: the call's tensor arguments in schema order (a ``Tensor[]`` element by
  element; an absent optional tensor is neither operand nor attribute);
- results: the values of the call the program uses (a multi-result op whose other
  results are unused returns fewer);
- ``composite_attributes``: every other argument of the schema (defaults included) by its
  schema name, typed: ``bool`` as ``i1`` (``true``), ``int`` as ``i64``, ``float`` as
  ``f64`` (also an integer given for a ``float`` argument), ``str`` as a string, a dtype,
  device, layout or memory format as torch's string (``torch.float32``), a list as an array;
  ``None`` (and enum defaults, which torch stores as numbers) omitted. MLIR sorts a
  dictionary by name; the schema order is that of ``modelprov.aten_schema`` on the
  decomposition (the call's torch schema);
- ``version``: :data:`COMPOSITE_VERSION` (this format).

A call the decompositions removed as a no-op (a same-dtype ``to``) is put back as one
``aten.alias`` node first (``_no_op_calls``): its composite's decomposition returns its
operand. A call stays without a composite (:attr:`CompositePlan.skipped` says why) when it
lowers to no op (a dead call torch.export removed, a constant it folded), hands no value on
(``_assert_tensor_metadata`` whose tensor nothing reads later: JAX drops a composite
without results; ``_guard_calls`` threads the others), has a computed
non-tensor argument (a symbolic size), its decomposed nodes are not contiguous or read a
value that is no argument of the call.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from modelprov._torch._compat import op_schema, tensor_argument_kind

__all__ = [
    "COMPOSITE_VERSION",
    "CompositeGroup",
    "CompositePlan",
    "NotComposite",
    "lower_group",
    "plan_composites",
]

COMPOSITE_VERSION = 1
"""The ``version`` of every composite modelprov writes: attribute format 1 (above)."""

_ENUM_TYPES = ("ScalarType", "Layout", "MemoryFormat", "Device")


class NotComposite(Exception):
    """A call that cannot be a composite; the message says why."""


@dataclasses.dataclass(frozen=True)
class CompositeGroup:
    """One ATen call of the user's program and the decomposed FX nodes lowered for it.

    Attributes:
        name: the composite's name, the call's ATen name (``aten.linear.default``).
        source: the call's node name in the user's program.
        nodes: the decomposed nodes made from it (contiguous in graph order), by name.
        operands: per array operand, in schema order, the decomposed node (or placeholder)
            computing the argument's value.
        outputs: the group's nodes whose value is used outside it or returned.
        attributes: the non-tensor arguments (see the module doc).
        schema: the call's torch schema.
    """

    name: str
    source: str
    nodes: tuple[str, ...]
    operands: tuple[str, ...]
    outputs: tuple[str, ...]
    attributes: Mapping[str, Any]
    schema: str


@dataclasses.dataclass(frozen=True)
class CompositePlan:
    """Which ATen calls of the user's program become composites.

    ``groups`` by the name of their first decomposed node; ``skipped``: source node ->
    why it stays without a composite; ``calls``: the ATen calls of the user's program.
    """

    groups: Mapping[str, CompositeGroup]
    skipped: Mapping[str, str]
    calls: int


def _attribute(name: str, kind: str, value: Any) -> Any:
    """The attribute form of one non-tensor argument value (None: omitted)."""
    import torch

    if value is None:
        return None
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return float(value) if "float" in kind and "Scalar" not in kind else value
    if isinstance(value, (float, str)):
        return value
    if isinstance(value, (torch.dtype, torch.layout, torch.memory_format, torch.device)):
        return str(value)
    if isinstance(value, (list, tuple)):
        items = [_attribute(name, kind, item) for item in value]
        if any(item is None for item in items):
            raise NotComposite(f"argument {name!r} is a list holding None")
        return items
    raise NotComposite(f"argument {name!r} has no static attribute form ({type(value).__name__})")


def _call_arguments(node: Any) -> list[tuple[Any, Any, bool]]:
    """(schema argument, value, given) per argument of an ATen call node, in schema order."""
    schema = op_schema(node.target)
    count = len(node.args)
    bound: list[tuple[Any, Any, bool]] = []
    for position, parameter in enumerate(schema.arguments):
        if position < count and not parameter.kwarg_only:
            bound.append((parameter, node.args[position], True))
        elif parameter.name in node.kwargs:
            bound.append((parameter, node.kwargs[parameter.name], True))
        elif parameter.has_default_value():
            bound.append((parameter, parameter.default_value, False))
        else:
            bound.append((parameter, None, False))
    return bound


def _operands_and_attributes(
    node: Any, counterpart: Callable[[Any], str]
) -> tuple[tuple[str, ...], dict[str, Any]]:
    """The call's operands (decomposed node names) and attributes, in schema order."""
    import torch

    operands: list[str] = []
    attributes: dict[str, Any] = {}
    for parameter, value, given in _call_arguments(node):
        name, kind = parameter.name, str(parameter.type)
        is_tensor, _ = tensor_argument_kind(parameter.type)
        items = value if isinstance(value, (list, tuple)) else [value]
        if any(isinstance(item, torch.fx.Node) for item in items):
            if not is_tensor:
                raise NotComposite(f"argument {name!r} is computed ({kind})")
            for item in items:
                if isinstance(item, torch.fx.Node):
                    operands.append(counterpart(item))
                elif item is not None:
                    raise NotComposite(f"argument {name!r} mixes tensors and numbers")
            continue
        if not given and kind.replace("Optional[", "").startswith(_ENUM_TYPES):
            continue  # torch stores enum defaults as numbers: no faithful attribute form
        converted = _attribute(name, "Scalar" if is_tensor else kind, value)
        if converted is not None:
            attributes[name] = converted
    return tuple(operands), attributes


def _through_guards(
    group: Sequence[Any], operands: tuple[str, ...], guards: Mapping[str, str]
) -> tuple[str, ...]:
    """``operands`` with each value the group reads through a guard's identity node
    (``guards``: identity node -> the value it hands on) replaced by that node."""
    read = {used.name for member in group for used in member.all_input_nodes}
    through = {guards[name]: name for name in read if name in guards}
    return tuple(through.get(name, name) for name in operands)


def plan_composites(
    decomposed: Any, original: Any, guards: Mapping[str, str] | None = None
) -> CompositePlan:
    """Group the decomposed graph's nodes by the ATen call of ``original`` they came from.

    ``decomposed`` and ``original`` are the FX graphs of the lowered program and of the
    user's ``torch.export`` program; ``guards`` maps the identity nodes ``_guard_calls``
    added to the value each hands on (a later call reads its argument through one).
    """
    from modelprov._torch._compat import is_op_overload
    from modelprov._torch._fx_lineage import nodes_by_export_name

    members = nodes_by_export_name(decomposed, id(original))
    position = {node: n for n, node in enumerate(decomposed.nodes)}
    placeholders = {node.name for node in decomposed.nodes if node.op == "placeholder"}

    def outputs_of(group: Sequence[Any]) -> list[Any]:
        inside = set(group)
        return [node for node in group if any(user not in inside for user in node.users)]

    def counterpart(item: Any, steps: int = 0) -> str:
        """The decomposed node computing original node ``item``'s value."""
        if item.op == "placeholder" and item.name in placeholders:
            return str(item.name)
        group = members.get(item.name)
        if group is not None:
            produced = outputs_of(group)
            if len(produced) != 1:
                raise NotComposite(f"argument {item.name!r} is one of several values")
            return str(produced[0].name)
        first = item.args[0] if item.args else None
        if item.op == "call_function" and isinstance(first, type(item)) and steps < 10_000:
            return counterpart(first, steps + 1)  # a node without ops: its input's value
        raise NotComposite(f"argument {item.name!r} has no lowered value")

    groups: dict[str, CompositeGroup] = {}
    skipped: dict[str, str] = {}
    calls = 0
    for node in original.nodes:
        if node.op != "call_function" or not is_op_overload(node.target):
            continue
        calls += 1
        group = members.get(node.name)
        if not group:
            skipped[node.name] = "lowered to no op of its own"
            continue
        try:
            indices = [position[member] for member in group]
            if indices != list(range(indices[0], indices[0] + len(indices))):
                raise NotComposite("its decomposed nodes are not contiguous")
            operands, attributes = _operands_and_attributes(node, counterpart)
            operands = _through_guards(group, operands, guards or {})
            outputs = outputs_of(group)
            if not outputs:
                raise NotComposite("it hands no value on")
            inside = {member.name for member in group}
            for member in group:
                for used in member.all_input_nodes:
                    if used.name not in inside and used.name not in operands:
                        raise NotComposite(f"it reads {used.name!r}, which is no argument")
        except NotComposite as reason:
            skipped[node.name] = str(reason)
            continue
        groups[group[0].name] = CompositeGroup(
            name=str(node.target),
            source=str(node.name),
            nodes=tuple(member.name for member in group),
            operands=operands,
            outputs=tuple(output.name for output in outputs),
            attributes=attributes,
            schema=str(op_schema(node.target)),
        )
    return CompositePlan(groups=groups, skipped=skipped, calls=calls)


def lower_group(
    group: CompositeGroup,
    operands: Sequence[Any],
    run_node: Callable[[str, Callable[[str], Any]], Any],
    root_scope: str,
) -> dict[str, Any]:
    """Lower ``group`` as one ``stablehlo.composite``: output node name -> its value.

    ``operands`` are the arrays of ``group.operands``; ``run_node(name, value_of)`` lowers
    one decomposed node (inside its own name scope), reading its inputs through
    ``value_of``. The decomposition's ops get the scopes they get outside
    (``<root_scope>/<node>/...``). Raises NotComposite (nothing emitted) when a value the
    group hands on is not an array.
    """
    import jax

    def decomposition(*arrays: Any, **attributes: Any) -> tuple[Any, ...]:
        del attributes  # the call's values, for the composite op only
        local: dict[str, Any] = {}
        for name, array in zip(group.operands, arrays, strict=True):
            local.setdefault(name, array)
        with jax.named_scope(root_scope):
            for name in group.nodes:
                local[name] = run_node(name, local.__getitem__)
        results = tuple(local[name] for name in group.outputs)
        if not all(_is_array(value) for value in results):
            raise NotComposite("a value it hands on is not an array")
        return results

    decomposition.__name__ = group.name
    composite = jax.lax.composite(decomposition, name=group.name, version=COMPOSITE_VERSION)
    results = composite(*operands, **group.attributes)
    return dict(zip(group.outputs, results, strict=True))


def _is_array(value: Any) -> bool:
    import jax

    return isinstance(value, (jax.Array, jax.core.Tracer))
