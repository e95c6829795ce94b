"""Read each FX node's provenance (module, target, stack, pre-decomposition node) from its meta.

What torch 2.13 records, as used here:

- ``node.meta["nn_module_stack"]``: ordered ``{key: (module_path, module_type)}``, outermost
  first; the root appears as ``('', <root class>)``. Types are qualified class names
  (strings) or classes. Decompositions keep the stack of the node they replace.
- ``node.meta["from_node"]``: a list of ``torch.fx.traceback.NodeSource`` chains, one link
  per pass (``run_decompositions`` adds two: ``ExportedProgram.module()`` and
  ``Interpreter_PropagateUnbackedSymInts``). A link's ``graph_id`` is ``id()`` of the graph
  holding that node, so the links whose ``graph_id`` is the user's ExportedProgram graph name
  the node(s) it came from: e.g. ``permute`` and ``addmm`` both lead to ``linear``.
- ``node.meta["stack_trace"]``: a Python traceback, outermost frame first; ``file``/``line``
  are its user frame (``_frames.call_stack``), not necessarily the innermost frame.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import torch

from modelprov._torch._compat import is_op_overload
from modelprov._torch._fx_lineage import export_node_names
from modelprov.core import _stack_trace
from modelprov.core._sources import Source
from modelprov.stablehlo.lower._frames import call_stack

__all__ = ["fx_node_infos", "node_info"]


def _type_name(module_type: object) -> str:
    if isinstance(module_type, type):
        return f"{module_type.__module__}.{module_type.__qualname__}"
    return str(module_type) if module_type is not None else ""


def _module_of(node: torch.fx.Node) -> tuple[str, str]:
    stack: Mapping[str, Any] | None = node.meta.get("nn_module_stack")
    if not stack:
        return "", ""
    path, module_type = list(stack.values())[-1]
    return str(path), _type_name(module_type)


def fx_node_infos(
    decomposed: torch.fx.Graph,
    original: torch.fx.Graph,
    *,
    trace_options: _stack_trace.TraceOptions | None = None,
) -> dict[str, Source]:
    """Provenance of every ``call_function`` node of ``decomposed``, keyed by node name.

    ``original`` is the graph of the ExportedProgram before decompositions; stack-trace
    paths are rewritten by ``trace_options`` when given.
    """
    return {
        node.name: node_info(node, id(original), trace_options)
        for node in _call_nodes(decomposed.nodes)
    }


def node_info(
    node: torch.fx.Node,
    original_graph_id: int | None,
    trace_options: _stack_trace.TraceOptions | None = None,
) -> Source:
    """Provenance of one call node as a ``Source`` (see :func:`fx_node_infos`)."""
    module, module_type = _module_of(node)
    raw_trace = str(node.meta.get("stack_trace") or "")
    trace = raw_trace
    if trace_options is not None:
        trace = _stack_trace.rewrite_paths(trace, trace_options)
    frames = call_stack(raw_trace, trace_options)  # user frame: _stack_trace.user_frame
    frame = frames[-1] if frames else None
    target = node.target
    return Source(
        id=node.name,
        fx_node=node.name,
        module_path=module,
        module_type=module_type,
        target=str(target) if is_op_overload(target) else _name(target),
        file=frame.file if frame else None,
        line=frame.line if frame else None,
        stack_trace=trace,
        source_nodes=export_node_names(node, original_graph_id),
        call_stack=frames,
    )


def _name(target: object) -> str:
    module = getattr(target, "__module__", None)
    qualname = getattr(target, "__qualname__", None)
    if module and qualname:
        return f"{module}.{qualname}"
    return str(target)


def _call_nodes(nodes: Iterable[torch.fx.Node]) -> Iterable[torch.fx.Node]:
    return (node for node in nodes if node.op == "call_function")
