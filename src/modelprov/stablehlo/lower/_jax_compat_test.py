"""The JAX internals behind _jax_compat exist in the installed jax and round-trip an artifact."""

from __future__ import annotations

import dataclasses
import importlib

import numpy as np
import pytest

from modelprov.errors import MissingDependencyError
from modelprov.stablehlo.lower._jax_compat import TESTED_JAX, ir_context, module_to_bytecode

jax = pytest.importorskip("jax")


def test_installed_jax_is_the_tested_version() -> None:
    assert jax.__version__ == TESTED_JAX, (
        f"jax {jax.__version__}: re-check _jax_compat's helpers, then update TESTED_JAX"
    )


def test_module_to_bytecode_writes_an_artifact_jax_runs() -> None:
    import jax.export
    import jax.numpy as jnp

    def f(x: jax.Array) -> jax.Array:
        return jnp.sin(x) * 2.0

    x = np.linspace(0.0, 1.0, 8, dtype=np.float32)
    exported = jax.export.export(jax.jit(f))(x)
    with ir_context():
        module = exported.mlir_module(serialized=False)
        serialized = module_to_bytecode(module)
    assert isinstance(serialized, bytes) and serialized
    rebuilt = dataclasses.replace(exported, mlir_module_serialized=serialized)
    again = jax.export.deserialize(rebuilt.serialize())
    np.testing.assert_allclose(np.asarray(again.call(x)), np.sin(x) * 2.0, rtol=1e-6)


def test_a_missing_internal_names_the_versions(monkeypatch: pytest.MonkeyPatch) -> None:
    internals = importlib.import_module("jax._src.export._export")
    monkeypatch.delattr(internals, "_module_to_bytecode")
    with pytest.raises(MissingDependencyError, match=r"jax .* lacks .*_module_to_bytecode"):
        module_to_bytecode(object())


def test_exported_with_results_returns_the_added_results_after_its_own() -> None:
    import jax.export
    import jax.numpy as jnp
    from jaxlib.mlir import ir

    from modelprov.stablehlo.lower._jax_compat import exported_with_results

    def f(x: jax.Array) -> jax.Array:
        return jnp.cos(jnp.sin(x))

    x = np.linspace(0.0, 1.0, 6, dtype=np.float32)
    exported = jax.export.export(jax.jit(f))(x)
    with ir_context():
        module = exported.mlir_module(serialized=False)
        main = next(op.operation for op in module.body.operations)
        block = main.regions[0].blocks[0]
        sine = next(op for op in block.operations if op.operation.name == "stablehlo.sine")
        returned = list(block.operations)[-1]
        with ir.InsertionPoint(returned), returned.location:
            ir.Operation.create("func.return", operands=[*returned.operands, sine.result])
        returned.erase()
        kind = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value)
        main.attributes["function_type"] = ir.TypeAttr.get(
            ir.FunctionType.get(list(kind.inputs), [*kind.results, sine.result.type])
        )
        if "res_attrs" in main.attributes:
            kept = list(ir.ArrayAttr(main.attributes["res_attrs"]))
            main.attributes["res_attrs"] = ir.ArrayAttr.get([*kept, ir.DictAttr.get({})])
        serialized = module_to_bytecode(module)
    widened = exported_with_results(exported, serialized, (jax.core.ShapedArray((6,), np.float32),))
    own, sine_value = widened.call(x)
    np.testing.assert_array_equal(np.asarray(own), np.asarray(exported.call(x)))
    np.testing.assert_allclose(np.asarray(sine_value), np.sin(x), rtol=1e-6)
