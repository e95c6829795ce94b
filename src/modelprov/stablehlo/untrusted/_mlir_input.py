"""What ``read_mlir_sources`` and ``restore_attributes`` take, read into MLIR text or bytecode.

Accepted: MLIR text (``str``), a path to a file (``str`` naming an existing file, or any
``os.PathLike``), ``bytes`` of MLIR text, MLIR bytecode (JAX's portable artifacts included)
or the ``.jaxexport`` artifact ``StableHLOProgram.save`` writes (``jax.export.Exported.
serialize()``, read back with ``jax.export.deserialize``; its module, a portable artifact,
becomes StableHLO text with locations through ``Exported.mlir_module()``). Anything else is
a StableHLOError naming the file or type and what it is.
"""

from __future__ import annotations

import os

from modelprov.errors import StableHLOError

__all__ = ["BYTECODE_MAGIC", "MlirInput", "load_mlir"]

MlirInput = str | bytes | bytearray | os.PathLike[str]

BYTECODE_MAGIC = b"ML\xefR"
"""The first bytes of every MLIR bytecode file."""

_MLIR_SUFFIXES = (".mlir", ".mlirbc", ".bc", ".jaxexport", ".stablehlo")
_ACCEPTED = (
    "MLIR text, MLIR bytecode, the .jaxexport artifact StableHLOProgram.save writes, or a "
    "path to one of them"
)


def load_mlir(mlir: object, *, caller: str) -> tuple[str | bytes, str]:
    """``(MLIR text or bytecode, what it is called in messages)`` for ``caller``'s input.

    A ``str`` is a path when it is one line naming an existing file; a one-line ``str``
    that looks like a file name (a ``.mlir``-like suffix or a folder) but names no file is
    a StableHLOError; any other ``str`` is MLIR text.
    """
    if isinstance(mlir, str):
        if "\n" not in mlir and os.path.isfile(mlir):
            return _read_file(mlir)
        if _looks_like_a_path(mlir):
            raise StableHLOError(f"{caller}: {mlir}: no such file; pass {_ACCEPTED}")
        return mlir, "the given MLIR text"
    if isinstance(mlir, os.PathLike):
        return _read_file(os.fspath(mlir))
    if isinstance(mlir, bytes | bytearray):
        return _from_bytes(bytes(mlir), "the given bytes")
    kind = type(mlir)
    raise StableHLOError(f"{caller}: got {kind.__module__}.{kind.__qualname__}; pass {_ACCEPTED}")


def _looks_like_a_path(text: str) -> bool:
    stripped = text.strip()
    if not stripped or "\n" in stripped or "{" in stripped:
        return False
    return stripped.endswith(_MLIR_SUFFIXES) or os.sep in stripped or "/" in stripped


def _read_file(path: str) -> tuple[str | bytes, str]:
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError as error:
        raise StableHLOError(f"{path}: cannot be read: {error.strerror or error}") from None
    return _from_bytes(raw, path)


def _from_bytes(raw: bytes, where: str) -> tuple[str | bytes, str]:
    """Bytecode as it is, a JAX export as its module's StableHLO text, else UTF-8 text."""
    if raw.startswith(BYTECODE_MAGIC):
        return raw, where
    try:
        return raw.decode("utf-8"), where
    except UnicodeDecodeError:
        pass
    module, why = _jax_export_module(raw)
    if module is not None:
        return module, f"{where} (a JAX export)"
    raise StableHLOError(
        f"{where}: {len(raw):,} bytes that are not MLIR text (not UTF-8), not MLIR bytecode "
        f"(which starts with {BYTECODE_MAGIC!r}) and not a JAX export ({why}); pass {_ACCEPTED}"
    )


def _jax_export_module(raw: bytes) -> tuple[str | None, str]:
    """The StableHLO text of a ``jax.export`` artifact's module, or None and why not."""
    try:
        import jax.export
    except ImportError:
        return None, 'reading one needs JAX: pip install "modelprov[stablehlo]"'
    try:
        exported = jax.export.deserialize(bytearray(raw))
    except Exception as error:  # flatbuffers raise whatever the bytes lead them to
        return None, f"jax.export.deserialize: {type(error).__name__}"
    if not bytes(exported.mlir_module_serialized).startswith(BYTECODE_MAGIC):
        return None, "jax.export.deserialize found no MLIR module in it"
    try:
        return str(exported.mlir_module()), ""
    except Exception as error:  # the bindings raise their own MLIRError
        return None, f"its module does not deserialize: {type(error).__name__}"
