"""User keys travel in op locations (fused-location metadata): past IREE, back as attributes.

Acceptance (issue 27): after IREE ``--compile-to=flow --mlir-print-debuginfo``,
read_mlir_sources on IREE's output returns the calibrated ranges of every Linear layer IREE
keeps; restore_attributes rebuilds custom.* from locations.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import modelprov
from modelprov.stablehlo import read_mlir_sources, restore_attributes
from modelprov.stablehlo.read._read import attribute_text
from tests.stablehlo import _downstream

pytest.importorskip("jax")


def _calibrated_mlp() -> tuple[modelprov.StableHLOProgram, dict[str, dict[str, Any]]]:
    model, args = modelprov._cli._examples.mlp()
    torch.manual_seed(2)
    ranges = modelprov.calibrate(model, [torch.randn(8, 784) for _ in range(4)])
    return modelprov.export_stablehlo(model, args, annotations=ranges), ranges


def _strip_user_keys(text: str) -> str:
    """The module with every custom.* attribute deleted, as IREE or a pass would."""
    from jax._src.interpreters import mlir
    from jaxlib.mlir import ir

    with mlir.make_ir_context():
        module = ir.Module.parse(text)
        ops: list[Any] = []
        module.operation.walk(lambda op: ops.append(op.operation) or ir.WalkResult.ADVANCE)
        for op in ops:
            names = [str(op.attributes[i].name) for i in range(len(op.attributes))]
            for name in names:
                if name.startswith("custom."):
                    del op.attributes[name]
        return str(module.operation.get_asm(enable_debug_info=True))


def _ranges(ops: Any) -> dict[str, tuple[str, str]]:
    found: dict[str, tuple[str, str]] = {}
    for op in ops:
        for source in op.sources:
            if "custom.min" in source.metadata:
                value = (source.metadata["custom.min"], source.metadata["custom.max"])
                assert found.setdefault(source.module_path, value) == value
    return found


def test_iree_flow_keeps_the_range_of_every_linear_layer_it_keeps() -> None:
    pytest.importorskip("iree.compiler")
    program, ranges = _calibrated_mlp()
    flow = _downstream.iree_flow(program)
    ops = read_mlir_sources(flow)
    # IREE dropped the attributes: the ranges come from the locations alone.
    assert not any("custom.min" in op.attributes for op in ops)
    kept = {source.module_path for op in ops for source in op.sources}
    linears = {"0", "2"}
    assert linears <= kept
    found = _ranges(ops)
    for path in kept:
        # calibrate's floats, f64 in the locations, back in their string form
        expected = (ranges[path]["custom.min"], ranges[path]["custom.max"])
        assert found[path] == tuple(attribute_text(value) for value in expected)


def test_restore_attributes_rebuilds_user_keys_from_locations() -> None:
    program, ranges = _calibrated_mlp()
    original = read_mlir_sources(program.text_with_locations)
    stripped = _strip_user_keys(program.text_with_locations)
    assert not any("custom.min" in op.attributes for op in read_mlir_sources(stripped))
    restored = read_mlir_sources(restore_attributes(stripped))
    assert [dict(op.attributes) for op in restored] == [dict(op.attributes) for op in original]
    ranged = [op for op in restored if "custom.min" in op.attributes]
    assert [op.attributes["modelprov.module"] for op in ranged] == ["0", "1", "2"]
    for op in ranged:
        path = op.attributes["modelprov.module"]
        assert op.attributes["custom.max"] == ranges[path]["custom.max"]
    x = torch.randn(4, 784)
    np.testing.assert_allclose(
        _downstream.run_text(program, restore_attributes(stripped), x)[0],
        program.run(x)[0],
        rtol=0,
        atol=1e-6,
    )


def test_module_scoped_keys_are_on_every_op_of_the_module_value_scoped_on_its_output() -> None:
    model, args = modelprov._cli._examples.mlp()
    annotations = {"0": {"custom.tag": "first", "custom.max": 3.5}}
    program = modelprov.export_stablehlo(model, args, annotations=annotations)
    stripped = _strip_user_keys(program.text_with_locations)
    ops = read_mlir_sources(stripped)
    of_layer = [op for op in ops if op.sources and {s.module_path for s in op.sources} == {"0"}]
    assert len(of_layer) > 3
    # A constant value several modules use (one op naming all of them) is no module's own.
    shared = [op for op in ops if len({s.module_path for s in op.sources}) > 1]
    assert shared and not any(source.metadata for op in shared for source in op.sources)
    assert all(op.sources[0].metadata.get("custom.tag") == "first" for op in of_layer)
    with_max = [op for op in of_layer if "custom.max" in op.sources[0].metadata]
    assert [op.op_name for op in with_max] == ["stablehlo.add"]  # the layer's output
    others = [op for op in ops if op.sources and "0" not in {s.module_path for s in op.sources}]
    assert others and not any(op.sources[0].metadata for op in others)


def test_location_keys_survive_canonicalize_and_cse() -> None:
    program, ranges = _calibrated_mlp()
    optimized = _downstream.canonicalize_and_cse(_strip_user_keys(program.text_with_locations))
    assert _ranges(read_mlir_sources(optimized)) == {
        path: (attribute_text(keys["custom.min"]), attribute_text(keys["custom.max"]))
        for path, keys in ranges.items()
    }


def test_xla_still_names_module_and_line_with_keys_in_locations() -> None:
    program, _ = _calibrated_mlp()
    x = torch.randn(4, 784)
    total, good, misses = _downstream.hlo_survival(program, _downstream.compiled_hlo(program, x))
    assert good == total, misses
