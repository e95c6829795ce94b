"""recover after onnxruntime's extended optimization, beside onnxscript's optimize, in one run.

Usage: python -m benchmarks.bench_recover [--layers 12] [--width 768] [--repeat 3]
Prints medians and the ratio recover / onnxscript optimize (target <= 1.0), then the peak RSS
of recover (graph only, in a fresh process) for the same graph with a small and a 50x larger
vocabulary: the weights grow, recover's memory must not.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

import onnx_ir as ir
import onnxruntime as ort
import onnxscript.optimizer
import torch

import modelprov
from modelprov._cli import _examples
from modelprov._model_io._files import save_model

# Peak RSS from VmHWM: ru_maxrss would carry over the forking parent's peak across exec.
_HWM = "int(next(l for l in open('/proc/self/status') if l.startswith('VmHWM')).split()[1])"
_CHILD = f"""
import sys, time
import modelprov.onnx.recover._recover as r
started = time.perf_counter()
r.recover(sys.argv[1], sys.argv[2])
print(time.perf_counter() - started, {_HWM})
"""
_BASELINE = f"""
import modelprov.onnx.recover._recover as r
print(0.0, {_HWM})
"""


def _export(layers: int, width: int, vocab: int | None = None) -> ir.Model:
    module, inputs = _examples.gpt2(layers, width)
    if vocab is not None:
        from transformers import GPT2Model

        config = module.model.config
        config.vocab_size = vocab
        module = _examples._GPT2Hidden(GPT2Model(config)).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = modelprov.export(module, inputs, optimize=False, verbose=False)
    model: ir.Model = program.model
    return model


def _ort_extended(source: str, target: str) -> None:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = target
    options.add_session_config_entry(
        "session.optimized_model_external_initializers_file_name",
        os.path.basename(target) + ".data",
    )
    options.add_session_config_entry(
        "session.optimized_model_external_initializers_min_size_in_bytes", "1024"
    )
    ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])


def _prepare(folder: str, base: ir.Model, tag: str) -> tuple[str, str, float]:
    original = os.path.join(folder, f"{tag}.onnx")
    optimized = os.path.join(folder, f"{tag}.ort.onnx")
    with_provenance = modelprov.optimize(base)
    save_model(with_provenance, original, external_data=True)
    _ort_extended(original, optimized)
    weights = os.path.getsize(original + ".data") / 2**20
    return original, optimized, weights


def _child(code: str, *args: str) -> tuple[float, float]:
    output = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, check=True
    ).stdout.split()
    return float(output[0]), int(output[1]) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--width", type=int, default=768)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    logging.getLogger("torch").setLevel(logging.ERROR)
    torch.manual_seed(0)
    base = _export(args.layers, args.width)
    with tempfile.TemporaryDirectory(prefix="bench-recover-") as folder:
        original, optimized, weights = _prepare(folder, base, "small")
        recover_times, optimize_times = [], []
        for _ in range(args.repeat):
            started = time.perf_counter()
            onnxscript.optimizer.optimize(base.clone())
            optimize_times.append(time.perf_counter() - started)
            started = time.perf_counter()
            result = modelprov.recover(original, optimized)
            recover_times.append(time.perf_counter() - started)
        ours, theirs = statistics.median(recover_times), statistics.median(optimize_times)
        report = modelprov.diff(original, result)
        print(
            f"GPT-2 {args.layers}x{args.width}: ORT extended wrote {len(result.graph.node)} nodes"
        )
        print(f"onnxscript optimize (in memory): median {theirs:.3f}s")
        print(f"modelprov.recover (from files, graph only): median {ours:.3f}s")
        print(f"time ratio recover/optimize: {ours / theirs:.2f} (target <= 1.0)")
        print(
            f"recall after recover: FX dyn {report.fx_nodes_dyn.value:.2f}, "
            f"source lines dyn {report.source_lines_dyn.value:.2f}, "
            f"modules dyn {report.module_paths_dyn.value:.2f}"
        )
        _, baseline_rss = _child(_BASELINE)
        _, small_rss = _child(_CHILD, original, optimized)
        big = _export(args.layers, args.width, vocab=50257)
        big_original, big_optimized, big_weights = _prepare(folder, big, "big")
        _, big_rss = _child(_CHILD, big_original, big_optimized)
        print(f"peak RSS, import only: {baseline_rss:.0f} MiB")
        print(f"peak RSS of recover, weights {weights:.0f} MiB: {small_rss:.0f} MiB")
        print(f"peak RSS of recover, weights {big_weights:.0f} MiB: {big_rss:.0f} MiB")


if __name__ == "__main__":
    main()
