"""A synthetic model with 4 GiB of external weights in a sparse file, and a per-process
peak-RSS meter; used by tests/test_external_data.py and benchmarks/bench_large_model.py."""

from __future__ import annotations

import os
import subprocess
import sys

import onnx
from onnx import helper

__all__ = ["LAYERS", "LAYER_BYTES", "build_large_model", "measure"]

LAYERS = 8
LAYER_BYTES = 512 * 1024 * 1024
_WIDE, _NARROW = 16384, 8192  # 8192 x 16384 float32 = 512 MiB


def _metadata(layer: int, op: str, fx: str, line: int) -> dict[str, str]:
    """What torch.onnx writes on a node of ``layers.<layer>`` (realistic sizes)."""
    module = f"layers.{layer}"
    trace = (
        'File "/home/user/project/train.py", line 88, in forward\n'
        "    hidden = self.backbone(hidden)\n"
        f'File "/home/user/project/model.py", line {line}, in forward\n'
        f"    x = self.{op.lower()}(x)"
    )
    return {
        "namespace": f": __main__.Net/{module}: torch.nn.modules.linear.Linear/{fx}: aten.{op}",
        "pkg.torch.onnx.class_hierarchy": str(
            ["__main__.Net", "torch.nn.modules.linear.Linear", f"aten.{op.lower()}.default"]
        ),
        "pkg.torch.onnx.fx_node": f"%{fx} : [num_users=1] = call_function[target=torch.ops."
        f"aten.{op.lower()}.default](args = (%x, %w{layer}), kwargs = {{}})",
        "pkg.torch.onnx.name_scopes": str(["", module, fx]),
        "pkg.torch.onnx.stack_trace": trace,
    }


def build_large_model(folder: str, *, drop_layer: int | None = None) -> tuple[str, str]:
    """Writes ``large.onnx`` (and, sharing its data, ``large.after.onnx`` in which layer
    ``drop_layer``'s Add lost its metadata) beside a sparse ``large.onnx.data`` of
    LAYERS x 512 MiB. Returns both paths; nothing is read back, no weight is written."""
    data_name = "large.onnx.data"
    with open(os.path.join(folder, data_name), "wb") as stream:
        stream.truncate(LAYERS * LAYER_BYTES)

    def model(drop: int | None) -> onnx.ModelProto:
        nodes, initializers = [], []
        current, width = "x", _NARROW
        for layer in range(LAYERS):
            out_width = _WIDE if width == _NARROW else _NARROW
            weight = onnx.TensorProto(name=f"w{layer}", data_type=onnx.TensorProto.FLOAT)
            weight.dims.extend([width, out_width])
            weight.data_location = onnx.TensorProto.EXTERNAL
            for key, value in (
                ("location", data_name),
                ("offset", str(layer * LAYER_BYTES)),
                ("length", str(LAYER_BYTES)),
            ):
                entry = weight.external_data.add()
                entry.key, entry.value = key, value
            bias = helper.make_tensor(
                f"b{layer}", onnx.TensorProto.FLOAT, [out_width], [0.0] * out_width
            )
            initializers += [weight, bias]
            matmul = helper.make_node(
                "MatMul", [current, f"w{layer}"], [f"m{layer}"], name=f"node_linear_{layer}_mm"
            )
            add = helper.make_node(
                "Add", [f"m{layer}", f"b{layer}"], [f"h{layer}"], name=f"node_linear_{layer}_add"
            )
            helper.set_metadata_props(matmul, _metadata(layer, "MatMul", f"mm_{layer}", 10))
            if layer != drop:
                helper.set_metadata_props(add, _metadata(layer, "Add", f"add_{layer}", 11))
            nodes += [matmul, add]
            current, width = f"h{layer}", out_width
        graph = helper.make_graph(
            nodes,
            "large",
            [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, _NARROW])],
            [helper.make_tensor_value_info(current, onnx.TensorProto.FLOAT, [1, width])],
            initializers,
        )
        made = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
        made.ir_version = 10
        return made

    before = os.path.join(folder, "large.onnx")
    after = os.path.join(folder, "large.after.onnx")
    for path, drop in ((before, None), (after, drop_layer)):
        with open(path, "wb") as stream:
            stream.write(model(drop).SerializeToString())
    return before, after


_MEASURE = """
import resource, subprocess, sys, time
start = time.perf_counter()
result = subprocess.run(sys.argv[1:], capture_output=True, text=True)
elapsed = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
print(result.returncode, peak, elapsed)
sys.stdout.write(result.stdout)
sys.stderr.write(result.stderr)
"""


def measure(command: list[str]) -> tuple[int, int, float, str, str]:
    """Runs ``command`` in a fresh process; (exit code, peak RSS bytes, seconds, out, err)."""
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, *command], capture_output=True, text=True, check=True
    )
    first, _, rest = done.stdout.partition("\n")
    code, peak, elapsed = first.split()
    return int(code), int(peak), float(elapsed), rest, done.stderr
