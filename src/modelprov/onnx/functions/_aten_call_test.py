"""Parsing FX node text, binding to ATen schemas, and the JSON record."""

from __future__ import annotations

import json

import pytest

from modelprov.errors import MetadataError
from modelprov.onnx.functions._aten_call import (
    AtenCall,
    call_from_fx_text,
    call_of,
    dump_schemas,
    function_name,
    load_schemas,
    onnx_attribute,
)

LAYER_NORM = (
    "%layer_norm : [num_users=1] = call_function[target=torch.ops.aten.layer_norm.default]"
    "(args = (%clone, [64], %p_w, %p_b, 1e-05, False), kwargs = {})"
)
ARANGE = (
    "%arange : [num_users=1] = call_function[target=torch.ops.aten.arange.default]"
    "(args = (16,), kwargs = {device: cpu, pin_memory: False, dtype: torch.int64})"
)


def test_fx_text_binds_to_the_schema() -> None:
    call = call_from_fx_text(LAYER_NORM, {"clone": "clone", "p_w": "model.w"})
    assert call is not None
    assert call.target == "aten::layer_norm.default"
    assert [(a.name, a.is_tensor) for a in call.arguments] == [
        ("input", True),
        ("normalized_shape", False),
        ("weight", True),
        ("bias", True),
        ("eps", False),
        ("cudnn_enable", False),
    ]
    assert call.arguments[0].tensors == (("clone", "clone"),)
    assert call.arguments[2].tensors == (("p_w", "model.w"),)
    assert call.arguments[1].value == [64]
    assert call.arguments[4].value == 1e-05


def test_kwargs_and_enums() -> None:
    call = call_from_fx_text(ARANGE, {})
    assert call is not None
    values = {a.name: a.value for a in call.arguments}
    assert values["end"] == 16 and values["device"] == "cpu" and values["dtype"] == "torch.int64"
    assert call.tensor_arguments == []


def test_record_round_trip_and_precedence() -> None:
    call = call_from_fx_text(LAYER_NORM, {"clone": "clone"})
    assert call is not None
    assert AtenCall.from_json(call.to_json()) == call
    metadata = {"pkg.modelprov.aten_call": call.to_json(), "pkg.torch.onnx.fx_node": ARANGE}
    assert call_of(metadata, {}) == call
    assert AtenCall.from_json('{"version": 99}') is None
    assert call_from_fx_text("%x : = placeholder[target=x]", {}) is None


def test_names_and_attributes() -> None:
    assert function_name("aten::addmm.default") == "aten_addmm_default"
    assert function_name("aten::add_.Tensor") == "aten_add__Tensor"
    call = call_from_fx_text(LAYER_NORM, {})
    assert call is not None
    eps = onnx_attribute(call.arguments[4])
    shape = onnx_attribute(call.arguments[1])
    assert eps is not None and abs(eps.value - 1e-05) < 1e-9
    assert shape is not None and list(shape.value) == [64]


@pytest.mark.parametrize(
    "text",
    [
        '{"version": true, "target": "aten::relu.default", "args": []}',
        '{"version": 1.0, "target": "aten::relu.default", "args": []}',
        '{"version": 1, "target": 5, "args": []}',
        '{"version": 1, "target": "aten::relu.default", "args": [7]}',
        '{"version": 1, "target": "aten::relu.default", "args": [{"name": "self"}]}',
        '{"version": 1, "target": "t", "args": [{"name": "x", "type": "Tensor", "tensor": 3}]}',
        "[" * 50_000,
        "not json",
    ],
)
def test_malformed_records_are_not_read(text: str) -> None:
    assert AtenCall.from_json(text) is None


def _v1_record(call: AtenCall) -> str:
    """The version-1 form (schema, names and types inline), as earlier modelprov wrote it."""
    args = []
    for a in call.arguments:
        entry: dict[str, object] = {"name": a.name, "type": a.type}
        if a.is_tensor:
            pairs = [{"fx": fx, "onnx": onnx} if fx else None for fx, onnx in a.tensors]
            entry["tensor"] = pairs if a.is_list else pairs[0]
        else:
            entry["value"] = a.value
        args.append(entry)
    document = {"version": 1, "target": call.target, "schema": call.schema, "args": args}
    return json.dumps(document)


def test_version_1_records_are_still_read() -> None:
    call = call_from_fx_text(LAYER_NORM, {"clone": "clone", "p_w": "model.w"})
    assert call is not None
    old = _v1_record(call)
    assert AtenCall.from_json(old) == call
    assert len(call.to_json()) < len(old) / 2
    assert json.loads(call.to_json())["version"] == 2
    assert "schema" not in json.loads(call.to_json())


def test_schema_pool_round_trip_and_precedence() -> None:
    call = call_from_fx_text(LAYER_NORM, {})
    assert call is not None
    pool = load_schemas(dump_schemas({call.target: call.schema}))
    assert pool == {call.target: call.schema}
    assert AtenCall.from_json(call.to_json(), pool) == call
    # The pool's schema wins over torch's: a renamed argument shows it was used.
    renamed = {call.target: call.schema.replace("Tensor input", "Tensor x")}
    from_pool = AtenCall.from_json(call.to_json(), renamed)
    assert from_pool is not None and from_pool.arguments[0].name == "x"
    # A record whose arguments do not fit its schema is no record (fall back to FX text).
    mismatched = json.dumps({"version": 2, "target": call.target, "args": [1]})
    assert AtenCall.from_json(mismatched) is None
    assert load_schemas(None) == {}


def test_malformed_schema_pool_is_an_error() -> None:
    for text in ("{", '{"format":"x"}', '{"format":"modelprov.aten_schemas","version":9}'):
        with pytest.raises(MetadataError, match="aten_schemas"):
            load_schemas(text)
