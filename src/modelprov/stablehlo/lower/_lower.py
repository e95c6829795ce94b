"""Lower a torch ExportedProgram to StableHLO with torchax and JAX, one named scope per FX node.

This follows ``torchax.export.exported_program_to_stablehlo`` step for step (the same
decompositions, interpreter and ``jax.export`` call) with these changes:

- each FX node is interpreted inside ``jax.named_scope(<node name>)``, so every op's location
  is a NameLoc ``"<root>/<node name>/<jax primitive>"``;
- the whole interpretation runs under ``jax.disable_jit()``, so the jitted helpers torchax
  calls (``jax.nn.relu`` ...) are inlined instead of becoming private functions whose ops
  would carry the helper's scope instead of the node's;
- the states and input avals come from :mod:`._program_inputs` (placeholder order, one
  symbolic scope), where torchax's own helpers mismatch some programs;
- ``torch.cond`` / ``torch.while_loop``, which torchax cannot lower, become ``jax.lax.cond`` /
  ``while_loop`` (:mod:`._control_flow`), and :mod:`._decompositions` rewrites calls torchax
  mishandles before lowering.

Nothing is computed differently: the ops are the ones torchax emits.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Callable, Sequence
from typing import Any

import torch

from modelprov._torch._compat import is_op_overload, is_op_target
from modelprov.core import _stack_trace
from modelprov.errors import StableHLOError
from modelprov.stablehlo.lower._composites import (
    CompositeGroup,
    CompositePlan,
    NotComposite,
    lower_group,
    plan_composites,
)
from modelprov.stablehlo.lower._control_flow import is_control_flow, lower_control_flow
from modelprov.stablehlo.lower._decompositions import LOWERING_DECOMPOSITIONS
from modelprov.stablehlo.lower._guard_calls import thread_guard_calls
from modelprov.stablehlo.lower._no_op_calls import restore_no_op_calls
from modelprov.stablehlo.lower._program_inputs import program_states, user_input_avals
from modelprov.stablehlo.lower._torchax_compat import import_torchax

__all__ = ["ROOT_SCOPE", "Lowered", "decompose", "lower", "node_location", "plain_torchax_export"]

_LOG = logging.getLogger(__name__)

_FUNCTION_NAME = "forward"
ROOT_SCOPE = f"jit({_FUNCTION_NAME})"
"""The first component of every op's NameLoc (JAX names it after the jitted function)."""


@dataclasses.dataclass(frozen=True)
class Lowered:
    """The result of :func:`lower`.

    Attributes:
        decomposed: the ExportedProgram after the decompositions torchax needs; its FX node
            names are the names used as scopes.
        exported: the ``jax.export.Exported`` (no modelprov attributes yet).
        weights: parameters, buffers and lifted constants as JAX arrays, in the order the
            exported function takes them (its first argument).
        composites: the ATen calls lowered as composites (None without ``composites``).
    """

    decomposed: torch.export.ExportedProgram
    exported: Any
    weights: tuple[Any, ...]
    composites: CompositePlan | None = None


def node_location(node: torch.fx.Node) -> str:
    """The innermost user frame of ``node`` as ``file:line`` ('' when it has no stack trace)."""
    trace = node.meta.get("stack_trace") or ""
    frame = _stack_trace.user_frame(trace) if trace else None
    return f"{frame.file}:{frame.line}" if frame is not None else ""


def _describe(node: torch.fx.Node) -> str:
    where = node_location(node)
    stack = node.meta.get("nn_module_stack") or {}
    module = ""
    if stack:
        path, module_type = list(stack.values())[-1]
        name = getattr(module_type, "__qualname__", None) or str(module_type).rsplit(".", 1)[-1]
        module = f" in module {str(path) or '<root>'!r} ({name})"
    return f"FX node {node.name!r} ({node.target}){module}" + (f" at {where}" if where else "")


