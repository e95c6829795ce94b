"""The JAX internals behind _jax_compat exist in the installed jax and round-trip an artifact."""

from __future__ import annotations

import dataclasses
import importlib

import numpy as np
import pytest

from modelprov.errors import MissingDependencyError
from modelprov.stablehlo._jax_compat import TESTED_JAX, ir_context, module_to_bytecode

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
