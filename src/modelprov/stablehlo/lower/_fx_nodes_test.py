"""FX node provenance: module path and type, target, stack frame, pre-decomposition node."""

from __future__ import annotations

import pytest
import torch

from modelprov.stablehlo.lower._fx_nodes import fx_node_infos

pytest.importorskip("jax")


def test_decomposed_linear_points_back_to_linear() -> None:
    from modelprov.stablehlo.lower._lower import decompose

    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.ReLU())
    original = torch.export.export(model, (torch.randn(1, 3),))
    infos = fx_node_infos(decompose(original).graph, original.graph)
    assert infos["permute"].source_nodes == ("linear",)
    assert infos["addmm"].source_nodes == ("linear",)
    assert infos["addmm"].target == "aten.addmm.default"
    assert infos["addmm"].id == infos["addmm"].fx_node == "addmm"
    assert infos["addmm"].module_path == "0"
    assert infos["addmm"].module_type == "torch.nn.modules.linear.Linear"
    assert infos["relu"].source_nodes == ("relu",)
    assert infos["relu"].module_path == "1"
    assert infos["relu"].file is not None and infos["relu"].file.endswith("activation.py")
    assert infos["relu"].call_stack[-1].file == infos["relu"].file
    assert infos["relu"].shared_ids() == ("relu",)
