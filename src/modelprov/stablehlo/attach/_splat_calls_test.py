"""Values XLA writes as an unnamed splat become calls located at the op reading them."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("jax")

from hypothesis import given, settings
from hypothesis import strategies as st

from modelprov.stablehlo.attach._splat_calls import call_small_splats
from modelprov.stablehlo.lower._jax_compat import ir_context, mlir_to_hlo_text
from modelprov.stablehlo.read._op_walk import main_function


def _module(shape: str) -> str:
    """x * broadcast(c) + broadcast(d) * broadcast(d): a value read by a model op, and one
    XLA folds into another constant (the product)."""
    ty = f"tensor<{shape}xf32>"
    return f"""
module @m {{
  func.func public @main(%x: {ty}) -> {ty} {{
    %c = stablehlo.constant dense<5.000000e-01> : tensor<f32> loc("n/c")
    %b = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<f32>) -> {ty} loc("mul/b")
    %m = stablehlo.multiply %x, %b : {ty} loc("mul")
    %d = stablehlo.constant dense<2.000000e+00> : tensor<f32> loc("n/d")
    %k = stablehlo.broadcast_in_dim %d, dims = [] : (tensor<f32>) -> {ty} loc("k/b")
    %p = stablehlo.multiply %k, %k : {ty} loc("k/p")
    %r = stablehlo.add %m, %p : {ty} loc("add")
    return %r : {ty} loc("ret")
  }}
}}"""


def _moved(text: str) -> tuple[int, list[tuple[str, str]], str]:
    """(ops moved, main's ops as (name, location), the module's text)."""
    from jaxlib.mlir import ir

    with ir_context():
        module = ir.Module.parse(text)
        moved = call_small_splats(module, lambda t: mlir_to_hlo_text(t, metadata=True))
        assert module.operation.verify()
        function = main_function(ir, module)
        assert function is not None
        block = function.regions[0].blocks[0]
        main = [(op.name, str(op.location)) for op in block.operations]
        return moved, main, module.operation.get_asm(enable_debug_info=False)


@settings(max_examples=8, deadline=None, derandomize=True, database=None)
@given(shape=st.lists(st.integers(1, 9), min_size=1, max_size=3))
def test_only_small_splats_read_by_computed_ops_become_calls(shape: list[int]) -> None:
    elements = math.prod(shape)
    moved, main, text = _moved(_module("x".join(map(str, shape))))
    if 1 < elements < 32:  # XLA writes these as an unnamed broadcast of a constant
        # the multiply's operand and the product (k is folded into it: it goes with it)
        assert moved == 2
        # at the op's location, and named by the ops that only fed it (gone from main)
        assert ("func.call", 'loc(fused["mul/b", "n/c"])') in main
        assert ("func.call", 'loc(fused["k/p", "n/d", "k/b"])') in main
        assert text.count("func.func private @modelprov_splat_") == 2
        # each body computes its value's constant-only ops from its own copy of c or d;
        # what only they read is gone from main
        assert text.count("stablehlo.constant dense<5.000000e-01>") == 1
        assert text.count("stablehlo.constant dense<2.000000e+00>") == 1
        assert all(name != "stablehlo.constant" for name, _ in main)
    elif elements == 1:  # a plain constant: nothing to name
        assert moved == 0
        assert "modelprov_splat_" not in text
    else:  # 32 or more: XLA names the broadcasts by their locations itself
        assert ("stablehlo.broadcast_in_dim", 'loc("mul/b")') in main
        assert moved == 0


def test_the_calls_are_located_where_the_values_were_read() -> None:
    from jaxlib.mlir import ir

    with ir_context():
        module = ir.Module.parse(_module("2x4"))
        call_small_splats(module, lambda t: mlir_to_hlo_text(t, metadata=True))
        text = module.operation.get_asm(enable_debug_info=True)
    main = text.split("func.func public @main")[1]
    assert "%0 = call @modelprov_splat_0() : () -> tensor<2x4xf32>" in main
    assert "stablehlo.multiply %arg0, %0" in main
    hlo = mlir_to_hlo_text(text, metadata=True)  # the call carries the reader's location
    assert any("call()" in line and 'op_name="mul/b;n/c"' in line for line in hlo.splitlines())


def test_a_module_without_main_is_left_alone() -> None:
    from jaxlib.mlir import ir

    with ir_context():
        module = ir.Module.parse("module @m { func.func public @f() { return } }")
        assert call_small_splats(module, lambda t: mlir_to_hlo_text(t, metadata=True)) == 0
