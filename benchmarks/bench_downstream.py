"""What provenance survives downstream compilers, on the issue's three models (issue 14).

For seed 003's MLP, nn.TransformerEncoder (2 x 64), a 2-layer Llama config and a conv +
transformer mix (stem conv, two residual blocks, head), prints:
- XLA: computing HLO instructions (not parameters, constants or broadcasts of constants)
  whose metadata names a module path/source node (op_name) and a user source line (stack
  frame), after ``jax.jit(...).compile()`` (target >= 95%);
- XLA op_name: computing instructions of the optimized HLO (parameters, constants and tuples
  aside; broadcasts of constants and fusions counted) whose op_name names their module or
  the root-level op they compute (issue 27, target >= 95%), with the misses by opcode: every
  instruction of the text (a dump's view, fused computations' bodies included), and the
  kernels (a profiler's view: a fusion is one, named by its own metadata), and every
  instruction with broadcasts of constants set aside too (HLO's form of a splat constant,
  column "splats aside"); ``-v`` lists each miss;
- IREE: ops of ``iree-compile --compile-to=flow`` whose location is known and names a module
  path/source node (target >= 90%);
- join: user FX nodes found on both the ONNX and the StableHLO side by source id, overall
  and from each side (target >= 95%).

    python benchmarks/bench_downstream.py [--models mlp,...,conv_transformer] [-v]
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
import warnings

import modelprov
from tests.stablehlo import _downstream


def main(argv: list[str] | None = None) -> int:
    """Measure every model and print one line each."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--models", default=",".join(_downstream.MODELS))
    parser.add_argument("-v", "--verbose", action="store_true", help="list each op_name miss")
    options = parser.parse_args(argv)
    print(
        f"{'model':22} {'XLA named+line':>18} {'XLA op_name':>16} {'kernels':>13} "
        f"{'splats aside':>14} "
        f"{'IREE flow named':>18} "
        f"{'join both/all':>15} "
        f"{'onnx->shlo':>10} {'shlo->onnx':>10} {'export s':>8}"
    )
    for name in options.models.split(","):
        model, args, kwargs = _downstream.MODELS[name]()
        start = time.perf_counter()
        program = modelprov.export_stablehlo(model, args, kwargs)
        seconds = time.perf_counter() - start
        hlo = _downstream.compiled_hlo(program, *args, *kwargs.values())
        total, good, _ = _downstream.hlo_survival(program, hlo)
        counted, op_named, misses = _downstream.hlo_op_name_coverage(program, hlo)
        kernels, named_kernels, _ = _downstream.hlo_op_name_coverage(
            program, hlo, kernels_only=True
        )
        values, named_values, _ = _downstream.hlo_op_name_coverage(
            program, hlo, splat_constants=False
        )
        missed = collections.Counter(
            f"{i.opcode}{'' if i.op_name else '(no op_name)'}" for i in misses
        )
        try:
            known, named = _downstream.iree_survival(_downstream.iree_flow(program))
            iree = f"{named}/{known}={named / known:.3f}"
        except ImportError:
            iree = "no iree"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            onnx_program = modelprov.export(model, args, kwargs=kwargs, verbose=False)
        joined = modelprov.join_sources(onnx_program, program)
        print(
            f"{name:22} {f'{good}/{total}={good / total:.3f}':>18} "
            f"{f'{op_named}/{counted}={op_named / counted:.3f}':>16} "
            f"{f'{named_kernels}/{kernels}={named_kernels / kernels:.3f}':>13} "
            f"{f'{named_values}/{values}={named_values / values:.3f}':>14} {iree:>18} "
            f"{f'{len(joined.both)}/{len(joined.ids)}={joined.coverage:.3f}':>15} "
            f"{joined.onnx_coverage:>10.3f} {joined.stablehlo_coverage:>10.3f} {seconds:>8.1f}"
        )
        print(f"{'':22} op_name misses: {dict(missed.most_common())}")
        if options.verbose:
            for miss in misses:
                print(f"{'':24}{miss.name} {miss.opcode} op_name={miss.op_name!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
