"""export_stablehlo vs plain torchax export of the same ExportedProgram (TransformerEncoder).

Both sides lower the same ``torch.export`` program; modelprov additionally scopes every FX
node, deserializes the module, sets attributes and re-serializes it. Runs alternate so both
see the same machine state. Prints medians and the ratio (target: at most 1.2x).

    python benchmarks/bench_stablehlo.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable

import torch

from modelprov.core._policy import DEFAULT_POLICIES
from modelprov.stablehlo._export import program_from_exported_program
from modelprov.stablehlo.lower._lower import plain_torchax_export


def _model() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()
    return model, (torch.randn(2, 10, 64),)


def _time(function: Callable[[], object]) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    """Run the side-by-side timing and print one table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--repeats", type=int, default=7)
    options = parser.parse_args(argv)

    model, args = _model()
    program = torch.export.export(model, args)
    annotations = {"layers.0": {"custom.max": 3.5}, "layers.1.linear2": {"custom.min": -1.0}}
    normalized = {path: {k: str(v) for k, v in kv.items()} for path, kv in annotations.items()}

    def plain() -> object:
        return plain_torchax_export(program)

    def ours() -> object:
        return program_from_exported_program(program, normalized, DEFAULT_POLICIES)

    plain()  # warm up imports and JAX caches for both sides
    ours()
    plain_times: list[float] = []
    ours_times: list[float] = []
    for _ in range(options.repeats):
        plain_times.append(_time(plain))
        ours_times.append(_time(ours))
    plain_median = statistics.median(plain_times)
    ours_median = statistics.median(ours_times)
    lines = [
        f"TransformerEncoder 2x64, {options.repeats} alternating runs each",
        f"  torchax exported_program_to_stablehlo  median {plain_median * 1e3:8.1f} ms",
        f"  modelprov (same ExportedProgram)       median {ours_median * 1e3:8.1f} ms",
        f"  ratio modelprov / torchax              {ours_median / plain_median:8.2f}x"
        " (target <= 1.20x)",
    ]
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
