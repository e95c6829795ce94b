"""Constant-only ops XLA folds to one constant become one op, named by every copy."""

from __future__ import annotations

import pytest

pytest.importorskip("jax")

from hypothesis import given, settings
from hypothesis import strategies as st

from modelprov.stablehlo.attach._folded_constant_values import (
    merge_folded_constant_values,
)
from modelprov.stablehlo.lower._jax_compat import ir_context, mlir_to_hlo_text


def _module(shape: str, divisor: float, offset: float) -> str:
    """x / broadcast(d) + x / broadcast(d - offset): equal constants when offset is 0."""
    ty = f"tensor<{shape}xf32>"
    return f"""
module @m {{
  func.func public @main(%x: tensor<{shape}xf32>) -> tensor<{shape}xf32> {{
    %d = stablehlo.constant dense<{divisor:e}> : tensor<f32> loc("n/d")
    %z = stablehlo.constant dense<{offset:e}> : tensor<f32> loc("n/z")
    %s = stablehlo.subtract %d, %z : tensor<f32> loc("var/s")
    %b1 = stablehlo.broadcast_in_dim %d, dims = [] : (tensor<f32>) -> {ty} loc("mean/b")
    %b2 = stablehlo.broadcast_in_dim %s, dims = [] : (tensor<f32>) -> {ty} loc("var/b")
    %m = stablehlo.divide %x, %b1 : tensor<{shape}xf32> loc("mean/div")
    %v = stablehlo.divide %x, %b2 : tensor<{shape}xf32> loc("var/div")
    %r = stablehlo.add %m, %v : tensor<{shape}xf32> loc("add")
    return %r : tensor<{shape}xf32> loc("ret")
  }}
}}"""


def _merge(text: str) -> tuple[int, list[str], str]:
    """(ops removed, the broadcasts' locations, the module's text) after the merge."""
    from jaxlib.mlir import ir

    with ir_context():
        module = ir.Module.parse(text)
        removed = merge_folded_constant_values(module, mlir_to_hlo_text)
        assert module.operation.verify()
        block = module.body.operations[0].regions[0].blocks[0]
        broadcasts = [
            str(op.location) for op in block.operations if op.name == "stablehlo.broadcast_in_dim"
        ]
        return removed, broadcasts, module.operation.get_asm(enable_debug_info=True)


@settings(max_examples=6, deadline=None, derandomize=True, database=None)
@given(
    divisor=st.sampled_from([2.0, 32.0, 0.5, 7.0]),
    offset=st.sampled_from([0.0, 1.0]),
    shape=st.sampled_from(["2x64x1", "4x8", "3"]),
)
def test_values_xla_folds_together_become_one_op(divisor: float, offset: float, shape: str) -> None:
    removed, broadcasts, _ = _merge(_module(shape, divisor, offset))
    if offset == 0.0:  # d - 0 folds to d: the broadcasts the divides read are one value
        assert removed == 3  # a broadcast, the subtract and z, which only fed it
        # named by both broadcasts, and by the ops that computed the removed one's value
        assert broadcasts == ['loc(fused["mean/b", "n/z", "var/s", "var/b"])']  # graph order
    else:  # different values: nothing merged (only values the model's ops read are)
        assert removed == 0
        assert broadcasts == ['loc("mean/b")', 'loc("var/b")']


def test_the_merged_splat_keeps_its_name_in_xla() -> None:
    """XLA names a splat constant of 32 elements or more by its location unless its folder
    merged two of them (it drops the location then)."""
    text = _module("2x64x1", 32.0, 0.0)
    plain = mlir_to_hlo_text(text)
    assert "b.1 = f32[2,64,1]" not in plain  # merged by XLA's folder: no name
    _, _, merged = _merge(text)
    assert "b.1 = f32[2,64,1]" in mlir_to_hlo_text(merged)  # named by "mean/b"


def test_a_module_without_main_or_constants_is_left_alone() -> None:
    removed, _, _ = _merge("module @m { func.func public @f() { return } }")
    assert removed == 0
