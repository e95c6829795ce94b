"""The claim phase of the correspondence engine, the same for every matcher: each removed
node is claimed by the node(s) now computing what it computed.

* a node producing a value that replaced an old value absorbs the removed nodes that fed
  that old value, back to the values it reads (fusion, rewrite, CSE, Identity removal);
* a node reading a value without producer (a folded constant, a graph input) that replaced
  an old value absorbs the removed nodes that computed that old value (constant folding);
* new nodes with nothing to anchor them share the claims of the new nodes they connect to
  through fresh values (a rule that emits several nodes).

Removed nodes nobody claims were dead: their computation no longer exists.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet

import onnx_ir as ir

from modelprov.core._correspond._graph import Change, Matching, Snapshot

__all__ = ["assign_claims"]


def assign_claims(before: Snapshot, after_nodes: list[ir.Node], matching: Matching) -> Change:
    """Who computes each removed node's work now, given what a matcher paired."""
    return _ClaimPhase(before, after_nodes, matching).run()


class _ClaimPhase:
    """One claim phase over one change, in named steps (:meth:`run` lists them):

    1. what each new node reads, as old values (:meth:`_read_through_new_nodes`);
    2. producers of values that replaced old values absorb what computed those
       (:meth:`_claim_replaced_values`);
    3. readers of values without producer (folded constants, graph inputs) absorb what
       computed the old values they stand for (:meth:`_claim_folded_values`);
    4. new nodes without claims share those of their cluster (``_share_within_clusters``);
    5. the record of the change (:meth:`_change`).
    """

    def __init__(self, before: Snapshot, after_nodes: list[ir.Node], matching: Matching) -> None:
        self.before = before
        self.after_nodes = after_nodes
        self.matching = matching
        self.old_of = matching.same
        self.replaced = matching.replaced
        self.claimable = matching.claimable
        self.values_persist = matching.values_persist
        self.producer_now = {value: node for node in after_nodes for value in node.outputs}
        self.consumers_now: dict[ir.Value, list[ir.Node]] = {}
        for node in after_nodes:
            for value in node.inputs:
                if value is not None:
                    self.consumers_now.setdefault(value, []).append(node)
        self.known_reads: dict[ir.Node, set[ir.Value]] = {}
        self.absorbed: dict[ir.Node, set[ir.Node]] = {}
        self.produced: dict[ir.Node, set[ir.Node]] = {}
        self.fallback: dict[ir.Node, set[ir.Node]] = {}
        self.glue = _layout_glue(matching.new_nodes)
        self.new_set = set(matching.new_nodes)
        self.conversions: dict[ir.Node, ir.Node] = {}  # reorder -> the node it converts for
        self._equivalents: dict[ir.Value, frozenset[ir.Value]] = {}
        self._stops: dict[ir.Node, _Stops] = {}
        self._input_sets: dict[ir.Node, set[ir.Value]] = {}

    def run(self) -> Change:
        """The steps of the class docstring, in order."""
        self._read_through_new_nodes()
        producerless = self._claim_replaced_values()
        self._claim_folded_values(producerless)
        self._conversions_carry_what_they_convert()
        unanchored = _share_within_clusters(
            self.matching.new_nodes,
            self.glue,
            self.absorbed,
            self.before,
            self.producer_now,
            self.old_equivalents,
            lambda value: bool(self.old_equivalents(value)),
            self.produced,
        )
        return self._change(unanchored)

    # --- what values stand for -------------------------------------------------------

    def old_equivalents(self, value: ir.Value) -> list[ir.Value]:
        """The old values a value of the graph now stands for."""
        olds = list(self.replaced.get(value, ()))
        if self.values_persist and self.before.knows(value):
            olds.append(value)
        return olds

    def _old_equivalent_set(self, value: ir.Value) -> frozenset[ir.Value]:
        found = self._equivalents.get(value)
        if found is None:
            found = self._equivalents[value] = frozenset(self.old_equivalents(value))
        return found

    def _old_inputs(self, old: ir.Node) -> set[ir.Value]:
        """The values an old node read (shared: callers only test membership)."""
        found = self._input_sets.get(old)
        if found is None:
            found = self._input_sets[old] = {v for v in self.before.inputs[old] if v is not None}
        return found

    def _stops_of(self, node: ir.Node) -> _Stops:
        """The old values above which ``node`` computes nothing: a union of sets shared
        with other nodes (a folded constant's old values can number thousands)."""
        found = self._stops.get(node)
        if found is None:
            sets: list[Container[ir.Value]] = []
            reads = self.known_reads.get(node)
            if reads:
                sets.append(reads)
            for value in node.inputs:
                if value is not None:
                    olds = self._old_equivalent_set(value)
                    if olds:
                        sets.append(olds)
            old = self.old_of.get(node)
            if old is not None:
                sets.append(self._old_inputs(old))
            found = self._stops[node] = _Stops(sets)
        return found

    # --- the walk --------------------------------------------------------------------

    def _regions(
        self, entries: Iterable[ir.Value], stops: _Stops
    ) -> tuple[set[ir.Node], AbstractSet[ir.Node]]:
        """Removed nodes from ``entries`` back to ``stops``, and the further ones reached
        only by also reading through the input of a Shape or Size (what a fold of it does
        not compute): one walk over data inputs, then one from the inputs whose shape alone
        the claimed nodes read."""
        producer_of = self.before.producer.get
        reads_of = self.before.reads_of
        claimable = self.claimable
        claimed: set[ir.Node] = set()
        through: list[ir.Value] = []
        stack = [node for value in entries if (node := producer_of(value)) in claimable]
        while stack:
            node = stack.pop()
            if node in claimed:
                continue
            claimed.add(node)
            data, shape_only = reads_of(node)
            for value in data:
                # The cheap tests first: most inputs come from nodes that are not claimable.
                upstream = producer_of(value)
                if upstream in claimable and upstream not in claimed and value not in stops:
                    stack.append(upstream)
            if shape_only:
                through.extend(shape_only)
        if not through:
            return claimed, _NOTHING

        def claimable_producer(value: ir.Value) -> ir.Node | None:
            upstream = producer_of(value)
            return upstream if upstream in claimable and value not in stops else None

        starts = [node for value in through if (node := claimable_producer(value)) is not None]
        loose, _ = _upstream(
            starts, self.before.inputs.__getitem__, claimable_producer, seen=set(claimed)
        )
        return claimed, loose - claimed

    def _absorb(self, node: ir.Node, entries: Iterable[ir.Value], stops: _Stops) -> None:
        """``node`` absorbs the walk from ``entries`` back to ``stops``."""
        claim, extra = self._regions(entries, stops)
        if claim:
            self.absorbed.setdefault(node, set()).update(claim)
        if extra:
            self.fallback.setdefault(node, set()).update(extra)

    # --- the steps -------------------------------------------------------------------

    def _read_through_new_nodes(self) -> None:
        """What each new node reads, as old values: through the fresh values of other new
        nodes back to values the old graph knew (a new node computes nothing above them)."""
        known_reads = self.known_reads
        new_set = set(self.matching.new_nodes)
        for node in self.after_nodes:
            if node not in new_set:
                continue
            reads: set[ir.Value] = set()
            for value in node.inputs:
                if value is None:
                    continue
                olds = self.old_equivalents(value)
                if olds:
                    reads.update(olds)
                    continue
                upstream = self.producer_now.get(value)
                if upstream is not None and upstream in known_reads:
                    reads.update(known_reads[upstream])
            known_reads[node] = reads

    def _claim_replaced_values(self) -> list[tuple[ir.Value, list[ir.Value]]]:
        """A node producing a value that replaced old values absorbs the removed nodes that
        computed them; returns the replaced values without producer, for the next step."""
        before, claimable = self.before, self.claimable
        producerless: list[tuple[ir.Value, list[ir.Value]]] = []
        for new_value, olds in self.replaced.items():
            producer = self.producer_now.get(new_value)
            if producer is None:
                producerless.append((new_value, olds))
                continue
            if producer in self.glue and _behind_glue(producer, self.glue, self.old_equivalents):
                # The end of a layout conversion and its inverse hands back a value the graph
                # has behind it: the node computing that one computes this.
                continue
            if is_layout_reorder(producer):
                # A reorder computes nothing: the new node whose output it converts computes
                # the value, and the reorder carries what that node computes (none such:
                # the value was there already).
                computing = _behind_conversions(producer, self.glue)
                if computing is None or computing not in self.new_set:
                    continue
                self.conversions[producer] = computing
                producer = computing
            self.produced.setdefault(producer, set()).update(
                before.producer[old] for old in olds if before.producer.get(old) in claimable
            )
            self._absorb(producer, olds, self._stops_of(producer))
        return producerless

    def _claim_folded_values(self, producerless: list[tuple[ir.Value, list[ir.Value]]]) -> None:
        """A value without producer (folded constant, graph input) took old values' places:
        each reader absorbs what computed the old value it (or what it absorbed) read."""
        before = self.before
        for new_value, olds in producerless:
            # A folded constant can stand for many old values: which of them a reader read
            # is looked up from the (few) values it read, in the order of ``olds``.
            position = {old: index for index, old in enumerate(olds)}
            unique = len(position) == len(olds)
            for consumer in self.consumers_now.get(new_value, ()):
                old_consumer = self.old_of.get(consumer)
                if old_consumer is not None:
                    read = self._old_inputs(old_consumer)
                else:
                    read = {
                        v
                        for node in self.absorbed.get(consumer, ())
                        for v in before.inputs[node]
                        if v is not None
                    }
                # A new reader that took over removed nodes claims only what they read; one
                # without claims of its own may have taken over any of the old readers.
                if unique and len(read) < len(olds):
                    entries = sorted((v for v in read if v in position), key=position.__getitem__)
                else:
                    entries = [old for old in olds if old in read]
                if old_consumer is None and not self.absorbed.get(consumer):
                    entries = list(olds)
                self._absorb(consumer, entries, self._stops_of(consumer).without(entries))

    def _conversions_carry_what_they_convert(self) -> None:
        """A reorder handing back a value carries the claims of the node whose output it
        converts (what that value computes, no more); one that moves no element (a blocked
        layout of a 1 x 1 image with whole blocks of channels) is a no-op in contents and
        carries what its readers compute."""
        for glue, computing in self.conversions.items():
            claim: set[ir.Node] = set()
            if _moves_nothing(glue, computing):
                for reader in self.consumers_now.get(glue.outputs[0], ()):
                    old = self.old_of.get(reader)
                    claim.update([old] if old is not None else self.absorbed.get(reader, ()))
            if not claim:
                claim = self.absorbed.get(computing, set())
            if claim:
                self.absorbed.setdefault(glue, set()).update(claim)

    def _change(self, unanchored: list[ir.Node]) -> Change:
        """The record of the change; removed nodes nobody claims were dead."""
        absorbed, fallback = self.absorbed, self.fallback
        claimed_all: set[ir.Node] = set()
        for claim in absorbed.values():
            claimed_all.update(claim)
        fallback_all = {node for extra in fallback.values() for node in extra}
        removed = self.matching.removed
        eliminated = [
            node for node in removed if node not in claimed_all and node not in fallback_all
        ]
        kept_fallback = {
            node: extra - claimed_all for node, extra in fallback.items() if extra - claimed_all
        }
        return Change(
            fallback=kept_fallback,
            constant=set(self.before.constant_nodes()),
            produced={node: olds for node, olds in self.produced.items() if olds},
            absorbed=absorbed,
            replaced=self.replaced,
            same=self.old_of,
            new_nodes=self.matching.new_nodes,
            removed=removed,
            eliminated=eliminated,
            unanchored=unanchored,
        )


