"""Identical constant values merge into one op that names every copy; XLA keeps the name."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("jax")

from modelprov.stablehlo.attach._constant_values import merge_constant_values

_SHAPE = "4x8"


def _module_text(uses: list[tuple[float, str, str]]) -> str:
    """``main(x)``: for each (value, op, node) a broadcast of the scalar ``value`` (one
    constant op per value, as JAX makes them) located at ``node``, combined with ``x`` by
    ``op``; the results summed."""
    lines = []
    constants: dict[float, str] = {}
    for value in dict.fromkeys(value for value, _, _ in uses):
        constants[value] = f"%c{len(constants)}"
        lines.append(f"{constants[value]} = stablehlo.constant dense<{value!r}> : tensor<f32>")
    total = "%arg0"
    for n, (value, op, node) in enumerate(uses):
        lines.append(
            f"%b{n} = stablehlo.broadcast_in_dim {constants[value]}, dims = [] : "
            f'(tensor<f32>) -> tensor<{_SHAPE}xf32> loc("{node}")'
        )
        lines.append(f'%r{n} = stablehlo.{op} %arg0, %b{n} : tensor<{_SHAPE}xf32> loc("{node}")')
        lines.append(f"%s{n} = stablehlo.add {total}, %r{n} : tensor<{_SHAPE}xf32>")
        total = f"%s{n}"
    body = "\n    ".join(lines)
    return f"""module @m attributes {{mhlo.num_replicas = 1 : i32}} {{
  func.func public @main(%arg0: tensor<{_SHAPE}xf32>) -> (tensor<{_SHAPE}xf32>) {{
    {body}
    return {total} : tensor<{_SHAPE}xf32>
  }}
}}"""


def _merged(text: str) -> tuple[str, int, list[str]]:
    """The module after merging, ops removed, and the location of each broadcast."""
    from jax._src.interpreters import mlir
    from jaxlib.mlir import ir

    with mlir.make_ir_context():
        module = ir.Module.parse(text)
        removed = merge_constant_values(module)
        assert module.operation.verify()
        (function,) = module.body.operations
        locations = [
            str(op.location)
            for op in function.regions[0].blocks[0].operations
            if op.operation.name == "stablehlo.broadcast_in_dim"
        ]
        return str(module.operation.get_asm(enable_debug_info=True)), removed, locations


def _compile(text: str) -> tuple[np.ndarray, str]:
    """XLA CPU's result on a fixed input, and its optimized HLO."""
    import jax
    import jax.numpy as jnp
    from jax._src.export import _export as jax_export_internals
    from jax._src.interpreters import mlir
    from jaxlib.mlir import ir

    template = jax.export.export(jax.jit(lambda x: x))(jax.ShapeDtypeStruct((4, 8), jnp.float32))
    with mlir.make_ir_context():
        serialized = jax_export_internals._module_to_bytecode(ir.Module.parse(text))
    exported = dataclasses.replace(template, mlir_module_serialized=serialized)
    x = np.linspace(-2.0, 2.0, 32, dtype=np.float32).reshape(4, 8)
    compiled = jax.jit(exported.call).lower(x).compile()
    return np.asarray(compiled(x)), str(compiled.as_text())


def _broadcast_names(hlo: str) -> list[str]:
    from modelprov.stablehlo import read_hlo_sources

    return [op.op_name for op in read_hlo_sources(hlo) if op.opcode == "broadcast"]


def test_copies_merge_and_xla_names_the_merged_value_by_every_node() -> None:
    uses = [(2.0, "multiply", "a/mul"), (2.0, "add", "b/add"), (3.0, "multiply", "c/mul")]
    text = _module_text(uses)
    merged, removed, locations = _merged(text)
    assert removed == 1
    assert locations == ['loc(fused["a/mul", "b/add"])', 'loc("c/mul")']
    before, hlo_before = _compile(text)
    after, hlo_after = _compile(merged)
    np.testing.assert_array_equal(before, after)
    # XLA merges the copies itself and drops their differing locations ...
    assert any(name.endswith("call_exported") for name in _broadcast_names(hlo_before))
    # ... a value that is one op keeps its location (both names, MLIR's FusedLoc).
    names = _broadcast_names(hlo_after)
    assert names and not any(name.endswith("call_exported") for name in names), names
    assert any(name.endswith("a/mul;b/add") for name in names), names


def test_model_data_and_non_splat_constants_are_never_merged() -> None:
    text = """module @m {
  func.func public @main(%arg0: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
    %c0 = stablehlo.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32> loc("a/c")
    %c1 = stablehlo.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32> loc("b/c")
    %n0 = stablehlo.negate %arg0 : tensor<4xf32> loc("a/n")
    %n1 = stablehlo.negate %arg0 : tensor<4xf32> loc("b/n")
    %s = stablehlo.add %n0, %c0 : tensor<4xf32>
    %t = stablehlo.add %n1, %c1 : tensor<4xf32>
    return %s, %t, %c1 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  }
}"""
    merged, removed, _ = _merged(text)
    assert removed == 0
    assert merged.count("stablehlo.negate") == 2 and merged.count("stablehlo.constant") == 2


@settings(max_examples=8, deadline=None, derandomize=True, database=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([0.5, 2.0, -1.0]),
            st.sampled_from(["multiply", "add", "maximum"]),
            st.sampled_from(["a/x", "b/y", "c/z"]),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_one_op_per_value_and_the_same_result(uses: list[tuple[float, str, str]]) -> None:
    text = _module_text(uses)
    merged, removed, _ = _merged(text)
    values = {value for value, _, _ in uses}
    assert merged.count("stablehlo.broadcast_in_dim") == len(values)
    assert removed == len(uses) - len(values)
    before: Any = _compile(text)[0]
    np.testing.assert_array_equal(before, _compile(merged)[0])
