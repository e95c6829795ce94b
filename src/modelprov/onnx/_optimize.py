"""modelprov.optimize: onnxscript's optimizer, with provenance carried through every change.

The graph is exactly what onnxscript produces (the same call torch.onnx.export(optimize=True)
makes); modelprov only watches what changed and rewrites metadata.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Callable, Iterator, Sequence
from typing import Any, overload

import onnx
import onnx_ir as ir
import onnx_ir.passes.common as common_passes
import onnxscript.optimizer
import onnxscript.rewriter

from modelprov._correspond import Change, Snapshot, all_nodes, diff
from modelprov._stack_trace import TraceOptions
from modelprov.onnx._convert import to_ir_copy, to_kind
from modelprov.onnx._function_bodies import (
    add_body_sources,
    calls_functions,
    inline_modelprov_calls,
    inline_user_functions,
)
from modelprov.onnx._provenance import Provenance
from modelprov.policy import Policies

__all__ = ["OptimizeProvenancePass", "StepRecord", "optimize"]

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class StepRecord:
    """What one step of the optimization did to the graph and its provenance."""

    name: str
    nodes_before: int
    nodes_after: int
    new_nodes: int
    removed_nodes: int
    eliminated_nodes: int
    unanchored_nodes: int
    lost_sources: tuple[str, ...]


def track(
    model: ir.Model, provenance: Provenance, name: str, step: Callable[[], object]
) -> StepRecord:
    """Runs ``step`` (which changes ``model`` in place) and moves provenance along."""
    before = Snapshot.of(model.graph)
    lost_before = set(provenance.lost)
    step()
    change: Change = diff(before, model.graph)
    provenance.apply(change, model.graph)
    if change.unanchored:
        logger.info(
            "%s: %d new node(s) could not be attributed: %s",
            name,
            len(change.unanchored),
            ", ".join(node.name or node.op_type for node in change.unanchored[:5]),
        )
    lost = provenance.table.ids(provenance.lost - lost_before)
    return StepRecord(
        name=name,
        nodes_before=len(before.nodes),
        nodes_after=sum(1 for _ in ir.traversal.RecursiveGraphIterator(model.graph)),
        new_nodes=len(change.new_nodes),
        removed_nodes=len(change.removed),
        eliminated_nodes=len(change.eliminated),
        unanchored_nodes=len(change.unanchored),
        lost_sources=tuple(lost),
    )


class OptimizeProvenancePass(ir.passes.InPlacePass):
    """onnxscript's optimizer plus user rewrite rules, with provenance kept by the policies.

    Steps: ``onnxscript.optimizer.optimize_ir`` (constant folding, default rewrite rules,
    unused-node and identity removal, constant lifting, CSE, name fixing); then the user
    ``rules`` through ``onnxscript.rewriter.rewrite``, followed by one more optimizer run
    when a rule fired. After each step the graph is compared with the graph before it and
    every node's sources are updated; at the end metadata is written by the policies.

    With ``per_pass=True`` the optimizer runs as the sequence of public passes it is made
    of (inlining; twice constant folding and the default rewrite rules; unused-node removal,
    constant lifting, initializer deduplication, CSE, output and name fixing), each tracked
    on its own, so ``steps`` says which pass merged or lost what. The graph is the same;
    it costs one snapshot per pass.
    """

    def __init__(
        self,
        *,
        policies: Policies | None = None,
        rules: Sequence[Any] | None = None,
        trace_options: TraceOptions | None = None,
        per_pass: bool = False,
    ) -> None:
        super().__init__()
        self.policies = policies
        self.rules = list(rules) if rules else []
        self.trace_options = trace_options
        self.per_pass = per_pass
        self.steps: list[StepRecord] = []

    def _optimizer(self, model: ir.Model, provenance: Provenance, label: str) -> list[StepRecord]:
        if not self.per_pass:
            return [track(model, provenance, label, lambda: _optimize_ir(model))]
        return [
            track(model, provenance, f"{label}: {name}", step)
            for name, step in _optimizer_passes(model)
        ]

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        inline_modelprov_calls(model)
        provenance = Provenance.read(model, trace_options=self.trace_options)
        self.steps = []
        if calls_functions(model):
            before = set(all_nodes(model.graph))
            calls = [dict(n.metadata_props) for n in before if n.op_identifier() in model.functions]
            self.steps.append(
                track(model, provenance, "inline functions", lambda: inline_user_functions(model))
            )
            add_body_sources(provenance, model, before, calls)
        self.steps += self._optimizer(model, provenance, "onnxscript.optimizer")
        if self.rules:
            record = track(
                model,
                provenance,
                "user rules",
                lambda: onnxscript.rewriter.rewrite(model, pattern_rewrite_rules=self.rules),
            )
            self.steps.append(record)
            if record.new_nodes or record.removed_nodes:
                self.steps.extend(
                    self._optimizer(model, provenance, "onnxscript.optimizer (after user rules)")
                )
        provenance.write(model, policies=self.policies, trace_options=self.trace_options)
        return ir.passes.PassResult(model, modified=True)


def _optimize_ir(model: ir.Model) -> None:
    onnxscript.optimizer.optimize_ir(model)


def _optimizer_passes(model: ir.Model) -> Iterator[tuple[str, Callable[[], object]]]:
    """optimize_ir's default pipeline as its public passes, in order (lazily, one by one)."""
    yield "inline functions", lambda: common_passes.InlinePass()(model)
    for iteration in (1, 2):
        yield (
            f"fold constants ({iteration})",
            lambda: onnxscript.optimizer.fold_constants(model, onnx_shape_inference=True),
        )
        yield f"default rewrite rules ({iteration})", lambda: onnxscript.rewriter.rewrite(model)
    tail: list[tuple[str, ir.passes.PassBase]] = [
        ("remove unused nodes", common_passes.RemoveUnusedNodesPass()),
        (
            "lift constants to initializers",
            common_passes.LiftConstantsToInitializersPass(lift_all_constants=True, size_limit=0),
        ),
        ("lift subgraph initializers", common_passes.LiftSubgraphInitializersToMainGraphPass()),
        ("deduplicate initializers", common_passes.DeduplicateInitializersPass()),
        ("common subexpression elimination", common_passes.CommonSubexpressionEliminationPass()),
        ("fix outputs", common_passes.OutputFixPass()),
        ("fix names", common_passes.NameFixPass()),
    ]
    for name, each in tail:
        yield name, functools.partial(each, model)


