"""Random small ONNX nets with one input/output signature and one set of op kinds, their
nodes carrying sources: models only computing tells apart."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as helper

FLOAT = onnx.TensorProto.FLOAT


def random_net(seed: int, *, batch: str | int = "batch") -> onnx.ModelProto:
    """x float[batch,3,8,8] -> y float[batch,4] through a random number of Conv(+BN)+Relu
    blocks with random residual Adds, random widths and random weights; every net uses the
    same op kinds, so only computing tells two of them apart. Nodes carry sources."""
    rng = np.random.default_rng(seed)
    width = int(rng.choice([4, 6, 8]))
    nodes: list[onnx.NodeProto] = []
    weights: list[onnx.TensorProto] = []

    def weight(name: str, *shape: int, scale: float = 0.3) -> str:
        array = (rng.standard_normal(shape) * scale).astype(np.float32)
        weights.append(onnx.numpy_helper.from_array(array, name))
        return name

    def node(op: str, inputs: list[str], output: str, **attributes: object) -> str:
        made = helper.make_node(op, inputs, [output], name=f"n{len(nodes)}", **attributes)
        made.metadata_props.add(key="pkg.torch.onnx.fx_node", value=f"%{output} : {op}")
        nodes.append(made)
        return output

    current, channels = "x", 3
    for block in range(int(rng.integers(1, 4))):
        conv = node(
            "Conv",
            [current, weight(f"w{block}", width, channels, 3, 3), weight(f"b{block}", width)],
            f"conv{block}",
            pads=[1, 1, 1, 1],
        )
        if rng.random() < 0.5:
            stats = [
                weight(f"g{block}", width),
                weight(f"beta{block}", width),
                weight(f"mean{block}", width),
            ]
            var = np.abs(rng.standard_normal(width)).astype(np.float32) + 0.5
            weights.append(onnx.numpy_helper.from_array(var, f"var{block}"))
            conv = node("BatchNormalization", [conv, *stats, f"var{block}"], f"bn{block}")
        out = node("Relu", [conv], f"relu{block}")
        if channels == width:
            out = node("Add", [out, current], f"res{block}")
        current, channels = out, width
    pooled = node("GlobalAveragePool", [current], "pool")
    flat = node("Flatten", [pooled], "flat")
    node("Gemm", [flat, weight("fc", 4, width), weight("fc_bias", 4)], "y", transB=1)
    graph = helper.make_graph(
        nodes,
        "net",
        [helper.make_tensor_value_info("x", FLOAT, [batch, 3, 8, 8])],
        [helper.make_tensor_value_info("y", FLOAT, [batch, 4])],
        weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 10
    onnx.checker.check_model(model)
    return model
