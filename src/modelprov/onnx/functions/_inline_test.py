"""inline without records: names made unique, constants restored as initializers."""

from __future__ import annotations

import onnx
import onnx_ir as ir

from modelprov.onnx.functions._functionize import FunctionizePass
from modelprov.onnx.functions._inline import inline

TEXT = """
<ir_version: 10, opset_import: ["" : 20]>
g (float[2,3] x) => (float[2,3] y) {
    y = Relu (x)
}
"""


def test_model_without_calls_is_unchanged() -> None:
    model = ir.from_proto(onnx.parser.parse_model(TEXT))
    result = inline(model)
    assert [n.op_type for n in result.graph] == ["Relu"]
    outcome = FunctionizePass()(result)
    assert outcome.calls == 0 and outcome.skipped and not outcome.modified
