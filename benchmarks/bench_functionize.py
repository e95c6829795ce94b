"""functionize vs onnxscript's optimize on the same 12-layer, 768-wide GPT-2.

Both sides start from the same plain ``torch.onnx.export(dynamo=True, optimize=False)``
model (a fresh clone per run): onnxscript's ``optimize_ir`` (what torch.onnx runs with
optimize=True) beside ``modelprov.functionize(level="aten")``; functionize is also timed on
the optimized model (what modelprov.export returns) and at ``level="module"``. Runs
alternate so both see the same machine state. Prints medians and the ratio (target: at
most 1.0).

    python benchmarks/bench_functionize.py [--repeats 5] [--layers 12] [--width 768]
"""

from __future__ import annotations

import argparse
import functools
import logging
import statistics
import sys
import time
import warnings
from collections.abc import Callable

import onnx_ir as ir
import onnxscript.optimizer
import torch

from modelprov._cli import _examples
from modelprov.onnx.export._aten_record import record_aten_calls
from modelprov.onnx.functions._functionize import FunctionizePass


def _time(function: Callable[[], object]) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def _functionize(model: ir.Model, level: str) -> None:
    FunctionizePass(level=level)(model)  # type: ignore[arg-type]


def main(argv: list[str] | None = None) -> int:
    """Run the side-by-side timing and print one table."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--width", type=int, default=768)
    options = parser.parse_args(argv)
    logging.getLogger("torch").setLevel(logging.ERROR)
    logging.getLogger("onnxscript").setLevel(logging.ERROR)
    model, args = _examples.gpt2(options.layers, options.width)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(model, args, dynamo=True, optimize=False, verbose=False)
    record_aten_calls(program)
    plain = program.model
    optimized = plain.clone()
    onnxscript.optimizer.optimize_ir(optimized)
    times: dict[str, list[float]] = {
        "onnxscript optimize_ir (plain export)": [],
        "functionize aten (plain export)": [],
        "functionize aten (optimized export)": [],
        "functionize module (optimized export)": [],
    }
    for _ in range(options.repeats):
        work = [plain.clone(), plain.clone(), optimized.clone(), optimized.clone()]
        runs: list[Callable[[], object]] = [
            functools.partial(onnxscript.optimizer.optimize_ir, work[0]),
            functools.partial(_functionize, work[1], "aten"),
            functools.partial(_functionize, work[2], "aten"),
            functools.partial(_functionize, work[3], "module"),
        ]
        for name, run in zip(times, runs, strict=True):
            times[name].append(_time(run))
    medians = {name: statistics.median(values) for name, values in times.items()}
    baseline = medians["onnxscript optimize_ir (plain export)"]
    print(
        f"GPT-2 {options.layers}x{options.width}, {len(list(plain.graph))} nodes plain, "
        f"{len(list(optimized.graph))} optimized; median of {options.repeats}"
    )
    for name, median in medians.items():
        print(f"  {name:40s} {median * 1000:9.1f} ms   ratio {median / baseline:5.2f}")
    ratio = medians["functionize aten (plain export)"] / baseline
    print(f"ratio functionize / onnxscript optimize (same model): {ratio:.2f} (target <= 1.0)")
    return 0 if ratio <= 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