_NOTHING: frozenset[ir.Node] = frozenset()


class _Stops:
    """Old values a claim walk stops at: the union of ``sets``, minus ``excluded``."""

    __slots__ = ("_excluded", "_sets")

    def __init__(
        self, sets: Sequence[Container[ir.Value]], excluded: AbstractSet[ir.Value] = frozenset()
    ) -> None:
        self._sets = sets
        self._excluded = excluded

    def __contains__(self, value: ir.Value) -> bool:
        if value in self._excluded:
            return False
        for each in self._sets:  # noqa: SIM110  # a loop: cheaper than any() over a generator
            if value in each:
                return True
        return False

    def without(self, values: Iterable[ir.Value]) -> _Stops:
        """These stops minus ``values``."""
        excluded = set(values)
        if excluded:
            return _Stops(self._sets, excluded | self._excluded)
        return self


def _share_within_clusters(
    new_nodes: list[ir.Node],
    glue: set[ir.Node],
    absorbed: dict[ir.Node, set[ir.Node]],
    before: Snapshot,
    producer_now: Mapping[ir.Value, ir.Node],
    old_equivalents: Callable[[ir.Value], list[ir.Value]],
    known: Callable[[ir.Value], bool],
    produced: dict[ir.Node, set[ir.Node]],
) -> list[ir.Node]:
    """New nodes without claims take, from the claims of the new nodes they feed through
    fresh values (else of all new nodes linked to them so), the removed nodes they can
    compute: those whose inputs from outside the claim all lie among what the node reads
    (directly or through other new nodes). One that reads a value computed on data (a
    ``Shape`` a tool split off a shape computation: onnxruntime makes ``Shape(Transpose(x))``
    ``Gather(Shape(x), perm)``) computes with them the old values its cluster produces, so
    its ``produced`` takes those of its claims: it folded no constant."""
    new_set = set(new_nodes)
    parent: dict[ir.Node, ir.Node] = {node: node for node in new_nodes}

    def find(node: ir.Node) -> ir.Node:
        while parent[node] is not node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    def fresh_producer(value: ir.Value | None) -> ir.Node | None:
        if value is None or known(value):
            return None
        upstream = producer_now.get(value)
        return upstream if upstream is not None and upstream in new_set else None

    for node in new_nodes:
        for value in node.inputs:
            upstream = fresh_producer(value)
            if upstream is not None:
                parent[find(upstream)] = find(node)
    cluster_claims: dict[ir.Node, set[ir.Node]] = {}
    fed: dict[ir.Node, list[ir.Node]] = {}  # new node -> new nodes reading its fresh values
    for node in new_nodes:
        claim = absorbed.get(node)
        if claim:
            cluster_claims.setdefault(find(node), set()).update(claim)
        for value in node.inputs:
            upstream = fresh_producer(value)
            if upstream is not None:
                fed.setdefault(upstream, []).append(node)
    claims_before = {node: frozenset(claim) for node, claim in absorbed.items() if claim}

    def fed_claims(node: ir.Node) -> set[ir.Node]:
        """The claims of the nearest claiming new nodes that ``node`` feeds through fresh
        values (a Concat of a fused Slice's starts works for that Slice only)."""
        found: set[ir.Node] = set()
        seen = {node}
        stack = list(fed.get(node, ()))
        while stack:
            reader = stack.pop()
            if reader in seen:
                continue
            seen.add(reader)
            claim = claims_before.get(reader)
            if claim:
                found.update(claim)
            else:
                stack.extend(fed.get(reader, ()))
        return found

    def reads(node: ir.Node) -> set[ir.Value]:
        """Old values a new node depends on, through fresh values of other new nodes."""
        boundary = _upstream_boundary(node, lambda n: n.inputs, fresh_producer)
        return {old for value in boundary for old in old_equivalents(value)}

    constant_reads: list[tuple[set[ir.Node], set[ir.Value]]] = []

    def is_constant(value: ir.Value) -> bool:
        """True for an old initializer (not a graph input) or a constant node's output."""
        if not constant_reads:  # only when some node shares claims
            initializers = {
                value
                for graph in before.graph_outputs
                for value in graph.initializers.values()
                if not value.is_graph_input()
            }
            constant_reads.append((before.constant_nodes(), initializers))
        nodes, initializers = constant_reads[0]
        return value in initializers or before.producer.get(value) in nodes

    def outside_inputs(target: ir.Node, claim: set[ir.Node]) -> set[ir.Value]:
        """Values the claimed nodes upstream of ``target`` read from outside the claim,
        but constants (a tool may fold or re-lay them out under new names)."""

        def claimed_producer(value: ir.Value) -> ir.Node | None:
            upstream = before.producer.get(value)
            return upstream if upstream is not None and upstream in claim else None

        found = _upstream_boundary(target, before.inputs.__getitem__, claimed_producer)
        return {value for value in found if not is_constant(value)}

    produced_by_cluster: dict[ir.Node, set[ir.Node]] = {}

    def cluster_produced(root: ir.Node) -> set[ir.Node]:
        """The old nodes whose outputs the cluster's nodes now produce."""
        if not produced_by_cluster:
            for member in new_nodes:
                olds = produced.get(member)
                if olds:
                    produced_by_cluster.setdefault(find(member), set()).update(olds)
            produced_by_cluster.setdefault(root, set())
        return produced_by_cluster.get(root, set())

    constant_nodes = before.constant_nodes()
    unanchored: list[ir.Node] = []
    for node in new_nodes:
        own = absorbed.get(node)
        if own and not own <= constant_nodes:
            continue
        # A node that only folded constants (a fused Gemm that took a weight's Transpose)
        # still computes part of its cluster.
        # What it feeds decides, when that claims anything; else its whole cluster.
        shared = fed_claims(node) or cluster_claims.get(find(node))
        if own and shared:
            shared = shared - own
        if not shared or (node in glue and not is_layout_reorder(node)):
            # A layout conversion a tool inserted and undid computes nothing of the claim;
            # a reorder into a blocked layout carries what its readers compute there.
            if not own:
                unanchored.append(node)
            continue
        available = reads(node)
        computable = {old for old in shared if outside_inputs(old, shared) <= available}
        if own:
            absorbed[node] = own | computable  # it has claims of its own: nothing by default
        else:
            absorbed[node] = computable or set(shared)
            if any(not is_constant(value) for value in _direct_old_reads(node, old_equivalents)):
                computed = cluster_produced(find(node)) & absorbed[node]
                if computed:
                    produced.setdefault(node, set()).update(computed)
    return unanchored


