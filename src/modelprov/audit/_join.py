"""modelprov.join_sources: ONNX nodes and StableHLO ops of one model, joined by source id.

Both exporters write, for every node/op, the node of the user's torch.export program it
came from: ONNX under ``pkg.modelprov.source_node`` (kept per source in the sources table, so
it survives optimization and fusion), StableHLO as ``modelprov.source_node`` and in the op's
location (which survives compilers that drop attributes). That name is the shared id.
"""

from __future__ import annotations

import dataclasses
import os
import types
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from modelprov._model_io._convert import ModelInput, as_ir
from modelprov.core._provenance import node_label
from modelprov.core._sources import Source, shared_id_list
from modelprov.keys import SOURCE_NODE_KEY
from modelprov.onnx._lookup import node_sources

if TYPE_CHECKING:
    from modelprov.stablehlo import StableHLOProgram

__all__ = ["SourceJoin", "join_sources", "shared_ids"]

ONNX_SOURCE_NODE_KEY = SOURCE_NODE_KEY


@dataclasses.dataclass(frozen=True)
class SourceJoin:
    """Which ONNX nodes and which StableHLO ops each source id (user FX node) became.

    Attributes:
        onnx_nodes: id -> labels of the ONNX nodes computing it (node names, or
            ``<op_type>@<index>`` for unnamed nodes), in graph order.
        stablehlo_ops: id -> indices of the StableHLO ops lowered from it (``OpRecord.index``
            of a StableHLOProgram, ``MlirOp.index`` of MLIR read from text or bytecode).
    """

    onnx_nodes: Mapping[str, tuple[str, ...]]
    stablehlo_ops: Mapping[str, tuple[int, ...]]

    @property
    def ids(self) -> tuple[str, ...]:
        """Every id seen on either side: ONNX order first, then StableHLO-only ids."""
        return tuple(dict.fromkeys([*self.onnx_nodes, *self.stablehlo_ops]))

    @property
    def both(self) -> tuple[str, ...]:
        """Ids found on both sides."""
        return tuple(i for i in self.onnx_nodes if i in self.stablehlo_ops)

    @property
    def onnx_only(self) -> tuple[str, ...]:
        """Ids only ONNX nodes name (e.g. nodes the StableHLO lowering computed away)."""
        return tuple(i for i in self.onnx_nodes if i not in self.stablehlo_ops)

    @property
    def stablehlo_only(self) -> tuple[str, ...]:
        """Ids only StableHLO ops name."""
        return tuple(i for i in self.stablehlo_ops if i not in self.onnx_nodes)

    @property
    def coverage(self) -> float:
        """Share of all ids found on both sides (1.0 when there are none)."""
        ids = self.ids
        return len(self.both) / len(ids) if ids else 1.0

    @property
    def onnx_coverage(self) -> float:
        """Share of the ids ONNX nodes name that StableHLO ops name too."""
        return len(self.both) / len(self.onnx_nodes) if self.onnx_nodes else 1.0

    @property
    def stablehlo_coverage(self) -> float:
        """Share of the ids StableHLO ops name that ONNX nodes name too."""
        both = sum(1 for i in self.stablehlo_ops if i in self.onnx_nodes)
        return both / len(self.stablehlo_ops) if self.stablehlo_ops else 1.0


def shared_ids(source: Source) -> list[str]:
    """The shared ids an ONNX source names (its ``pkg.modelprov.source_node`` value)."""
    return shared_id_list(source.metadata.get(ONNX_SOURCE_NODE_KEY, ""))


def _group(pairs: Iterable[tuple[str, Any]]) -> dict[str, tuple[Any, ...]]:
    grouped: dict[str, list[Any]] = {}
    for key, value in pairs:
        entries = grouped.setdefault(key, [])
        if value not in entries:
            entries.append(value)
    return {key: tuple(values) for key, values in grouped.items()}


def join_sources(
    onnx_model: ModelInput, stablehlo: StableHLOProgram | str | bytes | os.PathLike[str]
) -> SourceJoin:
    """Join an ONNX export and a StableHLO export of the same model by source id.

    ``onnx_model``: what ``modelprov.export`` returned or wrote (optimized or not).
    ``stablehlo``: a StableHLOProgram, or MLIR text/bytecode/path (also after downstream
    compilers such as IREE: locations carry the id when attributes are gone).
    """
    model = as_ir(onnx_model, where="join_sources(onnx_model, ...)")
    onnx_pairs = [
        (source_id, node_label(node, index))
        for index, (node, found) in enumerate(node_sources(model))
        for source in found
        for source_id in shared_ids(source)
    ]
    if isinstance(stablehlo, str | bytes | os.PathLike):
        from modelprov.stablehlo import read_mlir_sources

        ops = read_mlir_sources(stablehlo)
        op_pairs = [(s.id, op.index) for op in ops for s in op.sources]
    else:
        op_pairs = [(s.id, op.index) for op in stablehlo.ops for s in stablehlo.sources(op)]
    return SourceJoin(
        onnx_nodes=types.MappingProxyType(_group(onnx_pairs)),
        stablehlo_ops=types.MappingProxyType(_group(op_pairs)),
    )
