"""Fingerprints of modelprov's public outputs on every zoo case, to compare two versions.

Usage: python benchmarks/check_output_bytes.py save FILE [--models a,b] [--outputs x,y]
       python benchmarks/check_output_bytes.py compare FILE [--models a,b] [--outputs x,y]

``save`` writes, per zoo case (exports cached as in benchmarks/bench_zoo.py), the SHA-256 of
the serialized bytes of each public output, as JSON:

- ``optimize``: ``modelprov.optimize`` of the plain export;
- ``recover/<tool>`` and ``recover-report/<tool>``: the model and the JSON report of
  ``modelprov.recover_with_report(optimized, tool_output)`` (``recover`` is its model)
  after each black-box tool (onnxsim, onnxslim, onnxoptimizer, onnxruntime
  basic/extended/all) ran on the optimized model; a tool's output is cached by the hash
  of its input, so two versions whose optimize outputs agree recover from the same bytes;
- ``functionize/<level>`` and ``inline/<level>``: ``modelprov.functionize(optimized,
  level=...)`` and ``modelprov.inline`` of it, for the ``aten`` and ``module`` levels;
- ``report``: the data ``modelprov.report(optimized, before=export)`` embeds (the JSON the
  page renders, in its packed, deflated form); ``overlay`` and ``audit``: the JSON of
  ``modelprov.overlay(optimized)`` and ``modelprov.audit(optimized)``;
- ``quantize``: ``modelprov.quantize`` of the optimized model, calibrated on the case's
  example inputs (the quantizer attributes its nodes through recover).

``--outputs stablehlo`` (not in the default set: it lowers each case through JAX) adds
``modelprov.export_stablehlo`` of the case's module: its MLIR with locations and its op
records.

An output that raises is fingerprinted as its error's type and first line. ``compare``
computes them again with the modelprov on ``PYTHONPATH`` and lists every output that
differs from ``FILE``; it exits 1 when one does. Only the public API is used, so the same
script runs against older commits (``PYTHONPATH=<old checkout>/src``). Made for work that
must not change any output (restructures, speed-ups): save on the base, compare after.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import re
import sys
import tempfile
import warnings
from collections.abc import Callable
from typing import Any

import onnx
import onnx_ir as ir

if __package__ in (None, ""):  # run as a file: the checkout's root holds benchmarks/
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import modelprov
from benchmarks._zoo_cases import CASES, EXPORT_CACHE
from benchmarks._zoo_export import cached_export

TOOL_CACHE = os.path.join(tempfile.gettempdir(), "modelprov-tool-outputs")
"""Where the black-box tools' outputs are kept, by the hash of their input."""

_ORT_LEVELS = {
    "basic": "ORT_ENABLE_BASIC",
    "extended": "ORT_ENABLE_EXTENDED",
    "all": "ORT_ENABLE_ALL",
}


def _onnxruntime(level: str) -> Callable[[onnx.ModelProto], onnx.ModelProto]:
    def run(proto: onnx.ModelProto) -> onnx.ModelProto:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, _ORT_LEVELS[level])
        with tempfile.TemporaryDirectory(prefix="check-bytes-ort-") as folder:
            source, target = os.path.join(folder, "in.onnx"), os.path.join(folder, "out.onnx")
            onnx.save(proto, source)
            options.optimized_model_filepath = target
            ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
            return onnx.load(target)

    return run


def _onnxsim(proto: onnx.ModelProto) -> onnx.ModelProto:
    import onnxsim

    simplified, ok = onnxsim.simplify(proto)
    if not ok:
        raise RuntimeError("onnxsim could not validate its model")
    return simplified  # type: ignore[no-any-return]


def _onnxslim(proto: onnx.ModelProto) -> onnx.ModelProto:
    import onnxslim

    return onnxslim.slim(proto)  # type: ignore[no-any-return]


def _onnxoptimizer(proto: onnx.ModelProto) -> onnx.ModelProto:
    import onnxoptimizer

    return onnxoptimizer.optimize(proto)  # type: ignore[no-any-return]


