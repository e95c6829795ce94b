"""modelprov.export of higher-order ops (torch.cond, torch.while_loop, no_grad blocks), first
export of a fresh interpreter or not, from the API and the command line.

torch's own ``torch._dynamo.disable`` wrappers write ``_torchdynamo_disable*`` keys into node
meta while exporting; when torch.onnx's decomposition ran inside modelprov's
``preserve_node_meta()`` as well, torch refused every torch.cond program exported first in a
process ("Mismatch in custom metadata for key _torchdynamo_disable_method").
"""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import onnx_ir as ir
import onnxruntime
import pytest
import torch

import modelprov
from tests import _factories
from tests._cli import ROOT, cli

_FACTORIES_FILE = os.path.basename(_factories.__file__)

_EXPORT_FIRST = """
import sys
from tests import _factories
import modelprov
model, args = getattr(_factories, sys.argv[1])()
modelprov.export(model, args, sys.argv[2], verbose=False)
"""


def _inputs(args: tuple[Any, ...]) -> list[torch.Tensor]:
    """Inputs shaped like the example reaching every branch: shifted and scaled randoms."""
    (example,) = args
    generator = torch.Generator().manual_seed(0)
    return [
        torch.randn(example.shape, generator=generator) * scale + shift
        for shift in (-2.0, -0.1, 0.1, 2.0)
        for scale in (0.5, 3.0)
    ]


def _check_against_torch(
    path: str, factory: Callable[[], tuple[Any, ...]], *, user_frames: bool = True
) -> ir.Model:
    """The saved model runs in onnxruntime like the factory's model runs in torch, and every
    node (also inside If / Loop bodies) has sources, naming the factories file when
    ``user_frames`` (torch's decomposition drops the stack traces of a no_grad block's nodes:
    plain torch.onnx.export says ``<eval_with_key>`` there too)."""
    model, args = factory()
    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    (input_name,) = (i.name for i in session.get_inputs())
    for x in _inputs(args):
        with torch.no_grad():
            expected = model(x).numpy()
        (got,) = session.run(None, {input_name: x.numpy()})
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    onnx_model = ir.load(path)
    nodes = list(ir.traversal.RecursiveGraphIterator(onnx_model.graph))
    assert nodes
    for node in nodes:
        sources = modelprov.sources(onnx_model, node)
        assert all(source.fx_node for source in sources) and sources, (node.op_type, node.name)
        files = {os.path.basename(source.file or "") for source in sources}
        assert _FACTORIES_FILE in files or not user_frames, (node.op_type, node.name, files)
    return onnx_model


def _op_types(model: ir.Model) -> set[str]:
    return {node.op_type for node in ir.traversal.RecursiveGraphIterator(model.graph)}


def test_torch_cond_exports_first_in_a_fresh_interpreter(tmp_path: Any) -> None:
    out = str(tmp_path / "cond.onnx")
    run = subprocess.run(
        [sys.executable, "-c", _EXPORT_FIRST, "cond_model", out],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=ROOT,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "If" in _op_types(_check_against_torch(out, _factories.cond_model))


def test_torch_cond_exports_from_the_command_line(tmp_path: Any) -> None:
    out = str(tmp_path / "cond.onnx")
    run = cli("export", "tests._factories:cond_model", "--onnx", out)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "If" in _op_types(_check_against_torch(out, _factories.cond_model))


@pytest.mark.parametrize(
    ("factory", "op_type"),
    [
        (_factories.cond_model, "If"),
        (_factories.nested_cond, "If"),
        (_factories.while_loop_model, "Loop"),
        (_factories.no_grad_block, "Gemm"),  # torch.export's wrap_with_set_grad_enabled
    ],
    ids=lambda value: getattr(value, "__name__", value),
)
@pytest.mark.parametrize("optimize", [True, False])
def test_higher_order_ops_export(
    tmp_path: Any, factory: Callable[[], tuple[Any, ...]], op_type: str, optimize: bool
) -> None:
    out = str(tmp_path / "model.onnx")
    model, args = factory()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        modelprov.export(model, args, out, optimize=optimize, verbose=False)
    user_frames = factory is not _factories.no_grad_block
    assert op_type in _op_types(_check_against_torch(out, factory, user_frames=user_frames))


def test_named_dynamic_dims_keep_fx_annotations(tmp_path: Any) -> None:
    """torch.onnx's str dimension names: modelprov captures with them (so annotate blocks are
    recorded) and torch.onnx names the ONNX axis after them."""

    class Annotated(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.proj = torch.nn.Linear(4, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            with torch.fx.traceback.annotate({"stage": "encoder"}):
                hidden = self.proj(x)
            return torch.cond(hidden.sum() > 0, lambda t: t.relu(), lambda t: -t, (hidden,))

    model = Annotated().eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = modelprov.export(
            model, (torch.randn(2, 4),), dynamic_shapes=({0: "batch"},), verbose=False
        )
    (graph_input,) = program.model.graph.inputs
    assert graph_input.shape is not None and str(graph_input.shape[0]) == "batch"
    stages = {node.op_type: node.metadata_props.get("stage") for node in program.model.graph}
    assert stages["Gemm"] == "encoder"
    assert stages["If"] is None
    session = onnxruntime.InferenceSession(
        program.model_proto.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    x = torch.randn(5, 4)
    (got,) = session.run(None, {graph_input.name: x.numpy()})
    with torch.no_grad():
        np.testing.assert_allclose(got, model(x).numpy(), rtol=1e-5, atol=1e-5)
