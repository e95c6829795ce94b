"""optimize with a policies file of 45,000 globs (under the 1 MiB limit), beside without one.

Usage: python -m benchmarks.bench_policy_globs [--globs 45000] [--layers 2] [--repeat 3]
Prints the median times and their ratio (target <= 2.0). The file mixes the shapes a large
generated file has: globs with a literal prefix (``team123.*``), globs starting with a
wildcard (``*.stat123``) and globs with neither, a few of them matching the model's keys;
before the glob index, every key recompiled every glob (fnmatch keeps 32,768 patterns).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
import warnings

import onnx_ir as ir
import torch

import modelprov
from modelprov._cli import _examples
from modelprov.core._policy_file import MAX_POLICIES_BYTES
from modelprov.policy import load_policies


def _globs(count: int) -> dict[str, str]:
    keys: dict[str, str] = {}
    for i in range(count):
        shape = i % 3
        glob = f"team{i}.*" if shape == 0 else f"*.stat{i}" if shape == 1 else f"t{i}?x*"
        keys[glob] = "union"
    keys["pkg.torch.onnx.stack_*"] = "stack_traces"  # decides one of the model's keys
    keys["*.class_hierarchy"] = "follow_output"
    return keys


def _write_policies(folder: str, count: int) -> str:
    path = os.path.join(folder, "policies.json")
    document = {"format": "modelprov.policies", "version": 1, "keys": _globs(count)}
    text = json.dumps(document, separators=(",", ":"))
    if len(text.encode()) > MAX_POLICIES_BYTES:
        raise SystemExit(f"{count} globs take {len(text)} bytes, over the 1 MiB limit")
    with open(path, "w", encoding="utf-8") as stream:
        stream.write(text)
    return path


def _time(run: object, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()  # type: ignore[operator]
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--globs", type=int, default=45_000)
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    module, inputs = _examples.gpt2(args.layers, 64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(module, inputs, dynamo=True, optimize=False, verbose=False)
    proto = ir.to_proto(program.model)
    with tempfile.TemporaryDirectory() as folder:
        path = _write_policies(folder, args.globs)
        size = os.path.getsize(path)

        def without() -> None:
            modelprov.optimize(proto)

        def with_globs() -> None:  # the file is read each time, as the command line does
            modelprov.optimize(proto, policies=load_policies(path))

        without()  # warm up imports and caches
        plain = _time(without, args.repeat)
        globbed = _time(with_globs, args.repeat)
    print(f"model: gpt2 {args.layers} layers, {len(proto.graph.node)} nodes")
    print(f"policies: {args.globs} globs, {size} bytes")
    print(f"optimize without policies: {plain:.2f} s (median of {args.repeat})")
    print(f"optimize with the globs:   {globbed:.2f} s")
    print(f"ratio: {globbed / plain:.2f} (target <= 2.0)")


if __name__ == "__main__":
    main()
