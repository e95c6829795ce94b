"""modelprov.quantize beside onnxruntime's quantize_static alone, in one run.

Usage: python -m benchmarks.bench_quantize [--layers 2] [--width 64] [--batches 4] [--repeat 3]
Exports a GPT-2 config (random weights) with PyTorch-calibrated ranges, then times, medians:
onnxruntime's own quantize_static (calibrating every tensor from the batches), and
modelprov.quantize (ranges from PyTorch, onnxruntime calibrates only what has none, then
provenance on every node). Prints the ratio modelprov / onnxruntime and the share spent
attributing, plus the FX-node recall and the nodes without sources of the result.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import tempfile
import time
import warnings
from collections.abc import Callable

import numpy as np
import onnx
import onnx_ir as ir
import torch
from onnxruntime import quantization

import modelprov
from modelprov._cli import _examples
from modelprov.onnx.quantize._qdq_provenance import attribute_quantized


class _Reader(quantization.CalibrationDataReader):  # type: ignore[misc]
    def __init__(self, name: str, batches: list[np.ndarray]) -> None:
        self._items = iter([{name: batch} for batch in batches])

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self._items, None)


def _median(function: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--batches", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    options = parser.parse_args()
    logging.getLogger().setLevel(logging.ERROR)
    warnings.simplefilter("ignore")
    module, inputs = _examples.gpt2(options.layers, options.width)
    generator = torch.Generator().manual_seed(0)
    batches = [
        tuple(torch.randint(0, 100, tensor.shape, generator=generator) for tensor in inputs)
        for _ in range(options.batches)
    ]
    ranges = modelprov.calibrate(module, batches)
    program = modelprov.export(module, inputs, annotations=ranges, verbose=False)
    float_model = ir.to_proto(program.model)
    arrays = [batch[0].numpy() for batch in batches]
    input_name = float_model.graph.input[0].name
    with tempfile.TemporaryDirectory() as folder:
        source = os.path.join(folder, "float.onnx")
        target = os.path.join(folder, "ort.onnx")
        onnx.save(float_model, source)

        def plain() -> None:
            quantization.quantize_static(source, target, _Reader(input_name, arrays))

        ort_seconds = _median(plain, options.repeat)
        ours_seconds = _median(
            lambda: modelprov.quantize(float_model, calibration_batches=batches), options.repeat
        )
        quantized = ir.load(target)

        def attribute() -> None:
            attribute_quantized(ir.from_proto(float_model), quantized.clone())

        attribution_seconds = _median(attribute, options.repeat)
    result = modelprov.quantize(float_model, calibration_batches=batches)
    report = modelprov.diff(float_model, result)
    print(
        f"GPT-2 {options.layers}x{options.width}: {len(float_model.graph.node)} float nodes -> "
        f"{len(result.graph.node)} quantized"
    )
    print(f"onnxruntime quantize_static alone   {ort_seconds:8.3f} s")
    print(f"modelprov.quantize                  {ours_seconds:8.3f} s")
    print(f"  of which attributing provenance   {attribution_seconds:8.3f} s")
    print(f"ratio modelprov / onnxruntime       {ours_seconds / ort_seconds:8.2f}")
    print(
        f"FX-node recall {report.fx_nodes.value:.2f} (dyn {report.fx_nodes_dyn.value:.2f}), "
        f"nodes without sources {len(report.nodes_without_sources)}"
    )


if __name__ == "__main__":
    main()
