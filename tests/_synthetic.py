"""A synthetic ONNX model of any size with torch.onnx-style provenance (built in code).

Nodes sit in modules ``blocks.<b>.<attn|mlp>``; every node has the metadata torch.onnx
writes (namespace, name scopes, class hierarchy, FX node, stack trace), a share of them are
merged (two sources, via the sources table), carry no metadata, or carry
``modelprov.confidence`` like recovered nodes.
"""

from __future__ import annotations

import onnx_ir as ir

from modelprov.core._sources import Source, SourceTable

__all__ = ["synthetic_model"]

_OPS = ("Add", "Mul", "Relu", "Sigmoid", "Tanh", "Sub")


def _metadata(index: int, module: str, fx: str, op: str) -> dict[str, str]:
    block = module.rsplit(".", 1)[0]
    scopes = ["", block, module, fx]
    classes = ["model.Net", *("model.Block" for _ in scopes[1:-1]), f"aten.{op.lower()}"]
    return {
        "namespace": "/".join(f"{s}: {c}" for s, c in zip(scopes, classes, strict=True)),
        "pkg.torch.onnx.name_scopes": repr(scopes),
        "pkg.torch.onnx.class_hierarchy": repr(classes),
        "pkg.torch.onnx.fx_node": (
            f"%{fx} : [num_users=1] = call_function[target=torch.ops.aten.{op.lower()}.Tensor]"
            f"(args = (%x,))"
        ),
        "pkg.torch.onnx.stack_trace": (
            f'File "/src/model.py", line {20 + index % 40}, in forward\n    x = self.{module}(x)\n'
            f'File "/src/blocks.py", line {100 + index % 300}, in forward\n    x = x.{op.lower()}()'
        ),
    }


def synthetic_model(
    nodes: int = 2000,
    *,
    per_module: int = 25,
    merged_every: int = 17,
    none_every: int = 23,
    recovered_every: int = 31,
) -> ir.Model:
    """A chain-with-residuals model of ``nodes`` elementwise nodes on a [1, 8] float input."""
    x = ir.Value(name="x", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([1, 8]))
    graph = ir.Graph([x], [], nodes=[], name="synthetic", opset_imports={"": 18})
    table: list[Source] = []
    previous = residual = x
    for i in range(nodes):
        module = f"blocks.{i // (2 * per_module)}.{'attn' if (i // per_module) % 2 else 'mlp'}"
        op = _OPS[i % len(_OPS)]
        inputs = [previous, residual] if op in ("Add", "Mul", "Sub") else [previous]
        fx = f"{op.lower()}_{i}"
        unnamed = i % none_every == 5
        node = ir.node(op, inputs, name=None if unnamed else f"node_{fx}")
        if unnamed:
            pass
        elif i % merged_every == 3:
            ids = [fx, f"{fx}_folded"]
            for source_id in ids:
                table.append(Source.from_metadata(source_id, _metadata(i, module, source_id, op)))
            node.metadata_props["modelprov.sources"] = f'["{ids[0]}","{ids[1]}"]'
        else:
            node.metadata_props.update(_metadata(i, module, fx, op))
            if i % recovered_every == 7:
                node.metadata_props["modelprov.confidence"] = "inferred"
        graph.append(node)
        previous = node.outputs[0]
        previous.name = f"v{i}"
        if i % 5 == 4:
            residual = previous
    graph.outputs.append(previous)
    model = ir.Model(graph, ir_version=10)
    model.metadata_props["modelprov.sources"] = SourceTable(table).dumps()
    return model
