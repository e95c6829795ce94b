"""Put the ``modelprov.*`` attributes back on ops that MLIR passes created without them.

Passes such as ``canonicalize`` and ``cse`` keep the attributes of the ops they leave alone,
but the ops a rewrite pattern creates get none: MLIR asks every pass to keep locations, not
discardable attributes. export_stablehlo's locations name each op's sources (module path,
source node, user frames), so the attributes those determine can be rebuilt from them:
``modelprov.source_node``, ``modelprov.module`` and ``modelprov.stack``. Every attribute on
which the surviving ops with the same location agree (``modelprov.module_type`` too) is copied
from them instead. ``modelprov.node`` and ``modelprov.target`` name the FX node after
decomposition, which a location does not: it names the source node, and one source can lower
through several FX nodes (``linear`` is a ``permute``'s transpose and an ``addmm``'s dot, add,
multiplies). Those two come back only where the surviving ops of the same location agree and
some of them are of the op's own kind (a transpose's from a transpose); an op whose kind no
surviving op of its location shares gets neither, rather than another FX node's. User keys
(``custom.*``) come back from the locations that carry them (``_location_keys``): export
writes into each op's location exactly the user keys the policies gave that op, value-scoped
ones only on a module's output ops, so any op missing one of its location's keys gets it.

Measured on nn.TransformerEncoder and a 2-layer Llama: canonicalize + CSE run on the module
itself create no op without attributes whose location names a source; the ops found without
them in printed text are one-op reduce bodies, whose custom form prints no attributes (hence
``generic``).
"""

from __future__ import annotations

from typing import Any

from modelprov.core._sources import Source
from modelprov.errors import StableHLOError
from modelprov.keys import STABLEHLO_MODULE_KEY as MODULE_KEY
from modelprov.keys import STABLEHLO_MODULE_TYPE_KEY as MODULE_TYPE_KEY
from modelprov.keys import STABLEHLO_NODE_KEY as NODE_KEY
from modelprov.keys import STABLEHLO_SOURCE_NODE_KEY as SOURCE_NODE_KEY
from modelprov.keys import STABLEHLO_STACK_KEY as STACK_KEY
from modelprov.keys import STABLEHLO_TARGET_KEY as TARGET_KEY
from modelprov.onnx._source_nodes import format_source_nodes
from modelprov.stablehlo.read._locations import decoder, keys_reader
from modelprov.stablehlo.read._op_walk import STRUCTURAL_OPS, pre_order
from modelprov.stablehlo.untrusted._bytecode_text import mlir_text
from modelprov.stablehlo.untrusted._mlir_input import MlirInput, load_mlir

__all__ = ["restore_attributes"]

_COPIED = (NODE_KEY, SOURCE_NODE_KEY, MODULE_KEY, MODULE_TYPE_KEY, TARGET_KEY, STACK_KEY)
_PER_FX_NODE = frozenset({NODE_KEY, TARGET_KEY})
"""What the FX node decides, not the source its location names: copied from same-kind ops."""