def _layout_glue(new_nodes: list[ir.Node]) -> set[ir.Node]:
    """New layout conversions: Transposes that form a cancelling pair with another new
    Transpose (a conversion and its inverse, as layout-converting tools insert them), and
    the reorders to and from a blocked layout (onnxruntime's NCHWc)."""
    new_set = set(new_nodes)
    glue: set[ir.Node] = {node for node in new_nodes if is_layout_reorder(node)}
    for node in new_nodes:
        if not _is_transpose(node):
            continue
        inner_value = node.inputs[0]
        inner = inner_value.producer() if inner_value is not None else None
        if inner is None or inner not in new_set or not _is_transpose(inner):
            continue
        outer_perm = node.attributes["perm"].as_ints()
        inner_perm = inner.attributes["perm"].as_ints()
        if len(outer_perm) == len(inner_perm) and [inner_perm[a] for a in outer_perm] == list(
            range(len(outer_perm))
        ):
            glue.update((node, inner))
    return glue


LAYOUT_REORDERS = frozenset({"ReorderInput", "ReorderOutput"})
"""Conversions to and from a blocked layout (onnxruntime's NCHWc, domain
``com.microsoft.nchwc``; any custom domain): they move elements, they compute nothing."""


def is_layout_reorder(node: ir.Node) -> bool:
    """True for a reorder to or from a blocked layout (:data:`LAYOUT_REORDERS`)."""
    return (
        node.op_type in LAYOUT_REORDERS
        and node.domain not in ("", "ai.onnx")
        and bool(node.inputs)
        and node.inputs[0] is not None
    )


