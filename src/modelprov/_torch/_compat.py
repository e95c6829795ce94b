"""torch internals modelprov relies on, fenced in one place with a version guard.

Used, and why there is no public way:

- ``torch._ops.OpOverload`` / ``OpOverloadPacket``: the type of an FX node's ATen target
  (``torch.ops.aten.addmm.default``); torch exports no public alias.
- ``torch._ops.HigherOrderOperator``: the type of ``torch.ops.higher_order.cond`` /
  ``while_loop`` (StableHLO lowers them itself); no public alias either.
- ``OpOverload._schema``: the op's ``torch.FunctionSchema`` (argument names, types,
  defaults), needed to bind an FX call to its ATen signature.
- ``torch.OptionalType`` / ``ListType`` / ``TensorType``: TorchScript's type classes that a
  schema argument's ``.type`` is an instance of.
- The text torch.onnx writes under ``pkg.torch.onnx.fx_node``: ``torch.fx.Node.format_node``
  output (``%addmm : [num_users=1] = call_function[target=torch.ops.aten.addmm.default](args =
  (%b, %x, %w), kwargs = {})``), a format torch does not document or version.

Every helper imports torch when called, so importing this module stays torch-free. When one
of these internals is missing, :class:`~modelprov.errors.MissingDependencyError` names the
torch version and the range modelprov was tested with (:data:`TESTED_TORCH`).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from typing import Any, TypeVar

from modelprov.errors import MissingDependencyError

__all__ = [
    "TESTED_TORCH",
    "flatten_inputs",
    "fx_node_text_name",
    "fx_node_text_target",
    "is_higher_order_op",
    "is_op_overload",
    "is_op_target",
    "op_schema",
    "parse_fx_node_text",
    "parse_schema",
    "schema_by_name",
    "tensor_argument_kind",
]

TESTED_TORCH = ("2.13",)
"""torch minor versions this module was checked against (tests assert the installed one is)."""

_T = TypeVar("_T")


def _guarded(what: str, read: Callable[[], _T]) -> _T:
    """Runs ``read``; a missing torch internal becomes an error naming the versions."""
    try:
        return read()
    except AttributeError as error:
        import torch

        raise MissingDependencyError(
            f"torch {torch.__version__} lacks {what} ({error}); modelprov was tested with torch "
            f"{', '.join(TESTED_TORCH)}: install torch==2.13.0 or a modelprov that supports it"
        ) from error


def is_op_overload(target: object) -> bool:
    """True for an ATen op overload such as ``torch.ops.aten.addmm.default``."""
    import torch

    return isinstance(target, _guarded("torch._ops.OpOverload", lambda: torch._ops.OpOverload))


def is_higher_order_op(target: object) -> bool:
    """True for a higher-order operator such as ``torch.ops.higher_order.cond``."""
    import torch

    kind = _guarded("torch._ops.HigherOrderOperator", lambda: torch._ops.HigherOrderOperator)
    return isinstance(target, kind)


def is_op_target(target: object) -> bool:
    """True for an op overload or an op packet (``torch.ops.aten.addmm``)."""
    import torch

    kinds = _guarded(
        "torch._ops.OpOverload(Packet)",
        lambda: (torch._ops.OpOverload, torch._ops.OpOverloadPacket),
    )
    return isinstance(target, kinds)


def op_schema(target: Any) -> Any:
    """The ``torch.FunctionSchema`` of an op overload."""
    return _guarded("OpOverload._schema", lambda: target._schema)


def schema_by_name(target: str) -> Any:
    """The schema of ``aten::op.overload`` (or ``aten.op.overload``); None if torch has none."""
    import torch

    namespace, _, rest = target.replace("::", ".").partition(".")
    op_name, _, overload = rest.rpartition(".")
    if not op_name:
        op_name, overload = overload, "default"
    try:
        packet = getattr(getattr(torch.ops, namespace), op_name)
        overload_op = getattr(packet, overload)
    except (AttributeError, RuntimeError):
        return None
    return op_schema(overload_op)


def parse_schema(text: str) -> Any:
    """The ``torch.FunctionSchema`` written as ``text`` (torch's own parser); None when
    torch cannot read it."""
    import torch

    parse = _guarded("torch._C.parse_schema", lambda: torch._C.parse_schema)
    try:
        return parse(text)
    except RuntimeError:
        return None


def tensor_argument_kind(kind: Any) -> tuple[bool, bool]:
    """(is a tensor argument, is a list of tensors) for a schema argument's type."""
    import torch

    optional, listed, tensor = _guarded(
        "torch.OptionalType/ListType/TensorType",
        lambda: (torch.OptionalType, torch.ListType, torch.TensorType),
    )
    if isinstance(kind, optional):
        kind = kind.getElementType()
    if isinstance(kind, listed):
        element = kind.getElementType()
        if isinstance(element, optional):
            element = element.getElementType()
        return isinstance(element, tensor), True
    return isinstance(kind, tensor), False


# --- torch.fx.Node.format_node text (what torch.onnx writes under pkg.torch.onnx.fx_node) ---

FX_REFERENCE = "\x00fx:"
"""Prefix that marks an FX node reference (``%name``) in parsed arguments."""

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
_NAME = re.compile(r"^%(?P<name>[^\s:]+)\s*:")
_TARGET = re.compile(r"target=(?:torch\.ops\.)?(?P<target>[\w.:]+)")


def fx_node_text_name(text: str) -> str:
    """The FX node name a node's text starts with (``%addmm : ...`` -> ``addmm``), or ''."""
    match = _NAME.match(text)
    return match["name"] if match else ""


def fx_node_text_target(text: str) -> str:
    """The call target named in a node's text (``aten.addmm.default``), or ''."""
    match = _TARGET.search(text)
    return match["target"] if match else ""


def _literal(text: str) -> Any:
    """A Python literal of an FX argument repr; ``%name`` becomes a reference marker.

    Layers repeat the same argument shapes with other node names, so each shape (the text
    with its references numbered) is evaluated once and filled with the names after.
    """
    if "fx-slot" in text:  # a string that looks like a slot: evaluated as it is
        return ast.literal_eval(_pieces(text, None))
    names: list[str] = []
    shape = _pieces(text, names)
    parsed = _SHAPES.get(shape, _SHAPES)
    if parsed is _SHAPES:
        parsed = ast.literal_eval(shape)
        if len(_SHAPES) >= _SHAPES_LIMIT:
            _SHAPES.clear()
        _SHAPES[shape] = parsed
    return _filled(parsed, names)


def _pieces(text: str, names: list[str] | None) -> str:
    """The text as a Python literal: references become slots (their names go to ``names``)
    or, when ``names`` is None, reference markers; bare names become strings."""
    pieces: list[str] = []
    for token in _TOKEN.findall(text):
        if token.startswith("%"):
            if names is None:
                pieces.append(repr(FX_REFERENCE + token[1:]))
                continue
            pieces.append(repr(f"{_SLOT}{len(names)}"))
            names.append(FX_REFERENCE + token[1:])
        elif token[0].isalpha() or token[0] == "_":
            pieces.append(token if token in _LITERALS else repr(token))
        else:
            pieces.append(token)
    return "".join(pieces)


_SLOT = "\x00fx-slot:"
"""Marks the n-th reference of an argument shape."""
_SHAPES: dict[str, Any] = {}
_SHAPES_LIMIT = 4096


def _filled(parsed: Any, names: list[str]) -> Any:
    """A fresh copy of an evaluated shape with its numbered references named."""
    if isinstance(parsed, str):
        return names[int(parsed[len(_SLOT) :])] if parsed.startswith(_SLOT) else parsed
    if isinstance(parsed, tuple):
        return tuple(_filled(item, names) for item in parsed)
    if isinstance(parsed, list):
        return [_filled(item, names) for item in parsed]
    if isinstance(parsed, dict):
        return {_filled(key, names): _filled(value, names) for key, value in parsed.items()}
    if isinstance(parsed, set):
        return {_filled(item, names) for item in parsed}
    return parsed


def parse_fx_node_text(text: str) -> tuple[str, tuple[Any, ...], dict[str, Any]] | None:
    """(target, args, kwargs) of a ``call_function`` node's text; None when it is not one.

    Node references come back as strings starting with :data:`FX_REFERENCE`; other names
    (dtypes, devices) as their text. Never evaluates code (``ast.literal_eval`` only).
    """
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


def flatten_inputs(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
    """``(args, kwargs)`` flattened as torch.export flattens a program's inputs
    (``torch.utils._pytree.tree_flatten``; torch has no public flattening with its rules for
    its own containers), the order of an unlifted program's placeholders."""
    import torch

    def flatten() -> list[Any]:
        leaves, _ = torch.utils._pytree.tree_flatten((args, kwargs))
        return list(leaves)

    return _guarded("torch.utils._pytree.tree_flatten", flatten)
