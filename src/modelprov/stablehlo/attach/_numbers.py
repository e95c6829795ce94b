"""Numeric user keys as typed MLIR attributes: ``custom.max = 2.5 : f64``, ``bits = 4 : i64``.

A compiler reading ``custom.min`` wants a number, not a string to re-parse. A user key is
numeric when every value given for it (``annotate``, ``annotations=``, ``calibrate``) is an
``int`` (then ``i64``) or an ``int``/``float`` mix (then ``f64``); ``bool`` and ``str`` values
keep the key a string. The value written is the merged one (policies merge the string
forms), read back as that number; when a merge made something else of it (``union`` of two
ranges: a JSON array) or an int does not fit 64 bits, that op keeps the string.
``number_attributes="string"`` writes every user key as a string (seed 003's form).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Literal

__all__ = ["NUMBER_ATTRIBUTES", "NumberAttributes", "attribute_value", "number_kinds"]

NumberAttributes = Literal["typed", "string"]
NUMBER_ATTRIBUTES: tuple[NumberAttributes, ...] = ("typed", "string")

_I64 = (-(2**63), 2**63 - 1)


def number_kinds(
    annotations: Iterable[Mapping[str, Mapping[str, object]]],
) -> dict[str, type[int] | type[float]]:
    """Per user key, ``int`` or ``float`` when every value of it in ``annotations`` is one."""
    kinds: dict[str, type[int] | type[float]] = {}
    strings: set[str] = set()
    for mapping in annotations:
        for values in mapping.values():
            for key, value in values.items():
                if isinstance(value, bool) or not isinstance(value, int | float):
                    strings.add(key)
                elif isinstance(value, float) or kinds.get(key) is float:
                    kinds[key] = float
                else:
                    kinds[key] = int
    return {key: kind for key, kind in kinds.items() if key not in strings}


def attribute_value(
    key: str, text: str, kinds: Mapping[str, type[int] | type[float]]
) -> str | int | float:
    """The attribute value of ``key``: its number when the key is numeric and ``text`` one."""
    kind = kinds.get(key)
    if kind is int:
        try:
            number = int(text, 10)
        except ValueError:
            return text
        return number if _I64[0] <= number <= _I64[1] else text
    if kind is float:
        try:
            value = float(text)
        except ValueError:
            return text
        return value if math.isfinite(value) else text
    return text
