"""Provenance locations: written as name(call stack), read back, fused for several sources."""

from __future__ import annotations

from typing import Any

import pytest

from modelprov.core._sources import Source
from modelprov.core._stack_trace import Frame
from modelprov.stablehlo.read._locations import decode, location_name, provenance_location

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


def test_keys_in_a_fused_location_become_each_named_sources_metadata() -> None:
    from jax._src.interpreters import mlir
    from jaxlib.mlir import ir

    from modelprov.stablehlo.read._location_keys import attribute_text, with_keys

    first = _info("addmm", "fc1", ("linear",), (10,))
    second = _info("relu", "act", ("relu",), (11,))
    with mlir.make_ir_context():
        keys = {
            "custom.max": ir.FloatAttr.get_f64(2.5),
            "custom.n": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 3),
            "custom.on": ir.BoolAttr.get(True),
            "custom.tag": ir.StringAttr.get("x"),
        }
        keyed = with_keys(ir, provenance_location(ir, [first]), keys)
        assert with_keys(ir, keyed, {}) is keyed
        # A pass merging two ops fuses their locations; each part keeps its own keys.
        merged = ir.Location.fused([keyed, provenance_location(ir, [second])])
        decoded = decode(ir, merged)
        by_id = {source.id: source for source in decoded}
        assert sorted((s.module_path, s.id) for s in decoded) == [
            ("act", "relu"),
            ("fc1", "linear"),
        ]
        assert dict(by_id["linear"].metadata) == {
            "custom.max": "2.5",
            "custom.n": "3",
            "custom.on": "true",
            "custom.tag": "x",
        }
        assert dict(by_id["relu"].metadata) == {}
        assert attribute_text(ir, ir.ArrayAttr.get([])) is None
        # Another format version, or other metadata, is not read as keys.
        other = ir.Location.fused(
            [provenance_location(ir, [first])],
            ir.DictAttr.get(
                {
                    "modelprov.keys": ir.DictAttr.get({"custom.tag": ir.StringAttr.get("y")}),
                    "modelprov.keys_format": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 2),
                }
            ),
        )
        assert dict(decode(ir, other)[0].metadata) == {}


def _keyed(ir: Any, location: Any, **keys: str) -> Any:
    """``location`` carrying string ``keys`` (``_location_keys.with_keys``)."""
    from modelprov.stablehlo.read._location_keys import with_keys

    return with_keys(ir, location, {k: ir.StringAttr.get(v) for k, v in keys.items()})


def test_the_walker_hands_each_name_the_keys_of_the_fused_locations_around_it() -> None:
    from jax._src.interpreters import mlir
    from jaxlib.mlir import ir

    from modelprov.stablehlo.read._location_keys import location_keys
    from modelprov.stablehlo.read._locations import carried_keys, walk_names

    with mlir.make_ir_context():
        shared = provenance_location(ir, [_info("addmm", "fc1", ("linear",), (10,))])
        other = provenance_location(ir, [_info("relu", "act", ("relu",), (11,))])
        inner = _keyed(ir, shared, **{"custom.a": "inner", "custom.b": "b"})
        outer = _keyed(ir, ir.Location.fused([inner, other]), **{"custom.a": "outer"})
        # the same part under two carriers: each walk of it hands its own carrier's keys
        twice = ir.Location.fused(
            [_keyed(ir, shared, **{"custom.x": "1"}), _keyed(ir, shared, **{"custom.x": "2"})]
        )

        def keys_of(fused: Any) -> dict[str, Any] | None:
            return location_keys(ir, fused)

        def stop(name: str, child: object) -> bool:
            return "/" in name

        walked = {
            name: {k: ir.StringAttr(v).value for k, v in keys.items()}
            for name, _, stopped, keys in walk_names(ir, outer, stop, keys_of)
            if stopped
        }
        assert walked == {
            "fc1/linear": {"custom.a": "inner", "custom.b": "b"},  # the innermost wins
            "act/relu": {"custom.a": "outer"},
        }
        assert [keys for *_, keys in walk_names(ir, outer, stop)] == [{}, {}]
        both = [dict(keys) for name, _, _, keys in walk_names(ir, twice, stop, keys_of)]
        assert [{k: ir.StringAttr(v).value for k, v in keys.items()} for keys in both] == [
            {"custom.x": "1"},
            {"custom.x": "2"},
        ]
        (source,) = decode(ir, twice)  # one source, the first carrier's value
        assert dict(source.metadata) == {"custom.x": "1"}
        # what restore_attributes puts back: names in walk order (act/relu first), the
        # first name's value of a key winning
        assert {k: ir.StringAttr(v).value for k, v in carried_keys(ir, outer).items()} == {
            "custom.a": "outer",
            "custom.b": "b",
        }
        by_id = {source.id: dict(source.metadata) for source in decode(ir, outer)}
        assert by_id == {
            "linear": {"custom.a": "inner", "custom.b": "b"},
            "relu": {"custom.a": "outer"},
        }


@pytest.mark.parametrize("width", [50, 400])
def test_keyed_locations_are_walked_in_linear_steps(
    width: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from jax._src.interpreters import mlir
    from jaxlib.mlir import ir

    from modelprov.stablehlo.read import _locations

    steps = 0
    identity = _locations._identity

    def counted(location: object) -> object:
        nonlocal steps
        steps += 1
        return identity(location)

    with mlir.make_ir_context():
        names = [
            provenance_location(ir, [_info(f"n{i}", "m", (f"n{i}",), (i + 1,))])
            for i in range(width)
        ]
        keys = {f"custom.k{i}": str(i) for i in range(5)}
        location = _keyed(ir, ir.Location.fused(names), **keys)
        monkeypatch.setattr(_locations, "_identity", counted)
        decoded = decode(ir, location)
    assert len(decoded) == width
    assert all(dict(source.metadata) == keys for source in decoded)
    assert steps <= width + 3  # the carrier, its fused list, each name once


def test_carriers_sharing_parts_cannot_make_the_walk_explode() -> None:
    from jax._src.interpreters import mlir
    from jaxlib.mlir import ir

    from modelprov.errors import StableHLOError
    from modelprov.stablehlo.read._locations import carried_keys

    with mlir.make_ir_context():
        # each level: the level below under two carriers, 2**60 carrier chains in all
        level = provenance_location(ir, [_info("addmm", "fc1", ("linear",), (10,))])
        for depth in range(60):
            level = ir.Location.fused(
                [
                    _keyed(ir, level, **{f"custom.a{depth}": "x"}),
                    _keyed(ir, level, **{f"custom.b{depth}": "y"}),
                ]
            )
        with pytest.raises(StableHLOError, match="more than 100,000 parts"):
            decode(ir, level)
        with pytest.raises(StableHLOError, match="more than 100,000 parts"):
            carried_keys(ir, level)
