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
- ``node.meta["stack_trace"]``: a Python traceback, outermost frame first.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import torch

from modelprov import _stack_trace
from modelprov._torch_compat import is_op_overload
from modelprov.stablehlo._records import FxNodeInfo

__all__ = ["fx_node_infos"]


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


def _source_nodes(node: torch.fx.Node, original_graph_id: int, original: set[str]) -> list[str]:
    found: list[str] = []
    pending: list[Any] = list(node.meta.get("from_node") or [])
    seen = 0
    while pending and seen < 10_000:  # chains are short; the bound guards against cycles
        link = pending.pop(0)
        seen += 1
        if getattr(link, "graph_id", None) == original_graph_id:
            name = str(link.name)
            if name not in found:
                found.append(name)
            continue
        pending.extend(getattr(link, "from_node", None) or [])
    if not found and node.name in original:
        found.append(node.name)
    return found


def fx_node_infos(
    decomposed: torch.fx.Graph,
    original: torch.fx.Graph,
    *,
    trace_options: _stack_trace.TraceOptions | None = None,
) -> dict[str, FxNodeInfo]:
    """Provenance of every ``call_function`` node of ``decomposed``, keyed by node name.

    ``original`` is the graph of the ExportedProgram before decompositions; stack-trace
    paths are rewritten by ``trace_options`` when given.
    """
    original_names = {node.name for node in original.nodes}
    infos: dict[str, FxNodeInfo] = {}
    for node in _call_nodes(decomposed.nodes):
        module, module_type = _module_of(node)
        trace = str(node.meta.get("stack_trace") or "")
        if trace_options is not None:
            trace = _stack_trace.rewrite_paths(trace, trace_options)
        user_code = trace_options.user_code if trace_options is not None else None
        frame = _stack_trace.user_frame(trace, user_code) if trace else None
        target = node.target
        infos[node.name] = FxNodeInfo(
            name=node.name,
            source_nodes=tuple(_source_nodes(node, id(original), original_names)),
            module=module,
            module_type=module_type,
            target=str(target) if is_op_overload(target) else _name(target),
            file=frame.file if frame else None,
            line=frame.line if frame else None,
            stack_trace=trace,
        )
    return infos


def _name(target: object) -> str:
    module = getattr(target, "__module__", None)
    qualname = getattr(target, "__qualname__", None)
    if module and qualname:
        return f"{module}.{qualname}"
    return str(target)


def _call_nodes(nodes: Iterable[torch.fx.Node]) -> Iterable[torch.fx.Node]:
    return (node for node in nodes if node.op == "call_function")
