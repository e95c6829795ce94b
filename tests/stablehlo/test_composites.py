"""ATen calls as stablehlo.composite ops (issue 27, item 4): names, attributes, numerics,
shared decompositions, labels, IREE."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from torch import nn

pytest.importorskip("jax")

from modelprov.stablehlo import StableHLOProgram, export_stablehlo
from tests.stablehlo import _downstream

_ENUMS = ("ScalarType", "Layout", "MemoryFormat", "Device")


@dataclasses.dataclass(frozen=True)
class Composite:
    """One stablehlo.composite of a program, read back from its MLIR text."""

    name: str
    attributes: dict[str, tuple[str, Any]]  # name -> (kind, value)
    operands: int
    decomposition: str
    schema: str
    sources: tuple[str, ...]  # ids of the user's program nodes it computes
    uses: int  # of its results


def _attribute(ir: Any, attribute: Any) -> Any:
    """(kind, value) of an attribute; arrays as ("array", values, kinds)."""
    typeid = attribute.typeid
    if typeid == ir.IntegerAttr.static_typeid and str(ir.IntegerAttr(attribute).type) == "i1":
        return "bool", bool(ir.BoolAttr(attribute).value)
    if typeid == ir.IntegerAttr.static_typeid:
        return str(ir.IntegerAttr(attribute).type), ir.IntegerAttr(attribute).value
    if typeid == ir.FloatAttr.static_typeid:
        return str(ir.FloatAttr(attribute).type), ir.FloatAttr(attribute).value
    if typeid == ir.StringAttr.static_typeid:
        return "str", ir.StringAttr(attribute).value
    if typeid == ir.ArrayAttr.static_typeid:
        items = [_attribute(ir, item) for item in ir.ArrayAttr(attribute)]
        return "array", [item[1] for item in items], [item[0] for item in items]
    return "other", str(attribute)


def composites_of(program: StableHLOProgram) -> tuple[list[Composite], dict[str, Any]]:
    """The program's composites (in order) and its functions by name."""
    from jax._src.interpreters import mlir
    from jaxlib.mlir import ir

    found: list[Composite] = []
    with mlir.make_ir_context():
        module = ir.Module.parse(program.text)
        operations: list[Any] = []

        def visit(op: Any) -> Any:
            operations.append(op.operation)
            return ir.WalkResult.ADVANCE

        module.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
        functions = {
            ir.StringAttr(op.attributes["sym_name"]).value: op
            for op in operations
            if op.name == "func.func"
        }
        labelled = [op for op in operations if op.name not in ("builtin.module", "func.func")]
        labelled = [op for op in labelled if op.name != "func.return"]
        assert len(labelled) == len(program.ops)
        schemas: dict[str, str] = {}
        for name, function in functions.items():
            if "modelprov.aten_schema" in function.attributes:
                schemas[name] = ir.StringAttr(function.attributes["modelprov.aten_schema"]).value
        for op, record in zip(labelled, program.ops, strict=True):
            assert op.name == record.op_name
            if op.name != "stablehlo.composite":
                continue
            attributes = (
                ir.DictAttr(op.attributes["composite_attributes"])
                if "composite_attributes" in op.attributes
                else ir.DictAttr.get({})
            )
            decomposition = ir.FlatSymbolRefAttr(op.attributes["decomposition"]).value
            assert ir.IntegerAttr(op.attributes["version"]).value == 1
            found.append(
                Composite(
                    name=ir.StringAttr(op.attributes["name"]).value,
                    attributes={
                        str(attributes[i].name): _attribute(ir, attributes[i].attr)
                        for i in range(len(attributes))
                    },
                    operands=len(op.operands),
                    decomposition=decomposition,
                    schema=schemas.get(decomposition, ""),
                    sources=tuple(source.id for source in program.sources(record)),
                    uses=sum(len(list(result.uses)) for result in op.results),
                )
            )
        bodies = {
            name: len(list(f.regions[0].blocks[0].operations)) for name, f in functions.items()
        }
    return found, bodies


def _expected_attributes(node: torch.fx.Node) -> dict[str, tuple[str, Any]]:
    """What the composite of ATen call ``node`` should carry, by its schema, in order."""
    schema = node.target._schema
    expected: dict[str, tuple[str, Any]] = {}
    for position, argument in enumerate(schema.arguments):
        if position < len(node.args) and not argument.kwarg_only:
            value, given = node.args[position], True
        elif argument.name in node.kwargs:
            value, given = node.kwargs[argument.name], True
        elif argument.has_default_value():
            value, given = argument.default_value, False
        else:
            continue
        kind = str(argument.type)
        items = value if isinstance(value, (list, tuple)) else [value]
        if value is None or any(isinstance(item, torch.fx.Node) for item in items):
            continue
        if not given and kind.replace("Optional[", "").startswith(_ENUMS):
            continue
        expected[argument.name] = _typed(kind, value)
    return expected