TOOLS: dict[str, Callable[[onnx.ModelProto], onnx.ModelProto]] = {
    "onnxsim": _onnxsim,
    "onnxslim": _onnxslim,
    "onnxoptimizer": _onnxoptimizer,
    "ort-basic": _onnxruntime("basic"),
    "ort-extended": _onnxruntime("extended"),
    "ort-all": _onnxruntime("all"),
}
"""The black-box tools, run directly (not through modelprov), the same on every version."""

OUTPUTS = (
    "optimize",
    *(f"recover/{tool}" for tool in TOOLS),
    *(f"recover-report/{tool}" for tool in TOOLS),
    "functionize/aten",
    "inline/aten",
    "functionize/module",
    "inline/module",
    "report",
    "overlay",
    "audit",
    "quantize",
)

EXTRA_OUTPUTS = ("stablehlo",)
"""Outputs fingerprinted only when ``--outputs`` names them."""

_DATA = re.compile(r'<script[^>]*id="report-data"[^>]*>([^<]*)</script>')


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _model_bytes(model: ir.Model | onnx.ModelProto) -> bytes:
    proto = ir.to_proto(model) if isinstance(model, ir.Model) else model
    return proto.SerializeToString(deterministic=True)


def _tool_output(tool: str, original: bytes) -> onnx.ModelProto:
    """The tool's output for the model ``original`` (serialized), cached by its hash."""
    path = os.path.join(TOOL_CACHE, f"{_digest(original)[:24]}-{tool}.onnx")
    if not os.path.exists(path):
        output = TOOLS[tool](onnx.load_from_string(original))
        os.makedirs(TOOL_CACHE, exist_ok=True)
        partial = f"{path}.{os.getpid()}.partial"
        with open(partial, "wb") as out:
            out.write(output.SerializeToString(deterministic=True))
        os.replace(partial, path)
    return onnx.load(path)


def _report_data(html: str) -> bytes:
    found = _DATA.search(html)
    return (found.group(1) if found else html).encode("utf-8")


def _guarded(make: Callable[[], bytes]) -> str:
    try:
        return _digest(make())
    except Exception as error:  # a fingerprint of the failure: versions must fail alike
        first = str(error).splitlines()[0] if str(error) else ""
        return f"error: {type(error).__name__}: {first[:200]}"


def _stablehlo_bytes(name: str) -> bytes:
    import torch

    torch.manual_seed(0)  # the module cached_export builds
    case = CASES[name]
    module, args = case.build()
    shapes = case.dynamic_shapes() if case.dynamic_shapes is not None else None
    program = modelprov.export_stablehlo(module, args, dynamic_shapes=shapes)
    text = program.text_with_locations + "\n" + repr(program.ops)
    # JAX's own locations name the frames that lowered an op, modelprov's among them: the
    # checkout's folder is not part of what is compared.
    checkout = os.path.dirname(os.path.dirname(os.path.abspath(modelprov.__file__)))
    return text.replace(checkout, "<modelprov checkout>").encode("utf-8")


