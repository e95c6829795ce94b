"""Activation pairs modelprov.compare joins against those onnxruntime's qdq_loss_debug matches.

Usage: python -m benchmarks.bench_compare [--models mlp,cnn,gpt2]
For each model: its plain export is the float reference; the candidate is that export after
modelprov.optimize or after a black-box tool (recovered), then quantized (QDQ) by
modelprov.quantize. onnxruntime's ``qdq_loss_debug`` pairs the quantized model's activations
with the float model's by tensor name (``create_activation_matching``); modelprov.compare
pairs them by provenance. Printed per model and step: the activation pairs each finds, and
the worst per-module SQNR modelprov reports (isolate=True: each layer's own error).
"""

from __future__ import annotations

import argparse
import logging
import os
import tempfile
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir
import torch
from onnxruntime import quantization
from onnxruntime.quantization import qdq_loss_debug

import modelprov
from modelprov._cli import _examples


class _Reader(quantization.CalibrationDataReader):  # type: ignore[misc]
    def __init__(self, feeds: list[dict[str, np.ndarray]]) -> None:
        self._items = iter(feeds)

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self._items, None)


def _models() -> dict[str, Callable[[], tuple[torch.nn.Module, tuple[Any, ...]]]]:
    def mlp() -> tuple[torch.nn.Module, tuple[Any, ...]]:
        torch.manual_seed(0)
        layers = [torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32),
                  torch.nn.GELU(), torch.nn.Linear(32, 4)]
        return torch.nn.Sequential(*layers).eval(), (torch.randn(4, 32),)

    def cnn() -> tuple[torch.nn.Module, tuple[Any, ...]]:
        model, args = _examples.cnn()
        return model.eval(), tuple(args)

    def gpt2() -> tuple[torch.nn.Module, tuple[Any, ...]]:
        model, args = _examples.gpt2(2, 64)
        return model, tuple(args)

    return {"mlp": mlp, "cnn": cnn, "gpt2": gpt2}


def _float_inputs(model: ir.Model, args: tuple[Any, ...]) -> dict[str, np.ndarray]:
    names = [v.name for v in model.graph.inputs if v.name not in model.graph.initializers]
    arrays = [a.numpy() for a in args if isinstance(a, torch.Tensor)]
    return dict(zip(names, arrays, strict=True))


def _name_matches(float_path: str, quant_path: str, feeds: dict[str, np.ndarray]) -> int:
    """The activation pairs qdq_loss_debug finds: quantized tensors it can name in the float
    model (both sides collected with its own augmentation and runner)."""
    folder = os.path.dirname(float_path)
    augmented_float = os.path.join(folder, "float.aug.onnx")
    augmented_quant = os.path.join(folder, "quant.aug.onnx")
    qdq_loss_debug.modify_model_output_intermediate_tensors(float_path, augmented_float)
    qdq_loss_debug.modify_model_output_intermediate_tensors(quant_path, augmented_quant)
    float_activations = qdq_loss_debug.collect_activations(augmented_float, _Reader([feeds]))
    quant_activations = qdq_loss_debug.collect_activations(augmented_quant, _Reader([feeds]))
    matching = qdq_loss_debug.create_activation_matching(quant_activations, float_activations)
    return sum(1 for pair in matching.values() if "float" in pair)


def _steps() -> dict[str, Callable[[ir.Model], Any]]:
    return {
        "optimize": lambda m: modelprov.optimize(m),
        "onnxslim": lambda m: modelprov.optimize_with("onnxslim", m),
        "onnxsim": lambda m: modelprov.optimize_with("onnxsim", m),
        "onnxoptimizer": lambda m: modelprov.optimize_with("onnxoptimizer", m),
        "ort-extended": lambda m: modelprov.optimize_with("onnxruntime", m, level="extended"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="mlp,cnn,gpt2")
    options = parser.parse_args()
    logging.getLogger().setLevel(logging.ERROR)
    warnings.simplefilter("ignore")
    print(f"{'model':<6} {'step':<14} {'by name':>8} {'modelprov':>10} {'worst own SQNR dB':>18}")
    totals = [0, 0]
    for name in options.models.split(","):
        module, args = _models()[name]()
        plain = modelprov.export(module, args, optimize=False)
        feeds = _float_inputs(plain.model, args)
        with tempfile.TemporaryDirectory() as folder:
            float_path = os.path.join(folder, "float.onnx")
            onnx.save(ir.to_proto(plain.model), float_path)
            for step, run in _steps().items():
                candidate = run(plain.model)
                quantized = modelprov.quantize(candidate, calibration_batches=[feeds])
                quant_path = os.path.join(folder, f"{step}.quant.onnx")
                onnx.save(quantized if isinstance(quantized, onnx.ModelProto)
                          else ir.to_proto(quantized), quant_path)
                by_name = _name_matches(float_path, quant_path, feeds)
                report = modelprov.compare(plain, quant_path, args, isolate=True)
                owns = [m.own_min_sqnr_db for m in report.modules() if m.own_min_sqnr_db]
                worst = f"{min(owns):.1f}" if owns else "-"
                totals[0] += by_name
                totals[1] += len(report.rows)
                print(f"{name:<6} {step:<14} {by_name:>8} {len(report.rows):>10} {worst:>18}")
    print(f"total: qdq_loss_debug {totals[0]} pairs, modelprov {totals[1]} "
          f"({totals[1] / max(totals[0], 1):.1f}x)")


if __name__ == "__main__":
    main()
