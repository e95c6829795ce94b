"""Duplicate metadata keys in protos, merged by the key's policy instead of last-wins.

ONNX stores ``metadata_props`` as a list of entries, so a tool can write one key twice
(onnxruntime's fusions have been seen to); onnx_ir keeps only the last entry. modelprov
reads every proto through here first, so no value is dropped silently: the values of a
repeated key are merged by the key's policy, as if they came from several sources.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import onnx

from modelprov._model_io._proto_walk import subgraphs
from modelprov.core._policy import DEFAULT_POLICIES, MergeContext, Policies

__all__ = ["has_duplicate_keys", "merge_duplicate_keys", "merged_entries"]


def merged_entries(
    entries: Iterable[Any], *, where: str, policies: Policies | None = None
) -> dict[Any, Any]:
    """``key -> value`` of protobuf entries; a repeated key's values merged by its policy."""
    grouped: dict[Any, list[Any]] = {}
    for entry in entries:
        grouped.setdefault(entry.key, []).append(entry.value)
    chosen = policies if policies is not None else DEFAULT_POLICIES
    merged: dict[Any, Any] = {}
    for key, values in grouped.items():
        if (
            len(values) == 1
            or not isinstance(key, str)
            or not all(isinstance(value, str) for value in values)
        ):
            merged[key] = values[-1]
            continue
        texts = [value for value in values if value]
        ctx = MergeContext(key, where, (True,) * len(texts), ())
        value = chosen.merge(key, texts, ctx) if texts else ""
        if value is not None:
            merged[key] = value
    return merged


def _holders(proto: onnx.ModelProto) -> Iterator[tuple[str, Any]]:
    yield "model", proto.metadata_props
    graphs: list[tuple[str, onnx.GraphProto]] = [("", proto.graph)]
    graphs.extend((f"function {f.name}/", f) for f in proto.functions)  # type: ignore[misc]
    for function in proto.functions:
        yield f"function {function.name!r}", function.metadata_props
    while graphs:
        prefix, graph = graphs.pop()
        for index, node in enumerate(graph.node):
            yield f"{prefix}node {node.name or index!r}", node.metadata_props
            graphs.extend((f"{prefix}{node.name}/", g) for g in subgraphs(node))
        if isinstance(graph, onnx.GraphProto):
            for info in [*graph.input, *graph.output, *graph.value_info]:
                yield f"{prefix}value {info.name!r}", info.metadata_props


def _repeats(entries: Any) -> bool:
    return len({entry.key for entry in entries}) != len(entries)


def has_duplicate_keys(proto: onnx.ModelProto) -> bool:
    """True when some metadata holder of the model names a key twice."""
    return any(_repeats(entries) for _, entries in _holders(proto))


def merge_duplicate_keys(proto: onnx.ModelProto, policies: Policies | None = None) -> list[str]:
    """Merges repeated keys in place, by their policies; returns where it did."""
    merged_at: list[str] = []
    for where, entries in _holders(proto):
        if not _repeats(entries):
            continue
        merged = merged_entries(entries, where=where, policies=policies)
        del entries[:]
        for key, value in merged.items():
            entries.add(key=key, value=value)
        merged_at.append(where)
    return merged_at