def _workaround(target: object) -> str:
    return (
        "rewrite that line with supported ops, or decompose the op before lowering: "
        f"export_stablehlo(torch.export.export(model, args).run_decompositions({{{target}: "
        "<a function of supported torch ops>}))"
    )


def _scope_name(name: str) -> str:
    # FX names are identifiers; keep the scope a single path component whatever happens.
    return re.sub(r"[/\s]", "_", name)


def _make_interpreter_class(torchax: Any) -> type:
    import jax
    from torchax import export as torchax_export
    from torchax.ops import ops_registry

    base: type = torchax_export.JaxInterpreter

    class ScopedJaxInterpreter(base):  # type: ignore[misc]
        """torchax's JaxInterpreter, each node inside a named scope; errors name the node."""

        def __init__(
            self,
            graph_module: torch.fx.GraphModule,
            plan: CompositePlan | None = None,
            prefix: str = "",
        ) -> None:
            # A composite's operands may be values its decomposed nodes do not read
            # (zeros_like's input): keep every value (tracers are abstract, small).
            super().__init__(graph_module)
            self.garbage_collect_values = plan is None
            self.plan = plan
            self.group_values: dict[str, Any] = {}
            self.nodes_by_name = {node.name: node for node in self.graph.nodes}
            # torch.fx rewrites the args of any exception with its own trace; ours say it all.
            self.extra_traceback = False
            self.prefix = prefix  # of node names in control-flow subgraphs (_control_flow)

        def call_function(self, target: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            if is_op_target(target):
                op = ops_registry.all_aten_ops.get(target)
                if op is None and is_op_overload(target):
                    op = ops_registry.all_aten_ops.get(target.overloadpacket)
                if op is None or not op.is_jax_function:
                    raise _UnsupportedOp(target)
            return super().call_function(target, args, kwargs)

        def _run_control_flow(self, n: torch.fx.Node) -> Any:
            args, _ = self.fetch_args_kwargs_from_env(n)

            def run_graph(module: torch.fx.GraphModule, prefix: str, values: Any) -> Any:
                return type(self)(module, prefix=prefix).run(*values, enable_io_processing=False)

            return lower_control_flow(n.target, args, n, self.prefix, run_graph)

        def run_node(self, n: torch.fx.Node) -> Any:
            if n.name in self.group_values:
                return self.group_values.pop(n.name)  # lowered with its composite
            group = self.plan.groups.get(n.name) if self.plan is not None else None
            if group is not None:
                try:
                    return self._run_group(group, n)
                except NotComposite as reason:
                    _LOG.info("%s stays without a composite: %s", group.source, reason)
            if n.op == "call_function" and is_control_flow(n.target):
                return self._run_scoped(n, lambda: self._run_control_flow(n))
            return self._run_scoped(n, lambda: super(ScopedJaxInterpreter, self).run_node(n))

        def _run_group(self, group: CompositeGroup, first: torch.fx.Node) -> Any:
            nodes = self.nodes_by_name

            def run_member(name: str, value_of: Callable[[str], Any]) -> Any:
                node = nodes[name]
                args, kwargs = torch.fx.node.map_arg(
                    (node.args, node.kwargs), lambda used: value_of(used.name)
                )
                return self._run_scoped(
                    node, lambda: getattr(self, node.op)(node.target, args, kwargs)
                )

            operands = [self.env[nodes[name]] for name in group.operands]
            with jax.named_scope(_scope_name(first.name)):
                values = lower_group(group, operands, run_member, ROOT_SCOPE)
            for name in group.nodes[1:]:
                self.group_values[name] = values.get(name)
            return values.get(first.name)

        def _run_scoped(self, n: torch.fx.Node, run: Callable[[], Any]) -> Any:
            with jax.named_scope(_scope_name(self.prefix + n.name)):
                try:
                    return run()
                except (StableHLOError, NotComposite):
                    raise
                except _UnsupportedOp as exc:
                    raise StableHLOError(
                        f"torchax {torchax.__version__} has no lowering for {exc.target} "
                        f"used by {_describe(n)}; {_workaround(f'torch.ops.{exc.target}')}"
                    ) from None
                except Exception as exc:
                    raise StableHLOError(
                        f"torchax {torchax.__version__} failed to lower {_describe(n)}: "
                        f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                        f"; {_workaround(f'torch.ops.{n.target}')}"
                    ) from exc

    return ScopedJaxInterpreter


class _UnsupportedOp(Exception):
    def __init__(self, target: object) -> None:
        super().__init__(str(target))
        self.target = target


def decompose(exported_program: torch.export.ExportedProgram) -> torch.export.ExportedProgram:
    """The decompositions ``torchax.export.exported_program_to_jax`` runs, in its order, then
    modelprov's for calls torchax mishandles (``_decompositions``)."""
    import_torchax()
    from torchax import decompositions

    decomposed = exported_program.run_decompositions()
    table = {**decompositions.DECOMPOSITIONS, **LOWERING_DECOMPOSITIONS}
    return decomposed.run_decompositions(table)


def lower(
    exported_program: torch.export.ExportedProgram,
    *,
    decomposed: bool = False,
    composites: bool = False,
) -> Lowered:
    """Lower ``exported_program`` to a ``jax.export.Exported`` whose op locations name FX nodes.

    ``decomposed=True`` says the program already went through :func:`decompose`;
    ``composites=True`` lowers each ATen call of ``exported_program`` as one
    ``stablehlo.composite`` (``_composites``; not with ``decomposed``).
    Raises StableHLOError naming the FX node and its source line when a node cannot be lowered.
    """
    torchax = import_torchax()
    import jax
    import jax.export

    if decomposed and composites:
        raise ValueError("composites=True needs the user's program, not a decomposed one")
    program = exported_program if decomposed else decompose(exported_program)
    plan = None
    if composites:  # no-op and guard calls get identity nodes, to be composites too
        restore_no_op_calls(program.graph_module, exported_program.graph)
        guards = thread_guard_calls(program.graph_module, exported_program.graph)
        plan = plan_composites(program.graph, exported_program.graph, guards)
    env = torchax.default_env()  # registers torchax's ATen lowerings
    weights = tuple(env.t2j_copy(program_states(program)))
    avals = user_input_avals(program)
    if plan is not None and any(
        not isinstance(size, int) for aval in avals for size in getattr(aval, "shape", ())
    ):
        raise StableHLOError(
            "composites=True needs static shapes (jax.lax.composite does not lower with "
            f"symbolic dimensions in jax {jax.__version__}); export without dynamic_shapes, "
            "or without composites"
        )
    interpreter_class = _make_interpreter_class(torchax)
    num_mutations = len(program.graph_signature.buffers_to_mutate)
    graph_module = program.graph_module

    def forward(states: Sequence[Any], inputs: Sequence[Any]) -> Any:
        with jax.disable_jit():
            results = interpreter_class(graph_module, plan).run(
                *states, *inputs, enable_io_processing=False
            )
        return results[num_mutations:]

    forward.__name__ = _FUNCTION_NAME
    try:
        exported = jax.export.export(jax.jit(forward))(weights, tuple(avals))
    except StableHLOError as exc:
        # JAX adds its own frames to the traceback; the message already says where.
        raise StableHLOError(str(exc)) from exc.__cause__
    _LOG.debug("lowered %d FX nodes", len(graph_module.graph.nodes))
    return Lowered(decomposed=program, exported=exported, weights=weights, composites=plan)


def plain_torchax_export(exported_program: torch.export.ExportedProgram) -> Any:
    """torchax's own ``exported_program_to_stablehlo`` (the baseline for benchmarks)."""
    import_torchax()
    from torchax import export as torchax_export

    return torchax_export.exported_program_to_stablehlo(exported_program)
