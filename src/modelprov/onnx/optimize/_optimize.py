"""modelprov.optimize: onnxscript's optimizer, with provenance carried through every change.

The graph is exactly what onnxscript produces (the same call torch.onnx.export(optimize=True)
makes); modelprov only watches what changed and rewrites metadata.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import logging
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, overload

import onnx_ir as ir
import onnx_ir.passes.common as common_passes
import onnxscript.optimizer
import onnxscript.rewriter

from modelprov._model_io._convert import ModelInput, ModelProto, run_on_walked_copy
from modelprov._model_io._ir_check import check_functions
from modelprov.core._correspond import Change, Snapshot, correspond
from modelprov.core._policy import Policies
from modelprov.core._provenance import Provenance
from modelprov.core._stack_trace import TraceOptions
from modelprov.core._walks import Walk, nodes_and_graphs
from modelprov.onnx._pass_options import OptimizeOptions
from modelprov.onnx.optimize._function_bodies import (
    add_body_sources,
    calls_functions,
    inline_modelprov_calls,
    inline_user_functions,
)
from modelprov.onnx.optimize._model_state import model_state

if TYPE_CHECKING:
    from torch.onnx import ONNXProgram

__all__ = ["OptimizeProvenancePass", "OptimizeResult", "StepRecord", "optimize"]

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


@dataclasses.dataclass
class _Tracker:
    """Runs steps that change ``model`` in place and moves ``provenance`` along each.

    ``walked`` is ``nodes_and_graphs`` of the graph as it is, when known (read at the start,
    then what the last step's correspondence walked), so no step walks the graph twice.
    """

    model: ir.Model
    provenance: Provenance
    walked: tuple[list[ir.Node], list[ir.Graph]] | None = None

    def track(self, name: str, step: Callable[[], object]) -> StepRecord:
        """Runs ``step`` and returns what it did to the graph and its provenance."""
        graph = self.model.graph
        provenance = self.provenance
        before = Snapshot.of(graph, walked=self.walked)
        self.walked = None
        lost_before = set(provenance.lost)
        step()
        change: Change = correspond(before, graph)
        provenance.apply(change, graph, before)
        self.walked = (change.after_nodes, change.after_graphs)
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
            nodes_after=len(change.same) + len(change.new_nodes),  # every node, matched or new
            new_nodes=len(change.new_nodes),
            removed_nodes=len(change.removed),
            eliminated_nodes=len(change.eliminated),
            unanchored_nodes=len(change.unanchored),
            lost_sources=tuple(lost),
        )


@dataclasses.dataclass
class OptimizeResult(ir.passes.PassResult):
    """The pass's result: the model, whether it changed, and what each step did."""

    steps: tuple[StepRecord, ...] = ()


@dataclasses.dataclass(frozen=True, kw_only=True)
class OptimizeProvenancePass(OptimizeOptions, ir.passes.InPlacePass):
    """onnxscript's optimizer plus user rewrite rules, with provenance kept by the policies.

    Steps: ``onnxscript.optimizer.optimize_ir`` (constant folding, default rewrite rules,
    unused-node and identity removal, constant lifting, CSE, name fixing); then the user
    ``rules`` through ``onnxscript.rewriter.rewrite``, followed by one more optimizer run
    when a rule fired. After each step the graph is compared with the graph before it and
    every node's sources are updated; at the end metadata is written by the policies.

    With ``per_pass=True`` the optimizer runs as the sequence of public passes it is made
    of (inlining; up to twice constant folding and the default rewrite rules; unused-node
    removal, constant lifting, initializer deduplication, CSE, output and name fixing), each
    tracked on its own, so the result's ``steps`` say which pass merged or lost what. The
    graph is the same; it costs one snapshot per pass.

    The fields are the options; results are returned (:class:`OptimizeResult`), never kept
    on the pass, so one instance may run on many models. ``modified`` is true exactly when
    the graph or its metadata changed.
    """

    policies: Policies | None = None
    rules: Sequence[Any] | None = None
    trace_options: TraceOptions | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "rules", tuple(self.rules or ()))

    def __call__(self, model_or_result: ir.Model | ir.passes.PassResult, /) -> OptimizeResult:
        result = super().__call__(model_or_result)
        assert isinstance(result, OptimizeResult)  # call() makes one
        return result

    def _optimizer(self, tracker: _Tracker, label: str) -> list[StepRecord]:
        if not self.per_pass:
            return [tracker.track(label, lambda: _optimize_ir(tracker.model))]
        return _run_optimizer_passes(tracker, label)

    def call(self, model: ir.Model) -> OptimizeResult:
        before = model_state(model)
        steps = self._run_steps(model)
        return OptimizeResult(model, model_state(model) != before, steps)

    def _run_steps(
        self, model: ir.Model, *, walked: Walk | None = None, functions_checked: bool = False
    ) -> tuple[StepRecord, ...]:
        """Optimizes ``model`` in place, provenance kept, and returns what each step did
        (``call`` without telling whether the model changed, which costs two walks).

        ``walked``, when given, is ``nodes_and_graphs(model.graph)`` of the model as it is;
        ``functions_checked`` says the caller checked its model-local functions
        (``check_functions`` or the proto checks)."""
        if not functions_checked:
            check_functions(model)  # onnxscript would fail deep inside on recursive functions
        if inline_modelprov_calls(model) or walked is None:
            walked = nodes_and_graphs(model.graph)
        _warn_when_quadratic(len(walked[0]))
        provenance = Provenance.read(model, trace_options=self.trace_options, walked=walked)
        tracker = _Tracker(model, provenance, walked)
        steps: list[StepRecord] = []
        if calls_functions(model, walked[0]):
            old_nodes = set(walked[0])
            calls = [
                dict(n.metadata_props) for n in old_nodes if n.op_identifier() in model.functions
            ]
            steps.append(tracker.track("inline functions", lambda: inline_user_functions(model)))
            add_body_sources(provenance, model, old_nodes, calls)
        steps += self._optimizer(tracker, "onnxscript.optimizer")
        if self.rules:
            rules = list(self.rules)
            record = tracker.track(
                "user rules",
                lambda: onnxscript.rewriter.rewrite(model, pattern_rewrite_rules=rules),
            )
            steps.append(record)
            if record.new_nodes or record.removed_nodes:
                steps.extend(self._optimizer(tracker, "onnxscript.optimizer (after user rules)"))
        provenance.write(
            model,
            policies=self.policies,
            trace_options=self.trace_options,
            walked=tracker.walked,
        )
        return tuple(steps)


