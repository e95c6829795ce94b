"""Merge policies: how the values of one metadata key combine when sources meet.

A policy is any callable ``policy(values, ctx) -> str | None``. ``values`` are the
non-empty values of one key on the sources of a node, in source order (the order the
sources first appear in the unoptimized export); ``ctx`` says which of them come from
sources whose outputs the node produces. Returning ``None`` drops the key.

Policies are values: pass a :class:`Policies` to every function that merges. There is no
module-level switch and no global registry. Built-in policies can also be declared in a JSON
file (:func:`load_policies`, :func:`dump_policies`; the command line's ``--policies``).
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import json
import math
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol, TypeAlias, runtime_checkable

from modelprov._gc import gc_paused
from modelprov.core import _stack_trace, keys
from modelprov.core._glob_index import GlobIndex, is_glob
from modelprov.errors import PolicyError

__all__ = [
    "DEFAULT_POLICIES",
    "MergeContext",
    "Policies",
    "Policy",
    "common_prefix",
    "drop",
    "dump_policies",
    "error_on_conflict",
    "first",
    "follow_output",
    "from_output",
    "join",
    "load_policies",
    "max",
    "min",
    "parse_policies",
    "scope_lists",
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


_Spec: TypeAlias = "tuple[str, tuple[tuple[str, str | _Spec], ...]]"
"""A built-in policy as data: its name and its options (``("join", (("sep", ", "),))``)."""


@dataclasses.dataclass(frozen=True, eq=False)
class _Named:
    """A built-in policy: a named function, optionally value-scoped.

    ``spec`` says which built-in it is (what a policies file names); two built-ins with the
    same spec are equal. It is None when the policy wraps a user callable: such a policy is
    equal only to itself and cannot be written to a file.
    """

    name: str
    function: Callable[[Sequence[str], MergeContext], str | None]
    value_scoped: bool = False
    spec: _Spec | None = None

    def __call__(self, values: Sequence[str], ctx: MergeContext, /) -> str | None:
        return self.function(values, ctx)

    def __repr__(self) -> str:
        return f"modelprov.core.policy.{self.name}"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _Named):
            return NotImplemented
        if self.spec is None or other.spec is None:
            return self is other
        return self.spec == other.spec

    def __hash__(self) -> int:
        return hash(self.spec) if self.spec is not None else id(self)


def _builtin(
    name: str,
    function: Callable[[Sequence[str], MergeContext], str | None],
    *,
    value_scoped: bool = False,
) -> _Named:
    """A built-in policy without options: its spec is its name."""
    return _Named(name, function, value_scoped, (name, ()))


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


union = _builtin("union", _union)
"""All distinct values, sorted; one value stays as it is, several become a JSON array.

Values that are JSON arrays of strings count as their elements, so merging merged values
equals merging everything at once. Deterministic, idempotent and order-independent.
"""


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

    return _Named(f"join({sep!r})", _join, spec=("join", (("sep", sep),)))


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


common_prefix = _builtin("common_prefix", _common_prefix)
"""The longest common stem, cut at whole segments.

Python or JSON lists of strings (``name_scopes``, ``class_hierarchy``) are cut element-wise
and written back as a list; values containing ``/`` (``namespace``) are cut at ``/``
segments; other values (module paths) at ``.`` segments. Associative and idempotent.
"""


stack_traces = _builtin(
    "stack_traces",
    lambda values, ctx: _stack_trace.format_merged_traces(values) or None,
)
"""Every distinct stack trace, in source order, shared outer frames shown once.

Merged values are flattened first, so merging is associative and idempotent; the format
is in docs/metadata-format.md and parses back with modelprov's own parser.
"""


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


min = _builtin("min", _min)
"""The smallest number, written exactly as the source wrote it."""

max = _builtin("max", _max)
"""The largest number, written exactly as the source wrote it."""


def _from_output(values: Sequence[str], ctx: MergeContext) -> str | None:
    chosen = [value for value, is_output in zip(values, ctx.from_output, strict=False) if is_output]
    return chosen[-1] if chosen else None


from_output = _builtin("from_output", _from_output, value_scoped=True)
"""The value of the source whose output the node produces (value-scoped data).

