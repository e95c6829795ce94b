"""JAX internals modelprov relies on, fenced in one place with a version guard.

- ``jax._src.interpreters.mlir.make_ir_context``: an MLIR context with JAX's dialects
  registered, needed to open the module ``jax.export`` produced and add attributes to it.
- ``jax._src.export._export._module_to_bytecode``: JAX's own serializer of a StableHLO
  module into the portable artifact ``jax.export`` stores (versioned StableHLO bytecode),
  so the attributes modelprov adds survive in a file any JAX can deserialize.

Neither has a public equivalent in jax 0.10.2. When one is missing,
:class:`~modelprov.errors.MissingDependencyError` names the jax version found and the one
modelprov was tested with (:data:`TESTED_JAX`).
"""

from __future__ import annotations

import importlib
from typing import Any

from modelprov.errors import MissingDependencyError

__all__ = ["TESTED_JAX", "ir_context", "module_to_bytecode"]

TESTED_JAX = "0.10.2"
"""The jax version whose private helpers this module uses (the ``stablehlo`` extra's pin)."""


def _private(module: str, name: str) -> Any:
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as error:
        import jax

        raise MissingDependencyError(
            f"jax {jax.__version__} lacks {module}.{name} ({error}); modelprov was tested with "
            f'jax {TESTED_JAX}: install it with pip install "modelprov[stablehlo]"'
        ) from error


def ir_context() -> Any:
    """A new MLIR context with JAX's dialects loaded (use it as a context manager)."""
    return _private("jax._src.interpreters.mlir", "make_ir_context")()


def module_to_bytecode(module: Any) -> bytes:
    """The portable StableHLO bytecode of ``module``, as ``jax.export`` serializes it."""
    serialized: bytes = _private("jax._src.export._export", "_module_to_bytecode")(module)
    return serialized
