"""Merge policies as a JSON file: parsing (never evaluated as code) and writing.

The format (``format`` ``modelprov.policies``, version 1) is documented in
docs/metadata-format.md. A file names built-in policies only; its ``keys`` are layered over
:data:`~modelprov.core._policy.DEFAULT_POLICIES` unless it says ``"base": "none"``. Every
problem is a :class:`~modelprov.errors.PolicyError` naming the file, the key and what to do.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from typing import Any

from modelprov._base._gc import gc_paused
from modelprov._base._input_files import read_regular
from modelprov._base._versioned import header_problem
from modelprov.core import _builtin_policies  # noqa: F401  (registers the built-ins)
from modelprov.core._policies import DEFAULT_POLICIES, Policies
from modelprov.core._policy_registry import BUILTIN_POLICIES, Policy, Spec
from modelprov.errors import PolicyError
from modelprov.keys import POLICIES_FORMAT, RESERVED_PREFIX

__all__ = [
    "MAX_POLICIES_BYTES",
    "POLICIES_VERSION",
    "dump_policies",
    "load_policies",
    "parse_policies",
    "policy_json",
]

POLICIES_VERSION = 1
"""The version of the policies file format this module reads and writes."""

MAX_POLICIES_BYTES = 1 << 20
"""Largest policies file read (1 MiB): a policies file names keys, it holds no data."""

_BASES = {"defaults": DEFAULT_POLICIES, "none": Policies()}
"""What a file's ``keys`` are layered over (``base``)."""

_FIELDS = ("format", "version", "base", "default", "keys", "comment")

def _names() -> str:
    """The registered built-ins, as error messages list them."""
    return ", ".join(BUILTIN_POLICIES.names())


def load_policies(path: str | os.PathLike[str]) -> Policies:
    """The policies of the JSON file at ``path`` (at most :data:`MAX_POLICIES_BYTES`)."""
    where = os.fspath(path)
    try:
        data = read_regular(where, MAX_POLICIES_BYTES)
    except OSError as error:
        raise PolicyError(
            f"{where}: cannot read the policies file ({error.strerror or error}); "
            "give an existing JSON file"
        ) from None
    if len(data) > MAX_POLICIES_BYTES:
        raise PolicyError(
            f"{where}: a policies file may hold at most {MAX_POLICIES_BYTES} bytes; this one "
            "is larger (it should name keys and policies only)"
        )
    with gc_paused():  # a large file makes one object per key, none of them garbage
        return parse_policies(data, where=where)


def parse_policies(
    document: str | bytes | Mapping[str, Any], *, where: str = "<policies>"
) -> Policies:
    """The policies of a policies document: JSON text or bytes, or the decoded object.

    ``where`` names the document in error messages (a file name).
    """
    if isinstance(document, str | bytes):
        document = _decode(document, where)
    if not isinstance(document, Mapping):
        raise PolicyError(
            f"{where}: a policies file is a JSON object "
            f'{{"format": "{POLICIES_FORMAT}", "version": {POLICIES_VERSION}, "keys": {{...}}}}, '
            f"not a {_json_type(document)}"
        )
    unknown = [field for field in document if field not in _FIELDS]
    if unknown:
        raise PolicyError(
            f"{where}: unknown field {unknown[0]!r}; a policies file has the fields "
            f"{', '.join(_FIELDS)}"
        )
    _check_header(document, where)
    if not isinstance(document.get("comment", ""), str):
        raise PolicyError(f'{where}: "comment" must be a string')
    base_name = document.get("base", "defaults")
    if base_name not in _BASES:
        raise PolicyError(
            f"{where}: base {base_name!r} is not 'defaults' (layer the keys over "
            "DEFAULT_POLICIES, the default) or 'none' (only the keys of this file)"
        )
    base = _BASES[base_name]
    default = base.default
    if "default" in document:
        default = _parse_policy(document["default"], f"{where}: default")
    keys = document.get("keys", {})
    if not isinstance(keys, Mapping):
        raise PolicyError(
            f'{where}: "keys" is a JSON object {{key or glob: policy}}, not a {_json_type(keys)}'
        )
    entries: dict[str, Policy] = {}
    for key, spec in keys.items():
        if not isinstance(key, str) or not key or key.startswith(RESERVED_PREFIX):
            raise PolicyError(
                f"{where}: key {key!r}: give a metadata key or glob (e.g. custom.max, pkg.*); "
                f"modelprov's own keys ({RESERVED_PREFIX}*) are not merged by policies"
            )
        if not key.isascii() and not _is_text(key):
            raise PolicyError(
                f"{where}: key {key!r} holds a lone surrogate (a \\uD800-\\uDFFF escape "
                "without its pair), which no metadata key can hold; write the character itself"
            )
        builtin = BUILTIN_POLICIES.get(spec) if isinstance(spec, str) else None
        if builtin is not None and not builtin.options:  # a plain name: no options to read
            entries[key] = builtin.make()
        else:
            entries[key] = _parse_policy(spec, f"{where}: key {key!r}")
    return Policies({**base, **entries}, default=default)