When several sources' outputs meet on one node (an eliminated Identity, a merged
duplicate), the most downstream one wins. Nodes producing no source's output drop the key.
"""


def _follow_output(values: Sequence[str], ctx: MergeContext) -> str | None:
    for value, is_output in zip(values, ctx.from_output, strict=False):
        if is_output:
            return value
    return values[-1] if values else None


follow_output = _builtin("follow_output", _follow_output)
"""The value of the source producing the node's output; without one, of the last source.

For layout keys (``namespace``, ``name_scopes``, ``class_hierarchy``): a node that absorbed
shared code (a mask, a constant) stays where its output is computed, e.g. in its layer.
When several sources' outputs meet on the node, the first one (in export order) is the
operation that computed the tensor; the others are aliases of it that a step removed (an
eliminated Identity or no-op, a merged duplicate), so the node keeps the value onnxscript's
own optimizer keeps there. Without an output source the last source (the most downstream)
decides. The merged values remain in the node's sources.
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


scope_lists = _builtin("scope_lists", _scope_lists)
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

first = _builtin("first", lambda values, ctx: values[0] if values else None)
"""The first value in source order."""

drop = _builtin("drop", lambda values, ctx: None)
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


error_on_conflict = _builtin("error_on_conflict", _error_on_conflict)
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

    inner = policy.spec if isinstance(policy, _Named) else None
    spec: _Spec | None = ("value_scoped", (("of", inner),)) if inner is not None else None
    return _Named(f"value_scoped({name})", _scoped, value_scoped=True, spec=spec)


class Policies(Mapping[str, Policy]):
    """An immutable mapping from a metadata key or glob (``custom.*``) to a policy.

    Lookup: an exact key beats a glob; among globs the most specific (most literal
    characters) wins. Keys that match nothing get ``default`` (``union``: lossless).
    ``a | b`` combines, ``b`` winning; ``b`` may be a Policies or a plain dict.
    """

    __slots__ = ("_default", "_entries", "_globs", "_resolved")

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
        self._resolved: dict[str, Policy] = {}  # immutable: each key resolves once
        self._globs: GlobIndex | None = None  # built on the first lookup of a glob

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
        found = self._resolved.get(key)
        if found is None:
            entry = self.deciding_entry(key)
            found = self._entries[entry] if entry is not None else self._default
            self._resolved[key] = found
        return found

    def deciding_entry(self, key: str) -> str | None:
        """The entry (``key`` itself or the glob) whose policy applies to ``key``; None
        when the default does."""
        if key in self._entries and not is_glob(key):
            return key
        if self._globs is None:
            with gc_paused():  # one object per glob, none of them garbage
                self._globs = GlobIndex(self._entries)
        return self._globs.best(key)

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
        keys.NAMESPACE_KEY: follow_output,
        keys.CLASS_HIERARCHY_KEY: scope_lists,
        keys.NAME_SCOPES_KEY: scope_lists,
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


def load_policies(path: str | os.PathLike[str]) -> Policies:
    """The policies a JSON policies file declares (docs/metadata-format.md, "Merge policies
    file"): built-in policies by name, layered over :data:`DEFAULT_POLICIES` unless the file
    says ``"base": "none"``. Never evaluates code; a bad file raises PolicyError naming the
    file, the key and what to do."""
    from modelprov.core import _policy_file

    return _policy_file.load_policies(path)


def parse_policies(
    document: str | bytes | Mapping[str, Any], *, where: str = "<policies>"
) -> Policies:
    """:func:`load_policies` for a document already in memory (JSON text, bytes or the
    decoded object); ``where`` names it in error messages."""
    from modelprov.core import _policy_file

    return _policy_file.parse_policies(document, where=where)


def dump_policies(policies: Policies, *, full: bool = False) -> str:
    """``policies`` as a policies file (JSON text) that :func:`load_policies` reads back
    equal; only built-in policies can be written (PolicyError names a key that is not).
    With ``full`` every entry is written (``"base": "none"``), defaults included."""
    from modelprov.core import _policy_file

    return _policy_file.dump_policies(policies, full=full)
