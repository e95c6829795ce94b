"""JAX internals modelprov relies on, fenced in one place with a version guard.

- ``jax._src.interpreters.mlir.make_ir_context``: an MLIR context with JAX's dialects
  registered, needed to open the module ``jax.export`` produced and add attributes to it.
- ``jax._src.export._export._module_to_bytecode``: JAX's own serializer of a StableHLO
  module into the portable artifact ``jax.export`` stores (versioned StableHLO bytecode),
  so the attributes modelprov adds survive in a file any JAX can deserialize.
- ``jax.export.Exported._out_named_shardings``: one entry per result, which
  ``Exported.call`` indexes for every result; :func:`exported_with_results` gives a module
  that returns more results (``modelprov.compare`` exposing intermediate values) one
  unsharded entry per added result. ``dataclasses.replace`` on the public fields alone
  leaves it one entry per original result and ``call`` fails.

- ``jax._src.lib.xla_client._xla.mlir.mlir_module_to_xla_computation``: XLA's own
  conversion of MLIR text to HLO (what ``jax.jit(...).lower(...).as_text(dialect="hlo")``
  runs, MLIR folder included), for a module that is no JAX function
  (``_folded_constant_values`` asks it which constant values XLA folds together), and
  ``jax._src.lib.hlo.HloPrintOptions`` to print that HLO with its metadata
  (``_splat_calls`` asks which values XLA writes as an unnamed broadcast).

None has a public equivalent in jax 0.10.2. When one is missing,
:class:`~modelprov.errors.MissingDependencyError` names the jax version found and the one
modelprov was tested with (:data:`TESTED_JAX`).
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any

from modelprov.errors import MissingDependencyError

__all__ = [
    "TESTED_JAX",
    "exported_with_results",
    "ir_context",
    "mlir_to_hlo_text",
    "module_to_bytecode",
]

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


def mlir_to_hlo_text(text: str, *, metadata: bool = False) -> str:
    """XLA's HLO text of MLIR ``text`` (its results as one tuple), before any HLO pass; with
    ``metadata``, each instruction's metadata (``op_name`` from its op's location) too."""
    xla = _private("jax._src.lib", "xla_client")
    convert = getattr(
        getattr(getattr(xla, "_xla", None), "mlir", None), "mlir_module_to_xla_computation", None
    )
    if convert is None:
        import jax

        raise MissingDependencyError(
            f"jax {jax.__version__} lacks xla_client._xla.mlir.mlir_module_to_xla_computation; "
            f'modelprov was tested with jax {TESTED_JAX}: pip install "modelprov[stablehlo]"'
        )
    computation = convert(text, use_tuple_args=False, return_tuple=True)
    if not metadata:
        return str(computation.as_hlo_text())
    options = _private("jax._src.lib", "hlo").HloPrintOptions()
    options.print_metadata = True
    return str(computation.get_hlo_module().to_string(options))


def exported_with_results(exported: Any, serialized: bytes, added_avals: tuple[Any, ...]) -> Any:
    """``exported`` whose module is ``serialized``: the same function returning, after its
    own results, one more result per ``jax.core.ShapedArray`` of ``added_avals`` (unsharded),
    as a flat tuple. The inputs, platforms and effects are ``exported``'s."""
    import jax

    fields = {field.name for field in dataclasses.fields(exported)}
    if "_out_named_shardings" not in fields:
        raise MissingDependencyError(
            f"jax {jax.__version__}: jax.export.Exported has no _out_named_shardings field; "
            f'modelprov was tested with jax {TESTED_JAX}: pip install "modelprov[stablehlo]"'
        )
    unsharded = (None,) * len(added_avals)
    results = len(exported.out_avals) + len(added_avals)
    return dataclasses.replace(
        exported,
        mlir_module_serialized=serialized,
        out_avals=(*exported.out_avals, *added_avals),
        out_tree=jax.tree_util.tree_structure(tuple(range(results))),
        out_shardings_hlo=(*exported.out_shardings_hlo, *unsharded),
        _out_named_shardings=(*exported._out_named_shardings, *unsharded),
    )
