"""The built-in merge policies, each defined and registered here once.

A policy is any callable ``policy(values, ctx) -> str | None`` (see
:mod:`modelprov.core._policy_registry`). Registering a built-in (``plain_policy``, or
``register_policy`` for one with options) makes it known to the policies-file reader,
``dump_policies`` and the command line; its name goes into ``__all__`` below, which is what
``modelprov.policy`` hands on. The order of registration is the order error messages list.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import json
import math
import re
from collections.abc import Iterable, Sequence

from modelprov.core import _stack_trace
from modelprov.core._policy_registry import (
    MergeContext,
    NamedPolicy,
    Policy,
    PolicyOption,
    Spec,
    plain_policy,
    register_policy,
)
from modelprov.errors import PolicyError

__all__ = [
    "common_prefix",
    "drop",
    "error_on_conflict",
    "first",
    "follow_output",
    "from_output",
    "join",
    "max",
    "min",
    "scope_lists",
    "stack_traces",
    "union",
    "value_scoped",
]


def _distinct(items: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for item in items:
        if item not in seen:
            seen.add(item)
            out.append(item)
    return out


def _union_elements(value: str) -> list[str]:
    """A value as a set of atoms: union's own several-values form stands for its elements.

    That form is a sorted JSON array of at least two distinct strings exactly as union
    writes it; any other text (``[]``, ``["a"]``, ``["b","a"]``) is one atom, kept as is.
    Elements in that form are expanded too, so the atoms of a merge are the atoms of its
    values.
    """
    atoms: list[str] = []
    pending = [value]
    while pending:
        item = pending.pop()
        elements = _union_form(item)
        if elements is None:
            atoms.append(item)
        else:
            pending.extend(elements)
    return atoms


def _union_form(value: str) -> list[str] | None:
    if not (value.startswith('["') and value.endswith('"]')):
        return None
    try:
        parsed = json.loads(value)
    except (ValueError, RecursionError):
        return None
    if (
        isinstance(parsed, list)
        and len(parsed) >= 2
        and all(isinstance(item, str) for item in parsed)
        and _dump_union(parsed) == value
        and sorted(set(parsed)) == parsed
    ):
        return parsed
    return None


def _dump_union(elements: list[str]) -> str:
    return json.dumps(elements, ensure_ascii=False)


def _union(values: Sequence[str], ctx: MergeContext) -> str | None:
    elements = sorted({element for value in values for element in _union_elements(value)})
    if not elements:
        return None
    if len(elements) == 1:
        return elements[0]
    return _dump_union(elements)

union = plain_policy("union", _union)
"""All distinct values, sorted; one value stays as it is, several become a JSON array.

Values that are JSON arrays of strings count as their elements, so merging merged values
equals merging everything at once. Deterministic, idempotent and order-independent.
"""


first = plain_policy("first", lambda values, ctx: values[0] if values else None)
"""The first value in source order."""

drop = plain_policy("drop", lambda values, ctx: None)
"""Drops the key from merged nodes."""


_NUMBER = re.compile(
    r"[+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|inf|infinity)", re.I
)
"""A decimal number as people and modelprov write it: no underscores, no spaces."""


def _numbers(values: Sequence[str], ctx: MergeContext) -> list[tuple[float, str]]:
    parsed: list[tuple[float, str]] = []
    for value in values:
        try:
            if not _NUMBER.fullmatch(value):
                raise ValueError(value)
            number = float(value)
        except ValueError:
            raise PolicyError(
                f"policy {ctx.key!r} on node {ctx.node!r}: value {value[:80]!r} is not a "
                "number; use a non-numeric policy such as union for this key"
            ) from None
        if math.isnan(number):
            raise PolicyError(f"policy {ctx.key!r} on node {ctx.node!r}: value is NaN")
        parsed.append((number, value))
    return parsed


def _min(values: Sequence[str], ctx: MergeContext) -> str | None:
    numbers = _numbers(values, ctx)
    return builtins.min(numbers, key=lambda item: item[0])[1] if numbers else None


def _max(values: Sequence[str], ctx: MergeContext) -> str | None:
    numbers = _numbers(values, ctx)
    return builtins.max(numbers, key=lambda item: item[0])[1] if numbers else None


min = plain_policy("min", _min)
"""The smallest number, written exactly as the source wrote it."""

max = plain_policy("max", _max)
"""The largest number, written exactly as the source wrote it."""


def _as_str_list(value: str) -> list[str] | None:
    if not (value.startswith("[") and value.endswith("]")):
        return None
    try:
        parsed = ast.literal_eval(value)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    if isinstance(parsed, list) and all(isinstance(item, str) for item in parsed):
        return parsed
    return None


_SEGMENT = re.compile(r"[^/]+|/")
_DOTTED = re.compile(r"[^.]+|\.")


def _common_prefix(values: Sequence[str], ctx: MergeContext) -> str | None:
    distinct = _distinct(values)
    if not distinct:
        return None
    if len(distinct) == 1:
        return distinct[0]
    lists = [_as_str_list(value) for value in distinct]
    if all(item is not None for item in lists):
        parsed = [item for item in lists if item is not None]
        prefix = _shared_prefix(parsed)
        return repr(prefix)
    separator = _SEGMENT if any("/" in value for value in distinct) else _DOTTED
    tokens = _shared_prefix([separator.findall(value) for value in distinct])
    while tokens and tokens[-1] in ("/", "."):
        tokens.pop()
    return "".join(tokens)


def _shared_prefix(sequences: Sequence[Sequence[str]]) -> list[str]:
    prefix: list[str] = []
    for items in zip(*sequences, strict=False):
        if any(item != items[0] for item in items):
            break
        prefix.append(items[0])
    return prefix


common_prefix = plain_policy("common_prefix", _common_prefix)
"""The longest common stem, cut at whole segments.

