"""What a reader that does not use modelprov sees in torch.onnx's own node keys.

Each key torch.onnx writes on a node is read as the tools that show or parse it read it,
never through ``modelprov.sources`` or the sources table:

- ``namespace``: ``/``-separated segments ``name: class``, the last one ``fx_node: target``
  (Model Explorer's layout reads it so): the innermost module's path and the FX node.
- ``pkg.torch.onnx.name_scopes``: a Python list literal of strings, the module paths, innermost
  last, then the FX node's name: the innermost module's path (the module ``modelprov.diff``
  counts) and the FX node. Read two ways: as a tool parses it (``ast.literal_eval`` of the
  whole value: one list), and as Netron or Model Explorer show it (every line of the text
  that is such a list, after an optional ``# ``: what a person reads; for a one-line value,
  the same).
- ``pkg.torch.onnx.class_hierarchy``: the same list of the modules' classes, then the target:
  the innermost module's kind (its class chain) and the operation (the whole chain); read the
  same two ways.
- ``pkg.torch.onnx.fx_node``: lines ``%name : ...``, one per FX node.
- ``pkg.torch.onnx.stack_trace``: the ``File "f", line n`` frames it mentions.

A value a reader cannot parse contributes nothing. Recall of one aspect of one key is the share
of the distinct items of the plain export (all its nodes) that some node of the model after
still names in that key, read the same way for every model.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from collections.abc import Callable, Iterable

import onnx_ir as ir

NAMESPACE = "namespace"
NAME_SCOPES = "pkg.torch.onnx.name_scopes"
CLASS_HIERARCHY = "pkg.torch.onnx.class_hierarchy"
FX_NODE = "pkg.torch.onnx.fx_node"
STACK_TRACE = "pkg.torch.onnx.stack_trace"

_FX_LINE = re.compile(r"^%(\S+) : ", re.M)
_FRAME = re.compile(r'File "([^"\n]*)", line (\d+)')


def _string_list(value: str) -> list[str] | None:
    try:
        parsed = ast.literal_eval(value)
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        return None
    if isinstance(parsed, list) and all(isinstance(item, str) for item in parsed):
        return parsed
    return None


def _namespace(value: str) -> dict[str, set[str]]:
    segments = [segment.partition(": ")[0] for segment in value.split("/")]
    if not segments or not segments[-1]:
        return {"fx": set(), "modules": set()}
    return {"fx": {segments[-1]}, "modules": {segments[-2]} if len(segments) > 1 else set()}


def _shown_lists(value: str) -> list[list[str]]:
    lines = [line.removeprefix("# ") for line in value.split("\n")]
    return [parsed for line in lines if (parsed := _string_list(line))]


def _scopes(scopes: list[str]) -> tuple[set[str], set[str]]:
    return {scopes[-1]}, ({scopes[-2]} if len(scopes) > 1 else set())


def _classes(classes: list[str]) -> tuple[set[str], set[str]]:
    return ({"/".join(classes[:-1])} if len(classes) > 1 else set()), {"/".join(classes)}


def _two_readings(
    read: Callable[[list[str]], tuple[set[str], set[str]]], first: str, second: str
) -> Callable[[str], dict[str, set[str]]]:
    def reader(value: str) -> dict[str, set[str]]:
        items: dict[str, set[str]] = {
            first: set(),
            second: set(),
            f"{first} shown": set(),
            f"{second} shown": set(),
        }
        parsed = _string_list(value)
        if parsed:
            items[first], items[second] = read(parsed)
        for shown in _shown_lists(value):
            a, b = read(shown)
            items[f"{first} shown"] |= a
            items[f"{second} shown"] |= b
        return items

    return reader


_name_scopes = _two_readings(_scopes, "fx", "modules")
_class_hierarchy = _two_readings(_classes, "modules", "ops")


def _fx_node(value: str) -> dict[str, set[str]]:
    return {"fx": set(_FX_LINE.findall(value))}


def _stack_trace(value: str) -> dict[str, set[str]]:
    return {"lines": {f"{file}:{line}" for file, line in _FRAME.findall(value)}}


READERS: dict[str, Callable[[str], dict[str, set[str]]]] = {
    NAMESPACE: _namespace,
    NAME_SCOPES: _name_scopes,
    CLASS_HIERARCHY: _class_hierarchy,
    FX_NODE: _fx_node,
    STACK_TRACE: _stack_trace,
}
"""Every node key torch.onnx 2.13 writes (``_core._set_node_metadata``), with its reader."""

ASPECTS: tuple[tuple[str, str], ...] = tuple(
    (key, aspect) for key, read in READERS.items() for aspect in read("")
)
"""(key, aspect) pairs in a fixed order: what each key can name."""


def _nodes(model: ir.Model) -> Iterable[ir.Node]:
    yield from model.graph.all_nodes()
    for function in model.functions.values():
        yield from function.all_nodes()


def raw_items(model: ir.Model) -> dict[tuple[str, str], set[str]]:
    """(key, aspect) -> the distinct items the model's nodes name in that key."""
    items: dict[tuple[str, str], set[str]] = {pair: set() for pair in ASPECTS}
    for node in _nodes(model):
        for key, read in READERS.items():
            value = node.metadata_props.get(key)
            if value:
                for aspect, found in read(value).items():
                    items[key, aspect] |= found
    return items


@dataclasses.dataclass(frozen=True)
class RawRecall:
    """Per (key, aspect): how many of the export's items the model after still names."""

    total: dict[tuple[str, str], int]
    kept: dict[tuple[str, str], int]
    lost: dict[tuple[str, str], tuple[str, ...]]

    def value(self, pair: tuple[str, str]) -> float:
        return self.kept[pair] / self.total[pair] if self.total[pair] else 1.0


def raw_recall(export: ir.Model, after: ir.Model) -> RawRecall:
    """Raw-key recall of ``after`` against the plain ``export`` it was made from."""
    before = raw_items(export)
    now = raw_items(after)
    lost = {pair: tuple(sorted(before[pair] - now[pair])) for pair in ASPECTS}
    return RawRecall(
        total={pair: len(before[pair]) for pair in ASPECTS},
        kept={pair: len(before[pair]) - len(lost[pair]) for pair in ASPECTS},
        lost=lost,
    )
