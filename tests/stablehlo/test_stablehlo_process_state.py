"""export_stablehlo leaves the process able to export the next model (issue 24).

torchax's import renames torch's PrivateUse1 backend to ``jax``; before modelprov completed
that backend (``stablehlo.lower._jax_backend_compat``), every dynamo trace afterwards failed
("PyTorch is not linked with support for jax devices"): ONNX export of a ``torch.cond``
model, strict ``torch.export``. Each check runs in a fresh interpreter, so test order does not
matter.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from tests._cli import ROOT

pytest.importorskip("jax")

_SCRIPT = textwrap.dedent(
    """
    import warnings
    warnings.simplefilter("ignore")
    import numpy as np, onnxruntime, torch
    import modelprov
    from modelprov.stablehlo import export_stablehlo
    from tests import _factories

    mlp, mlp_args = _factories.mlp()
    export_stablehlo(mlp, mlp_args)  # imports torchax, lowers

    model, (x,) = _factories.cond_model()
    program = torch.onnx.export(model, (x,), dynamo=True, optimize=False, verbose=False)
    session = onnxruntime.InferenceSession(
        program.model_proto.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    for sign in (1.0, -1.0):
        value = (x.abs() + 0.1) * sign
        (got,) = session.run(None, {session.get_inputs()[0].name: value.numpy()})
        np.testing.assert_allclose(got, model(value).numpy(), atol=1e-6, rtol=0)
    modelprov.export(model, (x,), sys.argv[1], verbose=False)
    torch.export.export(mlp, mlp_args, strict=True)
    export_stablehlo(model, (x,))  # and the cond model lowers too
    print("exported after export_stablehlo")
    """
)


def test_onnx_export_of_a_cond_model_after_export_stablehlo(tmp_path: object) -> None:
    environment = dict(os.environ)
    environment["PYTHONPATH"] = os.pathsep.join(
        [os.path.join(ROOT, "src"), ROOT, environment.get("PYTHONPATH", "")]
    )
    completed = subprocess.run(
        [sys.executable, "-c", "import sys\n" + _SCRIPT, os.path.join(str(tmp_path), "cond.onnx")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=environment,
        timeout=600,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "exported after export_stablehlo" in completed.stdout


def test_torch_accelerator_api_answers_after_the_torchax_import() -> None:
    import torch

    from modelprov.stablehlo.lower._jax_backend_compat import accelerator_api_works
    from modelprov.stablehlo.lower._torchax_compat import import_torchax

    import_torchax()
    assert torch._C._get_privateuse1_backend_name() == "jax"
    assert accelerator_api_works()
    assert torch.accelerator.current_device_index() == 0
