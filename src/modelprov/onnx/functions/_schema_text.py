"""The arguments of an ATen schema read from its text, without importing torch.

A model modelprov exported stores each target's schema text once (``pkg.modelprov.aten_schemas``);
functionize needs of it only each argument's name, type and whether it holds tensors. This
reads them from the text and names each type the way torch prints ``argument.type``
(``Scalar`` -> ``number``, ``int[1]?`` -> ``Optional[List[int]]``, alias annotations dropped),
so the result equals what torch's own parser gives (a test checks every schema torch
registers). A schema with a type this reader does not know gives None: the caller asks
torch.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterator

__all__ = ["SchemaArgument", "read_arguments"]


@dataclasses.dataclass(frozen=True)
class SchemaArgument:
    """One argument: its name, its type as torch prints it, and its tensor kind."""

    name: str
    type: str
    is_tensor: bool
    is_list: bool


_BASE_TYPES = {
    "Tensor": "Tensor",
    "int": "int",
    "SymInt": "int",
    "float": "float",
    "bool": "bool",
    "str": "str",
    "Scalar": "number",
    "ScalarType": "int",
    "Layout": "int",
    "MemoryFormat": "int",
    "Device": "Device",
    "Generator": "Generator",
    "Dimname": "str",
    "Storage": "Storage",
    "Stream": "Stream",
    "complex": "complex",
}
"""Schema type names -> torch's printed names (others: unknown, torch decides)."""


def _unquoted(text: str) -> Iterator[tuple[int, str]]:
    """``(index, char)`` of the characters of ``text`` outside quoted strings."""
    quote = ""
    for index, char in enumerate(text):
        if quote:
            if char == quote and text[index - 1] != "\\":
                quote = ""
        elif char in "'\"":
            quote = char
        else:
            yield index, char


def _split_top(text: str, separator: str) -> list[str]:
    """``text`` split at ``separator`` outside brackets and quotes."""
    parts: list[str] = []
    depth, start = 0, 0
    for index, char in _unquoted(text):
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == separator and depth == 0:
            parts.append(text[start:index])
            start = index + 1
    parts.append(text[start:])
    return parts


def _closing(text: str) -> int:
    """Where the parenthesis opened just before ``text`` closes (-1: it does not)."""
    depth = 0
    for index, char in _unquoted(text):
        if char == "(":
            depth += 1
        elif char == ")":
            if depth == 0:
                return index
            depth -= 1
    return -1


def _without_annotations(text: str) -> str:
    """The type text without alias annotations such as ``(a!)`` or ``(a -> *)``."""
    kept: list[str] = []
    depth = 0
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif depth == 0:
            kept.append(char)
    return "".join(kept).strip()


def _printed(type_text: str) -> tuple[str, bool, bool] | None:
    """(torch's printed type, is a tensor argument, is a list) or None when unknown."""
    if type_text.endswith("?"):
        inner = _printed(type_text[:-1])
        if inner is None:
            return None
        return f"Optional[{inner[0]}]", inner[1], inner[2]
    if type_text.endswith("]") and "[" in type_text:
        element, _, size = type_text[:-1].rpartition("[")
        if size and not size.isdigit():
            return None
        inner = _printed(element)
        if inner is None or inner[2]:
            return None
        return f"List[{inner[0]}]", inner[1], True
    base = _BASE_TYPES.get(type_text)
    return None if base is None else (base, base == "Tensor", False)


@functools.lru_cache(maxsize=1024)
def read_arguments(schema: str) -> tuple[SchemaArgument, ...] | None:
    """The arguments of ``schema`` (``aten::op.overload(Type name=default, ...) -> ...``)
    in order, or None when the text is not one this reader follows."""
    head, opened, rest = schema.partition("(")
    end = _closing(rest)
    if not opened or not head.strip() or end < 0:
        return None
    listed = rest[:end].strip()
    arguments: list[SchemaArgument] = []
    for raw in _split_top(listed, ",") if listed else []:
        declaration = _split_top(raw, "=")[0].strip()
        if declaration == "*":
            continue
        kind, _, name = _without_annotations(declaration).rpartition(" ")
        kind = kind.strip()
        if not kind or not name.isidentifier():
            return None
        printed = _printed(kind)
        if printed is None:
            return None
        arguments.append(SchemaArgument(name, printed[0], printed[1], printed[2]))
    return tuple(arguments)
