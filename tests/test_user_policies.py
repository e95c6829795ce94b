"""User keys, user policies and user rewrite rules go through the same machinery."""

from __future__ import annotations

import json

import numpy as np
import onnx_ir as ir
import onnxscript.rewriter.pattern as orp
import pytest

import modelprov
from modelprov.core import _policy as policy
from modelprov.errors import PolicyError
from tests._checks import run
from tests.conftest import example_inputs


def _transposes(model: ir.Model) -> list[ir.Node]:
    return [node for node in model.graph if node.op_type == "Transpose"]


@pytest.fixture
def annotated(export_of) -> ir.Model:
    """The double transpose with user keys on its two transposes (first, then second)."""
    model = export_of("double_transpose")
    first, second = _transposes(model)
    first.metadata_props.update({"custom.min": "-3.5", "custom.max": "2.0", "team": "a"})
    second.metadata_props.update({"custom.min": "-1.25", "custom.max": "7", "team": "b"})
    return model


def test_value_scoped_keys_follow_the_output(annotated):
    optimized = modelprov.optimize(annotated)
    (fused,) = _transposes(optimized)
    assert fused.metadata_props["custom.min"] == "-1.25"
    assert fused.metadata_props["custom.max"] == "7"
    (output,) = fused.outputs
    assert output.metadata_props["custom.min"] == "-1.25"


def test_union_keeps_both_values(annotated):
    optimized = modelprov.optimize(annotated)
    (fused,) = _transposes(optimized)
    assert json.loads(fused.metadata_props["team"]) == ["a", "b"]
    sources = modelprov.sources(optimized, fused)
    assert [s.metadata["team"] for s in sources] == ["a", "b"]


def test_user_callable_is_called_with_values_and_context(annotated):
    calls = []

    def concat(values, ctx):
        calls.append((list(values), ctx.key, ctx.from_output, ctx.source_ids))
        return "+".join(values)

    optimized = modelprov.optimize(
        annotated, policies=modelprov.DEFAULT_POLICIES | {"team": concat}
    )
    (fused,) = _transposes(optimized)
    assert fused.metadata_props["team"] == "a+b"
    assert (["a", "b"], "team", (False, True), ("transpose", "transpose_1")) in calls


def test_glob_policy_and_drop(annotated):
    policies = modelprov.Policies(
        {"custom.*": policy.value_scoped(policy.min), "team": policy.drop}
    )
    optimized = modelprov.optimize(annotated, policies=policies)
    (fused,) = _transposes(optimized)
    assert fused.metadata_props["custom.min"] == "-1.25"
    assert "team" not in fused.metadata_props
    # The table still holds every source's own value.
    assert [s.metadata["team"] for s in modelprov.sources(optimized, fused)] == ["a", "b"]


def test_error_on_conflict_names_key_and_node(annotated):
    with pytest.raises(PolicyError, match=r"'team'.*different values"):
        modelprov.optimize(
            annotated, policies=modelprov.Policies({"team": policy.error_on_conflict})
        )
    assert "modelprov.sources" not in annotated.metadata_props


def test_policy_that_raises_gives_a_clear_error(annotated):
    def broken(values, ctx):
        raise RuntimeError("boom")

    before = [dict(node.metadata_props) for node in annotated.graph]
    with pytest.raises(PolicyError, match=r"for key 'team' failed on node .*RuntimeError: boom"):
        modelprov.optimize(annotated, policies=modelprov.Policies({"team": broken}))
    assert [dict(node.metadata_props) for node in annotated.graph] == before


def _mul_by_two_to_add() -> orp.RewriteRule:
    def target(op, x, two):
        return op.Mul(x, two)

    def replacement(op, x, two):
        return op.Add(x, x)

    def is_two(context, x, two, **_):
        value = two.const_value
        return value is not None and value.numpy().size == 1 and float(value.numpy()) == 2.0

    return orp.RewriteRule(target, replacement, is_two, name="MulByTwoToAdd")


def test_user_rewrite_rule_gets_provenance(export_of):
    base = export_of("double_transpose")
    optimized = modelprov.optimize(base, rules=[_mul_by_two_to_add()])
    adds = [node for node in optimized.graph if node.op_type == "Add"]
    assert len(adds) == 1 and not any(n.op_type == "Mul" for n in optimized.graph)
    assert [s.fx_node for s in modelprov.sources(optimized, adds[0])] == [
        "scalar_tensor_default",
        "mul",
    ]
    assert "return 2 * k" in adds[0].metadata_props["pkg.torch.onnx.stack_trace"]
    inputs = [t.numpy() for t in example_inputs("double_transpose")]
    np.testing.assert_allclose(run(optimized, inputs)[0], run(base, inputs)[0], rtol=1e-6)
    report = modelprov.diff(base, optimized)
    assert report.fx_nodes.value == 1.0
