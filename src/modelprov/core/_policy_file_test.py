"""Policies files: every built-in by name, layering, round trips, and every bad file."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest

from modelprov.core import _policy as policy
from modelprov.core._policy import (
    DEFAULT_POLICIES,
    MergeContext,
    Policies,
    dump_policies,
    load_policies,
    parse_policies,
)
from modelprov.core._policy_file import MAX_POLICIES_BYTES
from modelprov.errors import PolicyError
from modelprov.keys import POLICIES_FORMAT


def _file(keys: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"format": POLICIES_FORMAT, "version": 1, "keys": keys, **fields}


def _merge(p: policy.Policy, values: list[str], outputs: tuple[bool, ...]) -> str | None:
    return p(values, MergeContext("k", "n", outputs, tuple(map(str, range(len(values))))))


BY_NAME = {
    "union": policy.union,
    "first": policy.first,
    "drop": policy.drop,
    "min": policy.min,
    "max": policy.max,
    "common_prefix": policy.common_prefix,
    "stack_traces": policy.stack_traces,
    "from_output": policy.from_output,
    "follow_output": policy.follow_output,
    "scope_lists": policy.scope_lists,
    "error_on_conflict": policy.error_on_conflict,
}


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_each_built_in_by_name_is_that_policy(name: str) -> None:
    parsed = parse_policies(_file({"k": name}))
    assert parsed["k"] is BY_NAME[name]
    assert parse_policies(_file({"k": {"policy": name}}))["k"] is BY_NAME[name]


def test_join_and_value_scoped_take_their_options() -> None:
    parsed = parse_policies(
        _file(
            {
                "note": {"policy": "join", "sep": "; "},
                "lines": "join",
                "range": {"policy": "value_scoped", "of": "max"},
                "notes": {"policy": "value_scoped", "of": {"policy": "join", "sep": "|"}},
            }
        )
    )
    assert _merge(parsed["note"], ["a", "b; a"], (True, True)) == "a; b"
    assert _merge(parsed["lines"], ["a", "b"], (True, True)) == "a\nb"
    assert parsed["range"] == policy.value_scoped(policy.max)
    assert parsed.is_value_scoped("range") and not parsed.is_value_scoped("note")
    assert _merge(parsed["range"], ["9", "2", "5"], (False, True, True)) == "5"
    assert _merge(parsed["notes"], ["x", "y", "z"], (True, False, True)) == "x|z"


def test_a_file_naming_one_key_changes_only_that_key() -> None:
    parsed = parse_policies(_file({"custom.max": "max"}))
    assert parsed["custom.max"] is policy.max
    assert parsed.resolve("custom.max") is policy.max
    assert DEFAULT_POLICIES.resolve("custom.max") is policy.from_output
    for key in DEFAULT_POLICIES:
        if key != "custom.max":
            assert parsed[key] == DEFAULT_POLICIES[key], key
    assert list(parsed) == list(DEFAULT_POLICIES)
    assert parsed.default is policy.union


def test_globs_resolve_like_policies_and_exact_default_keys_win() -> None:
    parsed = parse_policies(_file({"custom.*": "max", "pkg.mine.*": "drop"}))
    assert parsed.resolve("custom.accuracy") is policy.max
    assert parsed.resolve("custom.min") is policy.from_output  # exact default key beats a glob
    assert parsed.resolve("pkg.mine.note") is policy.drop
    assert parsed.resolve("other") is policy.union


def test_base_none_and_default() -> None:
    parsed = parse_policies(_file({"a": "first"}, base="none", default="drop"))
    assert list(parsed) == ["a"]
    assert parsed.resolve("namespace") is policy.drop
    layered = parse_policies(_file({}, default="first"))
    assert layered.resolve("unnamed.key") is policy.first
    assert layered.resolve("namespace") is policy.follow_output


def test_text_bytes_and_a_file_read_the_same(tmp_path: pathlib.Path) -> None:
    document = _file({"custom.note": {"policy": "join", "sep": "; "}}, comment="team rules")
    text = json.dumps(document)
    path = tmp_path / "policies.json"
    path.write_text(text, encoding="utf-8")
    expected = list(parse_policies(document).items())
    assert list(parse_policies(text).items()) == expected
    assert list(parse_policies(b"\xef\xbb\xbf" + text.encode()).items()) == expected
    assert list(load_policies(path).items()) == expected
    assert list(load_policies(str(path)).items()) == expected


ROUND_TRIPS = {
    "defaults": DEFAULT_POLICIES,
    "layered": DEFAULT_POLICIES
    | {
        "custom.max": policy.max,
        "pkg.*": policy.union,
        "custom.note": policy.join("; "),
        "custom.range": policy.value_scoped(policy.max),
        "debug.*": policy.drop,
        "custom.notes": policy.value_scoped(policy.join(", ")),
    },
    "replaced default key": DEFAULT_POLICIES | {"namespace": policy.common_prefix},
    "own": Policies({"a": policy.first, "b*": policy.min}, default=policy.error_on_conflict),
    "empty": Policies(),
    "reordered": Policies(dict(reversed(list(DEFAULT_POLICIES.items())))),
    "separators": Policies({"k": policy.join('"\\\n\u00e9'), "j": policy.join("\t")}),
}


@pytest.mark.parametrize("name", list(ROUND_TRIPS))
def test_dump_then_load_gives_the_same_policies(name: str, tmp_path: pathlib.Path) -> None:
    policies = ROUND_TRIPS[name]
    text = dump_policies(policies)
    path = tmp_path / "p.json"
    path.write_text(text, encoding="utf-8")
    loaded = load_policies(path)
    assert list(loaded.items()) == list(policies.items())
    assert loaded.default == policies.default
    assert dump_policies(loaded) == text


def test_dump_writes_only_what_differs_from_the_defaults() -> None:
    document = json.loads(dump_policies(DEFAULT_POLICIES | {"custom.max": policy.max}))
    assert document["format"] == POLICIES_FORMAT and document["version"] == 1
    assert document["base"] == "defaults"
    assert document["keys"] == {"custom.max": "max"}
    assert json.loads(dump_policies(Policies({"a": policy.first})))["base"] == "none"


def test_dump_refuses_a_python_callable_naming_its_key() -> None:
    def mine(values: Any, ctx: Any) -> str:
        return "x"

    with pytest.raises(PolicyError, match=r"key 'my\.key'.*not a built-in"):
        dump_policies(DEFAULT_POLICIES | {"my.key": mine})
    with pytest.raises(PolicyError, match="key 'scoped'"):
        dump_policies(Policies({"scoped": policy.value_scoped(mine)}))
    with pytest.raises(PolicyError, match="default policy"):
        dump_policies(Policies(default=mine))


def test_built_ins_compare_by_what_they_are() -> None:
    assert policy.join(", ") == policy.join(", ") and policy.join(", ") != policy.join(";")
    assert hash(policy.join(", ")) == hash(policy.join(", "))
    assert policy.value_scoped(policy.max) == policy.value_scoped(policy.max)
    assert policy.value_scoped(policy.max) != policy.value_scoped(policy.min)
    assert policy.max != policy.min and policy.union == policy.union

    def mine(values: Any, ctx: Any) -> None:
        return None

    wrapped = policy.value_scoped(mine)
    assert wrapped == wrapped and wrapped != policy.value_scoped(mine)


BAD: dict[str, tuple[Any, str]] = {
    "not json": (b"{nope", "not valid JSON"),
    "not utf-8": (b'{"format": "\xff"}', "not UTF-8"),
    "array": (b"[1, 2]", "is a JSON object"),
    "nested deeply": (b"[" * 100_000, "nested too deeply"),
    "NaN": ('{"format": NaN}', "NaN is not JSON"),
    "duplicate key": (
        '{"format": "modelprov.policies", "version": 1, "keys": {"a": "max", "a": "min"}}',
        "'a' is given twice",
    ),
    "no format": ({"version": 1, "keys": {}}, '"format" is None'),
    "wrong format": ({"format": "modelprov.sources", "version": 1}, "not 'modelprov.policies'"),
    "no version": ({"format": POLICIES_FORMAT}, '"version" is None'),
    "version text": ({"format": POLICIES_FORMAT, "version": "1"}, "give the number 1"),
    "version bool": ({"format": POLICIES_FORMAT, "version": True}, "give the number 1"),
    "newer version": (_file({}, version=2), "version 2 .*newer modelprov"),
    "unknown field": (_file({}, polices={}), "unknown field 'polices'"),
    "bad base": (_file({}, base="all"), "base 'all'"),
    "comment not text": (_file({}, comment=3), '"comment" must be a string'),
    "keys a list": (_file([]), '"keys" is a JSON object'),  # type: ignore[arg-type]
    "unknown policy": (_file({"custom.max": "maximum"}), "key 'custom.max': unknown policy"),
    "policy a number": (_file({"k": 3}), "key 'k': a policy is a name"),
    "object without policy": (_file({"k": {"sep": ";"}}), 'needs "policy": NAME'),
    "unknown option": (_file({"k": {"policy": "max", "of": "min"}}), "takes no options"),
    "join unknown option": (
        _file({"k": {"policy": "join", "separator": ";"}}),
        "no option 'separator'; its options are sep",
    ),
    "sep a number": (_file({"k": {"policy": "join", "sep": 1}}), "non-empty string"),
    "sep empty": (_file({"k": {"policy": "join", "sep": ""}}), "non-empty string"),
    "value_scoped alone": (_file({"k": "value_scoped"}), 'needs "of"'),
    "value_scoped twice": (
        _file({"k": {"policy": "value_scoped", "of": {"policy": "value_scoped", "of": "max"}}}),
        "value-scoped once",
    ),
    "value_scoped of unknown": (
        _file({"k": {"policy": "value_scoped", "of": "biggest"}}),
        "key 'k': unknown policy 'biggest'",
    ),
    "reserved key": (_file({"modelprov.sources": "union"}), "modelprov's own keys"),
    "empty key": (_file({"": "union"}), "give a metadata key"),
    "bad default": (_file({}, default="eval"), "default: unknown policy 'eval'"),
}


@pytest.mark.parametrize("name", list(BAD))
def test_a_bad_file_is_a_policy_error_naming_the_file(name: str, tmp_path: pathlib.Path) -> None:
    content, message = BAD[name]
    path = tmp_path / "team-policies.json"
    if isinstance(content, dict):
        content = json.dumps(content)
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(PolicyError, match=message) as raised:
        load_policies(path)
    assert str(raised.value).startswith(f"{path}: ")
    assert "\n" not in str(raised.value)


def test_a_huge_file_is_refused_before_it_is_parsed(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "huge.json"
    keys = {f"custom.k{index}": "max" for index in range(MAX_POLICIES_BYTES // 20)}
    path.write_text(json.dumps(_file(keys)), encoding="utf-8")
    assert path.stat().st_size > MAX_POLICIES_BYTES
    with pytest.raises(PolicyError, match=f"{path}: .*at most {MAX_POLICIES_BYTES} bytes"):
        load_policies(path)


def test_a_missing_file_names_itself(tmp_path: pathlib.Path) -> None:
    with pytest.raises(PolicyError, match=r"none\.json: cannot read the policies file"):
        load_policies(tmp_path / "none.json")
    with pytest.raises(PolicyError, match="cannot read"):
        load_policies(tmp_path)


def test_text_is_named_by_where() -> None:
    with pytest.raises(PolicyError, match=r"^--policies: unknown field"):
        parse_policies(_file({}, extra=1), where="--policies")


def test_a_decoded_document_with_python_values_is_refused() -> None:
    with pytest.raises(PolicyError, match="not a function"):
        parse_policies(_file({"k": lambda values, ctx: None}))
    with pytest.raises(PolicyError, match="not a null"):
        parse_policies(_file({"k": None}))
