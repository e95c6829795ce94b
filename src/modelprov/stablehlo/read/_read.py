"""Provenance of the ops of MLIR a user got elsewhere: from attributes and from locations.

Works on what ``export_stablehlo`` wrote and on what downstream tools made of it: the text or
bytecode of JAX's serialized module, ``stablehlo-opt`` output, IREE output of any stage
(``iree-compile --compile-to=flow --mlir-print-debuginfo``). Attributes (``modelprov.*``,
user keys) are read where they survived; locations (``_locations``) are read always, so ops
of a stage that dropped the attributes still name their module path, source node and user
frames. Parsing uses JAX's MLIR bindings (StableHLO and the builtin dialects registered,
unknown dialects allowed), and IREE's bindings (``iree.compiler.ir``) for text JAX's cannot
parse, when iree-base-compiler is installed. The input is untrusted: it reaches the parser
only as text that passed ``_mlir_limits`` (bytecode is made text by ``_bytecode_text``).
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Mapping
from typing import Any

from modelprov.core._sources import Source, shared_id_list
from modelprov.core._stack_trace import Frame
from modelprov.errors import StableHLOError
from modelprov.keys import STABLEHLO_MODULE_KEY as MODULE_KEY
from modelprov.keys import STABLEHLO_MODULE_TYPE_KEY as MODULE_TYPE_KEY
from modelprov.keys import STABLEHLO_NODE_KEY as NODE_KEY
from modelprov.keys import STABLEHLO_SOURCE_NODE_KEY as SOURCE_NODE_KEY
from modelprov.keys import STABLEHLO_STACK_KEY as STACK_KEY
from modelprov.keys import STABLEHLO_TARGET_KEY as TARGET_KEY
from modelprov.stablehlo.read._locations import decoder, located_source
from modelprov.stablehlo.read._op_walk import STRUCTURAL_OPS, pre_order
from modelprov.stablehlo.untrusted._bytecode_text import mlir_text
from modelprov.stablehlo.untrusted._mlir_input import MlirInput, load_mlir

__all__ = ["AttributeValue", "MlirOp", "attribute_text", "read_mlir_sources", "sources_from"]

AttributeValue = str | bool | int | float


@dataclasses.dataclass(frozen=True)
class MlirOp:
    """One op of a parsed MLIR module and its provenance.

    Attributes:
        index: position in a pre-order walk (modules, functions and returns not counted).
        op_name: the MLIR operation name (``stablehlo.add``, ``flow.dispatch``...).
        attributes: the op's attributes whose name has a dot (``modelprov.*``,
            ``custom.*``) and whose value is a string, a float (``f64``/``f32``...), an integer
            or a bool, as Python ``str`` / ``float`` / ``int`` / ``bool``; other kinds are left
            out.
        sources: the sources its location and attributes name (empty: none known).
        has_location: True when the location names at least one source.
        location_known: False when the op's location is ``loc(unknown)``.
    """

    index: int
    op_name: str
    attributes: Mapping[str, AttributeValue]
    sources: tuple[Source, ...]
    has_location: bool
    location_known: bool


def sources_from(
    located: list[Source], attributes: Mapping[str, AttributeValue]
) -> tuple[Source, ...]:
    """Sources from decoded locations, completed by the ``modelprov.*`` attributes.

    Without a provenance location, the attributes alone give one source (when they name a
    node). A source's user keys are those its location carries (``_location_keys``), the
    op's own user-key attributes winning. Each source's ``id`` is the node of the user's
    torch.export program (the id ONNX exports of the same program write under
    ``pkg.modelprov.source_node``). User keys go into ``Source.metadata`` in their string
    form, as in ONNX (``2.5`` as ``"2.5"``).
    """
    text = {key: attribute_text(value) for key, value in attributes.items()}
    user = {k: v for k, v in text.items() if not k.startswith("modelprov.")}
    node = text.get(NODE_KEY, "")
    target = text.get(TARGET_KEY, "")
    module_type = text.get(MODULE_TYPE_KEY, "")
    if not located:
        if not node:
            return ()
        shared = text.get(SOURCE_NODE_KEY, node)
        file, line = _split_stack(text.get(STACK_KEY, ""))
        frames = (Frame(file, line, "", ""),) if file is not None and line is not None else ()
        located = [
            located_source(text.get(MODULE_KEY, ""), shared_id, frames)
            for shared_id in shared_id_list(shared)
        ]
    single = len(located) == 1
    return tuple(
        dataclasses.replace(
            entry,
            fx_node=node or entry.id,
            module_type=module_type if single else "",
            target=target if single else "",
            stack_trace=_trace(entry.call_stack),
            metadata=types.MappingProxyType({**entry.metadata, **user}),
        )
        for entry in located
    )


def attribute_text(value: AttributeValue) -> str:
    """An attribute's string form: strings as they are, numbers as annotation values print."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


