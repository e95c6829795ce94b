"""torch's control-flow operators (``torch.cond``, ``torch.while_loop``) lowered with JAX's.

torchax 0.0.13 has no lowering for higher-order operators: its interpreter calls
``torch.ops.higher_order.cond`` on JAX tracers, which fails. Here ``cond`` becomes
``jax.lax.cond`` (``stablehlo.case``) and ``while_loop`` ``jax.lax.while_loop``
(``stablehlo.while``); each branch / body graph is interpreted node by node like the main
graph, so its ops are labelled too.

Branch nodes are named by their path: ``<subgraph attribute>__<node>``
(``true_graph_0__addmm``, nested ``true_graph_0__true_graph_0__mul``), unique in the program,
and that name is their scope. JAX puts its own scopes before a branch's
(``jit(forward)/cond_1/cond/branch_1_fun/true_graph_0__addmm/dot_general``: the cond node, the
``cond`` primitive, the branch); :func:`node_component` reads the innermost branch node from
such a path and the top-level node from any other.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Container, Iterator, Mapping, Sequence
from typing import Any

import torch

from modelprov._torch._compat import is_higher_order_op
from modelprov.core._sources import Source

__all__ = [
    "CONTROL_FLOW",
    "branch_nodes",
    "branch_sources",
    "is_control_flow",
    "lower_control_flow",
    "node_component",
]

CONTROL_FLOW = frozenset({"cond", "while_loop"})
"""Names of the higher-order operators lowered here."""

_SEPARATOR = "__"
_BRANCH_NAME = re.compile(r"^(?:\w+_graph_\d+__)+\w+$")
"""A branch node's scoped name: subgraph attributes (torch names them ``true_graph_0``,
``while_loop_body_graph_0``...) each followed by ``__``, then the node."""
_JAX_PRIMITIVES = frozenset({"cond", "while"})
_JAX_BRANCH = re.compile(r"^(?:branch_\d+_fun|body_fun|cond_fun|body|cond)$")


def node_component(parts: Sequence[str], known: Container[str]) -> str | None:
    """The FX node a location path (split at ``/``, ``parts[0]`` the root) names: the
    innermost branch node under JAX's control-flow scopes, else ``parts[1]``; None if
    neither is in ``known``."""
    found = parts[1] if len(parts) > 1 and parts[1] in known else None
    for i in range(1, len(parts) - 2):
        candidate = parts[i + 2]
        if (
            parts[i] in _JAX_PRIMITIVES
            and _JAX_BRANCH.match(parts[i + 1])
            and _BRANCH_NAME.match(candidate)
            and candidate in known
        ):
            found = candidate
    return found


RunGraph = Callable[[torch.fx.GraphModule, str, tuple[Any, ...]], Any]
"""Interprets a subgraph (its module, its name prefix, its inputs) and returns its outputs."""


def is_control_flow(target: object) -> bool:
    """True for ``torch.ops.higher_order.cond`` / ``while_loop``."""
    return is_higher_order_op(target) and getattr(target, "name", lambda: "")() in CONTROL_FLOW


def _subgraph_arguments(node: torch.fx.Node) -> Iterator[str]:
    for argument in node.args:
        if isinstance(argument, torch.fx.Node) and argument.op == "get_attr":
            yield str(argument.target)


def branch_nodes(
    graph_module: torch.fx.GraphModule, prefix: str = ""
) -> dict[str, tuple[torch.fx.Node, torch.fx.Node]]:
    """Every call node inside a control-flow subgraph: scoped name -> (node, the top-level
    control-flow node it runs under)."""
    found: dict[str, tuple[torch.fx.Node, torch.fx.Node]] = {}

    def visit(module: torch.fx.GraphModule, prefix: str, owner: torch.fx.Node | None) -> None:
        for node in module.graph.nodes:
            if node.op != "call_function":
                continue
            if owner is not None:
                found[prefix + node.name] = (node, owner)
            if is_control_flow(node.target):
                for attribute in _subgraph_arguments(node):
                    sub = getattr(module, attribute)
                    visit(sub, f"{prefix}{attribute}{_SEPARATOR}", owner or node)

    visit(graph_module, prefix, None)
    return found


def branch_sources(
    graph_module: torch.fx.GraphModule,
    infos: Mapping[str, Source],
    make_source: Callable[[torch.fx.Node], Source],
) -> dict[str, Source]:
    """Sources of the branch nodes, keyed by scoped name. torch records no module or user
    stack inside branches after decomposition; those come from the control-flow node."""
    sources: dict[str, Source] = {}
    for name, (node, owner) in branch_nodes(graph_module).items():
        own = make_source(node)
        outer = infos.get(owner.name)
        if outer is not None:
            if not own.module_path:
                own = dataclasses.replace(
                    own, module_path=outer.module_path, module_type=outer.module_type
                )
            if not own.call_stack:
                own = dataclasses.replace(
                    own,
                    file=outer.file,
                    line=outer.line,
                    stack_trace=outer.stack_trace,
                    call_stack=outer.call_stack,
                )
        sources[name] = dataclasses.replace(own, id=name, fx_node=name)
    return sources


def lower_control_flow(
    target: Any, args: tuple[Any, ...], node: torch.fx.Node, prefix: str, run_graph: RunGraph
) -> Any:
    """Lower a ``cond`` / ``while_loop`` call; ``args`` hold its subgraphs as GraphModules."""
    import jax

    subgraphs = [argument for argument in args if isinstance(argument, torch.fx.GraphModule)]
    prefixes = [f"{prefix}{attribute}{_SEPARATOR}" for attribute in _subgraph_arguments(node)]
    if len(subgraphs) != 2 or len(prefixes) != 2:
        raise TypeError(f"{target.name()} takes two subgraphs, got {len(subgraphs)}")

    def run(index: int, values: tuple[Any, ...]) -> tuple[Any, ...]:
        outputs = run_graph(subgraphs[index], prefixes[index], values)
        return tuple(outputs) if isinstance(outputs, tuple | list) else (outputs,)

    if target.name() == "cond":
        predicate, _, _, operands = args
        return jax.lax.cond(
            predicate,
            lambda values: run(0, values),
            lambda values: run(1, values),
            tuple(operands),
        )
    _, _, carried, additional = args
    extra = tuple(additional)

    def condition(values: tuple[Any, ...]) -> Any:
        (result,) = run(0, (*values, *extra))
        return result

    return jax.lax.while_loop(condition, lambda values: run(1, (*values, *extra)), tuple(carried))
