"""ONNX and StableHLO exports of one annotated model give every source the same user keys.

Nested modules declare the same value-scoped key (on a tensor that leaves both), the same
module-scoped key, and a per-output key; the value-scoped key merges by ``max``, so an
op-level merge of the inner and the outer value (instead of the inner module's value, the
rule of ``core._scoping``) would show as a difference.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping

import pytest
import torch
from torch import nn

import modelprov
from modelprov.core._policy import DEFAULT_POLICIES, max, value_scoped
from modelprov.core._sources import shared_id_list
from modelprov.keys import (
    SOURCE_NODE_KEY,
    STABLEHLO_NODE_KEY,
    STABLEHLO_SOURCE_NODE_KEY,
)

pytest.importorskip("jax")


class _Inner(nn.Module):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.fc(x))


class _Block(nn.Module):  # type: ignore[misc]
    """Output 0 is the inner module's output; output 1 a linear of it."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = _Inner()
        self.scale = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = self.inner(x)
        return y, self.scale(y)


class _Model(nn.Module):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.block = _Block()
        self.head = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b = self.block(x)
        return self.head(a * b)


ANNOTATIONS = {
    "": {"custom.team": "root"},
    "block": {"custom.max": 2.0, "custom.owner": "block", "custom.output1.min": -3.0},
    "block.inner": {"custom.max": 1.0, "custom.owner": "inner"},
}
POLICIES = DEFAULT_POLICIES | {
    "custom.max": value_scoped(max),
    "custom.output1.min": value_scoped(max),
}


def _user_keys(
    items: Iterable[tuple[list[str], Mapping[str, str]]],
) -> dict[str, dict[str, set[str]]]:
    """Source id -> user key -> the values found on the nodes/ops of that one source."""
    found: dict[str, dict[str, set[str]]] = {}
    for ids, metadata in items:
        if len(ids) != 1:
            continue  # made from several sources: merged by the policies, not compared
        keys = found.setdefault(ids[0], {})
        for key, value in metadata.items():
            if key.startswith("custom."):
                keys.setdefault(key, set()).add(value)
    return found


def test_onnx_and_stablehlo_give_each_source_the_same_annotation_keys() -> None:
    torch.manual_seed(0)
    model, args = _Model().eval(), (torch.randn(2, 8),)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        onnx_program = modelprov.export(
            model, args, annotations=ANNOTATIONS, policies=POLICIES, optimize=False, verbose=False
        )
    stablehlo = modelprov.export_stablehlo(model, args, annotations=ANNOTATIONS, policies=POLICIES)
    from modelprov.stablehlo.read._read import attribute_text  # numbers in their string form

    onnx_keys = _user_keys(
        (shared_id_list(node.metadata_props.get(SOURCE_NODE_KEY, "")), node.metadata_props)
        for node in onnx_program.model.graph
    )
    stablehlo_keys = _user_keys(
        (
            shared_id_list(
                str(op.attributes.get(STABLEHLO_SOURCE_NODE_KEY, op.attributes[STABLEHLO_NODE_KEY]))
            ),
            {key: attribute_text(value) for key, value in op.attributes.items()},
        )
        for op in stablehlo.ops
        if len(op.nodes) == 1
    )
    shared = sorted(set(onnx_keys) & set(stablehlo_keys))
    assert shared == ["linear", "linear_1", "linear_2", "mul", "relu"], sorted(onnx_keys)
    for source_id in shared:
        assert onnx_keys[source_id] == stablehlo_keys[source_id], source_id

    # The inner module's value wins on the tensor leaving both modules; the per-output key
    # only on block's output 1; the module-scoped key of the innermost module.
    relu = next(i for i in shared if i.startswith("relu"))
    assert onnx_keys[relu] == {
        "custom.team": {"root"},
        "custom.owner": {"inner"},
        "custom.max": {"1.0"},
    }
    scale = next(i for i in shared if stablehlo_keys[i].get("custom.output1.min"))
    assert stablehlo_keys[scale]["custom.output1.min"] == {"-3.0"}
    assert stablehlo_keys[scale]["custom.max"] == {"2.0"}
    assert stablehlo_keys[scale]["custom.owner"] == {"block"}

    # StableHLOProgram.sources: each source's own metadata, the same on every op lowered
    # from it and the same as the ONNX export's source (its unoptimized node's metadata).
    per_source: dict[str, dict[str, str]] = {}
    for op in stablehlo.ops:
        for source in stablehlo.sources(op):
            keys = {k: v for k, v in source.metadata.items() if k.startswith("custom.")}
            assert per_source.setdefault(source.id, keys) == keys, source.id
    onnx_sources = {
        source_id: {key: next(iter(values)) for key, values in keys.items()}
        for source_id, keys in onnx_keys.items()
    }
    assert {i: per_source[i] for i in onnx_sources} == onnx_sources
