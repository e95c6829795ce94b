"""record_aten_calls on a real export."""

from __future__ import annotations

import warnings

import torch

from modelprov._cli import _examples
from modelprov.onnx.export._aten_record import record_aten_calls
from modelprov.onnx.functions._aten_call import ATEN_CALL_KEY, AtenCall


def test_every_aten_node_gets_its_record() -> None:
    model, args = _examples.double_transpose()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(model, args, dynamo=True, optimize=False, verbose=False)
    record_aten_calls(program)
    transposes = [node for node in program.model.graph if node.op_type == "Transpose"]
    assert len(transposes) == 2
    call = AtenCall.from_json(transposes[1].metadata_props[ATEN_CALL_KEY])
    assert call is not None
    assert call.target == "aten::transpose.int"
    assert [(a.name, a.value) for a in call.arguments[1:]] == [("dim0", -2), ("dim1", -1)]
    assert call.arguments[0].tensors == (("transpose", "transpose"),)
