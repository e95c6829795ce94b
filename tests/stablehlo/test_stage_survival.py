"""docs/downstream.md's per-stage table: user keys as attributes, frontend attributes and
location keys, from export through MLIR passes, XLA's optimized HLO and IREE's phases.

Seed 003's MLP calibrated by modelprov.calibrate (value-scoped custom.min/max on the three
layers) and the 2-layer Llama with layers.0.mlp value-scoped custom.min/max and
layers.1.self_attn module-scoped custom.tag (slow: about 25 s, most of it the export).
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

import modelprov
from tests.stablehlo import _downstream
from tests.stablehlo.test_xla_frontend_attributes import _LLAMA_KEYS

pytest.importorskip("jax")


def _mlp() -> tuple[modelprov.StableHLOProgram, tuple[Any, ...], set[str]]:
    model, args = modelprov._cli._examples.mlp()
    torch.manual_seed(2)
    ranges = modelprov.calibrate(model, [torch.randn(8, 784) for _ in range(4)])
    return modelprov.export_stablehlo(model, args, annotations=ranges), args, {"0", "1", "2"}


def _llama() -> tuple[modelprov.StableHLOProgram, tuple[Any, ...], set[str]]:
    model, args, kwargs = _downstream.MODELS["llama"]()
    program = modelprov.export_stablehlo(model, args, kwargs, annotations=_LLAMA_KEYS)
    # layers.0.mlp's range is on its output op, down_proj's; the tag on the attention's ops.
    return program, (*args, *kwargs.values()), {"layers.0.mlp.down_proj", "layers.1.self_attn"}


@pytest.mark.parametrize("build", [_mlp, pytest.param(_llama, marks=pytest.mark.slow)])
def test_user_keys_at_every_stage(build: Any) -> None:
    pytest.importorskip("iree.compiler")
    program, inputs, keyed = build()
    stages = _downstream.stage_counts(program, *inputs)
    exported = stages["export"]
    # Export: every op with user keys has them as attributes, in mhlo.frontend_attributes
    # and in its location; every labelled op has frontend attributes.
    assert exported.attributes == exported.frontend_keys == exported.keyed_locations > 0
    assert exported.frontend >= exported.attributes
    assert keyed <= exported.keyed_modules
    # MLIR canonicalize + CSE keep all three on the ops that survive.
    assert stages["canonicalize+cse"] == exported
    # XLA: no attributes or locations in HLO; the frontend attributes stay, on the
    # instructions made from each op (and on fusions whose root carries them).
    xla = stages["xla optimized"]
    assert xla.frontend > 0 and xla.frontend_keys >= exported.attributes
    if keyed == {"0", "1", "2"}:  # acceptance: the three layer outputs carry their range
        assert xla.keyed_modules == keyed
    else:  # an instruction may take them from the residual add it is made with (layers.N)
        assert "layers.1.self_attn" in xla.keyed_modules
    # IREE input: attributes kept, frontend attributes mostly dropped, locations kept (an
    # op may become several); every keyed module is still read back with its keys.
    iree_input = stages["iree input"]
    assert 0 < iree_input.attributes <= exported.attributes
    assert iree_input.frontend < exported.frontend / 2
    assert iree_input.keyed_locations >= exported.keyed_locations
    assert iree_input.keyed_modules == exported.keyed_modules
    # Global optimization and flow: attributes dropped but on a few matmuls; locations
    # with keys kept, so read_mlir_sources gives the kept sources their keys.
    for name in ("iree global-optimization", "iree flow"):
        stage = stages[name]
        assert stage.attributes <= 3 and stage.keyed_locations > 0, (name, stage)
    flow = stages["iree flow"]
    assert flow.attributes < flow.keyed_locations
    if keyed == {"0", "1", "2"}:  # acceptance: the range of every Linear layer IREE keeps
        assert flow.keyed_modules == keyed
    else:
        assert "layers.1.self_attn" in flow.keyed_modules
