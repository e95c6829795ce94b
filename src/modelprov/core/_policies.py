"""``Policies``: which merge policy each metadata key gets, and ``DEFAULT_POLICIES``.

Policies are values: pass a :class:`Policies` to every function that merges. There is no
module-level switch; the built-in policies themselves are registered once in
:mod:`modelprov.core._builtin_policies`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from modelprov import keys
from modelprov._base._gc import gc_paused
from modelprov.core._builtin_policies import (
    follow_output,
    from_output,
    join,
    scope_lists,
    stack_traces,
    union,
)
from modelprov.core._glob_index import GlobIndex, is_glob
from modelprov.core._policy_registry import MergeContext, Policy
from modelprov.errors import PolicyError

__all__ = ["DEFAULT_POLICIES", "Policies"]


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