def _direct_old_reads(
    node: ir.Node, old_equivalents: Callable[[ir.Value], list[ir.Value]]
) -> list[ir.Value]:
    """The old values ``node``'s inputs stand for."""
    return [old for value in node.inputs if value is not None for old in old_equivalents(value)]


def _moves_nothing(reorder: ir.Node, computing: ir.Node) -> bool:
    """True when ``reorder`` hands back a value of static shape whose spatial dimensions
    are all 1, computed by a Conv with as many output channels as the value has (or by
    nodes working in its layout after it, such as an activation beside it): its blocked
    layout holds the elements in the plain order."""
    shape = reorder.outputs[0].shape
    if shape is None or not shape.is_static() or len(shape) < 3:
        return False
    dims = shape.numpy()
    for _ in range(4):  # back through the nodes after the Conv, first inputs
        if computing.op_type == "Conv" or not computing.inputs or computing.inputs[0] is None:
            break
        upstream = computing.inputs[0].producer()
        if upstream is None:
            return False
        computing = upstream
    if (
        any(dim != 1 for dim in dims[2:])
        or computing.op_type != "Conv"
        or len(computing.inputs) < 2
    ):
        return False
    weight = computing.inputs[1]
    if weight is None or weight.shape is None or not weight.shape.is_static():
        return False
    return bool(weight.shape.numpy()[0] == dims[1])


