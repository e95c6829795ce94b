"""Run as a script by ``_bytecode_text``: MLIR bytecode on stdin, its text on stdout.

Arguments: the longest text to print (characters), the address space (bytes) and the CPU
seconds this process may use; it sets those limits (and no core dumps) first.

Imports nothing of modelprov (run with ``python -I``): only the MLIR bindings, JAX's
(StableHLO, CHLO, Shardy, MHLO registered; portable artifacts deserialized) and then
IREE's when installed. A module MLIR cannot parse gives exit 2 and the parsers' first
lines on stdout (MLIR's own diagnostics go to stderr); one whose text is longer than
argv[1] characters exit 3. A crash inside MLIR's C++ kills only this process.
"""

from __future__ import annotations

import io
import sys
from typing import Any


def _jax_text(data: bytes) -> bytes:
    from jaxlib.mlir import ir
    from jaxlib.mlir.dialects import chlo, mhlo, sdy, stablehlo

    with ir.Context() as context:
        for register in (stablehlo.register_dialect, chlo.register_dialect, sdy.register_dialect):
            register(context)
        mhlo.register_mhlo_dialect(context)
        context.allow_unregistered_dialects = True
        try:
            module = stablehlo.deserialize_portable_artifact(context, data)
        except Exception:  # plain MLIR bytecode, not a portable artifact
            module = ir.Module.parse(data)
        return _printed(module)


def _iree_text(data: bytes) -> bytes:
    from iree.compiler import ir

    with ir.Context():
        return _printed(ir.Module.parse(data))


def _printed(module: Any) -> bytes:
    buffer = io.BytesIO()
    module.operation.print(enable_debug_info=True, file=buffer, binary=True)
    return buffer.getvalue()


def _limit_resources(memory: int, seconds: int) -> None:
    try:
        import resource
    except ImportError:  # not POSIX: the parent's timeout still holds
        return
    for kind, value in (
        (resource.RLIMIT_AS, memory),
        (resource.RLIMIT_CPU, seconds),
        (resource.RLIMIT_CORE, 0),
    ):
        hard = resource.getrlimit(kind)[1]
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(kind, (value, hard))


def main() -> int:
    limit, memory, seconds = (int(argument) for argument in sys.argv[1:4])
    _limit_resources(memory, seconds)
    data = sys.stdin.buffer.read()
    errors: list[str] = []
    for convert in (_jax_text, _iree_text):
        try:
            text = convert(data)
        except ImportError:
            continue
        except Exception as exc:  # the bindings raise their own MLIRError
            errors.append(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
            continue
        if len(text) > limit:
            return 3
        sys.stdout.buffer.write(text)
        return 0
    sys.stdout.write("; ".join(errors) or "no MLIR bindings installed")
    return 2


if __name__ == "__main__":
    sys.exit(main())
