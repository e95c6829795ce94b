"""Attribute attachment on hand-written StableHLO: locations, fused sources, scoping, merging."""

from __future__ import annotations

import pytest

from modelprov.core._policy import Policies, from_output, max, value_scoped
from modelprov.core._sources import Source
from modelprov.stablehlo._records import OpRecord
from modelprov.stablehlo.attach._attach import attach

pytest.importorskip("jax")

_MODULE = """
module {
  func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    %0 = stablehlo.add %arg0, %arg0 : tensor<2xf32> loc("jit(forward)/add/add")
    %1 = stablehlo.multiply %0, %0 : tensor<2xf32> loc(fused["jit(forward)/mul/mul", "jit(forward)/mul_1/mul"])
    %2 = stablehlo.constant dense<1.0> : tensor<2xf32> loc(unknown)
    %3 = stablehlo.add %1, %2 : tensor<2xf32> loc("jit(forward)/add_2/add")
    %4 = stablehlo.add %3, %3 : tensor<2xf32> loc("jit(forward)/add_3/add")
    return %4 : tensor<2xf32>
  }
}
"""  # noqa: E501


def _info(name: str, module: str, line: int) -> Source:
    return Source(
        id=name,
        fx_node=name,
        source_nodes=(name,),
        module_path=module,
        module_type=f"m.{module.upper() or 'Root'}",
        target="aten.add.Tensor",
        file="model.py",
        line=line,
        stack_trace=f'File "model.py", line {line}, in forward\n    x = x + x',
    )


_INFOS = {
    "add": _info("add", "a", 1),
    "mul": _info("mul", "b", 2),
    "mul_1": _info("mul_1", "c", 3),
    "add_2": _info("add_2", "d.inner", 4),
    "add_3": _info("add_3", "d", 5),
}


def _attach(annotations: dict[str, dict[str, str]], policies: Policies) -> list[OpRecord]:
    from jax._src.interpreters import mlir
    from jaxlib.mlir import ir

    with mlir.make_ir_context():
        module = ir.Module.parse(_MODULE)
        result = attach(module, "jit(forward)", _INFOS, annotations, policies)
        assert module.operation.verify()
        text = module.operation.get_asm(enable_debug_info=False)
    for record in result.ops:
        for key, value in record.attributes.items():
            assert f'{key} = "' in text or key in text, (key, value)
    return list(result.ops)


def test_one_node_per_op_gets_its_provenance() -> None:
    ops = _attach({}, Policies())
    assert [op.op_name for op in ops] == [
        "stablehlo.add",
        "stablehlo.multiply",
        "stablehlo.constant",
        "stablehlo.add",
        "stablehlo.add",
    ]
    first = ops[0].attributes
    assert first["modelprov.node"] == "add"
    assert first["modelprov.module"] == "a"
    assert first["modelprov.module_type"] == "m.A"
    assert first["modelprov.target"] == "aten.add.Tensor"
    assert first["modelprov.stack"] == "model.py:1"
    assert first["modelprov.source_node"] == "add"  # the shared source id, always written
    assert ops[0].location == "a/add"  # module path / source node
    assert 'modelprov.node = "add"' in ops[0].text


def test_a_constant_only_one_node_uses_takes_that_nodes_location() -> None:
    ops = _attach({"d.inner": {"custom.min": "0.25"}}, Policies({"custom.min": from_output}))
    constant = ops[2]
    assert constant.nodes == ("add_2",)
    assert constant.location == "d.inner/add_2"
    assert constant.attributes["modelprov.node"] == "add_2"
    assert "custom.min" not in constant.attributes  # a constant is no module output
    assert ops[3].attributes["custom.min"] == "0.25"


_SHARED = """
module {
  func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    %0 = stablehlo.constant dense<1.0> : tensor<2xf32> loc(unknown)
    %1 = stablehlo.add %arg0, %0 : tensor<2xf32> loc("jit(forward)/add/add")
    %2 = stablehlo.add %1, %0 : tensor<2xf32> loc("jit(forward)/add_2/add")
    %3 = stablehlo.constant dense<2.0> : tensor<2xf32> loc(unknown)
    return %2 : tensor<2xf32>
  }
}
"""


def test_a_shared_constant_names_every_node_using_it_an_unused_one_none() -> None:
    from jax._src.interpreters import mlir
    from jaxlib.mlir import ir

    annotations = {"a": {"custom.min": "0.5"}, "d.inner": {"custom.tag": "x"}}
    with mlir.make_ir_context():
        module = ir.Module.parse(_SHARED)
        ops = attach(
            module, "jit(forward)", _INFOS, annotations, Policies({"custom.min": from_output})
        ).ops
    shared, add, _, unused = ops
    assert shared.nodes == ("add", "add_2")  # used by add and add_2, in graph order
    assert shared.attributes["modelprov.module"] == '["a", "d.inner"]'
    # A constant hands no value out of a module: value-scoped keys stay on add's output op.
    assert "custom.min" not in shared.attributes and add.attributes["custom.min"] == "0.5"
    # A constant value several nodes use is no module's own: no user keys, also in its
    # location (readers would give them to every source it names).
    assert "custom.tag" not in shared.attributes and "custom.tag" in ops[2].attributes
    assert unused.nodes == () and unused.attributes == {}