def _behind_conversions(node: ir.Node, glue: set[ir.Node]) -> ir.Node | None:
    """The producer of what the reorder ``node`` converts, through further reorders
    (None: a graph input or initializer)."""
    current: ir.Node | None = node
    for _ in range(16):
        if current is None or current not in glue or not is_layout_reorder(current):
            return current
        value = current.inputs[0] if current.inputs else None
        current = value.producer() if value is not None else None
    return None


def _behind_glue(
    node: ir.Node, glue: set[ir.Node], old_equivalents: Callable[[ir.Value], list[ir.Value]]
) -> bool:
    """True when ``node`` ends a cancelling Transpose pair whose input is a known value."""
    inner_value = node.inputs[0]
    inner = inner_value.producer() if inner_value is not None else None
    if inner is None or inner not in glue:
        return False
    behind = inner.inputs[0]
    return behind is not None and bool(old_equivalents(behind))


def _is_transpose(node: ir.Node) -> bool:
    return (
        node.op_type == "Transpose"
        and node.domain in ("", "ai.onnx")
        and "perm" in node.attributes
        and bool(node.inputs)
    )


def _upstream_boundary(
    start: ir.Node,
    inputs_of: Callable[[ir.Node], Sequence[ir.Value | None]],
    inner_producer: Callable[[ir.Value], ir.Node | None],
) -> set[ir.Value]:
    """Values read from outside a region, walking upstream from ``start``.

    ``inner_producer`` returns a value's producer when that producer belongs to the region
    (the walk continues through it), else None (the value is on the boundary).
    """
    return _upstream([start], inputs_of, inner_producer)[1]


def _upstream(
    starts: Iterable[ir.Node],
    inputs_of: Callable[[ir.Node], Sequence[ir.Value | None]],
    inner_producer: Callable[[ir.Value], ir.Node | None],
    *,
    seen: set[ir.Node] | None = None,
) -> tuple[set[ir.Node], set[ir.Value]]:
    """Walks upstream from ``starts`` through the producers ``inner_producer`` gives (None
    ends the walk at that value); returns the nodes reached, added to ``seen`` (nodes not
    to walk through again), and the values read from outside them."""
    reached = seen if seen is not None else set()
    boundary: set[ir.Value] = set()
    stack = list(starts)
    while stack:
        current = stack.pop()
        if current in reached:
            continue
        reached.add(current)
        for value in inputs_of(current):
            if value is None:
                continue
            upstream = inner_producer(value)
            if upstream is not None:
                stack.append(upstream)
            else:
                boundary.add(value)
    return reached, boundary