@overload
def optimize(
    model: onnx.ModelProto,
    *,
    policies: Policies | None = ...,
    rules: Sequence[Any] | None = ...,
    trace_options: TraceOptions | None = ...,
) -> onnx.ModelProto: ...
@overload
def optimize(
    model: ir.Model,
    *,
    policies: Policies | None = ...,
    rules: Sequence[Any] | None = ...,
    trace_options: TraceOptions | None = ...,
) -> ir.Model: ...
def optimize(
    model: onnx.ModelProto | ir.Model,
    *,
    policies: Policies | None = None,
    rules: Sequence[Any] | None = None,
    trace_options: TraceOptions | None = None,
) -> onnx.ModelProto | ir.Model:
    """Optimizes like torch.onnx.export(optimize=True) and keeps every node's provenance.

    Args:
        model: an onnx.ModelProto or onnx_ir.Model; it is not modified.
        policies: per-key merge policies (default: modelprov.DEFAULT_POLICIES).
        rules: extra onnxscript rewrite rules (``onnxscript.rewriter.pattern.RewriteRule``).
        trace_options: stack-trace path rewriting and per-node size budget.

    Returns:
        The optimized model, of the same kind as ``model``.
    """
    working = to_ir_copy(model, policies)
    OptimizeProvenancePass(policies=policies, rules=rules, trace_options=trace_options)(working)
    return to_kind(working, model)
