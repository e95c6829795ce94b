"""Merge policies: how the values of one metadata key combine when sources meet.

A policy is any callable ``policy(values, ctx) -> str | None``. ``values`` are the
non-empty values of one key on the sources of a node, in source order (the order the
sources first appear in the unoptimized export); ``ctx`` says which of them come from
sources whose outputs the node produces. Returning ``None`` drops the key.

Policies are values: pass a :class:`Policies` to every function that merges. There is no
module-level switch and no global registry.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import fnmatch
import json
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Protocol, runtime_checkable

from modelprov import _stack_trace, keys
from modelprov.errors import PolicyError

__all__ = [
    "DEFAULT_POLICIES",
    "MergeContext",
    "Policies",
    "Policy",
    "common_prefix",
    "drop",
    "error_on_conflict",
    "first",
    "from_output",
    "join",
    "max",
    "min",
    "stack_traces",
    "union",
    "value_scoped",
]


@dataclasses.dataclass(frozen=True)
class MergeContext:
    """What a policy may know about the merge it is asked to do.

    Attributes:
        key: the metadata key being merged.
        node: the name of the node (or value, or op) receiving the merged value.
        from_output: parallel to ``values``: True where the value comes from a source
            whose output the node produces (the tensor it computes), False where the
            source was absorbed (a fused producer, a folded constant, an eliminated node).
        source_ids: parallel to ``values``: the id of the source each value came from.
    """

    key: str
    node: str = ""
    from_output: tuple[bool, ...] = ()
    source_ids: tuple[str, ...] = ()


@runtime_checkable
class Policy(Protocol):
    """A merge policy: combines one key's values into one value, or ``None`` to drop."""

    def __call__(self, values: Sequence[str], ctx: MergeContext, /) -> str | None: ...


@dataclasses.dataclass(frozen=True)
class _Named:
    """A built-in policy: a named function, optionally value-scoped."""

    name: str
    function: Callable[[Sequence[str], MergeContext], str | None]
    value_scoped: bool = False

    def __call__(self, values: Sequence[str], ctx: MergeContext, /) -> str | None:
        return self.function(values, ctx)

    def __repr__(self) -> str:
        return f"modelprov.policy.{self.name}"


