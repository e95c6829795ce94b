"""User keys inside op locations: a ``FusedLoc`` whose metadata carries them.

An op with user keys (``custom.min``... as chosen by the policies, value-scoped or
module-scoped) gets its provenance location wrapped as

    loc(fused<{modelprov.keys = {custom.max = "2.2", custom.min = "-2.6"},
               modelprov.keys_format = 1 : i64}>[<provenance location>])

MLIR keeps a location through every pass that keeps locations and fuses it (keeping the
metadata of each part) when ops merge, so the keys travel wherever the provenance names go:
past IREE's global-optimization and flow stages, which drop discardable attributes. The
format is versioned by ``modelprov.keys_format`` (docs/metadata-format.md, "Keys in op
locations"); :func:`location_keys` reads format 1 and ignores the metadata of any other
fused location. Values are never evaluated: strings stay strings, numbers are printed.
The readers find the carriers with ``_locations.walk_names``, the one location walker.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from modelprov.keys import STABLEHLO_LOCATION_KEYS, STABLEHLO_LOCATION_KEYS_FORMAT

__all__ = [
    "LOCATION_KEYS_FORMAT",
    "attribute_text",
    "location_keys",
    "with_keys",
]

LOCATION_KEYS_FORMAT = 1
"""The format version written in ``modelprov.keys_format``."""


def with_keys(ir: Any, location: Any, keys: Mapping[str, Any]) -> Any:
    """``location`` wrapped in a fused location whose metadata holds ``keys`` (name ->
    ``ir.Attribute``, e.g. the op's own attributes); ``location`` itself when ``keys`` is
    empty. Must run inside the location's MLIR context."""
    if not keys:
        return location
    metadata = ir.DictAttr.get(
        {
            STABLEHLO_LOCATION_KEYS: ir.DictAttr.get(dict(keys)),
            STABLEHLO_LOCATION_KEYS_FORMAT: ir.IntegerAttr.get(
                ir.IntegerType.get_signless(64), LOCATION_KEYS_FORMAT
            ),
        }
    )
    return ir.Location.fused([location], metadata)


def location_keys(ir: Any, fused: Any) -> dict[str, Any] | None:
    """The keys (name -> ``ir.Attribute``) of a fused location written by :func:`with_keys`,
    None for any other fused location (no metadata, other metadata, another format)."""
    metadata = fused.metadata
    if metadata is None or metadata.typeid != ir.DictAttr.static_typeid:
        return None
    entries = ir.DictAttr(metadata)
    if STABLEHLO_LOCATION_KEYS not in entries or STABLEHLO_LOCATION_KEYS_FORMAT not in entries:
        return None
    version = entries[STABLEHLO_LOCATION_KEYS_FORMAT]
    if version.typeid != ir.IntegerAttr.static_typeid:
        return None
    if ir.IntegerAttr(version).value != LOCATION_KEYS_FORMAT:
        return None
    keys = entries[STABLEHLO_LOCATION_KEYS]
    if keys.typeid != ir.DictAttr.static_typeid:
        return None
    found = ir.DictAttr(keys)
    return {str(found[i].name): found[i].attr for i in range(len(found))}


def attribute_text(ir: Any, attribute: Any) -> str | None:
    """A key's value as text: a string as it is, an integer or a float printed (Python's
    ``str``), a bool as ``true``/``false``; None for any other attribute."""
    typeid = attribute.typeid
    if typeid == ir.StringAttr.static_typeid:
        return str(ir.StringAttr(attribute).value)
    if typeid == ir.IntegerAttr.static_typeid:
        integer = ir.IntegerAttr(attribute)
        if ir.IntegerType(integer.type).width == 1:  # a BoolAttr (it has no typeid of its own)
            return "true" if integer.value else "false"
        return str(integer.value)
    if typeid == ir.FloatAttr.static_typeid:
        return str(ir.FloatAttr(attribute).value)
    return None
