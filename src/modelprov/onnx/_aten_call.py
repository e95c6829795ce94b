"""One ATen call: its target, schema and bound arguments (the ``pkg.modelprov.aten_call`` record).

modelprov.export writes the record per FX node (:mod:`modelprov.onnx._aten_record`); for a
plain torch.onnx export the call is parsed from ``pkg.torch.onnx.fx_node`` and bound to the
op's schema from torch. Format: docs/metadata-format.md.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import json
import re
from collections.abc import Mapping
from typing import Any

import onnx_ir as ir
import torch

from modelprov._sources import FX_NODE_KEY
from modelprov.errors import MetadataError

__all__ = [
    "ATEN_CALL_KEY",
    "ATEN_CALL_VERSION",
    "ATEN_SCHEMAS_KEY",
    "AtenArgument",
    "AtenCall",
    "call_of",
    "dump_schemas",
    "function_name",
    "load_schemas",
    "schema_of",
]

ATEN_CALL_KEY = "pkg.modelprov.aten_call"
ATEN_CALL_VERSION = 2
"""Version 2 leaves the schema (and argument names and types) to the model's schema pool;
version 1 records, which carry them, are still read."""
ATEN_SCHEMAS_KEY = "pkg.modelprov.aten_schemas"
ATEN_SCHEMAS_FORMAT = "modelprov.aten_schemas"
ATEN_SCHEMAS_VERSION = 1

_IDENTIFIER = re.compile(r"\W")
_CALL = re.compile(
    r"call_function\[target=(?P<target>[^\]]+)\]\(args = (?P<args>.*), kwargs = "
    r"(?P<kwargs>\{.*\})\)\s*$",
    re.DOTALL,
)
_TOKEN = re.compile(
    r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|%[\w.]+|\d[\d.]*(?:[eE][+-]?\d+)?|[A-Za-z_][\w.]*|.",
    re.DOTALL,
)
_LITERALS = {"True", "False", "None"}
_REF = "\x00fx:"


@dataclasses.dataclass(frozen=True)
class AtenArgument:
    """One schema argument with the call's value.

    ``tensors`` holds, for tensor arguments, one ``(fx_name, onnx_value_name)`` pair per
    tensor (a ``Tensor[]`` has several; ``None`` elements are ``("", "")``); ``value`` holds
    the JSON value of a non-tensor argument (``None`` when absent).
    """

    name: str
    type: str
    is_tensor: bool
    tensors: tuple[tuple[str, str], ...] = ()
    value: Any = None
    is_list: bool = False


@dataclasses.dataclass(frozen=True)
class AtenCall:
    """An ATen op call: ``target`` like ``aten::addmm.default``, its schema and arguments."""

    target: str
    schema: str
    arguments: tuple[AtenArgument, ...]

    @property
    def tensor_arguments(self) -> list[AtenArgument]:
        """The tensor arguments in schema order."""
        return [argument for argument in self.arguments if argument.is_tensor]

    def to_json(self) -> str:
        """The versioned JSON record (key ``pkg.modelprov.aten_call``, version 2): target
        and argument values in schema order; the schema itself goes to the model's pool
        (:func:`dump_schemas`)."""
        args: list[Any] = []
        for argument in self.arguments:
            if argument.is_tensor:
                pairs = [{"fx": fx, "onnx": name} if fx else None for fx, name in argument.tensors]
                args.append(pairs if argument.is_list else (pairs[0] if pairs else None))
            else:
                args.append(argument.value)
        document = {"version": ATEN_CALL_VERSION, "target": self.target, "args": args}
        return json.dumps(document, ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str, schemas: Mapping[str, str] | None = None) -> AtenCall | None:
        """Parses a record (version 1 or 2); None when it is not one this version reads.

        A version-2 record takes its schema from ``schemas`` (the model's pool, see
        :func:`load_schemas`), else from torch.
        """
        try:
            document = json.loads(text)
        except ValueError:
            return None
        if not isinstance(document, dict):
            return None
        try:
            if document.get("version") == 1:
                return cls._from_v1(document)
            if document.get("version") == ATEN_CALL_VERSION:
                return cls._from_v2(document, schemas or {})
        except (KeyError, TypeError, AttributeError, RuntimeError):
            return None
        return None

    @classmethod
    def _from_v1(cls, document: dict[str, Any]) -> AtenCall:
        arguments: list[AtenArgument] = []
        for entry in document.get("args", []):
            if "tensor" in entry:
                raw = entry["tensor"]
                items = raw if isinstance(raw, list) else [raw]
                arguments.append(
                    AtenArgument(
                        entry["name"],
                        entry["type"],
                        True,
                        _tensor_pairs(items),
                        is_list=isinstance(raw, list),
                    )
                )
            else:
                arguments.append(
                    AtenArgument(entry["name"], entry["type"], False, (), entry["value"])
                )
        return cls(str(document["target"]), str(document.get("schema", "")), tuple(arguments))

    @classmethod
    def _from_v2(cls, document: dict[str, Any], schemas: Mapping[str, str]) -> AtenCall | None:
        target = str(document["target"])
        text = schemas.get(target)
        if text is None:
            known = schema_of(target)
            if known is None:
                return None
            text = str(known)
        schema = _parsed_schema(text)
        values = document["args"]
        if not isinstance(values, list) or len(values) != len(schema.arguments):
            return None
        arguments: list[AtenArgument] = []
        for argument, raw in zip(schema.arguments, values, strict=True):
            is_tensor, is_list = _is_tensor_type(argument.type)
            type_text = str(argument.type)
            if is_tensor:
                items = raw if is_list and isinstance(raw, list) else [raw]
                pairs = _tensor_pairs(items)
                arguments.append(
                    AtenArgument(argument.name, type_text, True, pairs, is_list=is_list)
                )
            else:
                arguments.append(AtenArgument(argument.name, type_text, False, (), raw))
        return cls(target, text, tuple(arguments))


def _tensor_pairs(items: list[Any]) -> tuple[tuple[str, str], ...]:
    return tuple(
        (str(item["fx"]), str(item.get("onnx") or "")) if item else ("", "") for item in items
    )


@functools.lru_cache(maxsize=1024)
def _parsed_schema(text: str) -> torch.FunctionSchema:
    return torch._C.parse_schema(text)


def dump_schemas(schemas: Mapping[str, str]) -> str:
    """The model-level ``pkg.modelprov.aten_schemas`` value: each target's schema once."""
    document = {
        "format": ATEN_SCHEMAS_FORMAT,
        "version": ATEN_SCHEMAS_VERSION,
        "schemas": dict(sorted(schemas.items())),
    }
    return json.dumps(document, ensure_ascii=False, separators=(",", ":"))