QUADRATIC_FROM_NODES = 10_000
"""From this many nodes on, ``optimize`` logs that onnxscript's rewriter will take long."""


def _warn_when_quadratic(nodes: int) -> None:
    """onnxscript's default rewrite rules cost time quadratic in a graph's node count: its
    rewriter tries every rule on every node, and the one rule with two output nodes
    (SlicesSplit) makes its SimplePatternMatcher index the whole graph each time, whether the
    graph holds a Slice or not. Measured on a chain of Add nodes (optimize_ir alone, CPU
    time): 1.5 s at 2,000 nodes, 7.6 s at 4,000, 30 s at 8,000. The rules are onnxscript's
    (modelprov must make its graph); this says what to expect."""
    if nodes >= QUADRATIC_FROM_NODES:
        logger.warning(
            "optimizing %d nodes: onnxscript's default rewrite rules take time quadratic in "
            "the node count (about 30 s CPU at 8,000 nodes, 4x per doubling); this may take "
            "long",
            nodes,
        )


def _optimize_ir(model: ir.Model) -> None:
    onnxscript.optimizer.optimize_ir(model)


def _run_optimizer_passes(tracker: _Tracker, label: str) -> list[StepRecord]:
    """optimize_ir's default pipeline run as its public passes, each step tracked.

    The loop is onnxscript's public ``fold_constants`` and ``rewrite`` (which applies the
    default rules and removes unused nodes, functions and opsets), repeated while it changes
    the model, as optimize_ir's inner PassManager does; the options are optimize_ir's own
    defaults, read from its signature. A test compares the graph with optimize_ir's.
    """
    model = tracker.model
    signature = inspect.signature(onnxscript.optimizer.optimize_ir)
    defaults = {name: parameter.default for name, parameter in signature.parameters.items()}
    steps: list[StepRecord] = []

    def step(name: str, run: Callable[[], object]) -> None:
        steps.append(tracker.track(f"{label}: {name}", run))

    if defaults["inline"]:
        step("inline functions", lambda: common_passes.InlinePass()(model))
    fold = functools.partial(
        onnxscript.optimizer.fold_constants,
        model,
        onnx_shape_inference=defaults["onnx_shape_inference"],
        input_size_limit=defaults["input_size_limit"],
        output_size_limit=defaults["output_size_limit"],
    )
    # Whether a pass changed the model: its state after against before. Tracking changes
    # only provenance, so one pass's state after is the next one's before.
    state = model_state(model)
    for iteration in range(1, defaults["num_iterations"] + 1):
        step(f"fold constants ({iteration})", fold)
        folded_state = model_state(model)
        step(f"default rewrite rules ({iteration})", lambda: onnxscript.rewriter.rewrite(model))
        rewritten_state = model_state(model)
        changed = folded_state != state or rewritten_state != folded_state
        state = rewritten_state
        if defaults["stop_if_no_change"] and not changed:
            break
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
        step(name, functools.partial(each, model))
    return steps


@overload
def optimize(
    model: ModelProto | str | os.PathLike[str],
    *,
    policies: Policies | None = ...,
    rules: Sequence[Any] | None = ...,
    trace_options: TraceOptions | None = ...,
) -> ModelProto: ...
@overload
def optimize(
    model: ir.Model | ONNXProgram,
    *,
    policies: Policies | None = ...,
    rules: Sequence[Any] | None = ...,
    trace_options: TraceOptions | None = ...,
) -> ir.Model: ...
def optimize(
    model: ModelInput,
    *,
    policies: Policies | None = None,
    rules: Sequence[Any] | None = None,
    trace_options: TraceOptions | None = None,
) -> ModelProto | ir.Model:
    """Optimizes like torch.onnx.export(optimize=True) and keeps every node's provenance.

    Args:
        model: an ModelProto, onnx_ir.Model, path or torch.onnx.ONNXProgram; it is
            not modified.
        policies: per-key merge policies (default: modelprov.DEFAULT_POLICIES).
        rules: extra onnxscript rewrite rules (``onnxscript.rewriter.pattern.RewriteRule``).
        trace_options: stack-trace path rewriting and per-node size budget.

    Returns:
        The optimized model, of the same kind as ``model`` (a ModelProto for a path, an
        onnx_ir.Model for an ONNXProgram).
    """
    optimize_pass = OptimizeProvenancePass(
        policies=policies, rules=rules, trace_options=trace_options
    )

    def run(copy: ir.Model, walked: Walk | None) -> OptimizeResult:
        # The copy is ours: whether it changed is of no use, so skip working that out. Making
        # it checked its functions, and walked it when it cloned an onnx_ir.Model.
        steps = optimize_pass._run_steps(copy, walked=walked, functions_checked=True)
        return OptimizeResult(copy, True, steps)

    optimized, _ = run_on_walked_copy(run, model, policies, where="optimize")
    return optimized
