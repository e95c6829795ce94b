"""Provenance of XLA's HLO instructions, read back from HLO text (never evaluated).

``export_stablehlo`` copies each op's attributes into ``mhlo.frontend_attributes``
(``_frontend_attributes``); XLA keeps them on the HLO instructions made from the op, through
its optimizations, as ``frontend_attributes={key="value",...}``. Its locations become
``metadata={op_name="..." ...}``. :func:`read_hlo_sources` reads both from the text of
``jax.jit(...).lower(...).as_text(dialect="hlo")``, ``.compile().as_text()`` or an XLA dump.

The text is scanned, not parsed as HLO: per instruction line, the name, the opcode and the
two attribute lists. XLA prints a value as a C-escaped quoted string, or bare when it reads
as a JSON dictionary (``{...}``, kept as text). Limits: :data:`MAX_HLO_CHARS` of text,
:data:`MAX_ATTRIBUTES` frontend attributes per instruction, values of at most
``MAX_VALUE_BYTES`` (1 MiB); beyond them, or on a malformed attribute list, a one-line
StableHLOError names the instruction.
"""

from __future__ import annotations

import dataclasses
import os
import re
import types
from collections.abc import Mapping

from modelprov.core._sources import MAX_VALUE_BYTES, Source
from modelprov.errors import StableHLOError
from modelprov.stablehlo.read._read import sources_from

__all__ = ["MAX_ATTRIBUTES", "MAX_HLO_CHARS", "HloOp", "read_hlo_sources"]

MAX_HLO_CHARS = 1 << 30
"""Largest HLO text accepted (1 Gi characters)."""

MAX_ATTRIBUTES = 4096
"""Most frontend attributes accepted on one instruction."""

_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?(?P<name>[\w.\-]+)\s*=\s*.+?\s(?P<opcode>[\w\-]+)\(")
_COMPUTATION = re.compile(r"^\s*(?:ENTRY\s+)?%?(?P<name>[\w.\-]+)\s.*\{\s*$")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "'": "'", "\\": "\\", "?": "?"}


@dataclasses.dataclass(frozen=True)
class HloOp:
    """One HLO instruction and its provenance.

    Attributes:
        index: position among the instructions of the text, in order.
        computation: the computation holding it (``main.2``, ``fused_computation.1``).
        name: the instruction name (``linear.15``).
        opcode: the HLO opcode (``add``, ``fusion``, ``broadcast``...).
        attributes: its ``frontend_attributes`` (``modelprov.*``, ``custom.*``...), as text.
        op_name: its ``metadata`` op_name ('' when none), e.g.
            ``jit(call)/call_exported/0/linear``.
        sources: the sources its ``modelprov.*`` attributes name, with the user keys as
            metadata (empty when it has none).
    """

    index: int
    computation: str
    name: str
    opcode: str
    attributes: Mapping[str, str]
    op_name: str
    sources: tuple[Source, ...]


def read_hlo_sources(hlo: str | os.PathLike[str]) -> tuple[HloOp, ...]:
    """Every instruction of HLO text (or a path to a file of it) with its provenance.

    Raises StableHLOError for text over the limits or a malformed attribute list.
    """
    if isinstance(hlo, os.PathLike):
        size = os.path.getsize(hlo)
        if size > MAX_HLO_CHARS:
            raise StableHLOError(
                f"{os.fspath(hlo)}: {size} bytes of HLO text, over the {MAX_HLO_CHARS} limit"
            )
        with open(hlo, encoding="utf-8") as handle:
            text = handle.read()
    else:
        text = hlo
    if not isinstance(text, str):
        raise TypeError(f"read_hlo_sources needs HLO text or a path, got {type(hlo).__name__}")
    if len(text) > MAX_HLO_CHARS:
        raise StableHLOError(
            f"{len(text)} characters of HLO text, over the {MAX_HLO_CHARS} limit; pass one "
            "module's text"
        )
    found: list[HloOp] = []
    computation = ""
    for line in text.splitlines():
        match = _INSTRUCTION.match(line)
        if match is None:
            header = _COMPUTATION.match(line)
            if header is not None:
                computation = header["name"]
            continue
        name = match["name"]
        lists = _attribute_lists(line, match.end(), name)
        attributes = lists.get("frontend_attributes", {})
        metadata = lists.get("metadata", {})
        found.append(
            HloOp(
                index=len(found),
                computation=computation,
                name=name,
                opcode=match["opcode"],
                attributes=types.MappingProxyType(attributes),
                op_name=metadata.get("op_name", ""),
                sources=sources_from([], attributes),
            )
        )
    return tuple(found)


