"""A new built-in policy is one registration: the policies-file reader, ``dump_policies``
and the command line's ``policies`` all know it from the registry alone."""

from __future__ import annotations

import json
import pathlib
from collections.abc import Iterator, Sequence

import pytest

from modelprov.cli import main
from modelprov.core._policy import DEFAULT_POLICIES, dump_policies, parse_policies
from modelprov.core._policy_registry import (
    BUILTIN_POLICIES,
    MergeContext,
    PolicyOption,
    plain_policy,
    register_policy,
)
from modelprov.errors import PolicyError
from modelprov.policy import Policies


def _longest(values: Sequence[str], ctx: MergeContext) -> str | None:
    return max(values, key=len) if values else None


@pytest.fixture
def longest() -> Iterator[object]:
    """``longest`` (no options) and ``longest_after(mark)`` registered for one test."""
    policy = plain_policy("longest", _longest)

    @register_policy(PolicyOption("mark", "text", example='">"'))
    def longest_after(mark: str) -> object:
        from modelprov.core._policy_registry import NamedPolicy

        def merge(values: Sequence[str], ctx: MergeContext) -> str | None:
            found = _longest(values, ctx)
            return None if found is None else mark + found

        return NamedPolicy("longest_after", merge, spec=("longest_after", (("mark", mark),)))

    try:
        yield policy
    finally:
        BUILTIN_POLICIES.unregister("longest")
        BUILTIN_POLICIES.unregister("longest_after")


def _document(keys: dict[str, object]) -> dict[str, object]:
    return {"format": "modelprov.policies", "version": 1, "keys": keys}


def test_reader_and_dump_know_a_registered_policy(longest: object) -> None:
    policies = parse_policies(
        _document({"custom.a": "longest", "custom.b": {"policy": "longest_after", "mark": "> "}})
    )
    assert policies["custom.a"] is longest
    assert policies.merge("custom.b", ["ab", "abc"], MergeContext("custom.b")) == "> abc"
    written = json.loads(dump_policies(policies))
    assert written["keys"] == {
        "custom.a": "longest",
        "custom.b": {"policy": "longest_after", "mark": "> "},
    }
    assert parse_policies(dump_policies(policies)) == policies


def test_reader_checks_a_registered_policys_options(longest: object) -> None:
    with pytest.raises(PolicyError, match=r"longest_after needs \"mark\""):
        parse_policies(_document({"custom.b": {"policy": "longest_after"}}))
    with pytest.raises(PolicyError, match=r"policy 'longest' has no option 'x'"):
        parse_policies(_document({"custom.a": {"policy": "longest", "x": "1"}}))
    with pytest.raises(PolicyError, match=r"use one of union, .*, longest, longest_after"):
        parse_policies(_document({"custom.a": "shortest"}))


def test_command_line_shows_a_registered_policy(
    longest: object, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "policies.json"
    path.write_text(json.dumps(_document({"custom.*": "longest"})), encoding="utf-8")
    assert main(["policies", str(path), "--key", "custom.x", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["custom.x"]["policy"] == "longest"
    assert shown["custom.x"]["entry"] == "custom.*"


def test_unregistered_name_is_unknown_again() -> None:
    assert "longest" not in BUILTIN_POLICIES
    with pytest.raises(PolicyError, match="unknown policy 'longest'"):
        parse_policies(_document({"custom.a": "longest"}))


def test_a_name_is_registered_once() -> None:
    with pytest.raises(ValueError, match="'union' is registered already"):
        plain_policy("union", _longest)


def test_every_builtin_in_the_defaults_is_registered() -> None:
    registered = BUILTIN_POLICIES.names()
    for policy in [*DEFAULT_POLICIES.values(), DEFAULT_POLICIES.default]:
        spec = getattr(policy, "spec", None)
        assert spec is not None and spec[0] in registered
    assert isinstance(DEFAULT_POLICIES, Policies)


def test_the_registry_and_the_public_face_list_the_same_built_ins() -> None:
    """The one place: what is registered in core/_builtin_policies.py is what that module
    and ``modelprov.policy`` hand on, each by its registered name."""
    import modelprov.policy
    from modelprov.core import _builtin_policies

    registered = list(BUILTIN_POLICIES.names())
    assert sorted(registered) == sorted(_builtin_policies.__all__)
    assert set(registered) <= set(modelprov.policy.__all__)
    for name in registered:
        found = getattr(modelprov.policy, name)
        assert getattr(found, "spec", (name,))[0] == name or getattr(found, "__name__", "") == name
