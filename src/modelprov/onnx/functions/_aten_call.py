"""One ATen call: its target, schema and bound arguments (the ``pkg.modelprov.aten_call`` record).

modelprov.export writes the record per FX node (:mod:`modelprov.onnx.export._aten_record`); for a
plain torch.onnx export the call is parsed from ``pkg.torch.onnx.fx_node`` and bound to the
op's schema from torch. Format: docs/metadata-format.md.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Mapping
from typing import Any

import onnx_ir as ir

from modelprov._base._versioned import header_problem
from modelprov._torch._compat import (
    FX_REFERENCE,
    parse_fx_node_text,
    parse_schema,
    tensor_argument_kind,
)
from modelprov._torch._compat import schema_by_name as schema_of
from modelprov.errors import MetadataError
from modelprov.keys import ATEN_CALL_KEY, ATEN_SCHEMAS_FORMAT, ATEN_SCHEMAS_KEY, FX_NODE_KEY
from modelprov.onnx.functions._schema_text import read_arguments
from modelprov.onnx.functions._wrap import function_name

__all__ = [
    "ATEN_CALL_KEY",
    "ATEN_CALL_VERSION",
    "AtenArgument",
    "AtenCall",
    "call_of",
    "dump_schemas",
    "function_name",
    "load_schemas",
    "schema_of",
]

ATEN_CALL_VERSION = 2
"""Version 2 leaves the schema (and argument names and types) to the model's schema pool
(``pkg.modelprov.aten_schemas``); version 1 records, which carry them, are still read."""
ATEN_SCHEMAS_VERSION = 1


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
        """The versioned JSON record (key ``pkg.modelprov.aten_call``, version 2): the target
        and the argument values in schema order; the schema goes to the model's pool
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
        """Parses a record (version 1 or 2); None when it is not one this version reads
        (wrong version or shape), so the caller falls back to the FX node's text. A version-2
        record takes its schema from ``schemas`` (the model's pool), else from torch."""
        try:
            document = json.loads(text)
        except (ValueError, TypeError, RecursionError):
            return None
        if header_problem(document, format=None, versions=(1, ATEN_CALL_VERSION)) is not None:
            return None
        version, args = document.get("version"), document.get("args", [])
        target, schema = document.get("target"), document.get("schema", "")
        if not isinstance(target, str) or not isinstance(schema, str):
            return None
        if not isinstance(args, list):
            return None
        if version == ATEN_CALL_VERSION:
            return _from_values(target, args, schemas or {})
        arguments = [_argument(entry) for entry in args]
        if any(argument is None for argument in arguments):
            return None
        return cls(target, schema, tuple(a for a in arguments if a is not None))


def _from_values(target: str, values: list[Any], schemas: Mapping[str, str]) -> AtenCall | None:
    """A version-2 record's call: names and types from the target's schema."""
    text = schemas.get(target)
    if text is None:
        known = schema_of(target)
        if known is None:
            return None
        text = str(known)
    parameters = _parameters(text)
    if parameters is None or len(values) != len(parameters):
        return None
    arguments: list[AtenArgument] = []
    for (name, kind, is_tensor, is_list), raw in zip(parameters, values, strict=True):
        if not is_tensor:
            arguments.append(AtenArgument(name, kind, False, (), raw))
            continue
        entry = _argument({"name": name, "type": kind, "tensor": raw})
        if entry is None or (is_list and not isinstance(raw, list)):
            return None
        arguments.append(dataclasses.replace(entry, is_list=is_list))
    return AtenCall(target, text, tuple(arguments))


@functools.lru_cache(maxsize=1024)
def _parameters(text: str) -> tuple[tuple[str, str, bool, bool], ...] | None:
    """(name, type, is a tensor argument, is a list) per argument of a schema's text: read
    without torch when the text allows (:mod:`._schema_text`), else by torch's parser."""
    read = read_arguments(text)
    if read is not None:
        return tuple((a.name, a.type, a.is_tensor, a.is_list) for a in read)
    schema = parse_schema(text)
    if schema is None:
        return None
    return tuple(
        (argument.name, str(argument.type), *tensor_argument_kind(argument.type))
        for argument in schema.arguments
    )


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
    except (ValueError, RecursionError) as error:
        raise MetadataError(f"{where}: {ATEN_SCHEMAS_KEY!r} is not valid JSON: {error}") from None
    problem = header_problem(
        document, format=ATEN_SCHEMAS_FORMAT, versions=(ATEN_SCHEMAS_VERSION,)
    )
    if problem is not None and problem.field != "version":
        raise MetadataError(f"{where}: {ATEN_SCHEMAS_KEY!r} is not a modelprov schema pool")
    if problem is not None:
        raise MetadataError(
            f"{where}: {ATEN_SCHEMAS_KEY!r} version {problem.found!r} is not "
            f"supported (supports {ATEN_SCHEMAS_VERSION}); upgrade modelprov"
        )
    schemas = document.get("schemas")
    if not isinstance(schemas, dict) or not all(
        isinstance(key, str) and isinstance(value, str) for key, value in schemas.items()
    ):
        raise MetadataError(f"{where}: {ATEN_SCHEMAS_KEY!r} must map targets to schema text")
    return schemas


