"""Fingerprints of modelprov.optimize's output on every zoo model, to compare two versions.

Usage: python -m benchmarks.check_optimize_bytes save FILE [--models a,b]
       python -m benchmarks.check_optimize_bytes compare FILE [--models a,b]

``save`` writes, per zoo model (exports cached as in benchmarks/bench_zoo.py), the SHA-256
of the optimized model's serialized proto and of its metadata alone (model, node and value
metadata, in order) as JSON. ``compare`` computes them again with the modelprov on
``PYTHONPATH`` and lists every model whose output differs from ``FILE``; it exits 1 when
one does. Made for work that must not change any output (speed-ups of read/write): save
on the base commit, compare after.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import sys
import warnings

import onnx_ir as ir

import modelprov
from benchmarks._zoo_cases import EXPORT_CACHE


def fingerprints(model: ir.Model) -> dict[str, str]:
    """SHA-256 of ``modelprov.optimize(model)`` serialized, and of its metadata alone."""
    optimized = modelprov.optimize(model)
    proto = ir.to_proto(optimized)
    metadata = [
        [[p.key, p.value] for p in proto.metadata_props],
        [[[p.key, p.value] for p in node.metadata_props] for node in proto.graph.node],
        [[[p.key, p.value] for p in value.metadata_props] for value in proto.graph.value_info],
    ]
    return {
        "model": hashlib.sha256(proto.SerializeToString(deterministic=True)).hexdigest(),
        "metadata": hashlib.sha256(json.dumps(metadata).encode()).hexdigest(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("action", choices=("save", "compare"))
    parser.add_argument("file")
    parser.add_argument("--models", default="", help="zoo models (default: all)")
    parser.add_argument(
        "--cache",
        default=EXPORT_CACHE,
        help="where zoo exports are kept between runs (as bench_zoo)",
    )
    args = parser.parse_args()
    logging.getLogger("torch").setLevel(logging.ERROR)
    warnings.simplefilter("ignore")
    from benchmarks.bench_zoo import MODELS, _cached_export

    names = [m for m in args.models.split(",") if m] or list(MODELS)
    found = {name: fingerprints(_cached_export(name, args.cache)[0]) for name in names}
    if args.action == "save":
        with open(args.file, "w") as out:
            json.dump(found, out, indent=1)
        print(f"saved fingerprints of {len(found)} models to {args.file}")
        return
    with open(args.file) as saved_file:
        saved = json.load(saved_file)
    differing = [name for name in names if saved.get(name) != found[name]]
    for name in differing:
        parts = [
            part
            for part in ("model", "metadata")
            if saved.get(name, {}).get(part) != found[name][part]
        ]
        print(f"{name}: {' and '.join(parts)} differ")
    print(f"{len(names) - len(differing)} of {len(names)} models byte-identical to {args.file}")
    sys.exit(1 if differing else 0)


if __name__ == "__main__":
    main()
