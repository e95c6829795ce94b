"""The provenance core: everything modelprov knows without torch, JAX or onnxscript.

Sources and the versioned sources table, the merge policies (public as
``modelprov.policy``; the metadata keys are ``modelprov.keys``), stack
traces, key scoping, the correspondence engine and in-memory :class:`Provenance` live
here; the ONNX and StableHLO backends (``modelprov.onnx``, ``modelprov.stablehlo``) build
on them. Importing this package loads nothing until a name is used (then onnx_ir and the
standard library only; a test checks it in a fresh interpreter)::

    from modelprov.core import Snapshot, correspond, Provenance

    provenance = Provenance.read(model)      # sources table + node keys
    before = Snapshot.of(model.graph)
    ...                                      # any change to model.graph
    provenance.apply(correspond(before, model.graph), model.graph)
    provenance.write(model)                  # merged by the policies
"""

import importlib
from typing import TYPE_CHECKING, Any

from modelprov._base._public_names import pin_value

if TYPE_CHECKING:
    from modelprov.core._correspond import Change, Snapshot, correspond
    from modelprov.core._policy import DEFAULT_POLICIES, MergeContext, Policies, Policy
    from modelprov.core._provenance import Provenance, node_label
    from modelprov.core._sources import Source, SourceTable, dump_ids, parse_ids
    from modelprov.core._stack_trace import Frame, TraceOptions

_LAZY = {
    "Change": "modelprov.core._correspond",
    "Snapshot": "modelprov.core._correspond",
    "correspond": "modelprov.core._correspond",
    "Provenance": "modelprov.core._provenance",
    "node_label": "modelprov.core._provenance",
    "Source": "modelprov.core._sources",
    "SourceTable": "modelprov.core._sources",
    "dump_ids": "modelprov.core._sources",
    "parse_ids": "modelprov.core._sources",
    "Frame": "modelprov.core._stack_trace",
    "TraceOptions": "modelprov.core._stack_trace",
    "DEFAULT_POLICIES": "modelprov.core._policy",
    "MergeContext": "modelprov.core._policy",
    "Policies": "modelprov.core._policy",
    "Policy": "modelprov.core._policy",
}
"""Names imported on first use: a submodule (``modelprov.keys``, ``core._printable``)
is then importable without loading onnx_ir, which the command line's ``--version`` needs."""


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'modelprov.core' has no attribute {name!r}")
    imported = importlib.import_module(module)
    value = imported if module.endswith("." + name) else getattr(imported, name)
    pin_value(name, value, __name__)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "DEFAULT_POLICIES",
    "Change",
    "Frame",
    "MergeContext",
    "Policies",
    "Policy",
    "Provenance",
    "Snapshot",
    "Source",
    "SourceTable",
    "TraceOptions",
    "correspond",
    "dump_ids",
    "node_label",
    "parse_ids",
]
