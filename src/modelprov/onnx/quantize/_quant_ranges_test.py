"""Ranges read from metadata, from ranges=, and carried through value-moving ops."""

from __future__ import annotations

import onnx
import onnx_ir as ir
import pytest

from modelprov.errors import QuantizationError
from modelprov.onnx.quantize._quant_ranges import annotated_ranges, model_ranges

_TEXT = """
<ir_version: 10, opset_import: ["" : 18]>
g (float[2, 4] x) => (float[8] y) {
  a = Relu(x)
  s = Constant<value_ints = [8]>()
  y = Reshape(a, s)
}
"""


def _model(node_props: dict[str, dict[str, str]] | None = None) -> ir.Model:
    model = ir.from_proto(onnx.parser.parse_model(_TEXT))
    for node in model.graph:
        node.metadata_props.update((node_props or {}).get(node.op_type, {}))
    return model


def _scoped(model: ir.Model, op_type: str, path: str) -> None:
    for node in model.graph:
        if node.op_type == op_type:
            node.metadata_props["pkg.torch.onnx.name_scopes"] = repr(["", path, op_type.lower()])


def test_value_metadata_wins_over_node_metadata() -> None:
    model = _model({"Relu": {"custom.min": "0.0", "custom.max": "3.0"}})
    model.graph.node(0).outputs[0].metadata_props.update({"custom.min": "0", "custom.max": "2"})
    found = annotated_ranges(model)
    assert (found["a"].minimum, found["a"].maximum, found["a"].origin) == (0.0, 2.0, "metadata")


def test_reshape_carries_its_input_range() -> None:
    found = model_ranges(_model({"Relu": {"custom.min": "0.0", "custom.max": "3.5"}}))
    assert (found["y"].minimum, found["y"].maximum, found["y"].origin) == (0.0, 3.5, "propagated")


def test_a_range_of_its_own_is_not_overwritten_by_propagation() -> None:
    model = _model({"Relu": {"custom.min": "0", "custom.max": "3"}})
    found = model_ranges(model, {"y": (-1, 1)})
    assert (found["y"].minimum, found["y"].origin) == (-1.0, "ranges")


def test_module_path_keys_name_the_tensors_leaving_the_module() -> None:
    model = _model()
    _scoped(model, "Relu", "act")
    _scoped(model, "Reshape", "head")
    found = model_ranges(model, {"act": {"min": 0, "max": 5}, "": (-2, 2)})
    assert (found["a"].maximum, found["y"].maximum) == (5.0, 2.0)


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"custom.min": "0"}, "has only one of custom.min and custom.max"),
        ({"custom.min": "low", "custom.max": "1"}, "'low' is not a number"),
        ({"custom.min": "0", "custom.max": "inf"}, "not finite"),
        ({"custom.min": "2", "custom.max": "1"}, "min 2.0 is larger than max 1.0"),
    ],
)
def test_bad_metadata_names_the_node_and_key(props: dict[str, str], message: str) -> None:
    with pytest.raises(QuantizationError, match=message):
        annotated_ranges(_model({"Relu": props}))
