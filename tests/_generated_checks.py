"""One generated case run end to end: a sourced graph through a sequence of steps
(modelprov.optimize, or a simulated black-box tool then modelprov.recover), checked against
the truth of its construction.

What must hold (``check_case`` raises AssertionError saying which):

* numerics: onnxruntime gives the same outputs before and after;
* every source a node claims lies in its value region (tests._regions), including sources
  it keeps only for recall, unless no other node computes them;
* no node claims a source only through a constant the exporter shared when another node
  carries that source;
* recall: every source of the construction is claimed by some node (it has no dead code);
* a node a tool left untouched keeps exactly the sources it had before the tool.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import onnx_ir as ir

import modelprov
from modelprov.keys import KEPT_FOR_RECALL_KEY
from modelprov.onnx._lookup import node_sources
from tests._black_box import apply_tool
from tests._checks import run
from tests._regions import check_regions, dynamic_values
from tests._sourced_graphs import SourcedGraph, build

__all__ = ["Step", "check_case", "run_case"]


@dataclasses.dataclass(frozen=True)
class Step:
    """``optimize``, or a tool made of ``rewrites`` (see tests._black_box) then recover."""

    kind: str
    rewrites: tuple[str, ...] = ()
    seed: int = 0
    keep_model_metadata: bool = True


def _ids(model: ir.Model) -> dict[str, list[str]]:
    return {node.name or "": [s.id for s in found] for node, found in node_sources(model)}


def run_case(graph: SourcedGraph, steps: list[Step]) -> tuple[ir.Model, list[str]]:
    """The model after the steps, and the problems with untouched nodes found on the way."""
    current = graph.model
    problems: list[str] = []
    for step in steps:
        if step.kind == "optimize":
            current = modelprov.optimize(current)
            continue
        proto = ir.to_proto(current)
        output, untouched, origins = apply_tool(
            proto, list(step.rewrites), step.seed, keep_model_metadata=step.keep_model_metadata
        )
        before = _ids(current)
        current = ir.from_proto(modelprov.recover(proto, output, force=True))
        found_now = node_sources(current)
        for (node, found), name in zip(found_now, untouched, strict=True):
            if name is not None and [s.id for s in found] != before[name]:
                problems.append(
                    f"untouched {name} ({node.op_type}) after {step.rewrites}: "
                    f"{[s.id for s in found]} != {before[name]}"
                )
        problems += _literals_taking_others(found_now, origins, before, step)
    return current, problems


def _marked(node: ir.Node) -> set[str]:
    """The sources a node carries only for recall."""
    return set(json.loads(node.metadata_props.get(KEPT_FOR_RECALL_KEY, "[]")))


def _literals_taking_others(
    found_now: list, origins: list[str | None], before: dict[str, list[str]], step: Step
) -> list[str]:
    """A Constant node the tool kept that now also claims another node's source, although
    some node carries that source (a tool merged equal literals into it: it computes
    none of theirs)."""
    strict = {
        source.id
        for node, found in found_now
        if node.op_type != "Constant"
        for source in found
        if source.id not in _marked(node)
    }
    problems = []
    for (node, found), name in zip(found_now, origins, strict=True):
        if name is None or node.op_type != "Constant":
            continue
        taken = {s.id for s in found} - set(before.get(name, ())) - _marked(node)
        if taken & strict:
            problems.append(f"literal {name} after {step.rewrites} takes {sorted(taken & strict)}")
    return problems


def check_case(graph: SourcedGraph, steps: list[Step]) -> None:
    """Runs the case and asserts the properties of the module docstring."""
    original = graph.model
    after, problems = run_case(graph, steps)
    where = f"{graph.recipe} {steps}"
    assert not problems, f"{where}: {problems}"
    for expected, actual in zip(run(original, graph.inputs), run(after, graph.inputs), strict=True):
        np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-4, err_msg=where)
    regions = check_regions(original, after, graph.inputs)
    expected_ids = {s.id for _, found in node_sources(original) for s in found}
    # A node no original source reaches reads as its own source ("node:<name>"): not a claim.
    violations = [(label, s) for label, s in regions.violations if s in expected_ids]
    assert violations == [], f"{where}: out of region {violations}"
    claims = {
        node.name or f"{node.op_type}@{i}": {s.id for s in found} & expected_ids
        for i, (node, found) in enumerate(node_sources(after))
    }
    constant = {
        node.name or f"{node.op_type}@{i}"
        for i, node in enumerate(after.graph)
        if not dynamic_values(after.graph).intersection(node.outputs)
    }
    marked = {label: ids for label, ids in regions.kept_for_recall.items() if label in claims}
    strict = {label: ids - marked.get(label, set()) for label, ids in claims.items()}
    for label, ids in marked.items():
        outside = ids - regions.regions.get(label, ids)
        elsewhere = {s for s in outside if any(s in strict[o] for o in strict if o != label)}
        assert not elsewhere, f"{where}: {label} keeps {elsewhere} for recall, carried elsewhere"
    for kind, found in (
        ("constant", regions.shared_constants),
        ("literal", regions.shared_literals),
    ):
        for label, ids in found.items():
            if label in constant:
                continue  # a constant the tool kept: its own sources, not a fold's
            elsewhere = {
                s
                for s in ids
                if any(s in strict[o] and s not in found.get(o, ()) for o in strict if o != label)
            }
            assert not elsewhere, f"{where}: {label} claims {elsewhere} through a shared {kind}"
    claimed = set().union(*claims.values()) if claims else set()
    assert expected_ids <= claimed, f"{where}: lost {sorted(expected_ids - claimed)}"


def rebuild(recipe: tuple[str, tuple[str, ...], int]) -> SourcedGraph:
    """The graph of a recipe (for regression tests)."""
    return build(*recipe)
