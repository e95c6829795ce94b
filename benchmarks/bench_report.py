"""HTML report generation time for a ~2,000-node graph beside the time to load the model.

Usage: python -m benchmarks.bench_report [--layers 16] [--width 64] [--repeat 3] [--synthetic N]
Exports GPT-2 (``--layers`` blocks; 16 give about 2,000 nodes) with torch.onnx
(optimize=False), saves it, and times ``onnx.load`` against ``modelprov.report.report`` on the
file (reading included), then the report of the modelprov-optimized model with ``before``.
``--synthetic N`` uses a generated N-node model instead (no torch export). Target: a few
seconds, printed as a ratio to the load time.
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

import onnx
import onnx_ir as ir
import torch

import modelprov
from modelprov._cli import _examples
from modelprov.report import overlay, report


def _median(action: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--layers", type=int, default=16)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--synthetic", type=int, metavar="N", default=0)
    args = parser.parse_args()
    logging.getLogger("torch").setLevel(logging.ERROR)
    folder = tempfile.mkdtemp(prefix="modelprov-bench-report-")
    if args.synthetic:
        from tests._synthetic import synthetic_model

        model = synthetic_model(args.synthetic)
        label = f"synthetic model, {args.synthetic} nodes"
    else:
        module, inputs = _examples.gpt2(args.layers, args.width)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            program = torch.onnx.export(module, inputs, dynamo=True, optimize=False, verbose=False)
        model = program.model
        label = f"GPT-2 {args.layers}x{args.width} (torch.onnx, optimize=False)"
    path = os.path.join(folder, "model.onnx")
    ir.save(model, path)
    nodes = len(model.graph)
    size = os.path.getsize(path)
    print(f"{label}: {nodes} nodes, {size / 1e6:.1f} MB on disk")

    load = _median(lambda: onnx.load(path), args.repeat)
    html = report(path)
    generate = _median(lambda: report(path), args.repeat)
    coverage = _median(lambda: overlay(path), args.repeat)
    print(f"onnx.load:                 median {load:.3f}s")
    print(f"modelprov report:          median {generate:.3f}s  ({len(html) / 1e6:.1f} MB of HTML)")
    print(f"modelprov overlay:         median {coverage:.3f}s")
    print(f"ratio report / onnx.load:  {generate / load:.1f}x  (target: a few seconds in all)")
    if not args.synthetic:
        optimized = modelprov.optimize(model)
        after = os.path.join(folder, "optimized.onnx")
        ir.save(optimized, after)
        with_before = _median(lambda: report(after, before=path), args.repeat)
        print(
            f"report --before (optimized, {len(optimized.graph)} nodes, against {nodes}): "
            f"median {with_before:.3f}s"
        )
    with open(os.path.join(folder, "report.html"), "w", encoding="utf-8") as stream:
        stream.write(html)
    print(f"report written to {os.path.join(folder, 'report.html')}")


if __name__ == "__main__":
    main()
