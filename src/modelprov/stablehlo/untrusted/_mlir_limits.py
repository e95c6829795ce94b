"""MLIR text is untrusted: checked by a linear scan before MLIR's C++ parser sees it.

MLIR's parser, printer and verifier recurse once per level of nesting (regions, locations,
attributes, types), and its Python bindings abort the process on a string that is not
UTF-8. Both kill the caller with a signal that no ``except`` catches (measured with jaxlib
0.10.2 on an 8 MiB stack: 2,500 nested regions, 20,000 nested call sites when printed,
10,000 nested arrays; a ``\\FF`` escape in a location name aborts on reading the name).
So, before anything reaches the parser, :func:`check_mlir_text` refuses with a
``StableHLOError``:

- text over ``MAX_MLIR_CHARS`` characters;
- text that is not UTF-8 (lone surrogates), and string literals whose ``\\XX`` escapes
  spell bytes that are not UTF-8;
- nesting deeper than ``MAX_NESTING``, counted over ``( [ { <`` outside strings and
  comments, *through aliases*: ``#loc2 = loc("f"(#loc1))`` nests ``#loc1`` one level
  deeper, so a chain of one-line aliases is as deep as the location it spells.

The limit is far below the measured crash depths (a 5x margin for the shallowest, nested
regions, which take two levels each) and far above what exporters write (JAX's call-site
chains stop at 10 frames; modelprov's hold the user's frames; regions nest a few levels).
Bytecode has no text to scan: ``_bytecode_text`` turns it into text in a child process
first. The scan is linear: regular expressions and numpy over the text, one pass over
the aliases.
"""

from __future__ import annotations

import re

import numpy as np

from modelprov.errors import StableHLOError

__all__ = ["MAX_MLIR_CHARS", "MAX_NESTING", "check_mlir_text", "nesting"]

MAX_MLIR_CHARS = 2 << 30
"""Longest MLIR text read (2 Gi characters)."""
MAX_NESTING = 1000
"""Deepest nesting of brackets (through aliases) in MLIR text read."""

# A string literal (MLIR strings hold no raw line break) or a line comment.
_STRING_OR_COMMENT = re.compile(rb'"[^"\\\n]*(?:\\.[^"\\\n]*)*"|//[^\n]*')
_STRING_WITH_ESCAPES = re.compile(rb'"[^"\\\n]*(?:\\.[^"\\\n]*)+"|//[^\n]*|"[^"\\\n]*"')
_HIGH_ESCAPE = re.compile(rb"\\[89a-fA-F][0-9a-fA-F]")
_ESCAPE = re.compile(rb"\\([0-9a-fA-F]{2}|.)")
_SIMPLE_ESCAPES = {b"n": b"\n", b"t": b"\t", b'"': b'"', b"\\": b"\\"}
# Tokens with a bracket that does not nest.
_NOT_NESTING = re.compile(rb"->|>=|<=")
_ALIAS_DEFINITION = re.compile(rb"^([#!][A-Za-z_][\w$.\-]*)[ \t]*=", re.MULTILINE)
_ALIAS_USE = re.compile(rb"[#!][A-Za-z_][\w$.\-]*")
_LINE_START = re.compile(rb"^\S", re.MULTILINE)
_STEP = np.zeros(256, dtype=np.int8)
_STEP[list(b"([{<")] = 1
_STEP[list(b")]}>")] = -1


def check_mlir_text(text: str, where: str) -> None:
    """Raises StableHLOError (naming ``where``) when ``text`` breaks a limit above."""
    if len(text) > MAX_MLIR_CHARS:
        raise StableHLOError(
            f"{where} has {len(text):,} characters, more than the {MAX_MLIR_CHARS:,} MLIR "
            "text modelprov reads; pass a smaller module"
        )
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise StableHLOError(
            f"{where} is not UTF-8 text (a lone surrogate at character {error.start}); "
            "pass MLIR text as the MLIR tools write it"
        ) from None
    if _HIGH_ESCAPE.search(data) is not None:
        _check_escapes(data, where)
    try:
        depth = _nesting(_code(data))
    except _AliasCycle as cycle:
        raise StableHLOError(
            f"{where}: the alias {cycle.args[0]} refers to itself (through {cycle.args[1]} "
            "aliases); pass MLIR whose aliases are defined by what comes before"
        ) from None
    if depth > MAX_NESTING:
        raise StableHLOError(
            f"{where} nests {depth:,} levels deep (regions, locations, attributes or types, "
            f"counting through aliases), more than the {MAX_NESTING:,} MLIR's parser is "
            "given; pass a module that nests less"
        )


def nesting(text: str) -> int:
    """How deep ``text`` nests (brackets outside strings and comments, through aliases)."""
    return _nesting(_code(text.encode("utf-8", "surrogatepass")))


def _code(data: bytes) -> bytes:
    """``data`` with strings and comments blanked and ``->``, ``>=``, ``<=`` spaced out."""
    # Filled, not spaced: a line that starts with a string still starts at the margin.
    code = _STRING_OR_COMMENT.sub(lambda match: b"s" * len(match.group()), data)
    return _NOT_NESTING.sub(b"  ", code)


class _AliasCycle(Exception):
    """An alias whose definition reaches itself: (its name, how many aliases round)."""


