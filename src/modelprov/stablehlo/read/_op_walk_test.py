"""The shared op walk: pre-order over nested regions, as a hand recursion lists it."""

from __future__ import annotations

from typing import Any

import pytest

from modelprov.stablehlo.read._op_walk import STRUCTURAL_OPS, pre_order

ir = pytest.importorskip("jaxlib.mlir.ir")

_PROGRAM = """
func.func @main(%a: tensor<2xf32>, %p: tensor<i1>) -> tensor<2xf32> {
  %0 = "test.add"(%a, %a) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %1 = "test.if"(%p) ({
    %2 = "test.neg"(%0) : (tensor<2xf32>) -> tensor<2xf32>
    "test.yield"(%2) : (tensor<2xf32>) -> ()
  }, {
    "test.yield"(%0) : (tensor<2xf32>) -> ()
  }) : (tensor<i1>) -> tensor<2xf32>
  func.return %1 : tensor<2xf32>
}
func.func @helper(%b: tensor<2xf32>) -> tensor<2xf32> {
  func.return %b : tensor<2xf32>
}
"""


def _by_hand(operation: Any) -> list[str]:
    names = [str(operation.name)]
    for region in operation.regions:
        for block in region.blocks:
            for op in block.operations:
                names.extend(_by_hand(op.operation))
    return names


def _module() -> Any:
    from modelprov.stablehlo.lower._jax_compat import ir_context

    context = ir_context()
    context.allow_unregistered_dialects = True
    return context, ir.Module.parse(_PROGRAM, context)


def test_pre_order_lists_every_op_root_first_as_a_recursion_does() -> None:
    context, module = _module()
    with context:
        walked = [str(op.name) for op in pre_order(ir, module)]
    assert walked == _by_hand(module.operation)
    assert walked[:3] == ["builtin.module", "func.func", "test.add"]
    assert walked.count("test.yield") == 2


def test_pre_order_skips_the_named_ops_only() -> None:
    context, module = _module()
    with context:
        walked = [str(op.name) for op in pre_order(ir, module, skip=STRUCTURAL_OPS)]
    expected = [name for name in _by_hand(module.operation) if name not in STRUCTURAL_OPS]
    assert walked == expected == ["test.add", "test.if", "test.neg", "test.yield", "test.yield"]


def test_pre_order_from_an_op_starts_at_it() -> None:
    context, module = _module()
    with context:
        region_op = next(op for op in pre_order(ir, module) if op.name == "test.if")
        walked = [str(op.name) for op in pre_order(ir, region_op)]
    assert walked == ["test.if", "test.neg", "test.yield", "test.yield"]
