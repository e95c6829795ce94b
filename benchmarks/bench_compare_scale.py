"""modelprov.compare on a large graph beside the floor: both models run once, all values exposed.

Usage: python -m benchmarks.bench_compare_scale [--layers 260] [--repeat 3]
Exports a Llama-config model (260 layers ≈ 48,000 ONNX nodes; random weights) with modelprov,
then times, median of ``--repeat`` in CPU seconds: the floor (onnxruntime running the model
with every compared value exposed, plus torch running the program with every FX node's output
captured and dropped) and ``modelprov.compare(program, program.model, inputs)``. Prints the
ratio (target ≤ 3) and the process's peak RSS after each.
"""

from __future__ import annotations

import argparse
import logging
import resource
import statistics
import time
import warnings
from collections.abc import Callable

import modelprov
from benchmarks._scale_model import _llama
from modelprov.numerics import compare
from modelprov.numerics._compare import _joined_values
from modelprov.numerics._onnx_values import run_exposing
from modelprov.numerics._torch_values import run_fx_nodes


def _cpu(function: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.process_time()
        function()
        times.append(time.process_time() - started)
    return statistics.median(times)


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=260)
    parser.add_argument("--repeat", type=int, default=3)
    options = parser.parse_args()
    logging.getLogger().setLevel(logging.ERROR)
    warnings.simplefilter("ignore")
    module, args = _llama(options.layers)
    program = modelprov.export(module, args)
    joined = _joined_values(program.model)
    arrays = [a.numpy() for a in args]  # type: ignore[attr-defined]
    names = [item.source.fx_node or item.source.id for item in joined]
    assert program.exported_program is not None

    def floor() -> None:
        run_exposing(program.model, [item.value for item in joined], arrays, where="bench")
        run_fx_nodes(program.exported_program, args, {}, names, lambda name, value: None)

    floor_s = _cpu(floor, options.repeat)
    floor_peak = _peak_mb()
    report = compare(program, program.model, args)
    compare_s = _cpu(lambda: compare(program, program.model, args), options.repeat)
    print(
        f"llama {options.layers} layers: {len(program.model.graph)} ONNX nodes, "
        f"{len(report.rows)} values compared, diverging {sum(r.diverges for r in report.rows)}"
    )
    print(f"floor (both runs, all values exposed): {floor_s:.2f} s CPU, peak {floor_peak:.0f} MB")
    print(f"modelprov.compare:                     {compare_s:.2f} s CPU, peak {_peak_mb():.0f} MB")
    print(f"ratio compare / floor: {compare_s / floor_s:.2f} (target <= 3)")


if __name__ == "__main__":
    main()