def _distinct(items: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for item in items:
        if item not in seen:
            seen.add(item)
            out.append(item)
    return out


def _union_elements(value: str) -> list[str]:
    """A value as a set: a JSON array of strings stands for its elements."""
    if value.startswith("[") and value.endswith("]"):
        try:
            parsed = json.loads(value)
        except ValueError:
            return [value]
        if isinstance(parsed, list) and all(isinstance(item, str) for item in parsed):
            return list(parsed)
    return [value]


def _union(values: Sequence[str], ctx: MergeContext) -> str | None:
    elements = sorted({element for value in values for element in _union_elements(value)})
    if not elements:
        return None
    if len(elements) == 1:
        return elements[0]
    return json.dumps(elements, ensure_ascii=False)


union = _Named("union", _union)
"""All distinct values, sorted; one value stays as it is, several become a JSON array.

Values that are JSON arrays of strings count as their elements, so merging merged values
equals merging everything at once. Deterministic, idempotent and order-independent.
"""


def join(sep: str = "\n") -> Policy:
    """Distinct pieces in source order joined by ``sep``; values are split on ``sep`` first."""

    def _join(values: Sequence[str], ctx: MergeContext) -> str | None:
        pieces = _distinct(piece for value in values for piece in value.split(sep) if piece)
        return sep.join(pieces) if pieces else None

    return _Named(f"join({sep!r})", _join)


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


common_prefix = _Named("common_prefix", _common_prefix)
"""The longest common stem, cut at whole segments.

Python or JSON lists of strings (``name_scopes``, ``class_hierarchy``) are cut element-wise
and written back as a list; values containing ``/`` (``namespace``) are cut at ``/``
segments; other values (module paths) at ``.`` segments. Associative and idempotent.
"""


stack_traces = _Named(
    "stack_traces",
    lambda values, ctx: _stack_trace.format_merged_traces(values) or None,
)
"""Every distinct stack trace, in source order, shared outer frames shown once.

Merged values are flattened first, so merging is associative and idempotent; the format
is in docs/metadata-format.md and parses back with modelprov's own parser.
"""


def _numbers(values: Sequence[str], ctx: MergeContext) -> list[tuple[float, str]]:
    parsed: list[tuple[float, str]] = []
    for value in values:
        try:
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


min = _Named("min", _min)
"""The smallest number, written exactly as the source wrote it."""

max = _Named("max", _max)
"""The largest number, written exactly as the source wrote it."""


def _from_output(values: Sequence[str], ctx: MergeContext) -> str | None:
    chosen = [value for value, is_output in zip(values, ctx.from_output, strict=False) if is_output]
    return chosen[-1] if chosen else None


from_output = _Named("from_output", _from_output, value_scoped=True)
"""The value of the source whose output the node produces (value-scoped data).

When several sources' outputs meet on one node (an eliminated Identity, a merged
duplicate), the most downstream one wins. Nodes producing no source's output drop the key.
"""

first = _Named("first", lambda values, ctx: values[0] if values else None)
"""The first value in source order."""

drop = _Named("drop", lambda values, ctx: None)
"""Drops the key from merged nodes."""


def _error_on_conflict(values: Sequence[str], ctx: MergeContext) -> str | None:
    distinct = _distinct(values)
    if len(distinct) > 1:
        shown = ", ".join(repr(value[:60]) for value in distinct[:4])
        raise PolicyError(
            f"key {ctx.key!r} on node {ctx.node!r} has {len(distinct)} different values "
            f"({shown}) and its policy is error_on_conflict; give the key another policy"
        )
    return distinct[0] if distinct else None


error_on_conflict = _Named("error_on_conflict", _error_on_conflict)
"""The one value all sources agree on; raises PolicyError when they differ."""


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

    return _Named(f"value_scoped({name})", _scoped, value_scoped=True)


def _specificity(pattern: str) -> int:
    return sum(1 for char in pattern if char not in "*?[]")


def _is_glob(key: str) -> bool:
    return any(char in key for char in "*?[")


class Policies(Mapping[str, Policy]):
    """An immutable mapping from a metadata key or glob (``custom.*``) to a policy.

    Lookup: an exact key beats a glob; among globs the most specific (most literal
    characters) wins. Keys that match nothing get ``default`` (``union``: lossless).
    ``a | b`` combines, ``b`` winning; ``b`` may be a Policies or a plain dict.
    """

    __slots__ = ("_default", "_entries")

    def __init__(
        self, mapping: Mapping[str, Policy] | None = None, *, default: Policy | None = None
    ) -> None:
        entries: dict[str, Policy] = {}
        for key, policy in (mapping or {}).items():
            if not isinstance(key, str) or not key:
                raise TypeError(f"Policies keys must be non-empty strings, got {key!r}")
            if not callable(policy):
                raise TypeError(
                    f"policy for key {key!r} must be callable (values, ctx) -> str | None, "
                    f"got {type(policy).__name__}"
                )
            entries[key] = policy
        self._entries = entries
        self._default: Policy = default if default is not None else union

    @property
    def default(self) -> Policy:
        """The policy for keys that match no entry."""
        return self._default

    def __getitem__(self, key: str) -> Policy:
        return self._entries[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __or__(self, other: Mapping[str, Policy]) -> Policies:
        if not isinstance(other, Mapping):
            return NotImplemented
        default = other.default if isinstance(other, Policies) else self._default
        return Policies({**self._entries, **other}, default=default)

    def __ror__(self, other: Mapping[str, Policy]) -> Policies:
        if not isinstance(other, Mapping):
            return NotImplemented
        return Policies({**other, **self._entries}, default=self._default)

    def __repr__(self) -> str:
        return f"Policies({self._entries!r})"

    def resolve(self, key: str) -> Policy:
        """The policy that applies to ``key``."""
        exact = self._entries.get(key)
        if exact is not None and not _is_glob(key):
            return exact
        best: tuple[int, int, Policy] | None = None
        for order, (pattern, policy) in enumerate(self._entries.items()):
            if _is_glob(pattern) and fnmatch.fnmatchcase(key, pattern):
                rank = (_specificity(pattern), order, policy)
                if best is None or rank[:2] > best[:2]:
                    best = rank
        return best[2] if best is not None else self._default

    def is_value_scoped(self, key: str) -> bool:
        """True when ``key`` follows tensors (its policy is ``from_output`` or declared so)."""
        return bool(getattr(self.resolve(key), "value_scoped", False))

    def merge(self, key: str, values: Sequence[str], ctx: MergeContext) -> str | None:
        """Applies the key's policy, turning any failure into a PolicyError that names it."""
        policy = self.resolve(key)
        try:
            result = policy(values, ctx)
        except PolicyError:
            raise
        except Exception as error:
            raise PolicyError(
                f"policy {policy!r} for key {key!r} failed on node {ctx.node!r}: "
                f"{type(error).__name__}: {error}"
            ) from error
        if result is not None and not isinstance(result, str):
            raise PolicyError(
                f"policy {policy!r} for key {key!r} on node {ctx.node!r} returned "
                f"{type(result).__name__}; a policy must return a str or None"
            )
        return result


DEFAULT_POLICIES = Policies(
    {
        keys.NAMESPACE_KEY: common_prefix,
        keys.CLASS_HIERARCHY_KEY: common_prefix,
        keys.NAME_SCOPES_KEY: common_prefix,
        keys.FX_NODE_KEY: join("\n"),
        keys.STACK_TRACE_KEY: stack_traces,
        keys.TORCH_EXPORT_KEY_PATTERN: union,
        keys.ONNXSCRIPT_RULE_NAME_KEY: join(", "),
        keys.ONNXSCRIPT_FOLDED_FROM_KEY: union,
        keys.ATEN_CALL_KEY: join("\n"),
        **dict.fromkeys(keys.CALIBRATION_KEY_PATTERNS, from_output),
    }
)
"""Policies for every key torch.onnx and onnxscript write, and the calibration keys.

The statistics :func:`modelprov.calibrate` writes (``custom.min``, ``custom.max``,
``custom.mean``, ``custom.std``, ``custom.pNN``, ``custom.histogram``,
``custom.outputN.*``) are value-scoped: a fused node's range is the range of the tensor it
produces. Every other key falls back to ``union`` (lossless, module-scoped).
"""
