"""Timing shared by the benchmarks: onnxscript's optimizer on a copy, and the CPU time of
one run started from a collected heap (bench_optimize's and bench_zoo's timing)."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

import onnx_ir as ir
import onnxscript

__all__ = ["cpu_seconds", "optimize_ir_copy"]


def optimize_ir_copy(model: ir.Model) -> ir.Model:
    """onnxscript's optimizer on a copy (modelprov.optimize leaves its input alone too)."""
    copy = model.clone()
    onnxscript.optimizer.optimize_ir(copy)
    return copy


def cpu_seconds(run: Callable[[ir.Model], object], model: ir.Model) -> float:
    """CPU time of one run, started from a collected heap.

    Without the collection, whichever run happens to cross the collector's threshold pays
    for a full collection of the whole process heap (every model of the run): ~0.15 s on
    GPT-2, more than the difference being measured, landing on one side or the other.
    """
    gc.collect()
    started = time.process_time()
    run(model)
    return time.process_time() - started
