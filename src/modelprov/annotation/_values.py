"""Annotation keys and values: the typed values the Python API returns, and their string form.

In Python an annotation value is a ``str``, ``bool``, ``int`` or finite ``float``
(:func:`annotation_value`; what ``annotations()`` and ``calibrate()`` return). Written into
ONNX ``metadata_props`` (strings by the format) it takes the string form below, which reads
back without guessing (:func:`format_value`):

- ``str``: as is;
- ``bool``: ``"true"`` or ``"false"``;
- ``int``: decimal (``"-3"``); ``int(text)`` reads it back;
- ``float``: the shortest string that reads back to the same double (``repr``: ``"0.0"``,
  ``"0.1"``, ``"1e-07"``, ``"-0.0"``); ``float(text)`` reads it back exactly. NaN and
  infinities are rejected;
- a 0-d numpy array, numpy scalar or 0-d torch tensor: its ``.item()``, formatted as above.

Anything else (``None``, lists, dicts, multi-element tensors, complex numbers) is rejected.

A key is a non-empty ``str`` without control characters that does not start with a reserved
prefix (``modelprov.`` is ours, ``pkg.torch.`` is torch.onnx's).
"""

from __future__ import annotations

import math
from typing import Final

from modelprov.errors import AnnotationError
from modelprov.keys import RESERVED_PREFIX, TORCH_PREFIX

__all__ = [
    "RESERVED_KEY_PREFIXES",
    "AnnotationValue",
    "annotation_value",
    "check_key",
    "format_value",
]

AnnotationValue = str | bool | int | float

RESERVED_KEY_PREFIXES: Final = (RESERVED_PREFIX, TORCH_PREFIX)

_ALLOWED_TYPES: Final = "str, bool, int, float, or a 0-d numpy/torch scalar"


def check_key(key: object) -> str:
    """Return ``key`` if it is a valid annotation key, else raise AnnotationError saying why."""
    if not isinstance(key, str):
        raise AnnotationError(
            f"annotation key {key!r} is a {type(key).__name__}; keys must be non-empty str"
        )
    if not key:
        raise AnnotationError("annotation key is empty; keys must be non-empty str")
    bad = next((c for c in key if _is_control(c)), None)
    if bad is not None:
        raise AnnotationError(
            f"annotation key {key!r} contains the control character {bad!r}; remove it"
        )
    for prefix in RESERVED_KEY_PREFIXES:
        if key.startswith(prefix):
            raise AnnotationError(
                f"annotation key {key!r} starts with the reserved prefix {prefix!r}; "
                "choose another prefix, e.g. 'custom.'"
            )
    return str.__str__(key)


def format_value(value: object, key: str | None = None) -> str:
    """Format one annotation value as its documented string (see the module docstring).

    ``key`` only names the value in error messages.
    """
    typed = annotation_value(value, key)
    if isinstance(typed, str):
        return typed
    if isinstance(typed, bool):
        return "true" if typed else "false"
    if isinstance(typed, int):
        try:
            return str(typed)
        except ValueError as err:  # more digits than sys.get_int_max_str_digits()
            where = f"annotation {key!r}" if key is not None else "annotation value"
            raise AnnotationError(f"{where}: the int is too large to format ({err})") from err
    return repr(typed)


def annotation_value(value: object, key: str | None = None) -> AnnotationValue:
    """One annotation value as a plain Python ``str``, ``bool``, ``int`` or finite ``float``.

    Subclasses (``numpy.float64``, ``IntEnum``) and 0-d arrays/tensors become the plain type;
    anything else, NaN and infinities raise AnnotationError. ``key`` names the value in errors.
    """
    where = f"annotation {key!r}" if key is not None else "annotation value"
    scalar = _unwrap_scalar(value, where)
    if isinstance(scalar, str):
        return str.__str__(scalar)
    if isinstance(scalar, bool):
        return bool(scalar)
    if isinstance(scalar, int):
        return int(scalar)
    if isinstance(scalar, float):
        number = float(scalar)
        if not math.isfinite(number):
            raise AnnotationError(
                f"{where} is {number!r}; NaN and infinite floats cannot be stored, "
                "use a finite float or a str"
            )
        return number
    raise AnnotationError(
        f"{where} has the unsupported type {type(value).__name__} ({_short_repr(value)}); "
        f"allowed types: {_ALLOWED_TYPES}"
    )


def _unwrap_scalar(value: object, where: str) -> object:
    """Return ``value.item()`` for 0-d numpy/torch values, ``value`` otherwise."""
    if isinstance(value, str | bool | int | float):
        return value
    shape = getattr(value, "shape", None)
    item = getattr(value, "item", None)
    if shape is None or not callable(item):
        return value
    if tuple(shape) != ():
        raise AnnotationError(
            f"{where} is a {type(value).__name__} of shape {tuple(shape)}; only 0-d "
            f"(single-number) arrays and tensors are allowed ({_ALLOWED_TYPES})"
        )
    scalar = item()
    if isinstance(scalar, bool | int | float):
        return scalar
    raise AnnotationError(
        f"{where} is a {type(value).__name__} holding a {type(scalar).__name__}; "
        f"allowed types: {_ALLOWED_TYPES}"
    )


def _is_control(char: str) -> bool:
    code = ord(char)
    return code < 0x20 or 0x7F <= code < 0xA0


def _short_repr(value: object, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
