"""Provenance locations: written as name(call stack), read back, fused for several sources."""

from __future__ import annotations

import pytest

from modelprov.core._sources import Source
from modelprov.core._stack_trace import Frame
from modelprov.stablehlo._locations import decode, location_name, provenance_location

pytest.importorskip("jax")


def _info(name: str, module: str, sources: tuple[str, ...], lines: tuple[int, ...]) -> Source:
    frames = tuple(Frame("model.py", line, "forward", "") for line in lines)
    return Source(
        id=name,
        fx_node=name,
        source_nodes=sources,
        module_path=module,
        module_type="",
        target="aten.addmm.default",
        file="model.py" if lines else None,
        line=lines[-1] if lines else None,
        stack_trace="",
        call_stack=frames,
    )


def test_location_round_trips_through_text() -> None:
    from jax._src.interpreters import mlir
    from jaxlib.mlir import ir

    info = _info("addmm_3", "layers.0.self_attn", ("linear_3",), (10, 42))
    with mlir.make_ir_context():
        location = provenance_location(ir, [info])
        printed = str(location)
        assert printed.startswith(
            'loc("layers.0.self_attn/linear_3"(callsite("forward"("model.py":42:0)'
        )
        module = ir.Module.parse(f"module {{}} {printed}")
        (entry,) = decode(ir, module.operation.location)
    assert (entry.module_path, entry.id, entry.file, entry.line) == (
        "layers.0.self_attn",
        "linear_3",
        "model.py",
        42,
    )
    assert [frame.line for frame in entry.call_stack] == [10, 42]


def test_several_sources_fuse_and_root_ops_have_no_module() -> None:
    from jax._src.interpreters import mlir
    from jaxlib.mlir import ir

    first = _info("add", "", ("add",), (5,))
    second = _info("mul", "block", ("mul", "mul_1"), ())
    with mlir.make_ir_context():
        location = provenance_location(ir, [first, second])
        assert "fused[" in str(location)
        decoded = decode(ir, location)
    assert [(e.module_path, e.id, e.line) for e in decoded] == [
        ("", "add", 5),
        ("block", "mul", None),
        ("block", "mul_1", None),
    ]
    assert location_name("", "add") == "add"


def test_names_that_are_no_provenance_are_looked_through() -> None:
    from jax._src.interpreters import mlir
    from jaxlib.mlir import ir

    with mlir.make_ir_context():
        jax_scope = ir.Location.name(
            "jit(forward)/addmm/dot_general",
            childLoc=ir.Location.name("_aten_addmm", childLoc=ir.Location.file("jaten.py", 1, 2)),
        )
        assert decode(ir, jax_scope) == []
        assert decode(ir, ir.Location.name("states[0]")) == []
        tool_frames = ir.Location.callsite(
            ir.Location.name(
                "_aten_add", childLoc=ir.Location.file("/v/torchax/ops/jaten.py", 1, 2)
            ),
            [
                ir.Location.name(
                    "run_node", childLoc=ir.Location.file("/v/torch/fx/interpreter.py", 3, 4)
                )
            ],
        )
        assert decode(ir, ir.Location.name("add", childLoc=tool_frames)) == []
