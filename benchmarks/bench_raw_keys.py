"""torch.onnx's own node keys read raw, after modelprov.optimize and after onnxscript's optimizer.

Usage: python -m benchmarks.bench_raw_keys [--models bert,llama] [--generated 200] [--cache DIR]

A tool that does not use ``modelprov.sources`` reads ``namespace``,
``pkg.torch.onnx.name_scopes``, ``class_hierarchy``, ``fx_node`` and ``stack_trace`` as they
are (tests/_raw_keys.py says how: list literals by ``ast.literal_eval``, every line of them as
shown, FX node lines, stack frames). For each zoo model (benchmarks/_zoo_cases.py, as bench_zoo
exports it: torch.onnx, optimize=False, cached under --cache), the
same export goes through ``modelprov.optimize`` and through ``onnxscript.optimizer.optimize_ir``
(what ``torch.onnx.export(optimize=True)`` runs); each cell is the raw recall of one key's
aspect, ``modelprov/onnxscript``, ``!`` where modelprov's is lower. ``src`` is
modelprov's own reader (``modelprov.diff``: the lowest of FX nodes, lines, modules), which
must stay 1.00. Then ``--generated`` random sourced graphs (tests/_sourced_graphs.py, seeded)
summarized per aspect: lowest difference and how many graphs are below onnxscript.
Acceptance: no cell below onnxscript, ``src`` 1.00 everywhere.
"""

from __future__ import annotations

import argparse
import logging
import sys
import warnings

import numpy as np
import onnx_ir as ir
import onnxscript.optimizer

import modelprov
from benchmarks import bench_zoo
from benchmarks._zoo_cases import EXPORT_CACHE
from tests._raw_keys import ASPECTS, RawRecall, raw_recall
from tests._sourced_graphs import IMAGE_BLOCKS, SEQUENCE_BLOCKS, build

_SHORT = {
    "namespace": "ns",
    "pkg.torch.onnx.name_scopes": "scopes",
    "pkg.torch.onnx.class_hierarchy": "classes",
    "pkg.torch.onnx.fx_node": "fx_node",
    "pkg.torch.onnx.stack_trace": "trace",
}


def _label(pair: tuple[str, str]) -> str:
    key, aspect = pair
    return f"{_SHORT[key]}.{aspect.replace(' shown', '+')}"


def compare(export: ir.Model) -> tuple[RawRecall, RawRecall, float]:
    """Raw recall after modelprov.optimize and after optimize_ir, and modelprov's own recall
    (the lowest of FX nodes, lines and modules) of the same export."""
    ours = modelprov.optimize(export.clone())
    theirs = export.clone()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        onnxscript.optimizer.optimize_ir(theirs)
    report = modelprov.diff(export, ours)
    own = min(report.fx_nodes.value, report.source_lines.value, report.module_paths.value)
    return raw_recall(export, ours), raw_recall(export, theirs), own


def _row(name: str, ours: RawRecall, theirs: RawRecall, own: float) -> list[tuple[str, str]]:
    cells = []
    below = []
    for pair in ASPECTS:
        mine, other = ours.value(pair), theirs.value(pair)
        mark = "!" if mine < other else " "
        cells.append(f"{mine:.2f}/{other:.2f}{mark}".rjust(17))
        if mine < other:
            below.append((name, _label(pair)))
    print(f"{name:<16}{own:>5.2f}" + "".join(cells), flush=True)
    return below + ([(name, "src")] if own < 1.0 else [])


def generated(count: int) -> list[tuple[str, str]]:
    """``count`` seeded random sourced graphs; prints one summary line per aspect."""
    rng = np.random.default_rng(0)
    differences: dict[tuple[str, str], list[float]] = {pair: [] for pair in ASPECTS}
    lowest_own = 1.0
    for _ in range(count):
        family = str(rng.choice(["sequence", "image"]))
        kinds = SEQUENCE_BLOCKS if family == "sequence" else IMAGE_BLOCKS
        blocks = tuple(str(kind) for kind in rng.choice(kinds, size=int(rng.integers(1, 7))))
        graph = build(family, blocks, int(rng.integers(0, 2**16)))
        ours, theirs, own = compare(graph.model)
        lowest_own = min(lowest_own, own)
        for pair in ASPECTS:
            differences[pair].append(ours.value(pair) - theirs.value(pair))
    print(f"\n{count} generated graphs: modelprov's own recall, lowest {lowest_own:.2f}")
    print(f"{'aspect':<20}{'lowest diff':>12}{'mean diff':>10}{'below':>7}")
    below = []
    for pair, values in differences.items():
        worse = sum(value < 0 for value in values)
        print(f"{_label(pair):<20}{min(values):>12.2f}{np.mean(values):>10.2f}{worse:>7}")
        below += [("generated", _label(pair))] * worse
    return below + ([("generated", "src")] if lowest_own < 1.0 else [])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(bench_zoo.MODELS))
    parser.add_argument("--generated", type=int, default=200, help="random sourced graphs")
    parser.add_argument(
        "--cache",
        default=EXPORT_CACHE,
        help="where zoo exports are kept between runs",
    )
    args = parser.parse_args(argv)
    logging.getLogger("torch").setLevel(logging.ERROR)
    models = [m for m in args.models.split(",") if m]
    unknown = [m for m in models if m not in bench_zoo.MODELS]
    if unknown:
        parser.error(f"unknown model: {', '.join(unknown)}")
    print(f"{'model':<16}{'src':>5}" + "".join(_label(pair).rjust(17) for pair in ASPECTS))
    below: list[tuple[str, str]] = []
    for name in models:
        try:
            export = bench_zoo._cached_export(name, args.cache)[0]
        except Exception as error:  # an export failure is reported, the sweep goes on
            print(f"{name:<16}export failed: {type(error).__name__}: {str(error)[-160:]}")
            continue
        below += _row(name, *compare(export))
    if args.generated:
        below += generated(args.generated)
    print(f"\nbelow onnxscript: {len(below)}" + (f", e.g. {below[:6]}" if below else ""))
    return 1 if below else 0


if __name__ == "__main__":
    sys.exit(main())
