"""Which user annotation keys apply where, decided once for every backend (no torch).

A module-scoped key (the default) applies to everything its module and submodules compute,
a descendant's value overriding its ancestor's. A value-scoped key (``from_output`` policy or
declared value-scoped) applies only to what produces a tensor leaving the module that declares
it. A per-output key (``custom.output1.max``) applies only to what produces that output of the
module. The backends (``onnx/_annotations.py``, ``stablehlo/attach/_attach.py``) only
answer which of their nodes or ops hand a value out of a module, and which produce a
given module output;
:func:`source_keys` decides the rest.

One value per key and source, the innermost applicable module's. When an inner and an outer
module both declare a key for the same source (a value-scoped key on a tensor that leaves
both, as a calibrated ``Sequential`` and its last layer give the same output), the inner
module's value is the source's, as for module-scoped keys. Why not merge the two by the key's
policy: policies combine the values of *different* sources (a fused node's, a fused op's), and a
source carries one value per key in the sources table; the inner declaration is the more
specific statement about that one tensor, and both backends then store the same source
metadata, which their policies merge alike.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from modelprov.core._policy import Policies

__all__ = [
    "Applied",
    "KeyScoping",
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


@dataclasses.dataclass(frozen=True)
class Applied:
    """One annotation value that applies to a source.

    Attributes:
        value: the value (of the innermost module declaring the key that applies).
        from_output: True for a value-scoped key (it applies because the source produces the
            declaring module's output); for a module-scoped key, what the backend said
            about the source (``produces_output`` of :meth:`KeyScoping.source_keys`).
    """

    value: str
    from_output: bool


class KeyScoping:
    """The annotations of one export, split once into module- and value-scoped keys.

    ``annotations``: module path -> {key: value} (normalized); ``module_outputs``: module
    path -> the user-program nodes producing its outputs, in order (for per-output keys;
    None or a missing module: unknown, a per-output key then applies to every output).
    """

    def __init__(
        self,
        annotations: Mapping[str, Mapping[str, str]],
        policies: Policies,
        module_outputs: Mapping[str, tuple[str, ...]] | None = None,
    ) -> None:
        self._module_scoped = module_scoped_keys(annotations, policies)
        self._value_scoped = {
            path: scoped
            for path, keys in annotations.items()
            if (scoped := value_scoped_keys(keys, policies))
        }
        self._module_outputs = module_outputs or {}

    @property
    def has_value_scoped(self) -> bool:
        """True when some module declares a value-scoped key."""
        return bool(self._value_scoped)

    def source_keys(
        self,
        module_path: str,
        *,
        leaves: Callable[[str], bool],
        made: Collection[str] = (),
        produces_output: bool = True,
    ) -> dict[str, Applied]:
        """The keys that apply to one source computed by the module at ``module_path``.

        The backend answers ``leaves(module)``: does this source's output leave ``module``
        (an ancestor of ``module_path`` declaring value-scoped keys; asked only for those)?
        ``made``: the user-program nodes the source stands for (which module output it
        produces). Ancestors are visited outer first, so the innermost module wins a key.
        """
        applied: dict[str, Applied] = {}
        for module in ancestors_outer_first(module_path):
            for key, value in self._module_scoped.get(module, {}).items():
                applied[key] = Applied(value, produces_output)
            scoped = self._value_scoped.get(module)
            if scoped and leaves(module):
                outputs = self._module_outputs.get(module)
                for key, value in scoped.items():
                    if applies_to_output(key, outputs, made):
                        applied[key] = Applied(value, True)
        return applied
