"""modelprov.optimize vs onnxscript.optimizer.optimize on GPT-2, side by side in one run.

Usage: python -m benchmarks.bench_optimize [--layers 12] [--width 768] [--repeat 5]
Prints each one's median time, the ratio (target <= 1.10) and each one's provenance recall,
and the README loop's time (``modelprov.sources`` of every node) on both models.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time
import warnings

import onnxscript.optimizer
import torch

import modelprov
from modelprov import _examples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--width", type=int, default=768)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    logging.getLogger("torch").setLevel(logging.ERROR)
    module, inputs = _examples.gpt2(args.layers, args.width)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        started = time.perf_counter()
        base = torch.onnx.export(module, inputs, dynamo=True, optimize=False, verbose=False).model
        export_seconds = time.perf_counter() - started
    parameters = sum(p.numel() for p in module.parameters())
    print(
        f"GPT-2 {args.layers}x{args.width} ({parameters / 1e6:.1f}M parameters): "
        f"{len(base.graph)} nodes, export {export_seconds:.1f}s"
    )
    theirs_times: list[float] = []
    ours_times: list[float] = []
    theirs = ours = base
    for _ in range(args.repeat):
        started = time.perf_counter()
        theirs = onnxscript.optimizer.optimize(base.clone())
        theirs_times.append(time.perf_counter() - started)
        started = time.perf_counter()
        ours = modelprov.optimize(base)
        ours_times.append(time.perf_counter() - started)
    theirs_median, ours_median = statistics.median(theirs_times), statistics.median(ours_times)
    print(
        f"onnxscript.optimizer.optimize: median {theirs_median:.3f}s  ({len(theirs.graph)} nodes)"
    )
    print(f"modelprov.optimize:            median {ours_median:.3f}s  ({len(ours.graph)} nodes)")
    print(f"time ratio modelprov/onnxscript: {ours_median / theirs_median:.2f} (target <= 1.10)")
    for label, model in (("export", base), ("modelprov.optimize", ours)):
        started = time.perf_counter()
        found = sum(len(modelprov.sources(model, node)) for node in model.graph)
        print(
            f"README loop (sources() of every node) on the {label} model: "
            f"{time.perf_counter() - started:.3f}s for {len(model.graph)} nodes, "
            f"{found} sources (target <= 1 s)"
        )
    for label, model in (("onnxscript", theirs), ("modelprov", ours)):
        report = modelprov.diff(base, model)
        print(
            f"{label:>10} recall: FX nodes {report.fx_nodes.value:.2f} "
            f"(dyn {report.fx_nodes_dyn.value:.2f}), source lines {report.source_lines.value:.2f} "
            f"(dyn {report.source_lines_dyn.value:.2f}), module paths "
            f"{report.module_paths.value:.2f}, nodes without sources "
            f"{len(report.nodes_without_sources)}"
        )


if __name__ == "__main__":
    main()