def _typed(kind: str, value: Any) -> Any:
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int):
        if "float" in kind and "Scalar" not in kind:
            return ("f64", float(value))
        return ("i64", value)
    if isinstance(value, float):
        return ("f64", value)
    if isinstance(value, (list, tuple)):
        items = [_typed(kind, item) for item in value]
        return ("array", [v for _, v in items], ["bool" if k == "bool" else k for k, _ in items])
    return ("str", str(value))


def _calls(model: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[torch.fx.Node]:
    program = torch.export.export(model, args, kwargs)
    return [
        node
        for node in program.graph.nodes
        if node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload)
    ]


def _used_values(graph: torch.fx.Graph) -> set[str]:
    """Names of the nodes whose value the graph's output depends on."""
    live: set[str] = set()
    for node in reversed(list(graph.nodes)):
        if node.op == "output" or node.name in live:
            live.update(n.name for n in node.all_input_nodes)
    return live


def _own_sources(program: StableHLOProgram) -> set[str]:
    """Ids of the user's nodes some op of ``program`` is lowered from (aliases aside)."""
    return {
        source
        for op in program.ops
        for name in op.nodes
        for source in program.nodes[name].source_nodes
    }


def check_composites(
    model: nn.Module,
    args: tuple[Any, ...],
    kwargs: dict[str, Any] | None = None,
    *,
    against_plain: bool = True,
) -> tuple[StableHLOProgram, list[Composite], list[torch.fx.Node]]:
    """Export with composites and check every computing ATen call is one, typed; numerics.

    A computing call has ops of its own in the plain export and a value (``against_plain``
    also compares outputs with the plain export); without it, every call with a value.
    """
    kwargs = kwargs or {}
    program = export_stablehlo(model, args, kwargs or None, composites=True)
    plain = export_stablehlo(model, args, kwargs or None) if against_plain else None
    composites, _ = composites_of(program)
    calls = _calls(model, args, kwargs)
    own = _own_sources(plain) if plain is not None else {node.name for node in calls}
    computing = [node for node in calls if node.name in own and node.meta.get("val") is not None]
    for node in computing:
        made = [c for c in composites if node.name in c.sources and c.name == str(node.target)]
        assert len(made) == 1, (node.name, node.target)
        composite = made[0]
        assert composite.attributes == _expected_attributes(node), node.name
        assert composite.schema == str(node.target._schema)
        tensors = [
            item
            for item in (*node.args, *node.kwargs.values())
            for item in (item if isinstance(item, (list, tuple)) else [item])
            if isinstance(item, torch.fx.Node)
        ]
        assert composite.operands == len(tensors), node.name
    with torch.no_grad():
        expected = model(*args, **kwargs)
    expected = getattr(expected, "last_hidden_state", expected)
    references = expected if isinstance(expected, tuple) else (expected,)
    got = program.run(*args, **kwargs)
    baseline = plain.run(*args, **kwargs) if plain is not None else got
    assert len(got) == len(references) == len(baseline)
    for value, reference, plain_value in zip(got, references, baseline, strict=True):
        np.testing.assert_allclose(value, reference.numpy(), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(value, plain_value, rtol=0, atol=1e-6)
    assert program.coverage == pytest.approx(1.0, abs=0.05)
    return program, composites, computing


# --- generated modules ------------------------------------------------------------------

_WIDTH = 8


class _Sdpa(nn.Module):  # type: ignore[misc]
    def __init__(self, causal: bool) -> None:
        super().__init__()
        self.causal = causal

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        heads = x.unsqueeze(1)
        attended = nn.functional.scaled_dot_product_attention(
            heads, heads, heads, is_causal=self.causal
        )
        return attended.squeeze(1)


class _Softmax(nn.Module):  # type: ignore[misc]
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=self.dim)


class _Conv(nn.Module):  # type: ignore[misc]
    def __init__(self, padding: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 1, 2 * padding + 1, padding=padding)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x.unsqueeze(1)).squeeze(1)