def load_schemas(text: str | None, *, where: str = "model") -> dict[str, str]:
    """Parses :func:`dump_schemas`' form ({} when absent); MetadataError when malformed."""
    if not text:
        return {}
    try:
        document = json.loads(text)
    except ValueError as error:
        raise MetadataError(f"{where}: {ATEN_SCHEMAS_KEY!r} is not valid JSON: {error}") from None
    if not isinstance(document, dict) or document.get("format") != ATEN_SCHEMAS_FORMAT:
        raise MetadataError(f"{where}: {ATEN_SCHEMAS_KEY!r} is not a modelprov schema pool")
    if document.get("version") != ATEN_SCHEMAS_VERSION:
        raise MetadataError(
            f"{where}: {ATEN_SCHEMAS_KEY!r} version {document.get('version')!r} is not "
            f"supported (supports {ATEN_SCHEMAS_VERSION}); upgrade modelprov"
        )
    schemas = document.get("schemas")
    if not isinstance(schemas, dict) or not all(
        isinstance(key, str) and isinstance(value, str) for key, value in schemas.items()
    ):
        raise MetadataError(f"{where}: {ATEN_SCHEMAS_KEY!r} must map targets to schema text")
    return schemas


def function_name(target: str) -> str:
    """The function name of an ATen target: ``aten::addmm.default`` -> ``aten_addmm_default``."""
    name = _IDENTIFIER.sub("_", target.replace("::", "_"))
    return name if name and not name[0].isdigit() else f"_{name}"


def schema_of(target: str) -> torch.FunctionSchema | None:
    """The schema of ``aten::op.overload`` (or ``aten.op.overload``) from torch; None if unknown."""
    namespace, _, rest = target.replace("::", ".").partition(".")
    op_name, _, overload = rest.rpartition(".")
    if not op_name:
        op_name, overload = overload, "default"
    try:
        packet = getattr(getattr(torch.ops, namespace), op_name)
        return getattr(packet, overload)._schema  # type: ignore[no-any-return]
    except (AttributeError, RuntimeError):
        return None


def _is_tensor_type(kind: Any) -> tuple[bool, bool]:
    """(is a tensor argument, is a list of tensors) for a schema argument type."""
    if isinstance(kind, torch.OptionalType):
        kind = kind.getElementType()
    if isinstance(kind, torch.ListType):
        element = kind.getElementType()
        if isinstance(element, torch.OptionalType):
            element = element.getElementType()
        return isinstance(element, torch.TensorType), True
    return isinstance(kind, torch.TensorType), False


