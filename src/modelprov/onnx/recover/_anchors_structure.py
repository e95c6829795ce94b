"""Anchors from structure, for recover: what a black-box tool's nodes are when their names
do not say it.

* duplicates: an original value computed twice (same op, attributes and inputs) is the one
  a tool merging duplicates keeps; an Identity's output is its input;
* forward, in graph order: a node reading the values an original node read, with its op and
  attributes, is that node (its outputs renamed, or its inputs read through a layout
  conversion and back: a cancelling Transpose pair); a weight copied or re-laid out under a
  new name may stand in its slot, and one fresh data input (a fused producer's output) is the
  original input there, when the other inputs name the node; of twins (copies up to
  duplicates) reading equal literals, the one reading the very values the node reads;
* backward, from the readers: a fresh value read in a slot of a node that is an original node
  is the value that node read there, and its producer the original producer when both do
  the same (equal Constants for constants) and reads what the old producer read (a tool
  fusing two Slices or Reshapes into one node of the second's op reads the first's input:
  it computes both, it is not the second); a value the forward walk anchored from its
  reader's slot anchors its producer the same way, when that reads exactly what the old
  producer read (a renamed node behind a fresh input is no fusion); a merged literal, once
  every anchor is known, is the first of the equal literals its anchored readers read.

No weights are read: Constant nodes are compared by their attribute tensors only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import onnx_ir as ir

from modelprov.core._correspond import METADATA_READERS, literal_key

__all__ = [
    "anchor_by_structure",
    "anchored_producer",
    "duplicate_values",
    "merged_duplicates",
    "reads_other_constant",
    "same_attributes",
    "same_inputs",
    "same_type",
]


def duplicate_values(old_nodes: list[ir.Node]) -> dict[ir.Value, ir.Value]:
    """Per original value computed twice (same op, attributes and inputs, up to such
    duplicates), the first value computing it: what a tool merging duplicates keeps; per
    Identity output, its input."""
    first: dict[ir.Value, ir.Value] = {}
    seen: dict[tuple[object, ...], ir.Node] = {}
    # Equal small literals read as one (tools merge them first), for the key only: a literal
    # is no duplicate whose source its twin takes.
    literals: dict[tuple[object, ...], ir.Value] = {}
    literal_of: dict[ir.Value, ir.Value] = {}

    def canonical(value: ir.Value) -> ir.Value:
        found = first.get(value, value)
        return literal_of.get(found, found)

    for node in old_nodes:
        if node.op_type == "Constant":
            key = literal_key(node)
            if key is not None:
                literal_of[node.outputs[0]] = literals.setdefault(key, node.outputs[0])
            continue
        if _has_subgraph(node):
            continue
        if node.op_type == "Identity" and node.domain in ("", "ai.onnx") and node.inputs[0]:
            # An Identity's output is its input: a tool removing it merges the two.
            first[node.outputs[0]] = first.get(node.inputs[0], node.inputs[0])
            continue
        key = (
            node.domain,
            node.op_type,
            tuple(canonical(value) if value is not None else None for value in node.inputs),
            tuple(sorted((name, str(attr)) for name, attr in node.attributes.items())),
        )
        twin = seen.setdefault(key, node)
        if twin is not node and len(twin.outputs) == len(node.outputs):
            for mine, theirs in zip(node.outputs, twin.outputs, strict=True):
                first[mine] = first.get(theirs, theirs)
    return first


def _has_subgraph(node: ir.Node) -> bool:
    return any(
        attr.type in (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS)
        for attr in node.attributes.values()
    )


def merged_duplicates(
    node_anchors: dict[ir.Node, ir.Node], duplicates: dict[ir.Value, ir.Value], taken: set[ir.Node]
) -> dict[ir.Value, list[ir.Value]]:
    """New value -> the old duplicates of the old value it is, whose nodes no new node is:
    the tool merged them into this one (it computes them). A removed Identity is no
    duplicate here: the claim phase gives it to its producer or reader as any no-op."""
    classes: dict[ir.Value, list[ir.Value]] = {}
    for value, kept in duplicates.items():
        producer = value.producer()
        if producer is not None and producer.op_type != "Identity":
            classes.setdefault(kept, [kept]).append(value)
    merged: dict[ir.Value, list[ir.Value]] = {}
    if not classes:
        return merged
    # The tool may keep any copy (the first in its own order): every other copy no new
    # node is was merged into the one kept.
    for new_node, old_node in node_anchors.items():
        for new, old in zip(new_node.outputs, old_node.outputs, strict=True):
            found = [
                twin
                for twin in classes.get(duplicates.get(old, old), ())
                if twin is not old and twin.producer() not in taken
            ]
            if found:
                merged[new] = found
    return merged


def _through_layout(value: ir.Value, anchored: Mapping[ir.Value, ir.Value]) -> ir.Value:
    """The first anchored value behind cancelling Transpose pairs a tool inserted (a layout
    conversion and its inverse, as onnxruntime's layout transformations leave them)."""
    while True:
        if value in anchored:
            return value
        outer = value.producer()
        if outer is None or outer.op_type != "Transpose" or outer.domain not in ("", "ai.onnx"):
            return value
        inner_value = outer.inputs[0]
        inner = inner_value.producer() if inner_value is not None else None
        if inner is None or inner.op_type != "Transpose" or inner.domain not in ("", "ai.onnx"):
            return value
        outer_perm, inner_perm = _perm_of(outer), _perm_of(inner)
        if outer_perm is None or inner_perm is None or len(outer_perm) != len(inner_perm):
            return value
        if [inner_perm[axis] for axis in outer_perm] != list(range(len(outer_perm))):
            return value
        if inner.inputs[0] is None:
            return value
        value = inner.inputs[0]


def _perm_of(node: ir.Node) -> list[int] | None:
    attr = node.attributes.get("perm")
    return list(attr.as_ints()) if attr is not None else None


def anchor_by_structure(
    original: tuple[ir.Graph, list[ir.Node]],
    optimized: tuple[ir.Graph, list[ir.Node]],
    duplicates: dict[ir.Value, ir.Value],
    node_anchors: dict[ir.Node, ir.Node],
    value_anchors: dict[ir.Value, ir.Value],
    taken: set[ir.Node],
) -> None:
    """Adds to ``node_anchors`` and ``value_anchors`` (new -> old; ``taken``: the old nodes
    anchored) what structure says, walking forward and backward (the module docstring)
    until nothing more anchors. ``original`` and ``optimized``: each main graph with
    ``all_nodes`` of it; ``duplicates``: of ``duplicate_values``."""
    old_graph, old_nodes = original
    new_graph, new_nodes = optimized
    old_constant = _constant_values(old_graph, old_nodes)
    new_constant = _constant_values(new_graph, new_nodes)
    by_key: dict[tuple[object, ...], list[ir.Node]] = {}
    for old in old_nodes:
        if old.op_type == "Constant" or not old.inputs or _has_subgraph(old):
            continue
        key = _masked_key(old, lambda v: duplicates.get(v, v), old_constant)
        by_key.setdefault(key, []).append(old)
    if not by_key:
        return
    by_names = set(node_anchors)
    twins: dict[ir.Value, list[ir.Value]] = {}  # a duplicate kept -> every copy of it
    for value, kept in duplicates.items():
        twins.setdefault(kept, [kept]).append(value)
    for _ in range(3):  # a backward anchor may let the forward walk go on, and back
        anchored = len(node_anchors)
        _anchor_forward(
            new_nodes,
            old_nodes,
            by_key,
            duplicates,
            node_anchors,
            value_anchors,
            taken,
            old_constant,
            new_constant,
        )
        _anchor_backward(
            node_anchors, value_anchors, taken, (duplicates, twins), old_constant, new_constant
        )
        if len(node_anchors) == anchored:
            break
    _settle_merged_literals(
        [node for node in node_anchors if node not in by_names],
        node_anchors,
        value_anchors,
        taken,
        (duplicates, twins),
    )


def _settle_merged_literals(
    anchored: list[ir.Node],
    node_anchors: dict[ir.Node, ir.Node],
    value_anchors: dict[ir.Value, ir.Value],
    taken: set[ir.Node],
    copies: tuple[Mapping[ir.Value, ir.Value], Mapping[ir.Value, list[ir.Value]]],
) -> None:
    """A Constant the backward walk anchored from the readers it had then is, once every
    anchor is known, the first of the equal old literals all its anchored readers read (a
    tool merging equal literals keeps the first; the reader anchored first may be a later
    copy's)."""
    for node in anchored:
        old = node_anchors[node]
        if node.op_type != "Constant" or old.op_type != "Constant":
            continue
        first = _first_equal_literal(node, node.outputs[0], node_anchors, taken, copies, free=old)
        if first is None or first is old:
            continue
        taken.discard(old)
        node_anchors[node] = first
        taken.add(first)
        value_anchors[node.outputs[0]] = first.outputs[0]


def _anchor_forward(
    new_nodes: list[ir.Node],
    old_nodes: list[ir.Node],
    by_key: dict[tuple[object, ...], list[ir.Node]],
    duplicates: dict[ir.Value, ir.Value],
    node_anchors: dict[ir.Node, ir.Node],
    value_anchors: dict[ir.Value, ir.Value],
    taken: set[ir.Node],
    old_constant: set[ir.Value],
    new_constant: set[ir.Value],
) -> None:
    """The forward walk of ``anchor_by_structure``, in graph order."""
    by_slot: dict[tuple[object, ...], list[ir.Node]] | None = None
    for node in new_nodes:
        if node in node_anchors or not node.inputs or node.graph is None:
            continue
        masked: list[ir.Value | str | None] = []
        anchors: list[ir.Value | None] = []
        unknown: list[int] = []
        for index, value in enumerate(node.inputs):
            old = (
                None if value is None else value_anchors.get(_through_layout(value, value_anchors))
            )
            anchors.append(old)
            if value is None:
                masked.append(None)
            elif value in new_constant or (old is not None and old in old_constant):
                masked.append(_CONSTANT)
            elif old is not None:
                masked.append(duplicates.get(old, old))
            else:
                masked.append(_UNKNOWN)
                unknown.append(index)
        if len(unknown) > 1 or all(each is None or each is _CONSTANT for each in masked):
            continue

        def fits(old_node: ir.Node, node: ir.Node = node) -> bool:
            return (
                old_node not in taken
                and len(old_node.outputs) == len(node.outputs)
                and same_attributes(node, old_node)
                and all(
                    value not in value_anchors or value_anchors[value] is old
                    for value, old in zip(node.outputs, old_node.outputs, strict=True)
                )
            )

        chosen: ir.Node | None = None
        if unknown:
            # One input the tool made fresh (a fused producer's output): the other inputs,
            # all anchored exactly, name the old node; the fresh value is its input there.
            (slot,) = unknown
            if any(
                anchors[i] is None for i, v in enumerate(node.inputs) if v is not None and i != slot
            ):
                continue
            if by_slot is None:
                by_slot = _slot_index(old_nodes, duplicates, old_constant)
            key = _slot_key(node, slot, [duplicates.get(a, a) if a else None for a in anchors])
            candidates = [old_node for old_node in by_slot.get(key, ()) if fits(old_node)]
            if len(candidates) != 1:
                continue
            (chosen,) = candidates
            fresh, replaced = node.inputs[slot], chosen.inputs[slot]
            if fresh is None or replaced is None or not same_type(replaced, fresh):
                continue
            # Read through a layout conversion and back: the value converted is the input
            # (the cancelling pair is glue, not the producer of what the old node read).
            fresh = _through_layout(fresh, value_anchors)
            value_anchors[fresh] = replaced
        else:
            candidates = [
                old_node
                for old_node in by_key.get((node.domain, node.op_type, tuple(masked)), ())
                if fits(old_node)
                and not any(
                    each is _CONSTANT and anchor is not old and reads_other_constant(value, old)
                    for each, anchor, value, old in zip(
                        masked, anchors, node.inputs, old_node.inputs, strict=True
                    )
                    if value is not None
                )
            ]
            exact = [
                old_node
                for old_node in candidates
                if all(
                    each is not _CONSTANT or anchor is old
                    for each, anchor, old in zip(masked, anchors, old_node.inputs, strict=True)
                )
            ]
            # Copies of one expression (twins up to duplicates) reading equal literals the
            # tool renamed or merged: the copy reading the very values this node reads is
            # this node.
            own = [
                old_node
                for old_node in candidates
                if all(
                    each is _CONSTANT or anchor is old
                    for each, anchor, old in zip(masked, anchors, old_node.inputs, strict=True)
                )
            ]
            exact.sort(key=lambda old_node: old_node not in own)
            if exact:
                chosen = exact[0]
            elif len(candidates) == 1 or len(own) == 1:
                chosen = candidates[0] if len(candidates) == 1 else own[0]
            else:
                chosen = None
            if chosen is None:
                if not candidates:
                    if by_slot is None:
                        by_slot = _slot_index(old_nodes, duplicates, old_constant)
                    _anchor_fused_chain(
                        node, masked, anchors, by_slot, duplicates, fits, taken, value_anchors
                    )
                continue
        node_anchors[node] = chosen
        taken.add(chosen)
        for value, old in zip(node.outputs, chosen.outputs, strict=True):
            value_anchors[value] = old


_CONSTANT = "<constant>"
_UNKNOWN = "<unknown>"


def _anchor_fused_chain(
    node: ir.Node,
    masked: list[ir.Value | str | None],
    anchors: list[ir.Value | None],
    by_slot: dict[tuple[object, ...], list[ir.Node]],
    duplicates: dict[ir.Value, ir.Value],
    fits: Callable[[ir.Node], bool],
    taken: set[ir.Node],
    value_anchors: dict[ir.Value, ir.Value],
) -> None:
    """A node reading the constants of one original node but, in its one data slot, a value
    upstream of that node's (a Reshape of a Reshape made one Reshape) computes that node's
    outputs with the chain between fused in: its outputs are that node's (it is not that
    node; the claim phase gives it the chain)."""
    data = [i for i, each in enumerate(masked) if each is not None and each is not _CONSTANT]
    if len(data) != 1:
        return
    (slot,) = data
    start = anchors[slot]
    if start is None or any(
        each is _CONSTANT and anchor is None for each, anchor in zip(masked, anchors, strict=True)
    ):
        return  # every constant must name the node
    key = _slot_key(node, slot, [duplicates.get(a, a) if a else None for a in anchors])
    candidates = []
    for old in by_slot.get(key, ()):
        read = old.inputs[slot]
        if read is not None and fits(old) and _fed_by(read, start, taken):
            candidates.append(old)
    if len(candidates) == 1:
        for value, old_value in zip(node.outputs, candidates[0].outputs, strict=True):
            value_anchors.setdefault(value, old_value)


def _fed_by(value: ir.Value, start: ir.Value, taken: set[ir.Node]) -> bool:
    """True when ``value`` is computed from ``start`` by a chain of at most eight original
    nodes that no new node is (first inputs)."""
    current: ir.Value | None = value
    for _ in range(8):
        producer = current.producer() if current is not None else None
        if producer is None or producer in taken or not producer.inputs:
            return False
        current = producer.inputs[0]
        if current is start:
            return True
    return False


def _slot_key(node: ir.Node, slot: int, inputs: list[ir.Value | None]) -> tuple[object, ...]:
    """A node's op and inputs with one slot left open."""
    rest = tuple(_UNKNOWN if index == slot else value for index, value in enumerate(inputs))
    return (node.domain, node.op_type, slot, rest)


def _slot_index(
    old_nodes: list[ir.Node], duplicates: dict[ir.Value, ir.Value], constant: set[ir.Value]
) -> dict[tuple[object, ...], list[ir.Node]]:
    """Old nodes by op and inputs with one data input left open, for ``_slot_key``."""
    index: dict[tuple[object, ...], list[ir.Node]] = {}
    for old in old_nodes:
        if old.op_type == "Constant" or _has_subgraph(old) or len(old.inputs) < 2:
            continue
        inputs = [duplicates.get(v, v) if v is not None else None for v in old.inputs]
        for slot, value in enumerate(old.inputs):
            if value is not None and value not in constant:
                index.setdefault(_slot_key(old, slot, inputs), []).append(old)
    return index


def _constant_values(graph: ir.Graph, nodes: list[ir.Node]) -> set[ir.Value]:
    """Initializers that are no graph inputs, and the values computed from such only
    (shape arithmetic included: Shape and Size read no contents)."""
    constant = {v for v in graph.initializers.values() if not v.is_graph_input()}
    for node in nodes:
        if _has_subgraph(node) or node.graph is not graph:
            continue
        reads = (
            ()
            if node.op_type in METADATA_READERS and node.domain in ("", "ai.onnx")
            else (node.inputs)
        )
        if all(value is None or value in constant for value in reads):
            constant.update(node.outputs)
    return constant


def _masked_key(
    node: ir.Node, canonical: Callable[[ir.Value], ir.Value], constant: set[ir.Value]
) -> tuple[object, ...]:
    inputs = tuple(
        None if value is None else _CONSTANT if value in constant else canonical(value)
        for value in node.inputs
    )
    return (node.domain, node.op_type, inputs)


def _anchor_backward(
    node_anchors: dict[ir.Node, ir.Node],
    value_anchors: dict[ir.Value, ir.Value],
    taken: set[ir.Node],
    copies: tuple[dict[ir.Value, ir.Value], Mapping[ir.Value, list[ir.Value]]],
    old_constant: set[ir.Value],
    new_constant: set[ir.Value],
) -> None:
    """From the readers back: a value the names do not anchor, read in a slot of a node
    that is an old node, is the value the old node read there (a data input; a constant
    may have been re-laid out); its producer is the old producer when both do the same
    (same op and attributes, or equal Constants) on the same data (its anchored data
    inputs are the old producer's)."""

    duplicates = copies[0]

    def constant_slot(new: ir.Value, old: ir.Value) -> bool:
        return new in new_constant or old in old_constant

    work = list(node_anchors.items())
    while work:
        node, old_node = work.pop()
        if len(node.inputs) != len(old_node.inputs):
            continue
        for read, old in zip(node.inputs, old_node.inputs, strict=True):
            if read is None or old is None:
                continue
            new = _through_layout(read, value_anchors)
            if new in value_anchors:
                producer = _producer_of_slot_value(
                    new, old, node_anchors, taken, value_anchors, duplicates, new_constant
                )
                if producer is not None:
                    work.append((producer, node_anchors[producer]))
                continue
            is_constant = new in new_constant or old in old_constant
            producer, old_producer = new.producer(), old.producer()
            if is_constant and producer is not None and producer.op_type == "Constant":
                old_producer = _first_equal_literal(producer, new, node_anchors, taken, copies) or (
                    old_producer
                )
            same_producer = (
                producer is not None
                and old_producer is not None
                and producer not in node_anchors
                and old_producer not in taken
                and producer.op_type == old_producer.op_type
                and producer.domain == old_producer.domain
                and len(producer.outputs) == len(old_producer.outputs)
                and (
                    _same_constant(producer, old_producer)
                    if is_constant
                    else same_attributes(producer, old_producer)
                    and same_inputs(
                        producer, old_producer, value_anchors, duplicates, ignore=constant_slot
                    )
                )
            )
            if same_producer:
                assert producer is not None and old_producer is not None
                node_anchors[producer] = old_producer
                taken.add(old_producer)
                for value, old_value in zip(producer.outputs, old_producer.outputs, strict=True):
                    value_anchors.setdefault(value, old_value)
                work.append((producer, old_producer))
            elif not is_constant and same_type(old, new):
                value_anchors[new] = old


def _producer_of_slot_value(
    new: ir.Value,
    old: ir.Value,
    node_anchors: dict[ir.Node, ir.Node],
    taken: set[ir.Node],
    value_anchors: dict[ir.Value, ir.Value],
    duplicates: dict[ir.Value, ir.Value],
    new_constant: set[ir.Value],
) -> ir.Node | None:
    """Anchors, and returns, the producer of ``new``, a value anchored as ``old`` from the
    slot of a reader (the forward walk's one fresh input), as the old producer when it is
    that node: same op and attributes, reading what the old producer read (anchored inputs
    the same values, up to duplicates, equal literals and removed pass-through ops; other
    constants of equal known contents; other data of the same type). A renamed node behind
    a fresh input is then no fusion that takes what its inputs computed. A fusion into a
    node of the old producer's op reads other values or constants (an Add of a matmul and
    a folded bias plus mask for two Adds, a Reshape of the first Reshape's input)."""
    if value_anchors[new] is not old or new in new_constant:
        return None
    producer, old_producer = new.producer(), old.producer()
    if (
        producer is None
        or old_producer is None
        or producer in node_anchors
        or old_producer in taken
        or producer.op_type != old_producer.op_type
        or producer.domain != old_producer.domain
        or producer.op_type == "Constant"
        or len(producer.outputs) != len(old_producer.outputs)
        or len(producer.inputs) != len(old_producer.inputs)
        or not same_attributes(producer, old_producer)
        or any(
            value in value_anchors and value_anchors[value] is not old_value
            for value, old_value in zip(producer.outputs, old_producer.outputs, strict=True)
        )
    ):
        return None
    for read, old_read in zip(producer.inputs, old_producer.inputs, strict=True):
        if (read is None) != (old_read is None):
            return None
        if read is None or old_read is None:
            continue
        anchor = value_anchors.get(_through_layout(read, value_anchors))
        if anchor is not None:
            if not (
                duplicates.get(anchor, anchor) is duplicates.get(old_read, old_read)
                or _equal_literals(anchor, old_read)
                or _skips_pass_through(old_read, anchor)
            ):
                return None
        elif read in new_constant or _known_tensor(old_read) is not None:
            if _known_tensor(old_read) is None or reads_other_constant(read, old_read):
                return None
        elif not same_type(old_read, read):
            return None
    node_anchors[producer] = old_producer
    taken.add(old_producer)
    for value, old_value in zip(producer.outputs, old_producer.outputs, strict=True):
        value_anchors.setdefault(value, old_value)
    return producer


def _skips_pass_through(old: ir.Value, wanted: ir.Value) -> bool:
    """True when ``old`` is ``wanted`` seen through pass-through ops (Identity, Dropout)."""
    current: ir.Value | None = old
    for _ in range(8):
        if current is wanted:
            return True
        producer = current.producer() if current is not None else None
        if producer is None or producer.op_type not in _PASS_THROUGH or not producer.inputs:
            return False
        current = producer.inputs[0]
    return current is wanted


_PASS_THROUGH = frozenset({"Identity", "Dropout"})


def same_inputs(
    node: ir.Node,
    old_node: ir.Node,
    value_anchors: dict[ir.Value, ir.Value],
    duplicates: dict[ir.Value, ir.Value],
    *,
    ignore: Callable[[ir.Value, ir.Value], bool] | None = None,
) -> bool:
    """True when the node reads what the old node read, slot by slot, where its inputs are
    anchored (``value_anchors``; ``duplicates``: of ``duplicate_values``), but in the slots
    ``ignore(new, old)`` excuses.

    An input may be renamed, or may now skip pass-through ops (Identity, Dropout) the tool
    removed. A node that kept its output names but now reads other tensors was rewritten
    (e.g. two transposes folded into the second one, a BatchNorm folded into a Conv's
    weights): it is not the same node. A fresh tensor where the old node read a literal
    or an initializer must hold the same contents (``reads_other_constant``).
    """
    if len(node.inputs) != len(old_node.inputs):
        return False
    for new, old in zip(node.inputs, old_node.inputs, strict=True):
        if (new is None) != (old is None):
            return False
        if new is None or old is None:
            continue
        if new not in value_anchors:
            if reads_other_constant(new, old):
                return False
            continue
        if ignore is not None and ignore(new, old):
            continue
        anchor = value_anchors[new]
        if duplicates.get(anchor, anchor) is duplicates.get(old, old):
            continue  # the tool merged the duplicate the node read into its twin
        if _equal_literals(anchor, old):
            continue  # the tool merged the literal the node read into an equal one
        if not _skips_no_ops(old, anchor):
            return False
    return True


def _equal_literals(value: ir.Value, other: ir.Value) -> bool:
    """True when both are outputs of Constant nodes holding the same small literal."""
    mine, theirs = value.producer(), other.producer()
    if mine is None or theirs is None or mine.op_type != "Constant" or theirs.op_type != "Constant":
        return False
    key = literal_key(mine)
    return key is not None and key == literal_key(theirs)


def _skips_no_ops(old: ir.Value, wanted: ir.Value) -> bool:
    """True when ``old`` is ``wanted`` seen through ops that change nothing.

    The chain back from ``old`` (first inputs) must reach ``wanted`` through pass-through
    ops (Identity, Dropout), or through any ops when ``old`` has the same known dtype and
    static shape as ``wanted`` (a no-op Reshape, a cancelling Transpose pair).
    """
    same_type = (
        old.dtype is not None
        and old.dtype == wanted.dtype
        and old.shape is not None
        and wanted.shape is not None
        and old.shape.is_static()
        and old.shape == wanted.shape
    )
    current: ir.Value | None = old
    steps = 0
    while current is not None and current is not wanted:
        producer = current.producer()
        if producer is None or not producer.inputs or steps > 8:
            return False
        if producer.op_type not in _PASS_THROUGH and not same_type:
            return False
        current = producer.inputs[0]
        steps += 1
    return current is wanted


def reads_other_constant(new: ir.Value, old: ir.Value | None) -> bool:
    """True when ``old`` is a literal or an initializer and ``new`` is not the same tensor:
    a literal or initializer of other contents, or a value a node computes (the starts of
    two fused Slices concatenated). A node reading it is not the node that read ``old``
    (a Reshape to another shape, a Conv with a BatchNorm folded into its weights)."""
    if old is None or new is old:
        return False
    theirs = _known_tensor(old)
    if theirs is None:
        return False
    mine = _known_tensor(new)
    if mine is None:
        producer = new.producer()
        return producer is not None and producer.op_type != "Constant"
    return (
        mine.dtype != theirs.dtype
        or mine.shape != theirs.shape
        or mine.tobytes() != theirs.tobytes()
    )


def _known_tensor(value: ir.Value) -> ir.TensorProtocol | None:
    producer = value.producer()
    if producer is None:
        return value.const_value if value.is_initializer() else None
    attribute = producer.attributes.get("value")
    if producer.op_type != "Constant" or attribute is None:
        return None
    if attribute.type != ir.AttributeType.TENSOR:
        return None
    return attribute.as_tensor()


def _first_equal_literal(
    producer: ir.Node,
    new: ir.Value,
    node_anchors: Mapping[ir.Node, ir.Node],
    taken: set[ir.Node],
    copies: tuple[Mapping[ir.Value, ir.Value], Mapping[ir.Value, list[ir.Value]]],
    *,
    free: ir.Node | None = None,
) -> ir.Node | None:
    """Of the old Constants equal to ``producer`` that the anchored readers of ``new``, and
    the copies merged into them (``copies``: duplicates and, per duplicate kept, its copies),
    read in its slots (not ``taken``, but for ``free``), the first in the original graph (a
    tool merging equal literals keeps the first): readers of a merged literal disagree on
    which old literal it is."""
    duplicates, twins = copies
    found: list[ir.Node] = []
    for use in new.uses():
        old_reader = node_anchors.get(use.node)
        if old_reader is None or use.idx >= len(old_reader.inputs):
            continue
        readers = [old_reader]
        if old_reader.outputs:
            first = old_reader.outputs[0]
            for twin in twins.get(duplicates.get(first, first), ()):
                merged = twin.producer()
                if merged is not None and merged not in taken and merged not in readers:
                    readers.append(merged)
        for reader in readers:
            if use.idx >= len(reader.inputs):
                continue
            old_value = reader.inputs[use.idx]
            old_literal = old_value.producer() if old_value is not None else None
            if (
                old_literal is not None
                and (old_literal not in taken or old_literal is free)
                and old_literal.op_type == "Constant"
                and _same_constant(producer, old_literal)
            ):
                found.append(old_literal)
    if not found:
        return None
    if all(each is found[0] for each in found):
        return found[0]  # the common case: no merged literal, one old literal
    graph = found[0].graph
    if graph is None or any(each.graph is not graph for each in found):
        return found[0]
    order = {node: index for index, node in enumerate(graph) if node in found}
    return min(found, key=order.__getitem__)


def _same_constant(node: ir.Node, old_node: ir.Node) -> bool:
    if set(node.attributes) != set(old_node.attributes):
        return False
    for name, attr in node.attributes.items():
        other = old_node.attributes[name]
        if attr.type == ir.AttributeType.TENSOR and other.type == ir.AttributeType.TENSOR:
            mine, theirs = attr.as_tensor(), other.as_tensor()
            if mine.dtype != theirs.dtype or mine.shape != theirs.shape:
                return False
            if mine.tobytes() != theirs.tobytes():
                return False
        elif str(attr) != str(other):
            return False
    return True


def anchored_producer(
    node: ir.Node, value_anchors: Mapping[ir.Value, ir.Value]
) -> ir.Node | None:
    """The one original node that produced every output of ``node``, by the outputs'
    anchors; None when ``node`` has no outputs, one is not anchored, or they come from
    several original nodes (or from none: graph inputs and initializers)."""
    olds = [value_anchors.get(value) for value in node.outputs]
    if not olds or any(old is None for old in olds):
        return None
    producers = {old.producer() for old in olds if old is not None}
    return next(iter(producers)) if len(producers) == 1 else None


def same_type(old: ir.Value, new: ir.Value) -> bool:
    """False when the two values' known dtypes or known ranks and dimensions differ: a
    tool reused a name for another tensor (e.g. after moving a reshape upstream)."""
    if old.dtype is not None and new.dtype is not None and old.dtype != new.dtype:
        return False
    if old.shape is None or new.shape is None:
        return True
    if len(old.shape) != len(new.shape):
        return False
    return all(
        not isinstance(a, int) or not isinstance(b, int) or a == b
        for a, b in zip(old.shape, new.shape, strict=True)
    )


def same_attributes(node: ir.Node, old_node: ir.Node) -> bool:
    if set(node.attributes) != set(old_node.attributes):
        return False
    return all(
        str(node.attributes[name]) == str(old_node.attributes[name]) for name in node.attributes
    )
