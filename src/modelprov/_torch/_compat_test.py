"""The torch internals behind _torch_compat exist in the installed torch and mean what we use."""

from __future__ import annotations

import sys

import pytest
import torch

from modelprov._torch import _compat as _torch_compat
from modelprov._torch._compat import (
    FX_REFERENCE,
    fx_node_text_name,
    fx_node_text_target,
    is_op_overload,
    is_op_target,
    op_schema,
    parse_fx_node_text,
    schema_by_name,
    tensor_argument_kind,
)
from modelprov.errors import MissingDependencyError


def test_installed_torch_is_a_tested_version() -> None:
    assert torch.__version__.startswith(_torch_compat.TESTED_TORCH), (
        f"torch {torch.__version__}: re-check every helper of _torch_compat, then add it "
        "to TESTED_TORCH"
    )


def test_op_overloads_and_packets_are_told_apart() -> None:
    assert is_op_overload(torch.ops.aten.addmm.default)
    assert not is_op_overload(torch.ops.aten.addmm)
    assert is_op_target(torch.ops.aten.addmm) and is_op_target(torch.ops.aten.addmm.default)
    assert not is_op_overload(torch.add) and not is_op_target("aten::addmm")


def test_schemas_by_op_and_by_name_agree() -> None:
    schema = op_schema(torch.ops.aten.addmm.default)
    assert [argument.name for argument in schema.arguments][:3] == ["self", "mat1", "mat2"]
    assert str(schema_by_name("aten::addmm.default")) == str(schema)
    assert str(schema_by_name("aten.addmm")) == str(schema)
    assert schema_by_name("aten::no_such_op.default") is None
    kinds = {arg.name: tensor_argument_kind(arg.type) for arg in schema.arguments}
    assert kinds["self"] == (True, False) and kinds["beta"] == (False, False)
    cat = schema_by_name("aten::cat.default")
    assert tensor_argument_kind(cat.arguments[0].type) == (True, True)


def test_fx_node_text_of_the_installed_torch_parses() -> None:
    exported = torch.export.export(torch.nn.Linear(3, 2), (torch.randn(1, 3),))
    node = next(n for n in exported.graph.nodes if n.op == "call_function")
    parsed = parse_fx_node_text(node.format_node())
    assert parsed is not None
    assert fx_node_text_name(node.format_node()) == node.name == "linear"
    assert fx_node_text_target(node.format_node()) == "aten.linear.default"
    assert fx_node_text_name("no node text") == fx_node_text_target("no node text") == ""
    target, args, kwargs = parsed
    assert target == "aten.linear.default" == f"aten.{node.target.__name__}"
    assert all(isinstance(a, str) and a.startswith(FX_REFERENCE) for a in args[:2])
    assert kwargs == {}
    assert parse_fx_node_text("%x : [num_users=1] = placeholder[target=x]") is None
    code = "call_function[target=f](args = (__import__('os'),), kwargs = {})"
    assert parse_fx_node_text(code) is None  # a call is no literal: never evaluated


def test_a_missing_internal_names_the_versions(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(sys.modules["torch._ops"], "OpOverload")
    with pytest.raises(MissingDependencyError, match=r"torch .* lacks torch\._ops\.OpOverload"):
        is_op_overload(object())