def _attribute_lists(line: str, start: int, name: str) -> dict[str, dict[str, str]]:
    """``frontend_attributes={...}`` and ``metadata={...}`` of one instruction line, found
    outside quoted strings and brackets (operands, backend configs)."""
    found: dict[str, dict[str, str]] = {}
    depth = 1  # ``start`` is inside the operand list
    position = start
    length = len(line)
    while position < length:
        char = line[position]
        if char == '"':
            _, position = _quoted(line, position, name)
            continue
        if char in "({[":
            depth += 1
        elif char in ")}]":
            depth -= 1
        elif depth == 0 and char == ",":
            rest = line[position + 1 :].lstrip()
            for label in ("frontend_attributes", "metadata"):
                if rest.startswith(label + "={"):
                    opening = line.index("{", position)
                    entries, position = _entries(line, opening + 1, name, label)
                    found[label] = entries
                    break
            else:
                position += 1
            continue
        position += 1
    return found


def _entries(line: str, position: int, name: str, label: str) -> tuple[dict[str, str], int]:
    """``key=value`` entries from ``position`` (after ``{``) to the closing ``}``; metadata
    separates them with spaces, frontend attributes with commas."""
    entries: dict[str, str] = {}
    length = len(line)
    while True:
        while position < length and line[position] in " ,":
            position += 1
        if position >= length:
            raise StableHLOError(f"HLO instruction {name!r}: {label} is not closed")
        if line[position] == "}":
            return entries, position + 1
        equals = line.find("=", position)
        if equals < 0:
            raise StableHLOError(f"HLO instruction {name!r}: {label} entry without '='")
        key = line[position:equals].strip()
        if not key or any(c in key for c in ' {}",'):
            raise StableHLOError(f"HLO instruction {name!r}: bad {label} key {key!r}")
        position = equals + 1
        if position < length and line[position] == '"':
            value, position = _quoted(line, position, name)
        elif position < length and line[position] == "{":
            value, position = _braced(line, position, name)
        else:
            end = position
            while end < length and line[end] not in " ,}":
                end += 1
            value, position = line[position:end], end
        if len(value.encode("utf-8")) > MAX_VALUE_BYTES:
            raise StableHLOError(
                f"HLO instruction {name!r}: {label} value of {key!r} is over "
                f"{MAX_VALUE_BYTES} bytes"
            )
        entries[key] = value
        if len(entries) > MAX_ATTRIBUTES:
            raise StableHLOError(
                f"HLO instruction {name!r}: more than {MAX_ATTRIBUTES} {label} entries"
            )


def _quoted(line: str, position: int, name: str) -> tuple[str, int]:
    """The C-escaped string starting at ``line[position] == '"'``, and the position after.

    XLA escapes bytes (UTF-8 beyond ASCII as octal), so the escapes are decoded as bytes."""
    data = bytearray()
    index = position + 1
    length = len(line)
    while index < length:
        char = line[index]
        if char == '"':
            return data.decode("utf-8", errors="replace"), index + 1
        if char == "\\" and index + 1 < length:
            escape = line[index + 1]
            octal = re.match(r"[0-7]{1,3}", line[index + 1 : index + 4])
            hexadecimal = re.match(r"x([0-9a-fA-F]{1,2})", line[index + 1 : index + 4])
            if escape in _ESCAPES:
                data += _ESCAPES[escape].encode()
                index += 2
                continue
            if octal is not None:
                data.append(int(octal.group(0), 8) & 0xFF)
                index += 1 + len(octal.group(0))
                continue
            if hexadecimal is not None:
                data.append(int(hexadecimal.group(1), 16))
                index += 1 + len(hexadecimal.group(0))
                continue
        data += char.encode("utf-8")
        index += 1
    raise StableHLOError(f"HLO instruction {name!r}: a quoted string is not closed")


def _braced(line: str, position: int, name: str) -> tuple[str, int]:
    """The balanced ``{...}`` text (a JSON dictionary value) at ``position``, kept as is."""
    depth = 0
    index = position
    length = len(line)
    while index < length:
        char = line[index]
        if char == '"':
            _, index = _quoted(line, index, name)
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return line[position : index + 1], index + 1
        index += 1
    raise StableHLOError(f"HLO instruction {name!r}: a {{...}} value is not closed")