Python or JSON lists of strings (``name_scopes``, ``class_hierarchy``) are cut element-wise
and written back as a list; values containing ``/`` (``namespace``) are cut at ``/``
segments; other values (module paths) at ``.`` segments. Associative and idempotent.
"""


stack_traces = plain_policy(
    "stack_traces",
    lambda values, ctx: _stack_trace.format_merged_traces(values) or None,
)
"""Every distinct stack trace, in source order, shared outer frames shown once.

Merged values are flattened first, so merging is associative and idempotent; the format
is in docs/metadata-format.md and parses back with modelprov's own parser.
"""


def _from_output(values: Sequence[str], ctx: MergeContext) -> str | None:
    chosen = [value for value, is_output in zip(values, ctx.from_output, strict=False) if is_output]
    return chosen[-1] if chosen else None


from_output = plain_policy("from_output", _from_output, value_scoped=True)
"""The value of the source whose output the node produces (value-scoped data).

When several sources' outputs meet on one node (an eliminated Identity, a merged
duplicate), the most downstream one wins. Nodes producing no source's output drop the key.
"""


def _follow_output(values: Sequence[str], ctx: MergeContext) -> str | None:
    for value, is_output in zip(values, ctx.from_output, strict=False):
        if is_output:
            return value
    return values[-1] if values else None


follow_output = plain_policy("follow_output", _follow_output)
"""The value of the source producing the node's output; without one, of the last source.

For layout keys (``namespace``, ``name_scopes``, ``class_hierarchy``): a node that absorbed
shared code (a mask, a constant) stays where its output is computed, e.g. in its layer.
When several sources' outputs meet on the node, the first one (in export order) is the
operation that computed the tensor; the others are aliases of it that a step removed (an
eliminated Identity or no-op, a merged duplicate), so the node keeps the value onnxscript's
own optimizer keeps there (a node standing for other nodes' outputs that are no source's
output counts their sources as meeting there: ``Provenance.twins``). Without an output
source the last source (the most downstream) decides. The merged values remain in the
node's sources.
"""

_NOTE = "# "
"""Starts each further value's line in :data:`scope_lists`' merged form (a Python comment)."""


def _scope_atoms(value: str) -> list[str]:
    """A value as the values it stands for: scope_lists' merged form (a first line, then
    lines starting with ``# ``) is its lines, the marker removed; any other text is itself."""
    lines = value.split("\n")
    if len(lines) > 1 and all(line.startswith(_NOTE) for line in lines[1:]):
        return [lines[0], *(line[len(_NOTE) :] for line in lines[1:])]
    return [value]


def _scope_lists(values: Sequence[str], ctx: MergeContext) -> str | None:
    chosen = _follow_output(values, ctx)
    if chosen is None:
        return None
    primary, *_ = _scope_atoms(chosen)
    others = [
        atom
        for atom in _distinct(atom for value in values for atom in _scope_atoms(value))
        if atom != primary
    ]
    if "\n" in primary or any("\n" in atom for atom in others):
        return chosen  # a multi-line value has no line of its own: the layout value only
    return "\n".join([primary, *(_NOTE + atom for atom in others)])