def _argument(entry: object) -> AtenArgument | None:
    """One argument of a record, or None when it is malformed."""
    if not isinstance(entry, dict):
        return None
    name, kind = entry.get("name"), entry.get("type")
    if not isinstance(name, str) or not isinstance(kind, str):
        return None
    if "tensor" not in entry:
        return AtenArgument(name, kind, False, (), entry.get("value"))
    raw = entry["tensor"]
    items = raw if isinstance(raw, list) else [raw]
    tensors: list[tuple[str, str]] = []
    for item in items:
        if item is None:
            tensors.append(("", ""))
        elif isinstance(item, dict) and isinstance(item.get("fx"), str):
            onnx_name = item.get("onnx") or ""
            if not isinstance(onnx_name, str):
                return None
            tensors.append((item["fx"], onnx_name))
        else:
            return None
    return AtenArgument(name, kind, True, tuple(tensors), is_list=isinstance(raw, list))


def to_json_value(value: Any) -> Any:
    """A non-tensor argument value as JSON: numbers, bools, strings, lists; others as str."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else str(value)
    if isinstance(value, (list, tuple)):
        return [to_json_value(item) for item in value]
    return str(value)


@dataclasses.dataclass(frozen=True)
class _Parameter:
    """One schema argument, read from torch once per schema."""

    name: str
    type: str
    kwarg_only: bool
    has_default: bool
    default: Any
    is_tensor: bool
    is_list: bool


@dataclasses.dataclass(frozen=True)
class _Signature:
    """What binding needs of a ``torch.FunctionSchema``, in plain Python values."""

    target: str
    text: str
    parameters: tuple[_Parameter, ...]

    @classmethod
    def of(cls, schema: Any) -> _Signature:
        parameters: list[_Parameter] = []
        for argument in schema.arguments:
            has_default = bool(argument.has_default_value())
            is_tensor, is_list = tensor_argument_kind(argument.type)
            parameters.append(
                _Parameter(
                    argument.name,
                    str(argument.type),
                    bool(argument.kwarg_only),
                    has_default,
                    argument.default_value if has_default else None,
                    is_tensor,
                    is_list,
                )
            )
        name = schema.name if "::" in schema.name else f"aten::{schema.name}"
        target = f"{name}.{schema.overload_name or 'default'}"
        return cls(target, str(schema), tuple(parameters))


@functools.lru_cache(maxsize=1024)
def _signature_of(target: str) -> _Signature | None:
    schema = schema_of(target)
    return None if schema is None else _Signature.of(schema)


def bind(
    schema: Any,
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any],
    tensor_of: Any,
) -> AtenCall:
    """Binds call arguments to ``schema`` (a ``torch.FunctionSchema``); ``tensor_of(arg)``
    gives (fx, onnx) for a tensor."""
    return _bind(_Signature.of(schema), args, kwargs, tensor_of)


def _bind(
    signature: _Signature, args: tuple[Any, ...], kwargs: Mapping[str, Any], tensor_of: Any
) -> AtenCall:
    arguments: list[AtenArgument] = []
    count = len(args)
    for position, parameter in enumerate(signature.parameters):
        if position < count and not parameter.kwarg_only:
            value = args[position]
        elif parameter.name in kwargs:
            value = kwargs[parameter.name]
        elif parameter.has_default:
            value = parameter.default
        else:
            value = None
        if parameter.is_tensor:
            is_list = parameter.is_list
            items = list(value) if is_list and isinstance(value, (list, tuple)) else [value]
            tensors = tuple(("", "") if item is None else tensor_of(item) for item in items)
            if not is_list and value is None:
                tensors = (("", ""),)
            arguments.append(
                AtenArgument(parameter.name, parameter.type, True, tensors, is_list=is_list)
            )
        else:
            arguments.append(
                AtenArgument(parameter.name, parameter.type, False, (), to_json_value(value))
            )
    return AtenCall(signature.target, signature.text, tuple(arguments))


def call_from_fx_text(text: str, value_names: Mapping[str, str]) -> AtenCall | None:
    """Parses ``pkg.torch.onnx.fx_node`` text; ``value_names`` maps FX names to ONNX names."""
    parsed = parse_fx_node_text(text)
    if parsed is None:
        return None
    target, args, kwargs = parsed

    def tensor_of(item: Any) -> tuple[str, str]:
        if isinstance(item, str) and item.startswith(FX_REFERENCE):
            name = item[len(FX_REFERENCE) :]
            return name, value_names.get(name, "")
        return "", ""

    try:
        signature = _signature_of(target)
        return None if signature is None else _bind(signature, args, kwargs, tensor_of)
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
