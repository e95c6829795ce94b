"""Per-layer annotations and calibrated ranges, carried into ONNX and through optimization."""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import onnx_ir as ir
import pytest
import torch
from torch import nn

import modelprov
from modelprov._cli import _examples
from modelprov.errors import AnnotationError


def _export(module, args, **kwargs) -> ir.Model:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return modelprov.export(module, args, verbose=False, **kwargs).model


def _hook_ranges(model: nn.Module, batches) -> dict[str, tuple[float, float]]:
    """What plain forward hooks measure, independently of modelprov.calibrate."""
    ranges: dict[str, list[float]] = {}
    handles = []
    for name, module in model.named_modules():
        if name and not list(module.children()):

            def hook(mod, inputs, output, name=name):
                low, high = ranges.get(name, [float("inf"), float("-inf")])
                ranges[name] = [min(low, output.min().item()), max(high, output.max().item())]

            handles.append(module.register_forward_hook(hook))
    with torch.no_grad():
        for batch in batches:
            model(batch)
    for handle in handles:
        handle.remove()
    return {name: (low, high) for name, (low, high) in ranges.items()}


@pytest.fixture(scope="module")
def seed003():
    module, args = _examples.mlp()
    generator = torch.Generator().manual_seed(1)
    batches = [torch.randn(8, 784, generator=generator) for _ in range(4)]
    stats = modelprov.calibrate(module, batches)
    model = _export(module, args, annotations=stats)
    return module, batches, stats, model


def _producer_of_module_output(model: ir.Model, module_path: str) -> list[ir.Node]:
    return [
        node
        for node in model.graph
        if any(s.module_path == module_path for s in modelprov.sources(model, node))
        and "custom.max" in node.metadata_props
    ]


def test_each_layer_output_node_carries_its_range(seed003):
    module, batches, stats, model = seed003
    measured = _hook_ranges(module, batches)
    for path in ("0", "1", "2"):
        (node,) = _producer_of_module_output(model, path)
        low, high = (
            float(node.metadata_props["custom.min"]),
            float(node.metadata_props["custom.max"]),
        )
        assert np.float32(low) == np.float32(measured[path][0])
        assert np.float32(high) == np.float32(measured[path][1])
        assert node.metadata_props["custom.min"] == repr(stats[path]["custom.min"])
    relu = next(node for node in model.graph if node.op_type == "Relu")
    assert float(relu.metadata_props["custom.min"]) == 0.0
    last = model.graph.outputs[0].producer()
    assert last is not None and last.metadata_props["custom.max"] == repr(stats["2"]["custom.max"])


def test_only_output_producers_carry_value_scoped_keys(seed003):
    _, _, _, model = seed003
    carriers = [node for node in model.graph if "custom.min" in node.metadata_props]
    assert len(carriers) == 3


def test_graph_output_value_info_carries_the_range(seed003):
    _, _, stats, model = seed003
    proto = ir.to_proto(model)
    (output,) = proto.graph.output
    props = {entry.key: entry.value for entry in output.metadata_props}
    assert props["custom.min"] == repr(stats["2"]["custom.min"])
    assert props["custom.max"] == repr(stats["2"]["custom.max"])
    onnx.checker.check_model(proto, full_check=True)


def test_module_scoped_keys_inherit_and_override():
    module, args = _examples.cnn()
    modelprov.annotate(module, {"quant.scheme": "int8", "owner": "root"})
    modelprov.annotate(module.block2, {"quant.scheme": "int4"})
    try:
        model = _export(module, args, optimize=False)
    finally:
        for sub in (module, module.block2):
            object.__delattr__(sub, "_modelprov_annotations")
    for node in model.graph:
        (source,) = modelprov.sources(model, node)
        assert source.metadata["owner"] == "root"
        expected = "int4" if source.module_path.startswith("block2") else "int8"
        assert source.metadata["quant.scheme"] == expected


def test_ranges_follow_the_tensor_through_conv_bn_fusion():
    module, args = _examples.cnn()
    generator = torch.Generator().manual_seed(2)
    stats = modelprov.calibrate(
        module, [torch.randn(2, 3, 16, 16, generator=generator) for _ in range(3)]
    )
    model = _export(module, args, annotations=stats)
    convs = [node for node in model.graph if node.op_type == "Conv"]
    relus = [node for node in model.graph if node.op_type == "Relu"]
    assert len(convs) == 2 and len(relus) == 2
    for block, conv, relu in zip(("block1", "block2"), convs, relus, strict=True):
        # BatchNorm folded into the Conv: the Conv now produces BatchNorm's output.
        assert conv.metadata_props["custom.max"] == repr(stats[f"{block}.1"]["custom.max"])
        assert relu.metadata_props["custom.max"] == repr(stats[f"{block}.2"]["custom.max"])
        assert relu.metadata_props["custom.min"] == "0.0"


def test_unknown_module_path_lists_close_matches():
    module, args = _examples.mlp()
    with pytest.raises(AnnotationError, match=r"'3'.*"):
        _export(module, args, annotations={"3": {"custom.max": 1.0}})
    with pytest.raises(AnnotationError, match="block1"):
        _export(*_examples.cnn(), annotations={"blok1": {"x": 1}})


def test_fx_traceback_annotate_is_honoured():
    class Annotated(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(4, 4)

        def forward(self, x):
            with torch.fx.traceback.annotate({"stage": "encoder"}):
                y = self.linear(x)
            return torch.relu(y)

    model = _export(Annotated().eval(), (torch.randn(2, 4),), optimize=False)
    stages = {node.op_type: node.metadata_props.get("stage") for node in model.graph}
    assert stages.get("Gemm") == "encoder"
    assert stages.get("Relu") is None
