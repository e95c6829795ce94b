"""The provenance core: everything modelprov knows without torch, JAX or onnxscript.

Sources and the versioned sources table, the metadata keys, the merge policies, stack
traces, key scoping, the correspondence engine and in-memory :class:`Provenance` live
here; the ONNX and StableHLO backends (``modelprov.onnx``, ``modelprov.stablehlo``) build
on them. Importing this package loads onnx_ir and the standard library only (a test
checks it in a fresh interpreter)::

    from modelprov.core import Snapshot, correspond, Provenance

    provenance = Provenance.read(model)      # sources table + node keys
    before = Snapshot.of(model.graph)
    ...                                      # any change to model.graph
    provenance.apply(correspond(before, model.graph), model.graph)
    provenance.write(model)                  # merged by the policies
"""

from modelprov.core import keys, policy
from modelprov.core._correspond import Change, Snapshot, correspond
from modelprov.core._provenance import Provenance, node_label
from modelprov.core._sources import Source, SourceTable, dump_ids, parse_ids
from modelprov.core._stack_trace import Frame, TraceOptions
from modelprov.core.policy import DEFAULT_POLICIES, MergeContext, Policies, Policy

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
    "keys",
    "node_label",
    "parse_ids",
    "policy",
]