def fingerprints(name: str, cache: str, outputs: tuple[str, ...] = OUTPUTS) -> dict[str, str]:
    """Output label -> SHA-256 of its bytes (or its error), for one zoo case."""
    export, inputs = cached_export(name, cache)
    found: dict[str, str] = {}
    held: dict[str, Any] = {}

    def optimized() -> ir.Model:
        if "optimize" not in held:
            held["optimize"] = modelprov.optimize(export.clone())
        return held["optimize"]  # type: ignore[no-any-return]

    def optimized_bytes() -> bytes:
        if "optimize_bytes" not in held:
            held["optimize_bytes"] = _model_bytes(optimized())
        return held["optimize_bytes"]  # type: ignore[no-any-return]

    def functionized(level: str) -> ir.Model:
        if level not in held:
            held[level] = modelprov.functionize(optimized(), level=level)  # type: ignore[call-overload]
        return held[level]  # type: ignore[no-any-return]

    def recovered(tool: str) -> tuple[onnx.ModelProto, Any]:
        if tool not in held:
            original = optimized_bytes()
            output = _tool_output(tool, original)
            held[tool] = modelprov.recover_with_report(onnx.load_from_string(original), output)
        return held[tool]  # type: ignore[no-any-return]

    makers: dict[str, Callable[[], bytes]] = {
        "optimize": optimized_bytes,
        **{f"recover/{tool}": lambda tool=tool: _model_bytes(recovered(tool)[0]) for tool in TOOLS},
        **{
            f"recover-report/{tool}": lambda tool=tool: recovered(tool)[1].to_json().encode()
            for tool in TOOLS
        },
        **{
            f"functionize/{level}": lambda level=level: _model_bytes(functionized(level))
            for level in ("aten", "module")
        },
        **{
            f"inline/{level}": lambda level=level: _model_bytes(
                modelprov.inline(functionized(level))
            )
            for level in ("aten", "module")
        },
        "report": lambda: _report_data(modelprov.report(optimized(), before=export)),
        "overlay": lambda: json.dumps(modelprov.overlay(optimized()), sort_keys=True).encode(),
        "audit": lambda: modelprov.audit(optimized()).to_json().encode(),
        "stablehlo": lambda: _stablehlo_bytes(name),
        "quantize": lambda: _model_bytes(
            modelprov.quantize(ir.to_proto(optimized()), calibration_batches=[tuple(inputs)])
        ),
    }
    for label in outputs:
        found[label] = _guarded(makers[label])
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("action", choices=("save", "compare"))
    parser.add_argument("file")
    parser.add_argument("--models", default="", help="zoo cases (default: all)")
    parser.add_argument("--outputs", default="", help=f"outputs (default: all of {OUTPUTS})")
    parser.add_argument(
        "--cache", default=EXPORT_CACHE, help="where zoo exports are kept (as bench_zoo)"
    )
    args = parser.parse_args()
    logging.getLogger("torch").setLevel(logging.ERROR)
    logging.getLogger("modelprov").setLevel(logging.ERROR)
    warnings.simplefilter("ignore")
    names = [m for m in args.models.split(",") if m] or list(CASES)
    outputs = tuple(o for o in args.outputs.split(",") if o) or OUTPUTS
    unknown = sorted(set(outputs) - set(OUTPUTS) - set(EXTRA_OUTPUTS))
    if unknown:
        parser.error(f"unknown outputs {unknown}; choose from {OUTPUTS + EXTRA_OUTPUTS}")
    saved: dict[str, dict[str, str]] = {}
    if args.action == "compare":
        with open(args.file) as saved_file:
            saved = json.load(saved_file)
    found: dict[str, dict[str, str]] = {}
    compared = identical = 0
    for name in names:
        found[name] = fingerprints(name, args.cache, outputs)
        errors = sum(value.startswith("error") for value in found[name].values())
        print(f"{name}: {len(outputs)} outputs, {errors} errors", flush=True)
        for label, value in found[name].items():
            if args.action == "save":
                continue
            before = saved.get(name, {}).get(label)
            if before is None:
                print(f"  {label}: not in {args.file}")
                continue
            compared += 1
            if before == value:
                identical += 1
            else:
                print(f"  {label}: differs ({before[:60]} -> {value[:60]})")
        if args.action == "save":  # after every case: a long sweep keeps what it found
            partial = f"{args.file}.partial"
            with open(partial, "w") as out:
                json.dump(found, out, indent=1)
            os.replace(partial, args.file)
    if args.action == "save":
        print(f"saved fingerprints of {len(found)} cases x {len(outputs)} outputs to {args.file}")
        return
    print(f"{identical} of {compared} outputs ({len(names)} cases) byte-identical to {args.file}")
    sys.exit(1 if identical != compared else 0)


if __name__ == "__main__":
    main()