scope_lists = plain_policy("scope_lists", _scope_lists)
"""``follow_output``'s value on the first line, then every other distinct value, in source
order, each on a line of its own after ``# `` (default for ``pkg.torch.onnx.name_scopes`` and
``class_hierarchy``).

Those keys hold Python list literals that readers parse with ``ast.literal_eval`` (a node's
module path, innermost last, then its own name): a Python comment is no part of the literal,
so such a reader still gets one list, the one of the module computing the node's output (as
``namespace`` says), while Netron and Model Explorer show every merged module. Merged values
count as their lines, so merging merged values loses nothing; a multi-line value other than
this form keeps ``follow_output``'s value alone.
"""


def _error_on_conflict(values: Sequence[str], ctx: MergeContext) -> str | None:
    distinct = _distinct(values)
    if len(distinct) > 1:
        shown = ", ".join(repr(value[:60]) for value in distinct[:4])
        raise PolicyError(
            f"key {ctx.key!r} on node {ctx.node!r} has {len(distinct)} different values "
            f"({shown}) and its policy is error_on_conflict; give the key another policy"
        )
    return distinct[0] if distinct else None


error_on_conflict = plain_policy("error_on_conflict", _error_on_conflict)
"""The one value all sources agree on; raises PolicyError when they differ."""


@register_policy(PolicyOption("sep", "text", example='"; "', default="\n"))
def join(sep: str = "\n") -> Policy:
    """Pieces in source order joined by ``sep``; values are split on ``sep`` first, and a
    value's pieces that an earlier value already had are left out.

    Empty pieces (blank lines for ``"\n"``) stay, attached to the piece after them, so a
    single value comes back unchanged and merging merged values loses nothing. Merging is
    associative for values that do not end in ``sep`` (a trailing separator glues to the
    piece before it, so ``"0"`` then ``"\n"`` reads back as the one piece ``"0\n\n"``).
    """
    if not sep:
        raise ValueError("join(sep): the separator must not be empty")

    def _join(values: Sequence[str], ctx: MergeContext) -> str | None:
        pieces: list[str] = []
        seen: set[str] = set()
        for value in values:
            own = _join_pieces(value, sep)
            pieces.extend(piece for piece in own if piece not in seen)
            seen.update(own)
        return sep.join(pieces) if pieces else None

    return NamedPolicy(f"join({sep!r})", _join, spec=("join", (("sep", sep),)))


def _join_pieces(value: str, sep: str) -> list[str]:
    """``value`` split on ``sep`` so that ``sep.join`` gives it back exactly: empty parts
    are glued to the next part (leading separators) or to the last one (trailing)."""
    parts = value.split(sep)
    pieces: list[str] = []
    empty = 0
    for part in parts:
        if not part:
            empty += 1
            continue
        pieces.append(sep * empty + part)
        empty = 0
    if not pieces:
        return [value] if value else []
    if empty:
        pieces[-1] += sep * empty
    return pieces


@register_policy(
    PolicyOption("of", "policy", example='{"policy": "value_scoped", "of": "max"}',
                 meaning="the policy it scopes"),
    once="a policy is value-scoped once",
)
def value_scoped(policy: Policy) -> Policy:
    """Declares ``policy`` value-scoped: its key follows tensors, not operations.

    The wrapped policy sees only the values of sources whose outputs the node produces,
    so ``value_scoped(max)`` is the largest value among the tensors the node computes.
    """
    name = getattr(policy, "name", getattr(policy, "__name__", repr(policy)))

    def _scoped(values: Sequence[str], ctx: MergeContext) -> str | None:
        pairs = [
            (value, source)
            for value, source, is_output in zip(
                values, ctx.source_ids or ("",) * len(values), ctx.from_output, strict=False
            )
            if is_output
        ]
        if not pairs:
            return None
        outputs = tuple(True for _ in pairs)
        sources = tuple(source for _, source in pairs)
        narrowed = dataclasses.replace(ctx, from_output=outputs, source_ids=sources)
        return policy([value for value, _ in pairs], narrowed)

    inner = policy.spec if isinstance(policy, NamedPolicy) else None
    spec: Spec | None = ("value_scoped", (("of", inner),)) if inner is not None else None
    return NamedPolicy(f"value_scoped({name})", _scoped, value_scoped=True, spec=spec)
