"""Hostile MLIR, generated: deep, wide, self-referring or not UTF-8 (text and bytecode).

Each generator returns MLIR text of one ``stablehlo.add`` whose location (or whose nesting)
is the hostile part; ``depth`` is the nesting MLIR's C++ would recurse through.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Callable

__all__ = ["DEEP", "alias_dag", "bytecode_of", "fused_wide", "module", "run_isolated"]


def module(location: str, tail: str = "") -> str:
    """A one-op module whose add has ``loc(<location>)``, then ``tail`` (alias lines)."""
    return (
        "module {\n  func.func @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {\n"
        f"    %0 = stablehlo.add %arg0, %arg0 : tensor<2xf32> loc({location})\n"
        "    return %0 : tensor<2xf32>\n  }\n}\n" + tail
    )


def _callsite(depth: int) -> str:
    frames = [f'"f{i}"("model.py":{i + 1}:0)' for i in range(depth)]
    location = frames[-1]
    for frame in reversed(frames[:-1]):
        location = f"callsite({frame} at {location})"
    return module(f'"block/linear"({location})')


def _fused_deep(depth: int) -> str:
    location = '"block/x"'
    for i in range(depth):
        location = f'fused["block/n{i}", {location}]'
    return module(location)


def _names_deep(depth: int) -> str:
    return module('"scope"(' * depth + '"block/x"' + ")" * depth)


def _regions(depth: int) -> str:
    body = '"t.leaf"() : () -> ()'
    for _ in range(depth // 2):
        body = '"t.op"() ({\n' + body + "\n}) : () -> ()"
    return "module {\n" + body + "\n}\n"


def _arrays(depth: int) -> str:
    return "module attributes {t.a = " + "[" * depth + "1" + "]" * depth + "} {\n}\n"


def _alias_chain(depth: int) -> str:
    """Each alias one line, two brackets deep: the location is ``depth // 2`` names deep."""
    count = depth // 2
    lines = ['#l0 = loc("model.py":1:0)'] + [
        f'#l{i} = loc("f{i}"(#l{i - 1}))' for i in range(1, count)
    ]
    return module(f"#l{count - 1}", "\n".join(lines) + "\n")


DEEP: dict[str, Callable[[int], str]] = {
    "callsite": _callsite,
    "fused": _fused_deep,
    "names": _names_deep,
    "regions": _regions,
    "arrays": _arrays,
    "alias_chain": _alias_chain,
}
"""Kind -> generator of MLIR text nesting about ``depth`` levels."""


def fused_wide(width: int) -> str:
    """One fused location of ``width`` distinct provenance names."""
    return module("fused[" + ", ".join(f'"block/n{i}"' for i in range(width)) + "]")


def alias_dag(levels: int) -> str:
    """Each alias fuses two names of the one before: 2**levels paths, 3 * levels locations."""
    lines = ['#l0 = loc("block/x")'] + [
        f'#l{i} = loc(fused["a{i}"(#l{i - 1}), "b{i}"(#l{i - 1})])' for i in range(1, levels)
    ]
    return module(f"#l{levels - 1}", "\n".join(lines) + "\n")


_RUN = textwrap.dedent(
    """
    import json, sys
    from modelprov.errors import StableHLOError
    from modelprov.stablehlo import read_mlir_sources, restore_attributes
    results = []
    for path, call in json.load(open(sys.argv[1])):
        data = open(path, "rb").read()
        read = read_mlir_sources if call == "read" else restore_attributes
        try:
            value = read(data)
            results.append(["ok", len(value)])
        except StableHLOError as error:
            results.append(["StableHLOError", str(error)])
    print(json.dumps(results))
    """
)


def run_isolated(
    cases: list[tuple[str, str]], timeout: float = 300
) -> tuple[subprocess.CompletedProcess[str], list[list[object]]]:
    """Runs ``(path, "read" | "restore")`` cases in one child Python: a crash or a hang is
    the child's exit status, not the caller's. Returns the run and, per case,
    ``["ok", size]`` or ``["StableHLOError", message]`` (empty if the child died)."""
    import json
    import os
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as stream:
        json.dump(cases, stream)
    try:
        done = subprocess.run(
            [sys.executable, "-c", _RUN, stream.name],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    finally:
        os.unlink(stream.name)
    results = json.loads(done.stdout) if done.returncode == 0 else []
    return done, results


_TO_BYTECODE = textwrap.dedent(
    """
    import io, sys
    from jaxlib.mlir import ir
    from modelprov.stablehlo.lower._jax_compat import ir_context
    with ir_context() as context:
        context.allow_unregistered_dialects = True
        module = ir.Module.parse(open(sys.argv[1]).read())
        buffer = io.BytesIO()
        module.operation.write_bytecode(buffer)
    open(sys.argv[2], "wb").write(buffer.getvalue())
    """
)


def bytecode_of(text_path: str, bytecode_path: str) -> None:
    """Writes the MLIR bytecode of the text at ``text_path`` (MLIR's own writer, in a child:
    text MLIR parses but cannot print would kill the writer)."""
    subprocess.run(
        [sys.executable, "-c", _TO_BYTECODE, text_path, bytecode_path],
        check=True,
        capture_output=True,
        timeout=300,
    )