def _is_text(text: str) -> bool:
    """True when ``text`` encodes as UTF-8 (no lone surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def dump_policies(policies: Policies, *, full: bool = False) -> str:
    """``policies`` as a policies file (JSON text) that :func:`parse_policies` reads back equal.

    Policies made from DEFAULT_POLICIES (``DEFAULT_POLICIES | {...}``) are written as the
    keys that differ from it unless ``full``; others in full (``"base": "none"``). Raises
    PolicyError naming the key of a policy that is not a built-in (a Python callable cannot
    be written).
    """
    changed = {
        key: value
        for key, value in policies.items()
        if key not in DEFAULT_POLICIES or DEFAULT_POLICIES[key] != value
    }
    layered = {**DEFAULT_POLICIES, **changed}
    if not full and list(layered.items()) == list(policies.items()):
        base, written = "defaults", changed
    else:
        base, written = "none", dict(policies)
    document = {
        "format": POLICIES_FORMAT,
        "version": POLICIES_VERSION,
        "base": base,
        "default": policy_json(policies.default, "the default policy"),
        "keys": {key: policy_json(value, f"key {key!r}") for key, value in written.items()},
    }
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def _decode(document: str | bytes, where: str) -> Any:
    if isinstance(document, bytes):
        try:
            document = document.decode("utf-8-sig")
        except UnicodeDecodeError as error:
            raise PolicyError(
                f"{where}: not UTF-8 text (byte {error.start}); save the policies file as UTF-8"
            ) from None
    try:
        return json.loads(
            document, object_pairs_hook=_unique_object(where), parse_constant=_no_constant(where)
        )
    except RecursionError:
        raise PolicyError(f"{where}: JSON nested too deeply for a policies file") from None
    except ValueError as error:
        if isinstance(error, PolicyError):
            raise
        raise PolicyError(f"{where}: not valid JSON ({error}); fix the file") from None


def _unique_object(where: str) -> Callable[[list[tuple[str, Any]]], dict[str, Any]]:
    def build(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for key, value in pairs:
            if key in result:
                raise PolicyError(
                    f"{where}: key {key!r} is given twice in one object; keep one of them"
                )
            result[key] = value
        return result

    return build


def _no_constant(where: str) -> Callable[[str], Any]:
    def refuse(name: str) -> Any:
        raise PolicyError(f"{where}: {name} is not JSON; a policies file holds no numbers")

    return refuse


def _check_header(document: Mapping[str, Any], where: str) -> None:
    problem = header_problem(document, format=POLICIES_FORMAT, versions=(POLICIES_VERSION,))
    if problem is None:
        return
    if problem.field != "version":
        raise PolicyError(
            f'{where}: "format" is {problem.found!r}, not {POLICIES_FORMAT!r}; '
            f'start the file with {{"format": "{POLICIES_FORMAT}", "version": {POLICIES_VERSION}'
        )
    version = problem.found
    if type(version) is not int:
        raise PolicyError(f'{where}: "version" is {version!r}; give the number {POLICIES_VERSION}')
    if version != POLICIES_VERSION:
        newer = " (written by a newer modelprov?)" if version > POLICIES_VERSION else ""
        raise PolicyError(
            f"{where}: version {version} of the policies format is not supported{newer}; "
            f"this modelprov reads version {POLICIES_VERSION}"
        )


def _parse_policy(spec: Any, where: str, *, inside: str | None = None) -> Policy:
    """One policy: a built-in's name, or an object ``{"policy": name, option: value}``."""
    options: dict[str, Any] = {}
    if isinstance(spec, str):
        name = spec
    elif isinstance(spec, Mapping):
        given = spec.get("policy")
        if not isinstance(given, str):
            raise PolicyError(
                f'{where}: a policy object needs "policy": NAME (one of {_names()}), '
                f"got {_json_type(given) if given is not None else 'none'}"
            )
        name = given
        options = {field: value for field, value in spec.items() if field != "policy"}
    else:
        raise PolicyError(
            f"{where}: a policy is a name (one of {_names()}) or an object "
            f'{{"policy": NAME, ...}}, not a {_json_type(spec)}'
        )
    builtin = BUILTIN_POLICIES.get(name)
    if builtin is None:
        raise PolicyError(f"{where}: unknown policy {name!r}; use one of {_names()}")
    allowed = [option.name for option in builtin.options]
    for field in options:
        if field not in allowed:
            takes = f"its options are {', '.join(allowed)}" if allowed else "it takes no options"
            raise PolicyError(f"{where}: policy {name!r} has no option {field!r}; {takes}")
    if builtin.once is not None and inside == name:
        raise PolicyError(
            f"{where}: {name} inside {inside}: {builtin.once}; remove the inner {name}"
        )
    arguments: list[Any] = []
    for option in builtin.options:
        value = options.get(option.name, option.default)
        if value is None and option.name not in options:
            raise PolicyError(
                f'{where}: {name} needs "{option.name}": {option.meaning}, e.g. {option.example}'
            )
        if option.kind == "policy":
            arguments.append(_parse_policy(value, where, inside=name))
        elif not isinstance(value, str) or not value or not _is_text(value):
            raise PolicyError(
                f'{where}: {name}\'s "{option.name}" must be a non-empty string '
                f"(e.g. {option.example}), not {value!r}"[:300]
            )
        else:
            arguments.append(value)
    return builtin.make(*arguments)


def policy_json(value: Policy, what: str) -> str | dict[str, Any]:
    """One policy as a policies file writes it (a name, or an object with its options);
    PolicyError (naming ``what``) for a policy that is not a built-in."""
    spec = getattr(value, "spec", None)
    if spec is None:
        raise PolicyError(
            f"{what}: {value!r} is not a built-in policy and cannot be written to a policies "
            "file; give the key a built-in policy (modelprov.policy.*) or keep it in Python"
        )
    return _spec_json(spec)


def _spec_json(spec: Spec) -> str | dict[str, Any]:
    name, options = spec
    if not options:
        return name
    return {
        "policy": name,
        **{
            field: value if isinstance(value, str) else _spec_json(value)
            for field, value in options
        },
    }


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    kinds = {Mapping: "object", list: "array", str: "string", int: "number", float: "number"}
    return next(
        (kind for cls, kind in kinds.items() if isinstance(value, cls)), type(value).__name__
    )