def to_json_value(value: Any) -> Any:
    """A non-tensor argument value as JSON: numbers, bools, strings, lists; others as str."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else str(value)
    if isinstance(value, (list, tuple)):
        return [to_json_value(item) for item in value]
    return str(value)


def bind(
    schema: torch.FunctionSchema,
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any],
    tensor_of: Any,
) -> AtenCall:
    """Binds call arguments to ``schema``; ``tensor_of(arg)`` gives (fx, onnx) for a tensor."""
    arguments: list[AtenArgument] = []
    positional = list(args)
    for position, argument in enumerate(schema.arguments):
        if position < len(positional) and not argument.kwarg_only:
            value = positional[position]
        elif argument.name in kwargs:
            value = kwargs[argument.name]
        elif argument.has_default_value():
            value = argument.default_value
        else:
            value = None
        is_tensor, is_list = _is_tensor_type(argument.type)
        type_text = str(argument.type)
        if is_tensor:
            items = list(value) if is_list and isinstance(value, (list, tuple)) else [value]
            tensors = tuple(("", "") if item is None else tensor_of(item) for item in items)
            if not is_list and value is None:
                tensors = (("", ""),)
            arguments.append(AtenArgument(argument.name, type_text, True, tensors, is_list=is_list))
        else:
            arguments.append(
                AtenArgument(argument.name, type_text, False, (), to_json_value(value))
            )
    name = schema.name if "::" in schema.name else f"aten::{schema.name}"
    target = f"{name}.{schema.overload_name or 'default'}"
    return AtenCall(target, str(schema), tuple(arguments))


def _literal(text: str) -> Any:
    """A Python literal of an FX argument repr; ``%name`` becomes a reference marker."""
    pieces: list[str] = []
    for token in _TOKEN.findall(text):
        if token.startswith("%"):
            pieces.append(repr(_REF + token[1:]))
        elif token[0].isalpha() or token[0] == "_":
            pieces.append(token if token in _LITERALS else repr(token))
        else:
            pieces.append(token)
    return ast.literal_eval("".join(pieces))


def _parse_fx_text(text: str) -> tuple[str, tuple[Any, ...], dict[str, Any]] | None:
    line = next((line for line in text.splitlines() if "call_function[" in line), "")
    match = _CALL.search(line)
    if match is None:
        return None
    try:
        args = _literal(match["args"])
        kwargs = _literal(match["kwargs"])
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    if not isinstance(args, tuple) or not isinstance(kwargs, dict):
        return None
    target = match["target"].removeprefix("torch.ops.")
    return target, args, {str(key): value for key, value in kwargs.items()}


def call_from_fx_text(text: str, value_names: Mapping[str, str]) -> AtenCall | None:
    """Parses ``pkg.torch.onnx.fx_node`` text; ``value_names`` maps FX names to ONNX names."""
    parsed = _parse_fx_text(text)
    if parsed is None:
        return None
    target, args, kwargs = parsed
    schema = schema_of(target)
    if schema is None:
        return None

    def tensor_of(item: Any) -> tuple[str, str]:
        if isinstance(item, str) and item.startswith(_REF):
            name = item[len(_REF) :]
            return name, value_names.get(name, "")
        return "", ""

    try:
        return bind(schema, args, kwargs, tensor_of)
    except (TypeError, ValueError):
        return None


def call_of(
    metadata: Mapping[str, str],
    value_names: Mapping[str, str],
    schemas: Mapping[str, str] | None = None,
) -> AtenCall | None:
    """The ATen call of one source: its record (schemas from the model's pool), else
    parsed from its FX node text."""
    record = metadata.get(ATEN_CALL_KEY)
    if record:
        call = AtenCall.from_json(record, schemas)
        if call is not None:
            return call
    text = metadata.get(FX_NODE_KEY, "")
    return call_from_fx_text(text, value_names) if text else None


def onnx_attribute(argument: AtenArgument) -> ir.Attr | None:
    """The call node attribute of a non-tensor argument (None when the value is absent).

    ATen ``int``/``SymInt``/``bool`` -> INT, ``float`` -> FLOAT, ``str`` and enums (dtype,
    device, layout, memory format) -> STRING, ``int[]``/``bool[]`` -> INTS, ``float[]`` ->
    FLOATS, ``Scalar`` -> INT or FLOAT by the call's value; anything else -> STRING (JSON).
    """
    value = argument.value
    if value is None:
        return None
    name = argument.name
    if isinstance(value, bool):
        return ir.AttrInt64(name, int(value))
    if isinstance(value, int):
        if "float" in argument.type.lower():
            return ir.AttrFloat32(name, float(value))
        return ir.AttrInt64(name, value)
    if isinstance(value, float):
        return ir.AttrFloat32(name, value)
    if isinstance(value, list) and all(isinstance(item, (int, bool)) for item in value):
        if "float" in argument.type.lower() and value:
            return ir.AttrFloat32s(name, [float(item) for item in value])
        return ir.AttrInt64s(name, [int(item) for item in value])
    if isinstance(value, list) and all(isinstance(item, (int, float)) for item in value):
        return ir.AttrFloat32s(name, [float(item) for item in value])
    if isinstance(value, str):
        return ir.AttrString(name, value)
    return ir.AttrString(name, json.dumps(value, separators=(",", ":")))