def test_attributes_are_copied_into_xla_frontend_attributes_and_keys_into_locations() -> None:
    from jax._src.interpreters import mlir
    from jaxlib.mlir import ir

    from modelprov.stablehlo.read._locations import carried_keys

    annotations = {"d.inner": {"custom.min": "0.25", "custom.tag": "x"}}
    with mlir.make_ir_context():
        module = ir.Module.parse(_MODULE)
        attach(module, "jit(forward)", _INFOS, annotations, Policies({"custom.min": from_output}))
        ops = list(module.body.operations[0].regions[0].blocks[0].operations)
        add_2 = ops[3]
        frontend = ir.DictAttr(add_2.attributes["mhlo.frontend_attributes"])
        names = {str(frontend[i].name): str(frontend[i].attr) for i in range(len(frontend))}
        assert names["custom.min"] == '"0.25"'
        assert names["modelprov.node"] == '"add_2"'
        keys = carried_keys(ir, add_2.location)
        assert {k: ir.StringAttr(v).value for k, v in keys.items()} == {
            "custom.min": "0.25",
            "custom.tag": "x",
        }
        printed = str(add_2.location)
        assert printed.startswith("loc(fused<{modelprov.keys = {")
        assert "modelprov.keys_format = 1 : i64}>" in printed
        assert '"d.inner/add_2"' in printed
        # module-scoped only (not an output of d.inner): custom.tag and no custom.min
        constant_keys = carried_keys(ir, ops[2].location)
        assert {k: ir.StringAttr(v).value for k, v in constant_keys.items()} == {"custom.tag": "x"}
        assert carried_keys(ir, ops[0].location) == {}


def test_typed_numbers_go_typed_into_locations_and_as_strings_into_frontend_attributes() -> None:
    from jax._src.interpreters import mlir
    from jaxlib.mlir import ir

    from modelprov.stablehlo.read._locations import carried_keys, decode

    annotations = {"d.inner": {"custom.min": "-0.125", "custom.bits": "4", "custom.tag": "x"}}
    kinds = {"custom.min": float, "custom.bits": int}
    with mlir.make_ir_context():
        module = ir.Module.parse(_MODULE)
        attach(
            module,
            "jit(forward)",
            _INFOS,
            annotations,
            Policies({"custom.min": from_output}),
            number_kinds=kinds,
        )
        add_2 = list(module.body.operations[0].regions[0].blocks[0].operations)[3]
        assert ir.FloatAttr(add_2.attributes["custom.min"]).value == -0.125
        assert ir.IntegerAttr(add_2.attributes["custom.bits"]).value == 4
        frontend = ir.DictAttr(add_2.attributes["mhlo.frontend_attributes"])
        strings = {
            str(frontend[i].name): ir.StringAttr(frontend[i].attr).value
            for i in range(len(frontend))
        }
        assert {k: v for k, v in strings.items() if k.startswith("custom.")} == {
            "custom.min": "-0.125",
            "custom.bits": "4",
            "custom.tag": "x",
        }
        keys = carried_keys(ir, add_2.location)  # the op's own typed attributes
        assert keys["custom.min"] == add_2.attributes["custom.min"]
        assert keys["custom.bits"] == add_2.attributes["custom.bits"]
        (source,) = decode(ir, add_2.location)
        assert dict(source.metadata) == {k: strings[k] for k in keys}


def test_fused_location_merges_with_the_policies() -> None:
    annotations = {"b": {"custom.k": "x", "custom.max": "1.0"}, "c": {"custom.k": "y"}}
    annotations["c"]["custom.max"] = "2.5"
    policies = Policies({"custom.max": value_scoped(max)})
    fused = _attach(annotations, policies)[1]
    assert fused.nodes == ("mul", "mul_1")
    assert fused.attributes["modelprov.node"] == '["mul", "mul_1"]'  # default policy: union
    assert fused.attributes["custom.k"] == '["x", "y"]'
    assert fused.attributes["custom.max"] == "2.5"  # both outputs leave b and c: the max


def test_value_scoped_keys_only_on_module_outputs() -> None:
    annotations = {
        "a": {"custom.min": "-1.0", "custom.tag": "A"},
        "d": {"custom.min": "0.5"},
        "d.inner": {"custom.min": "0.25"},
    }
    ops = _attach(annotations, Policies({"custom.min": from_output}))
    add, _, _, inner, outer = ops
    assert add.attributes["custom.min"] == "-1.0"  # used by mul (module b): leaves a
    assert add.attributes["custom.tag"] == "A"  # module-scoped
    assert inner.attributes["custom.min"] == "0.25"  # leaves d.inner, stays inside d
    assert outer.attributes["custom.min"] == "0.5"  # returned: output of d
    assert "custom.tag" not in outer.attributes


def test_module_scoped_keys_are_inherited_by_submodules() -> None:
    ops = _attach({"d": {"custom.owner": "team"}}, Policies())
    by_node = {op.nodes[0]: op for op in ops if len(op.nodes) == 1}
    assert by_node["add_2"].attributes["custom.owner"] == "team"  # d.inner inherits from d
    assert by_node["add_3"].attributes["custom.owner"] == "team"
    assert "custom.owner" not in by_node["add"].attributes
