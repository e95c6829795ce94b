"""The small records the StableHLO exporter hands out: labelled ops, and FX node provenance
as ``Source`` records (``modelprov.core._sources``).

Pure data; built by ``_attach`` (ops) and ``_fx_nodes`` (nodes), kept by ``StableHLOProgram``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping

from modelprov.core._sources import Source
from modelprov.keys import STABLEHLO_MODULE_KEY as MODULE_KEY
from modelprov.keys import STABLEHLO_MODULE_TYPE_KEY as MODULE_TYPE_KEY
from modelprov.keys import STABLEHLO_NODE_KEY as NODE_KEY
from modelprov.keys import STABLEHLO_SOURCE_NODE_KEY as SOURCE_NODE_KEY
from modelprov.keys import STABLEHLO_STACK_KEY as STACK_KEY
from modelprov.keys import STABLEHLO_TARGET_KEY as TARGET_KEY

__all__ = ["FxNodeInfo", "OpRecord", "provenance_attributes"]


FxNodeInfo = Source
"""The provenance of one FX node of the decomposed ExportedProgram: a ``Source`` (the same
class, kept under this name for code that imports it). ``id`` and ``fx_node`` are the
node's name after decomposition (the name op locations use), ``source_nodes`` the nodes of
the user's program it was made from (``node.meta["from_node"]``; the ids ONNX exports of
the same program use), ``call_stack`` the user frames op locations record; ``metadata`` is
empty (:func:`provenance_attributes` derives the op attributes from the fields)."""


@dataclasses.dataclass(frozen=True)
class OpRecord:
    """One operation of the StableHLO module and what modelprov knows about it.

    Attributes:
        index: position of the op in a pre-order walk of the module (module and functions
            are not counted), i.e. in printing order.
        op_name: the MLIR operation name, e.g. ``stablehlo.add``.
        nodes: the FX nodes its location names, in graph order; empty for an op JAX made
            outside any node (a hoisted constant with ``loc(unknown)``, shape checks).
        attributes: every attribute modelprov set on the op (``modelprov.*`` and user keys),
            as written: ``str``, or ``float`` / ``int`` for numeric user keys.
        text: the op's first printed line, with attributes and without location.
        location: the op's provenance location name (``<module path>/<source node>``,
            e.g. ``0/linear``; several joined by ``;``), or its printed location when it
            came from no FX node.
        parent: the index of the op whose region holds this op (a reduce, a while loop),
            None at function level. StableHLO's pretty printer writes a reduce whose body is
            one op in compact form (``applies stablehlo.add``), which does not print the body
            ops, so their attributes (the same as the reduce's) are not in ``text``; they are
            in the module, its bytecode and the portable artifact.
        in_wrapper: True for ops of the function JAX adds around the lowered one when
            shapes are symbolic (it checks the input shapes and calls the lowered function);
            they come from no FX node.
    """

    index: int
    op_name: str
    nodes: tuple[str, ...]
    attributes: Mapping[str, str | int | float]
    text: str
    location: str
    parent: int | None
    in_wrapper: bool = False

    @property
    def module(self) -> str:
        """The op's ``modelprov.module`` attribute ('' for the root module or unattributed)."""
        return str(self.attributes.get(MODULE_KEY, ""))

    @property
    def in_region(self) -> bool:
        """True when the op sits in a nested region (a reduce body, a while loop)."""
        return self.parent is not None

    @property
    def is_constant(self) -> bool:
        """True for ``stablehlo.constant`` ops."""
        return self.op_name == "stablehlo.constant"


def provenance_attributes(info: Source) -> dict[str, str]:
    """The ``modelprov.*`` attributes one FX node gives the ops lowered from it."""
    values = {
        NODE_KEY: info.fx_node,
        MODULE_KEY: info.module_path,
        MODULE_TYPE_KEY: info.module_type,
        TARGET_KEY: info.target,
    }
    if info.source_nodes:
        values[SOURCE_NODE_KEY] = (
            info.source_nodes[0]
            if len(info.source_nodes) == 1
            else json.dumps(list(info.source_nodes), ensure_ascii=False)
        )
    if info.file is not None:
        values[STACK_KEY] = f"{info.file}:{info.line}"
    return values
