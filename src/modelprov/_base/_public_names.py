"""``__module__`` of public names set to the public module that hands them out.

Like onnx-ir's faces, each public module of modelprov calls :func:`pin_module` on its
``__all__``: ``repr``, ``help`` and the docs then name ``modelprov.policy.Policies``, not
the private module that defines it. A name is pinned once, by the first public module that
hands it out under its own name (an alias, ``FxNodeInfo`` for ``Source``, pins nothing), and
the faces that re-export another face's names import them from that face, so the pinned
module does not depend on which face was imported first.
"""

from __future__ import annotations

import types
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["is_private", "pin_module", "pin_value"]


def is_private(module: str) -> bool:
    """True when a part of the dotted module name starts with ``_``."""
    return any(part.startswith("_") for part in module.split("."))


def pin_value(name: str, value: Any, module: str) -> None:
    """Sets ``value.__module__`` to ``module`` if ``value`` is a class or function named
    ``name`` whose module is private."""
    if not isinstance(value, type | types.FunctionType):
        return
    if value.__name__ == name and is_private(value.__module__):
        value.__module__ = module


def pin_module(namespace: Mapping[str, Any], names: Iterable[str], module: str) -> None:
    """:func:`pin_value` for each of ``names`` in ``namespace`` (a face's globals)."""
    for name in names:
        pin_value(name, namespace.get(name), module)