_LAYERS = {
    "linear": lambda draw: nn.Linear(_WIDTH, _WIDTH, bias=draw(st.booleans())),
    "layer_norm": lambda draw: nn.LayerNorm(_WIDTH, eps=draw(st.sampled_from([1e-5, 1e-3]))),
    "softmax": lambda draw: _Softmax(draw(st.sampled_from([-1, 1]))),
    "sdpa": lambda draw: _Sdpa(draw(st.booleans())),
    "conv2d": lambda draw: _Conv(draw(st.sampled_from([0, 1]))),
    "gelu": lambda draw: nn.GELU(approximate=draw(st.sampled_from(["none", "tanh"]))),
}


@st.composite
def _stacks(draw: Any) -> nn.Module:
    names = draw(st.lists(st.sampled_from(sorted(_LAYERS)), min_size=1, max_size=4))
    torch.manual_seed(draw(st.integers(0, 99)))
    return nn.Sequential(*(_LAYERS[name](draw) for name in names)).eval()


_GENERATED = {
    "deadline": None,
    "derandomize": True,
    "database": None,
    "phases": [Phase.explicit, Phase.generate],  # each case is an export: no shrinking
    "suppress_health_check": [HealthCheck.too_slow],
}


def _check_generated(model: nn.Module) -> None:
    x = torch.randn(2, 4, _WIDTH)
    _, composites, computing = check_composites(model, (x,), against_plain=False)
    assert len(composites) == len(computing) and computing


@settings(max_examples=3, **_GENERATED)
@given(model=_stacks())
def test_generated_modules_every_aten_call_is_a_typed_composite(model: nn.Module) -> None:
    _check_generated(model)


@pytest.mark.slow
@settings(max_examples=25, **_GENERATED)
@given(model=_stacks())
def test_many_generated_modules(model: nn.Module) -> None:
    _check_generated(model)


def test_sdpa_composite_carries_its_arguments() -> None:
    model = nn.Sequential(_Sdpa(causal=True), nn.LayerNorm(_WIDTH)).eval()
    _, composites, _ = check_composites(model, (torch.randn(2, 4, _WIDTH),))
    sdpa = next(c for c in composites if c.name == "aten.scaled_dot_product_attention.default")
    assert sdpa.attributes["is_causal"] == ("bool", True)
    assert sdpa.attributes["dropout_p"] == ("f64", 0.0)
    assert "scale" not in sdpa.attributes  # None: omitted
    norm = next(c for c in composites if c.name == "aten.layer_norm.default")
    assert norm.attributes["normalized_shape"] == ("array", [_WIDTH], ["i64"])
    assert norm.attributes["eps"] == ("f64", 1e-5)


# --- no-op calls ---------------------------------------------------------------------------


class _NoOps(nn.Module):  # type: ignore[misc]
    """Steps over x: same-dtype ``to`` calls (alone, chained, returned, read twice by one
    user) between Linear and ReLU layers."""

    def __init__(self, steps: list[str]) -> None:
        super().__init__()
        self.steps = steps
        self.linears = nn.ModuleList(nn.Linear(_WIDTH, _WIDTH) for _ in steps)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        kept: list[torch.Tensor] = []
        for step, linear in zip(self.steps, self.linears, strict=True):
            if step == "to":
                x = x.to(torch.float32)
            elif step == "linear":
                x = linear(x)
            elif step == "relu":
                x = torch.relu(x)
            elif step == "returned":
                kept.append(x.to(torch.float32))
            elif step == "read_twice":  # add reads x and to(x): which read is the call's?
                x = x + x.to(torch.float32)
        return (x, *kept)


_NO_OP_STEPS = st.lists(
    st.sampled_from(["to", "linear", "relu", "returned", "read_twice"]), min_size=1, max_size=6
)


@settings(max_examples=4, **_GENERATED)
@given(steps=_NO_OP_STEPS, seed=st.integers(0, 99))
def test_no_op_calls_are_composites_returning_their_operand(steps: list[str], seed: int) -> None:
    torch.manual_seed(seed)
    model = _NoOps(steps).eval()
    x = torch.randn(2, _WIDTH)
    program, composites, _ = check_composites(model, (x,))
    calls = _calls(model, (x,), {})
    bodies = composites_of(program)[1]
    for call in calls:
        if str(call.target) != "aten.to.dtype":
            continue
        made = [c for c in composites if call.name in c.sources and c.name == "aten.to.dtype"]
        # a user reading the call's input besides its value leaves it uncertain: no composite
        uncertain = any(call.args[0] in user.all_input_nodes for user in call.users)
        assert len(made) == (0 if uncertain else 1), (steps, call.name)
        for composite in made:
            assert composite.operands == 1
            assert bodies[composite.decomposition] == 1  # its body returns its operand
            assert composite.uses > 0  # the call's users read the composite's value


# --- guard calls ---------------------------------------------------------------------------