def restore_attributes(mlir: MlirInput, *, generic: bool = False) -> str:
    """MLIR text (with locations) where every op whose location names sources has them
    as ``modelprov.*`` attributes too; ops that kept their attributes are left as they are.

    ``mlir`` is text, bytecode, the ``.jaxexport`` artifact ``StableHLOProgram.save``
    writes, or a path (``str`` or ``Path``) to any of them (e.g. ``stablehlo-opt`` output of
    ``StableHLOProgram.text_with_locations``). Raises StableHLOError for another kind of
    input, naming it, and when JAX's MLIR bindings cannot parse it. The input is not
    modified; MLIR that breaks the limits untrusted MLIR is read within (``_mlir_limits``,
    ``_bytecode_text``) is refused. ``generic=True`` prints MLIR's generic op form, which
    shows the attributes of every op: the custom form of a reduce whose body is one op
    (``applies stablehlo.add``) prints none of the body op's attributes.
    """
    from jaxlib.mlir import ir

    from modelprov.stablehlo.lower._jax_compat import ir_context

    data, where = load_mlir(mlir, caller="restore_attributes")
    data = mlir_text(data, where)
    with ir_context() as context:
        context.allow_unregistered_dialects = True
        try:
            module = _parse(ir, context, data)
        except Exception as exc:  # the bindings raise their own MLIRError
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise StableHLOError(
                f"cannot parse {where}: {first}; pass the MLIR text or bytecode a pass wrote"
            ) from None
        operations = pre_order(ir, module, skip=STRUCTURAL_OPS)
        # Hashes of ir.Operation change once an attribute is set: read everything first.
        donors: dict[tuple[object, ...], list[dict[str, str]]] = {}
        missing: list[tuple[Any, list[Source]]] = []
        keyed: list[tuple[Any, dict[str, Any]]] = []
        decode = decoder(ir)
        carried_keys = keys_reader(ir)
        for op in operations:
            located = decode(op.location)
            if not located:
                continue
            attributes = _string_attributes(ir, op)
            keys = {
                key: value
                for key, value in carried_keys(op.location).items()
                if key not in op.attributes
            }
            if keys:
                keyed.append((op, keys))
            if NODE_KEY in attributes:
                for lender in {_donor_key(op, located), _same_kind_key(op, located)}:
                    donors.setdefault(lender, []).append(attributes)
            else:
                missing.append((op, located))
        for op, located in missing:
            same = donors.get(_donor_key(op, located), [])
            same_kind = donors.get(_same_kind_key(op, located), [])
            for key, value in _rebuilt(located, same, same_kind).items():
                op.attributes[key] = ir.StringAttr.get(value)
        for op, keys in keyed:
            for key, attribute in keys.items():
                op.attributes[key] = attribute
        return str(module.operation.get_asm(enable_debug_info=True, print_generic_op_form=generic))


def _donor_key(op: Any, located: list[Source]) -> tuple[object, ...]:
    """Ops that may lend attributes to each other: the same sources in their location and,
    for constants, the same value (a constant takes the location of the one FX node using
    it, and two constants of one source may come from two of its FX nodes)."""
    named = tuple((entry.module_path, entry.id) for entry in located)
    if op.name.endswith(".constant") and "value" in op.attributes:
        return (named, str(op.name), str(op.attributes["value"]))
    return (named,)


def _same_kind_key(op: Any, located: list[Source]) -> tuple[object, ...]:
    """Ops that may lend their FX node (``_PER_FX_NODE``): those that may lend anything, of
    the same op kind too (constants already are)."""
    key = _donor_key(op, located)
    return key if len(key) > 1 else (*key, "kind", str(op.name))


def _rebuilt(
    located: list[Source], same: list[dict[str, str]], same_kind: list[dict[str, str]]
) -> dict[str, str]:
    """What the ops with the same location agree on, else what the location itself says;
    the FX node's own keys (``_PER_FX_NODE``) only when ``same_kind``, the ops of the same
    location and op kind (part of ``same``), has some.

    A location lists an op's own sources and then the no-op nodes it stands for
    (``_aliases``), so ``modelprov.source_node`` from the location alone names both.
    """
    shared = format_source_nodes(tuple(dict.fromkeys(entry.id for entry in located)))
    values = {SOURCE_NODE_KEY: shared, MODULE_KEY: located[0].module_path}
    with_frames = [entry for entry in located if entry.file is not None]
    if with_frames:
        values[STACK_KEY] = f"{with_frames[0].file}:{with_frames[0].line}"
    for key in _COPIED:
        if key in _PER_FX_NODE and not same_kind:
            continue  # no op of its kind kept its FX node: another kind's may not be its own
        found = {donor[key] for donor in same if key in donor}
        if len(found) == 1 and all(key in donor for donor in same):
            (values[key],) = found
        elif len(found) > 1 and key in values:
            del values[key]  # the ops of this location disagree: leave it out
    return values


def _string_attributes(ir: Any, op: Any) -> dict[str, str]:
    found: dict[str, str] = {}
    attributes = op.attributes
    for position in range(len(attributes)):
        named = attributes[position]
        if named.attr.typeid == ir.StringAttr.static_typeid:
            found[str(named.name)] = str(ir.StringAttr(named.attr).value)
    return found


def _parse(ir: Any, context: Any, data: str | bytes) -> Any:
    """The module: a portable artifact (JAX's serialized VHLO bytecode) read back as
    StableHLO, as read_mlir_sources reads it; other bytecode and text as they are."""
    if isinstance(data, bytes):
        from jaxlib.mlir.dialects import stablehlo

        try:
            return stablehlo.deserialize_portable_artifact(context, data)
        except Exception:  # plain MLIR bytecode, not a portable artifact
            pass
    return ir.Module.parse(data)
