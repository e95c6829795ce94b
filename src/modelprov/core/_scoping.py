"""Which user annotation keys apply where, decided once for every backend (no torch).

A module-scoped key (the default) applies to everything its module and submodules compute,
a descendant's value overriding its ancestor's. A value-scoped key (``from_output`` policy or
declared value-scoped) applies only to what produces a tensor leaving the module that declares
it. A per-output key (``custom.output1.max``) applies only to what produces that output of the
module. The backends (``onnx/_annotations.py``, ``stablehlo/_attach.py``) only answer which of
their nodes or ops hand a value out of a module, and which produce a given module output.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from modelprov.core.policy import Policies

__all__ = [
    "ancestors_outer_first",
    "applies_to_output",
    "module_scoped_keys",
    "output_index",
    "value_scoped_keys",
    "within",
]

_PER_OUTPUT = re.compile(r"(?:^|\.)output(?P<index>\d+)\.")


def within(module_path: str, ancestor: str) -> bool:
    """True when ``module_path`` is ``ancestor`` or inside it ('' contains every path)."""
    return not ancestor or module_path == ancestor or module_path.startswith(ancestor + ".")


def ancestors_outer_first(module_path: str) -> list[str]:
    """'' then every prefix of ``module_path`` by dotted component, ending with itself."""
    if not module_path:
        return [""]
    parts = module_path.split(".")
    return ["", *(".".join(parts[: i + 1]) for i in range(len(parts)))]


def output_index(key: str) -> int | None:
    """The output a per-output key is about (``custom.output1.max`` -> 1), else None."""
    match = _PER_OUTPUT.search(key)
    return int(match["index"]) if match else None


def applies_to_output(
    key: str, module_outputs: tuple[str, ...] | None, made: Collection[str]
) -> bool:
    """False when ``key`` is about another output of its module than those ``made`` names.

    ``module_outputs``: the user-program nodes producing the module's outputs, in order
    (None when unknown); ``made``: the user-program nodes the node or op at hand stands for.
    """
    index = output_index(key)
    if index is None or module_outputs is None or index >= len(module_outputs):
        return True
    return module_outputs[index] in made


def value_scoped_keys(declared: Mapping[str, str], policies: Policies) -> dict[str, str]:
    """The value-scoped keys among one module's annotations."""
    return {key: value for key, value in declared.items() if policies.is_value_scoped(key)}


def module_scoped_keys(
    annotations: Mapping[str, Mapping[str, str]], policies: Policies
) -> dict[str, dict[str, str]]:
    """Per module, the keys that apply to all it computes (the not value-scoped ones)."""
    return {
        path: {key: value for key, value in keys.items() if not policies.is_value_scoped(key)}
        for path, keys in annotations.items()
    }