@settings(max_examples=4, **_GENERATED)
@given(steps=_NO_OP_STEPS, seed=st.integers(0, 99))
def test_guard_calls_are_composites_handing_their_tensor_on(steps: list[str], seed: int) -> None:
    """Each ``_assert_tensor_metadata`` torch.export writes before a ``to`` is one composite
    named by it, with its dtype/device/layout, on the tensor it checks; later readers read
    through it (else JAX would drop it); numerics equal (check_composites)."""
    torch.manual_seed(seed)
    model = _NoOps(steps).eval()
    x = torch.randn(2, _WIDTH)
    program, composites, _ = check_composites(model, (x,))
    guards = [
        call
        for call in _calls(model, (x,), {})
        if str(call.target) == "aten._assert_tensor_metadata.default"
    ]
    assert len(guards) == steps.count("to") + steps.count("returned") + steps.count("read_twice")
    bodies = composites_of(program)[1]
    for call in guards:
        made = [c for c in composites if call.name in c.sources and c.name == str(call.target)]
        assert len(made) == 1, (steps, call.name)
        composite = made[0]
        assert composite.attributes == _expected_attributes(call)
        assert {"dtype", "device", "layout"} <= set(composite.attributes)
        assert composite.operands == 1
        assert bodies[composite.decomposition] == 1  # its body returns its operand
        assert composite.uses > 0


# --- sharing ------------------------------------------------------------------------------


def _three_linears() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 16)
    ).eval()


def test_identical_decompositions_are_shared_and_name_every_call() -> None:
    model = _three_linears()
    program, composites, _ = check_composites(model, (torch.randn(2, 8),))
    linears = [c for c in composites if c.name == "aten.linear.default"]
    assert len(linears) == 3
    same_shape = {c.decomposition for c in linears[:2]}
    assert len(same_shape) == 1 and linears[2].decomposition not in same_shape
    relus = {c.decomposition for c in composites if c.name == "aten.relu.default"}
    assert len(relus) == 1
    # the shared body's ops name both calls: location and modelprov.* merged by the policies
    body_ops = [
        op
        for op in program.ops
        if op.op_name == "stablehlo.dot_general"
        and {s.id for s in program.sources(op)} >= {"linear", "linear_1"}
    ]
    assert len(body_ops) == 1
    assert body_ops[0].location.split(";")[:2] == ["0/linear", "2/linear_1"]
    assert body_ops[0].attributes["modelprov.module"] == '["0", "2"]'
    assert "0/linear" in program.text_with_locations and "2/linear_1" in program.text_with_locations


def test_decompositions_whose_user_keys_differ_stay_apart() -> None:
    model = _three_linears()
    x = torch.randn(2, 8)
    program = export_stablehlo(
        model, (x,), composites=True, annotations={"2": {"custom.max": 1.5, "team.tag": "b"}}
    )
    composites, _ = composites_of(program)
    linears = [c for c in composites if c.name == "aten.linear.default"]
    assert len({c.decomposition for c in linears}) == 3
    tagged = [op for op in program.ops if op.attributes.get("team.tag") == "b"]
    assert tagged and all(any(s.module_path == "2" for s in program.sources(op)) for op in tagged)
    # value-scoped: the composite making module 2's output and the op its body returns
    ranged = [op for op in program.ops if "custom.max" in op.attributes]
    assert sorted(op.op_name for op in ranged) == ["stablehlo.add", "stablehlo.composite"]
    with torch.no_grad():
        np.testing.assert_allclose(program.run(x)[0], model(x).numpy(), rtol=1e-5, atol=1e-5)


def test_the_composites_flag_writes_composites(tmp_path: Any) -> None:
    from tests._cli import cli

    out = tmp_path / "mlp.mlir"
    result = cli(
        "export", "tests._factories:mlp", "--stablehlo", str(out), "--stablehlo-composites"
    )
    assert result.returncode == 0, result.stderr
    assert 'stablehlo.composite "aten.linear.default"' in out.read_text()


# --- Llama --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def llama() -> tuple[StableHLOProgram, list[Composite], list[torch.fx.Node], list[torch.fx.Node]]:
    model, args, kwargs = _downstream.llama()
    program, composites, computing = check_composites(model, args, kwargs)
    return program, composites, computing, _calls(model, args, kwargs)


