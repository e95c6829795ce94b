"""MLIR bytecode is untrusted: it becomes text in a child process, then is checked as text.

Bytecode has no text a linear scan can check before MLIR's C++ reads it: nesting is spelled
by references, so a few bytes can hold a location 50,000 levels deep, and its strings need
not be UTF-8. Reading or printing such a module can kill the process with a signal. So
``_bytecode_child`` reads the bytecode and prints it as text (with locations) in a child
process with resource limits (CPU time, address space, a wall-clock timeout); whatever
kills it is a StableHLOError here, and the text it prints goes through the same checks as
any text (``_mlir_limits``) before it is parsed in this process. The child imports no
modelprov code and starts in about a second (jaxlib's MLIR bindings only).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from modelprov.errors import StableHLOError
from modelprov.stablehlo.untrusted._mlir_limits import MAX_MLIR_CHARS, check_mlir_text

__all__ = ["BYTECODE_MAGIC", "CHILD_MEMORY_BYTES", "CHILD_SECONDS", "bytecode_as_text", "mlir_text"]

BYTECODE_MAGIC = b"ML\xefR"
"""How MLIR bytecode starts."""

CHILD_SECONDS = 600
"""Wall-clock and CPU seconds the child may take."""
CHILD_MEMORY_BYTES = 16 << 30
"""Address space the child may map, at least (more for bytecode over 256 MiB: 64 x)."""

_CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_bytecode_child.py")


def mlir_text(data: str | bytes, where: str) -> str:
    """MLIR text safe to give MLIR's parser: ``data`` (text, UTF-8 bytes or bytecode) as
    text, checked by ``check_mlir_text``; StableHLOError naming ``where`` otherwise."""
    if isinstance(data, bytes):
        if data.startswith(BYTECODE_MAGIC):
            return bytecode_as_text(data, where)
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as error:
            raise StableHLOError(
                f"{where} is neither MLIR bytecode nor UTF-8 text (byte {error.start} is "
                f"{data[error.start : error.start + 1]!r}); pass MLIR text or bytecode"
            ) from None
    check_mlir_text(data, where)
    return data


def bytecode_as_text(data: bytes, where: str) -> str:
    """The text (with locations) of the MLIR bytecode ``data``, checked by
    ``check_mlir_text``. Raises StableHLOError naming ``where`` when the bytecode cannot be
    read, kills the reader, or its text breaks a limit."""
    memory = max(CHILD_MEMORY_BYTES, 64 * len(data))
    try:
        done = subprocess.run(
            [sys.executable, "-I", _CHILD, str(MAX_MLIR_CHARS), str(memory), str(CHILD_SECONDS)],
            input=data,
            capture_output=True,
            timeout=CHILD_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise StableHLOError(
            f"cannot read {where}: reading the MLIR bytecode took over {CHILD_SECONDS} s; "
            "pass a smaller module"
        ) from None
    if done.returncode == 2:
        first = done.stdout.decode("utf-8", "replace").strip()[:500]
        raise StableHLOError(
            f"cannot parse {where}: {first}; pass MLIR text or bytecode (install "
            "iree-base-compiler to read IREE's dialects)"
        )
    if done.returncode == 3:
        raise StableHLOError(
            f"{where} is over {MAX_MLIR_CHARS:,} characters as MLIR text; pass a smaller module"
        )
    if done.returncode != 0:
        raise StableHLOError(
            f"cannot read {where}: MLIR's bytecode reader {_how(done.returncode)} (a "
            "malformed or hostile module: too deep, too large, or bad strings); pass MLIR "
            "that JAX or IREE wrote"
        )
    try:
        text = done.stdout.decode("utf-8")
    except UnicodeDecodeError as error:
        raise StableHLOError(
            f"{where} holds strings that are not UTF-8 (byte {error.start} of its text); "
            "MLIR's Python bindings cannot read them"
        ) from None
    check_mlir_text(text, where)
    return text


def _how(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"failed (exit {code})"
