"""FX nodes that lower to no op of their own, and the op whose result is their output.

Some nodes of the user's program compute nothing in StableHLO: torchax's decompositions
remove ``dropout`` in eval mode and ``contiguous``; others lower to no new op (``alias``, a
dtype conversion to the same dtype). Their output is their first
input, so the op producing that input produces their output too, exactly as when an ONNX
optimizer removes an Identity node. Those ops name them as extra sources (in locations and
``StableHLOProgram.sources``), so every node of the user's program is found in StableHLO.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

import torch

from modelprov.core._sources import Source
from modelprov.core._stack_trace import TraceOptions
from modelprov.stablehlo.lower._fx_nodes import node_info

__all__ = ["alias_infos"]

_MAX_CHAIN = 10_000


def _has_output(node: torch.fx.Node) -> bool:
    """False for nodes that return nothing (``_assert_tensor_metadata``): no value to alias."""
    return node.meta.get("val") is not None


def _first_input(node: torch.fx.Node) -> torch.fx.Node | None:
    first = node.args[0] if node.args else None
    return first if isinstance(first, torch.fx.Node) else None


def alias_infos(
    decomposed: torch.fx.Graph,
    original: torch.fx.Graph,
    infos: Mapping[str, Source],
    with_ops: Collection[str],
    trace_options: TraceOptions | None = None,
) -> dict[str, tuple[Source, ...]]:
    """Decomposed node (one that made ops) -> the nodes whose output its ops produce.

    ``with_ops``: names of the decomposed nodes some op was lowered from.
    """
    found: dict[str, list[Source]] = {}

    def add(owner: str, info: Source) -> None:
        entries = found.setdefault(owner, [])
        if all(entry.id != info.id for entry in entries):
            entries.append(info)

    # Decomposed nodes that made no op: their first input's producer made their output.
    for node in decomposed.nodes:
        if node.op != "call_function" or node.name in with_ops or node.name not in infos:
            continue
        if not _has_output(node):
            continue
        producer = _producer(node, lambda n: n.name in with_ops)
        if producer is not None:
            own = set(infos[producer.name].source_nodes)
            if not set(infos[node.name].source_nodes) <= own:
                add(producer.name, infos[node.name])

    # Nodes of the user's program the decompositions removed.
    covered = {source for info in infos.values() for source in info.source_nodes}
    outputs_of = _group_outputs(decomposed, infos, with_ops)
    for node in original.nodes:
        if node.op != "call_function" or node.name in covered or not _has_output(node):
            continue
        producer = _producer(node, lambda n: n.name in covered)
        if producer is None:
            continue
        info = node_info(node, None, trace_options)
        for owner in outputs_of.get(producer.name, ()):
            add(owner, info)
    return {owner: tuple(entries) for owner, entries in found.items()}


def _producer(node: torch.fx.Node, made_ops: Any) -> torch.fx.Node | None:
    current = _first_input(node)
    steps = 0
    while current is not None and steps < _MAX_CHAIN:
        steps += 1
        if current.op != "call_function":
            return None
        if made_ops(current):
            return current
        current = _first_input(current)
    return None


def _group_outputs(
    decomposed: torch.fx.Graph, infos: Mapping[str, Source], with_ops: Collection[str]
) -> dict[str, list[str]]:
    """Source node -> its decomposed nodes (with ops) whose value leaves its group."""
    outputs: dict[str, list[str]] = {}
    for node in decomposed.nodes:
        info = infos.get(node.name)
        if info is None or node.name not in with_ops:
            continue
        for source in info.source_nodes:
            leaves = any(
                user.op == "output"
                or source not in (infos[user.name].source_nodes if user.name in infos else ())
                for user in node.users
            )
            if leaves:
                outputs.setdefault(source, []).append(node.name)
    return outputs