@pytest.mark.slow
def test_llama_composites_run_on_xla_and_name_their_aten_calls(llama: Any) -> None:
    _, composites, computing, calls = llama
    made = [
        node
        for node in calls
        if any(c.name == str(node.target) and node.name in c.sources for c in composites)
    ]
    assert {node.name for node in computing} <= {node.name for node in made}
    # every call whose value the program uses is a composite, the no-op `to` casts and the
    # dtype asserts before them too (docs/downstream.md); the rest is a dead chain
    # (arange -> unsqueeze x 3) whose last value nothing reads: 189 of 193 here
    live = _used_values(calls[0].graph)
    used = [node for node in calls if node.name in live]
    assert {node.name for node in used} <= {node.name for node in made}
    assert len(made) / len(calls) >= 0.95
    assert any(str(node.target).startswith("aten.to.") for node in made)
    assert any(str(node.target) == "aten._assert_tensor_metadata.default" for node in made)
    left = [node for node in calls if node.name not in {n.name for n in made}]
    assert {str(node.target) for node in left} <= {"aten.arange.default", "aten.unsqueeze.default"}
    assert not any(node.name in live for node in left)
    assert {"aten.scaled_dot_product_attention.default", "aten.linear.default"} <= {
        c.name for c in composites
    }
    assert len({c.decomposition for c in composites}) < len(composites) / 2  # shared


@pytest.mark.slow
def test_llama_composites_compile_to_iree_flow(llama: Any) -> None:
    pytest.importorskip("iree.compiler")
    program = llama[0]
    flow = _downstream.iree_flow(program)
    assert b"stablehlo.composite" not in flow
    known, named = _downstream.iree_survival(flow)
    assert named / known > 0.9


def test_compare_reads_each_composite_as_its_calls_value() -> None:
    import modelprov

    model = nn.Sequential(nn.Linear(8, 8), nn.GELU(), nn.LayerNorm(8), nn.Linear(8, 4)).eval()
    x = torch.randn(2, 8)
    program = export_stablehlo(model, (x,), composites=True)
    report = modelprov.compare(model, program, (x,))
    assert report.first_divergence is None, report.to_text()
    compared = {row.node.split("#")[0] for row in report.rows}
    assert compared == {"stablehlo.composite"}
    assert len(report.rows) >= len(composites_of(program)[0])


def test_symbolic_shapes_are_refused_with_composites() -> None:
    from modelprov.errors import StableHLOError

    batch = torch.export.Dim("batch", min=1, max=64)
    with pytest.raises(StableHLOError, match="composites=True needs static shapes"):
        export_stablehlo(
            nn.Linear(8, 4), (torch.randn(3, 8),), dynamic_shapes=({0: batch},), composites=True
        )


def test_seed003_ranges_reach_xla_and_iree_through_composites() -> None:
    import jax

    import modelprov
    from modelprov._cli import _examples
    from modelprov.stablehlo import read_hlo_sources, read_mlir_sources

    model, args = _examples.mlp()
    ranges = modelprov.calibrate(model, [args, args])
    program = export_stablehlo(model, args, annotations=ranges, composites=True)
    ranged = [op for op in program.ops if "custom.max" in op.attributes]
    # each layer's composite and the op its decomposition returns
    assert sorted(op.op_name for op in ranged) == sorted(
        ["stablehlo.composite"] * 3 + ["stablehlo.add", "stablehlo.maximum", "stablehlo.add"]
    )
    compiled = jax.jit(program.exported.call).lower(program.weights, (args[0].numpy(),)).compile()
    hlo = read_hlo_sources(compiled.as_text())
    modules = {op.attributes.get("modelprov.module") for op in hlo if "custom.max" in op.attributes}
    assert modules == {"0", "1", "2"}
    pytest.importorskip("iree.compiler")
    flow = _downstream.iree_flow(program)
    found = {s.module_path for op in read_mlir_sources(flow) for s in op.sources if s.metadata}
    assert found >= {"0", "2"}


class _SameOpsOtherCalls(nn.Module):  # type: ignore[misc]
    """view and reshape lower to the same op; zeros_like reads only its input's shape."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = torch.relu(x) + 1
        flat = y.view(2, 12) * 2 + y.reshape(2, 12)
        return flat + torch.zeros_like(flat), x.new_ones(3)


def test_equal_bodies_of_different_aten_calls_stay_apart_and_unread_operands_are_kept() -> None:
    _, composites, computing = check_composites(
        _SameOpsOtherCalls().eval(), (torch.randn(2, 3, 4),)
    )
    assert len(composites) == len(computing)
    by_name = {c.name: c.decomposition for c in composites}
    assert by_name["aten.view.default"] != by_name["aten.reshape.default"]
    zeros = next(c for c in composites if c.name == "aten.zeros_like.default")
    assert zeros.operands == 1  # its input, though the body reads only the shape
