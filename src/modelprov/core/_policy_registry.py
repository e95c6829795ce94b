"""What a merge policy is, and the one registry of built-in policies.

A built-in policy is registered once, where it is defined (``core/_builtin_policies.py``),
with its name and its options: the policies-file reader, ``dump_policies`` and the command
line's ``policies`` all read this registry, so a new built-in is one definition in one
module.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Literal, Protocol, TypeAlias, TypeVar, runtime_checkable

from modelprov._base._registry import Registry

__all__ = [
    "BUILTIN_POLICIES",
    "BuiltinPolicy",
    "MergeContext",
    "NamedPolicy",
    "Policy",
    "PolicyOption",
    "PolicyRegistry",
    "Spec",
    "plain_policy",
    "register_policy",
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



Spec: TypeAlias = "tuple[str, tuple[tuple[str, str | Spec], ...]]"
"""A built-in policy as data: its name and its options (``("join", (("sep", ", "),))``)."""


@dataclasses.dataclass(frozen=True, eq=False)
class NamedPolicy:
    """A built-in policy: a named function, optionally value-scoped.

    ``spec`` says which built-in it is (what a policies file names); two built-ins with the
    same spec are equal. It is None when the policy wraps a user callable: such a policy is
    equal only to itself and cannot be written to a file.
    """

    name: str
    function: Callable[[Sequence[str], MergeContext], str | None]
    value_scoped: bool = False
    spec: Spec | None = None

    def __call__(self, values: Sequence[str], ctx: MergeContext, /) -> str | None:
        return self.function(values, ctx)

    def __repr__(self) -> str:
        return f"modelprov.policy.{self.name}"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, NamedPolicy):
            return NotImplemented
        if self.spec is None or other.spec is None:
            return self is other
        return self.spec == other.spec

    def __hash__(self) -> int:
        return hash(self.spec) if self.spec is not None else id(self)


@dataclasses.dataclass(frozen=True)
class PolicyOption:
    """One option of a built-in policy, as a policies file gives it.

    Attributes:
        name: the field of the policy's object form (``"sep"``).
        kind: ``"text"`` (a non-empty string) or ``"policy"`` (another policy, nested).
        example: shown in the error for a bad or missing value.
        default: the value when the file leaves the option out; None: it must be given.
        meaning: what the option is, for the error when a required one is missing.
    """

    name: str
    kind: Literal["text", "policy"]
    example: str
    default: str | None = None
    meaning: str = ""


@dataclasses.dataclass(frozen=True)
class BuiltinPolicy:
    """A registered built-in policy: its name, how to make it, and its options.

    ``make`` is called with one argument per option, in their order; ``once`` (for a
    policy that wraps another) says why it cannot wrap itself: the reader refuses that.
    """

    name: str
    make: Callable[..., Policy]
    options: tuple[PolicyOption, ...] = ()
    once: str | None = None


class PolicyRegistry(Registry[BuiltinPolicy]):
    """The built-in policies by name, in the order they were registered."""

    def __init__(self) -> None:
        super().__init__("built-in policy")


BUILTIN_POLICIES = PolicyRegistry()
"""The one registry of built-in policies (filled by ``core/_builtin_policies.py``)."""


def plain_policy(
    name: str,
    function: Callable[[Sequence[str], MergeContext], str | None],
    *,
    value_scoped: bool = False,
    registry: PolicyRegistry = BUILTIN_POLICIES,
) -> NamedPolicy:
    """A built-in policy without options, registered: its spec is its name."""
    policy = NamedPolicy(name, function, value_scoped, (name, ()))
    registry.register(BuiltinPolicy(name, lambda: policy))
    return policy


_Factory = TypeVar("_Factory", bound=Callable[..., Policy])


def register_policy(
    *options: PolicyOption, once: str | None = None, registry: PolicyRegistry = BUILTIN_POLICIES
) -> Callable[[_Factory], _Factory]:
    """Registers the decorated function (named as the policy) as a built-in with options."""

    def decorate(make: _Factory) -> _Factory:
        registry.register(BuiltinPolicy(make.__name__, make, options, once))
        return make

    return decorate