def _check_escapes(data: bytes, where: str) -> None:
    """String literals whose escapes spell bytes that are not UTF-8 are refused."""
    for match in _STRING_WITH_ESCAPES.finditer(data):
        literal = match.group()
        if not literal.startswith(b'"') or b"\\" not in literal:
            continue
        spelled = _ESCAPE.sub(_unescape, literal[1:-1])
        try:
            spelled.decode("utf-8")
        except UnicodeDecodeError:
            line = data.count(b"\n", 0, match.start()) + 1
            shown = literal[:60].decode("utf-8", "replace")
            raise StableHLOError(
                f"{where}: line {line}: the string {shown} holds bytes that are not UTF-8 "
                "(its \\XX escapes); MLIR's Python bindings cannot read it"
            ) from None


def _unescape(match: re.Match[bytes]) -> bytes:
    escape = match.group(1)
    if len(escape) == 2:
        return bytes([int(escape, 16)])
    return _SIMPLE_ESCAPES.get(escape, escape)


def _nesting(code: bytes) -> int:
    """The deepest nesting of ``code`` (strings and comments blanked), through aliases."""
    steps = _STEP[np.frombuffer(code, dtype=np.uint8)]
    where = np.flatnonzero(steps)
    if where.size == 0:
        return 0
    level = np.cumsum(steps[where], dtype=np.int64)
    # The depth after each bracket: stray closers never lower what follows below zero.
    floor = np.minimum.accumulate(np.minimum(level, 0))
    depth = level - floor

    def depth_at(positions: np.ndarray) -> np.ndarray:
        """The depth just before each position (0 before the first bracket)."""
        index = np.searchsorted(where, positions, side="left") - 1
        return np.where(index >= 0, depth[np.maximum(index, 0)], 0)

    deepest = int(depth.max())
    definitions = list(_ALIAS_DEFINITION.finditer(code))
    if not definitions:
        return deepest
    starts = np.array([m.start() for m in definitions], dtype=np.int64)
    top_level = depth_at(starts) == 0
    definitions = [m for m, top in zip(definitions, top_level, strict=True) if top]
    if not definitions:
        return deepest
    starts = np.array([m.start() for m in definitions], dtype=np.int64)
    # A definition runs to the next line that starts at the left margin.
    margins = np.array([m.start() for m in _LINE_START.finditer(code)] + [len(code)])
    ends = margins[np.searchsorted(margins, starts, side="right")]
    names = {m.group(1): i for i, m in enumerate(definitions)}
    # The deepest bracket inside each definition, relative to its start (0 at top level).
    first = np.searchsorted(where, starts, side="left")
    last = np.searchsorted(where, ends, side="left")
    bounds = np.empty(2 * len(definitions), dtype=np.int64)
    bounds[0::2], bounds[1::2] = first, last
    padded = np.append(depth, 0)  # reduceat's indices must be < its length
    own = np.where(last > first, np.maximum.reduceat(padded, bounds)[0::2], 0)
    defined_at = set(starts.tolist())
    uses: list[tuple[int, int]] = []  # (alias used, position)
    for match in _ALIAS_USE.finditer(code):
        used = names.get(match.group())
        if used is not None and match.start() not in defined_at:
            uses.append((used, match.start()))
    if not uses:
        return max(deepest, int(own.max()))
    positions = np.array([use[1] for use in uses], dtype=np.int64)
    levels = depth_at(positions)
    owner = np.searchsorted(starts, positions, side="right") - 1
    inside = (owner >= 0) & (positions < ends[np.maximum(owner, 0)])
    edges: list[list[tuple[int, int]]] = [[] for _ in definitions]
    outer: list[tuple[int, int]] = []
    for (used, _), level_at, owned, is_inside in zip(
        uses, levels.tolist(), owner.tolist(), inside.tolist(), strict=True
    ):
        if is_inside:
            edges[owned].append((used, level_at))
        else:
            outer.append((used, level_at))
    alias_depth = _alias_depths(own.tolist(), edges, list(names))
    deepest = max(deepest, max(alias_depth))
    for used, level_at in outer:
        deepest = max(deepest, level_at + alias_depth[used])
    return deepest


def _alias_depths(
    own: list[int], edges: list[list[tuple[int, int]]], names: list[bytes]
) -> list[int]:
    """How deep each alias nests, resolved: its own brackets, or an alias it uses at some
    level plus that alias's depth (a longest path; a cycle raises ``_AliasCycle``)."""
    resolved: list[int | None] = [None] * len(own)
    on_stack = [False] * len(own)
    for root in range(len(own)):
        if resolved[root] is not None:
            continue
        stack = [(root, 0)]
        on_stack[root] = True
        while stack:
            alias, next_edge = stack[-1]
            if next_edge < len(edges[alias]):
                stack[-1] = (alias, next_edge + 1)
                used = edges[alias][next_edge][0]
                if resolved[used] is None:
                    if on_stack[used]:
                        round_trip = len(stack) - [a for a, _ in stack].index(used)
                        raise _AliasCycle(names[used].decode("utf-8", "replace"), round_trip)
                    on_stack[used] = True
                    stack.append((used, 0))
                continue
            stack.pop()
            on_stack[alias] = False
            through = (level + (resolved[used] or 0) for used, level in edges[alias])
            resolved[alias] = max(own[alias], *through, 0)
    return [value or 0 for value in resolved]
