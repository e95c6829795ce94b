"""expose_node_results: main also returns each FX node's value; nothing else changes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("jax")

import modelprov
from modelprov.stablehlo._expose import expose_node_results


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("batch", [1, 3])
def test_each_node_value_is_returned_and_the_outputs_stay(batch: int) -> None:
    torch.manual_seed(batch)
    model = torch.nn.Sequential(
        torch.nn.Linear(5, 7), torch.nn.Tanh(), torch.nn.Linear(7, 3), torch.nn.Softmax(-1)
    ).eval()
    x = torch.randn(batch, 5)
    program = modelprov.export_stablehlo(model, (x,))
    text, serialized = program.text, program.exported.mlir_module_serialized
    exposure = expose_node_results(program)
    assert (program.text, program.exported.mlir_module_serialized) == (text, serialized)
    outputs, values = exposure.run(program, (x,), {})
    np.testing.assert_allclose(outputs[0], program.run(x)[0], rtol=1e-6, atol=1e-7)
    by_node = {node: values[i] for i, r in enumerate(exposure.results) for node in r.nodes}
    with torch.no_grad():
        first = model[0](x)
        hidden = torch.tanh(first)
        logits = model[2](hidden)
    np.testing.assert_allclose(by_node["addmm"], first.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(by_node["tanh"], hidden.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(by_node["addmm_1"], logits.numpy(), rtol=1e-5, atol=1e-6)
    for result, value in zip(exposure.results, values, strict=True):
        assert value.shape == result.shape
        assert set(result.nodes) <= set(program.ops[result.op].nodes)
        assert all(read < exposure.results.index(result) for read in result.reads)
    position = {node: i for i, r in enumerate(exposure.results) for node in r.nodes}
    assert exposure.results[position["tanh"]].reads == (position["addmm"],)