def _split_stack(value: str) -> tuple[str | None, int | None]:
    file, _, line = value.rpartition(":")
    if not file or not line.isdigit():
        return None, None
    return file, int(line)


def _trace(frames: tuple[Frame, ...]) -> str:
    return "\n".join(
        f'File "{frame.file}", line {frame.line}'
        + (f", in {frame.function}" if frame.function else "")
        for frame in frames
    )


def read_mlir_sources(mlir: MlirInput) -> tuple[MlirOp, ...]:
    """Every op of an MLIR module with its sources: MLIR text, bytecode, the ``.jaxexport``
    artifact ``StableHLOProgram.save`` writes (bytes), or a path (``str`` or ``Path``) to
    any of them.

    Raises StableHLOError for another kind of input, naming it, when no available MLIR
    binding can parse it, or when it breaks the limits untrusted MLIR is read within
    (``_mlir_limits``, ``_bytecode_text``).
    """
    data, where = load_mlir(mlir, caller="read_mlir_sources")
    data = mlir_text(data, where)
    errors: list[str] = []
    for binding in _bindings():
        try:
            return _read_with(binding, data)
        except _ParseError as exc:
            errors.append(str(exc))
    raise StableHLOError(
        f"cannot parse {where}: {'; '.join(errors) or 'no MLIR bindings installed'}; pass "
        "MLIR text or bytecode (install iree-base-compiler to read IREE's dialects)"
    )


class _ParseError(Exception):
    pass


def _bindings() -> list[tuple[Any, Any, Any]]:
    """(ir module, context factory, parser) triples: JAX's first, IREE's when installed."""
    found: list[tuple[Any, Any, Any]] = []
    try:
        from jaxlib.mlir import ir as jax_ir

        from modelprov.stablehlo.lower._jax_compat import ir_context

        def jax_context() -> Any:
            context = ir_context()
            context.allow_unregistered_dialects = True
            return context

        def jax_parse(data: str, context: Any) -> Any:
            del context
            return jax_ir.Module.parse(data)

        found.append((jax_ir, jax_context, jax_parse))
    except ImportError:
        pass
    try:
        from iree.compiler import ir as iree_ir

        def iree_parse(data: str, context: Any) -> Any:
            del context
            return iree_ir.Module.parse(data)

        found.append((iree_ir, iree_ir.Context, iree_parse))
    except ImportError:
        pass
    return found


def _read_with(binding: tuple[Any, Any, Any], data: str) -> tuple[MlirOp, ...]:
    ir, make_context, parse = binding
    context = make_context()
    with context:
        try:
            module = parse(data, context)
        except Exception as exc:  # the bindings raise their own MLIRError
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise _ParseError(f"{ir.__name__}: {first}") from None
        result: list[MlirOp] = []
        decode = decoder(ir)
        for op in pre_order(ir, module, skip=STRUCTURAL_OPS):
            attributes = _dotted_attributes(ir, op)
            located = decode(op.location)
            result.append(
                MlirOp(
                    index=len(result),
                    op_name=str(op.name),
                    attributes=types.MappingProxyType(attributes),
                    sources=sources_from(located, attributes),
                    has_location=bool(located),
                    location_known=op.location.typeid != ir.UnknownLoc.static_typeid,
                )
            )
    return tuple(result)


def _dotted_attributes(ir: Any, op: Any) -> dict[str, AttributeValue]:
    found: dict[str, AttributeValue] = {}
    attributes = op.attributes
    for position in range(len(attributes)):
        named = attributes[position]
        name = str(named.name)
        if "." not in name:
            continue
        value = _attribute_value(ir, named.attr)
        if value is not None:
            found[name] = value
    return found


def _attribute_value(ir: Any, attribute: Any) -> AttributeValue | None:
    """A string, float, integer or bool attribute as its Python value (else None)."""
    kind = attribute.typeid
    if kind == ir.StringAttr.static_typeid:
        return str(ir.StringAttr(attribute).value)
    if kind == ir.FloatAttr.static_typeid:
        return float(ir.FloatAttr(attribute).value)
    if kind == ir.IntegerAttr.static_typeid:  # BoolAttr too: an i1 IntegerAttr
        integer_type = attribute.type.typeid == ir.IntegerType.static_typeid
        if integer_type and ir.IntegerType(attribute.type).width == 1:
            return bool(ir.BoolAttr(attribute).value)
        return int(ir.IntegerAttr(attribute).value)
    return None
