"""Copy an op's provenance and user keys into ``mhlo.frontend_attributes``, for XLA.

XLA drops discardable attributes when it converts StableHLO to HLO, except this one: a
dictionary of strings that becomes the HLO instruction's ``frontend_attributes`` (what JAX's
``set_xla_metadata`` writes). Measured with jax 0.10.2 on XLA CPU: they are in
``jit(...).lower(...).as_text()`` and in the optimized HLO of ``.compile().as_text()``, on
each instruction made from the op and on a fusion whose root it is. The values are the
op's own attributes (the policies chose them) as strings: a typed number (``f64`` /
``i64``, ``_numbers``) in the string form ``read_mlir_sources`` gives it in
``Source.metadata`` (``_read.attribute_text``: ``2.5`` as ``"2.5"``); entries already in the
dictionary (the model author's) win.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from modelprov.keys import STABLEHLO_FRONTEND_ATTRIBUTES
from modelprov.stablehlo.read._read import AttributeValue, attribute_text

__all__ = ["add_frontend_attributes", "frontend_text"]


def frontend_text(value: AttributeValue) -> str:
    """A key's value as XLA stores it: a string (``true``/``false`` for a bool, a number in
    its string form)."""
    return attribute_text(value)


def add_frontend_attributes(
    ir: Any, operation: Any, attributes: Mapping[str, AttributeValue]
) -> None:
    """Add ``attributes`` (name -> value) to ``operation``'s ``mhlo.frontend_attributes``.

    Must run inside the operation's MLIR context; does nothing for no attributes.
    """
    if not attributes:
        return
    entries: dict[str, Any] = {
        key: ir.StringAttr.get(frontend_text(value)) for key, value in attributes.items()
    }
    if STABLEHLO_FRONTEND_ATTRIBUTES in operation.attributes:
        existing = operation.attributes[STABLEHLO_FRONTEND_ATTRIBUTES]
        if existing.typeid == ir.DictAttr.static_typeid:
            given = ir.DictAttr(existing)
            for position in range(len(given)):
                entries[str(given[position].name)] = given[position].attr
    operation.attributes[STABLEHLO_FRONTEND_ATTRIBUTES] = ir.DictAttr.get(entries)
