"""The ``modelprov`` command line: thin over the Python API.

Exit codes (:class:`modelprov.errors.ExitCode`): 0 ok, 1 a check failed (``--fail-under``),
2 usage or input error, 3 an output cannot be written, 4 StableHLO lowering failed, 5 an
optional dependency is missing, 70 internal error, 130 interrupted (Ctrl-C, SIGTERM), 141
stdout closed early. Errors are one line on stderr (``--debug`` adds the traceback). Reports
go to stdout; errors, progress and each command's one summary line go to stderr (a spinner on
a terminal, rate-limited lines otherwise; ``-q`` silences progress and summaries).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import logging
import math
import os
import signal
import sys
import traceback
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from modelprov import _progress
from modelprov._gc import gc_paused
from modelprov._io import (
    check_output,
    load_model,
    load_model_proto,
    model_from_proto,
    save_model,
)
from modelprov.core.keys import CONFIDENCE_KEY
from modelprov.errors import ExitCode, ModelprovError, UsageError

if TYPE_CHECKING:
    import onnx_ir as ir

__all__ = ["ExitCode", "UsageError", "build_parser", "main"]

EXIT_OK = ExitCode.OK
EXIT_CHECK_FAILED = ExitCode.CHECK_FAILED
EXIT_USAGE = ExitCode.BAD_INPUT


class _ArgumentParser(argparse.ArgumentParser):
    """argparse with one-line errors: ``modelprov: error: ...`` and exit code 2."""

    def error(self, message: str) -> Any:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message} (see {self.prog} --help)")


@contextlib.contextmanager
def _status(message: str) -> Iterator[None]:
    """Progress on stderr while a step runs: a spinner on a terminal, else rate-limited lines."""
    with _progress.status(message):
        yield


def _model_summary(model: ir.Model) -> str:
    """``N nodes, P% with sources`` for a summary line."""
    from modelprov.onnx._export_report import provenance_counts

    counts = provenance_counts(model)
    share = counts.nodes_with_sources / counts.nodes if counts.nodes else 1.0
    return f"{counts.nodes} nodes, {share:.0%} with sources"


def _fx_recall(before: ir.Model, after: ir.Model) -> str:
    """``FX-node recall R (k/n)`` of ``after`` against ``before``, for a summary line."""
    from modelprov.onnx._export_report import provenance_counts

    old, new = provenance_counts(before).fx_nodes, provenance_counts(after).fx_nodes
    kept = len(old & new)
    return f"FX-node recall {kept / len(old) if old else 1.0:.3f} ({kept}/{len(old)})"


# --- graph commands -------------------------------------------------------------------------


def _cmd_optimize(args: argparse.Namespace) -> int:
    import onnx_ir as ir

    from modelprov.onnx._optimize import OptimizeProvenancePass

    output = check_output(args.output, [args.model], in_place=args.in_place)
    with _status(f"loading {args.model}"):
        proto = load_model_proto(args.model, load_weights=True)
        model = model_from_proto(proto, args.model)
    optimize_pass = OptimizeProvenancePass(per_pass=bool(args.report or args.json))
    with _status("optimizing"):
        result = optimize_pass(model)
    with _status(f"writing {output}"):
        save_model(model, output)
    before = ir.from_proto(proto)
    if args.report or args.json:
        from modelprov.audit import optimize_report

        report = optimize_report(before, model, result.steps)
        print(report.to_json_text() if args.json else report.to_text())
    _progress.summary(
        f"wrote {output}: {len(list(before.graph))} -> {_model_summary(model)}, "
        f"{_fx_recall(before, model)}"
    )
    return EXIT_OK


def _cmd_recover(args: argparse.Namespace) -> int:
    import onnx_ir as ir

    output = check_output(args.output, [args.original, args.optimized], in_place=args.in_place)
    with _status("loading models"):
        original = load_model_proto(args.original, load_weights=False)
        optimized = load_model_proto(args.optimized, load_weights=False)
    from modelprov.onnx._recover import recover_with_working_model

    with _status("recovering provenance"):
        _, recovery, result = recover_with_working_model(original, optimized, force=args.force)
    with _status(f"writing {output}"):
        ir.external_data.set_base_dir(
            result.graph, os.path.dirname(os.path.abspath(args.optimized))
        )
        save_model(result, output)
    levels: dict[str, int] = {}
    for node in result.graph.all_nodes():
        level = node.metadata_props.get(CONFIDENCE_KEY)
        if level:
            levels[level] = levels.get(level, 0) + 1
    how_sure = ", ".join(f"{count} {level}" for level, count in sorted(levels.items()))
    if args.report or args.json:
        print(json.dumps(recovery.to_json(), indent=2) if args.json else recovery.to_text())
    _progress.summary(
        f"wrote {output}: {_model_summary(result)}" + (f" ({how_sure})" if how_sure else "")
    )
    return EXIT_OK


def _rewrite_model(
    args: argparse.Namespace, doing: str, transform: Callable[[ir.Model], ir.Model]
) -> int:
    """Loads MODEL (graph only), transforms it, writes OUTPUT atomically."""
    output = check_output(args.output, [args.model], in_place=args.in_place)
    with _status(f"loading {args.model}"):
        model = load_model(args.model)
    before = (len(list(model.graph)), len(model.functions))
    with _status(doing):
        result = transform(model)
    with _status(f"writing {output}"):
        save_model(result, output)
    after = (len(list(result.graph)), len(result.functions))
    _progress.summary(
        f"wrote {output}: {before[0]} -> {after[0]} nodes, {before[1]} -> {after[1]} functions"
    )
    return EXIT_OK


def _cmd_functionize(args: argparse.Namespace) -> int:
    from modelprov.onnx._functionize import FunctionizePass

    # The loaded model is ours: the pass changes it in place (no copy).
    return _rewrite_model(
        args,
        "wrapping ops into functions",
        lambda model: FunctionizePass(level=args.level)(model).model,
    )


def _cmd_inline(args: argparse.Namespace) -> int:
    from modelprov.onnx._inline import InlinePass

    return _rewrite_model(args, "inlining functions", lambda model: InlinePass()(model).model)


# --- reports --------------------------------------------------------------------------------


def _cmd_audit(args: argparse.Namespace) -> int:
    from modelprov.audit import audit

    with _status(f"auditing {args.model}"):
        report = audit(load_model_proto(args.model, load_weights=False))
    print(report.to_json_text() if args.json else report.to_text())
    return EXIT_OK


def _cmd_diff(args: argparse.Namespace) -> int:
    from modelprov.audit import diff

    with _status("comparing"):
        before = load_model_proto(args.before, load_weights=False)
        after = load_model_proto(args.after, load_weights=False)
        report = diff(before, after)
    print(report.to_json_text() if args.json else report.to_text())
    if args.fail_under is not None and report.fx_nodes_dyn.value < args.fail_under:
        print(
            f"modelprov: check failed: FX-node recall (dyn) {report.fx_nodes_dyn.value:.3f} "
            f"is under {args.fail_under}",
            file=sys.stderr,
        )
        return EXIT_CHECK_FAILED
    return EXIT_OK


# --- export ---------------------------------------------------------------------------------


def _load_factory(spec: str) -> Callable[[], Any]:
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise UsageError(f"{spec!r}: give the factory as MODULE:FACTORY, e.g. mypkg.models:build")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise UsageError(f"{spec}: cannot import module {module_name!r}: {error}") from None
    factory = module
    for part in attribute.split("."):
        if not hasattr(factory, part):
            raise UsageError(f"{spec}: module {module_name!r} has no attribute {attribute!r}")
        factory = getattr(factory, part)
    if not callable(factory):
        raise UsageError(f"{spec}: {attribute!r} is not callable")
    return factory  # type: ignore[no-any-return]


def _call_factory(spec: str) -> Any:
    """Imports and calls MODULE:FACTORY; whatever it raises becomes a one-line UsageError."""
    factory = _load_factory(spec)
    try:
        return factory()
    except Exception as error:
        raise UsageError(f"{spec}: the factory raised {_one_line(error)}") from error


def _model_and_inputs(spec: str) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    import torch

    made = _call_factory(spec)
    if not isinstance(made, tuple) or len(made) not in (2, 3):
        raise UsageError(
            f"{spec} returned {type(made).__name__}; it must return (model, args) or "
            "(model, args, kwargs)"
        )
    model, example, *rest = made
    kwargs = dict(rest[0]) if rest and rest[0] else {}
    if not isinstance(model, torch.nn.Module):
        raise UsageError(f"{spec} returned a {type(model).__name__}, not a torch.nn.Module")
    example = tuple(example) if isinstance(example, list | tuple) else (example,)
    return model, example, kwargs


def _read_annotations(path: str) -> dict[str, dict[str, Any]]:
    try:
        with open(path, encoding="utf-8") as stream:
            document = json.load(stream)
    except (OSError, ValueError, RecursionError) as error:
        reason = "nested too deeply" if isinstance(error, RecursionError) else error
        raise UsageError(f"{path}: cannot read annotations: {reason}") from None
    if not isinstance(document, dict) or not all(isinstance(v, dict) for v in document.values()):
        raise UsageError(
            f"{path}: annotations must be a JSON object {{module_path: {{key: value}}}}"
        )
    return document


def _calibration_batches(
    args: argparse.Namespace, example: tuple[Any, ...], kwargs: Mapping[str, Any]
) -> list[Any]:
    """``--batches FACTORY``'s batches (at most ``--calibrate N`` of them), else N random
    batches like the example inputs (tensors random, other arguments kept as constants)."""
    if args.batches:
        made = _call_factory(args.batches)
        if isinstance(made, str | bytes) or not hasattr(made, "__iter__"):
            raise UsageError(
                f"{args.batches} returned {type(made).__name__}; it must return an iterable "
                "of batches (tensors, tuples, dicts)"
            )
        batches: list[Any] = []
        for batch in made:
            if args.calibrate and len(batches) >= args.calibrate:
                break
            batches.append(batch)
        if not batches:
            raise UsageError(f"{args.batches} returned no batches")
        return batches
    from modelprov.annotation._random_batches import random_batches

    return list(random_batches(args.calibrate, example, kwargs))


def _cmd_export(args: argparse.Namespace) -> int:
    import modelprov

    if args.onnx is None and args.stablehlo is None:
        raise UsageError("give --onnx OUT.onnx, --stablehlo OUT.mlir or both")
    if args.calibrate is not None and args.calibrate < 1:
        raise UsageError(f"--calibrate {args.calibrate}: give a positive number of batches")
    outputs = [path for path in (args.onnx, args.stablehlo) if path is not None]
    for path in outputs:
        check_output(path, [args.annotations] if args.annotations else [])
    if args.quantize is not None:
        if args.onnx is None:
            raise UsageError("--quantize needs --onnx OUT.onnx (the float model it quantizes)")
        args.quantize = args.quantize or _quantized_name(args.onnx)
        check_output(args.quantize, [args.onnx])
    annotations: dict[str, dict[str, Any]] = {}
    batches: list[Any] = []
    with _status(f"building {args.factory}"):
        model, example, kwargs = _model_and_inputs(args.factory)
    if args.calibrate or args.batches:
        batches = _calibration_batches(args, example, kwargs)
        with _status(f"calibrating on {len(batches)} batches"):
            annotations = modelprov.calibrate(model, batches)
    if args.annotations:
        for path, keys in _read_annotations(args.annotations).items():
            annotations.setdefault(path, {}).update(keys)
    if args.onnx is not None:
        with _status(f"exporting {args.onnx}"), _user_model_errors(args.factory, "export"):
            onnx_program = modelprov.export(
                model,
                example,
                args.onnx,
                kwargs=kwargs or None,
                annotations=annotations or None,
                optimize=not args.no_optimize,
                verbose=args.verbose,
            )
        ranges = f", ranges of {len(annotations)} modules" if annotations else ""
        _progress.summary(f"wrote {args.onnx}: {_model_summary(onnx_program.model)}{ranges}")
    if args.quantize is not None:
        _export_quantized(args, batches or None)
    if args.stablehlo is not None:
        with _status(f"lowering to StableHLO {args.stablehlo}"):
            program = modelprov.export_stablehlo(
                model, example, kwargs or None, annotations=annotations or None
            )
            program.save(args.stablehlo)
        _progress.summary(
            f"wrote {args.stablehlo}: {len(program.ops)} ops, "
            f"{program.coverage:.0%} name their FX node"
        )
    return EXIT_OK


@contextlib.contextmanager
def _user_model_errors(spec: str, doing: str) -> Iterator[None]:
    """Failures of torch on the user's model become one-line usage errors naming it."""
    try:
        yield
    except (ModelprovError, KeyboardInterrupt):
        raise
    except Exception as error:
        raise UsageError(f"{spec}: {doing} failed: {_one_line(error)}") from error


def _quantized_name(path: str) -> str:
    stem, extension = os.path.splitext(path)
    return f"{stem}.quant{extension or '.onnx'}"


def _export_quantized(args: argparse.Namespace, batches: list[Any] | None) -> None:
    """Quantizes the exported --onnx model into --quantize (ranges from --calibrate)."""
    from modelprov.onnx._quantize import quantize

    with _status(f"quantizing {args.onnx} into {args.quantize}"):
        float_model = load_model(args.onnx, load_weights=True)
        result = quantize(float_model, calibration_batches=batches, **_quantize_options(args))
        save_model(result, args.quantize)


def _cmd_demo(args: argparse.Namespace) -> int:
    from modelprov._demo import run_demo

    folder = run_demo(sys.stdout, folder=args.output_dir)
    print(f"demo models written to {folder}")
    return EXIT_OK


# --- quantize -------------------------------------------------------------------------------


def _read_ranges(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as stream:
            document = json.load(stream)
    except (OSError, ValueError) as error:
        raise UsageError(f"{path}: cannot read ranges: {error}") from None
    if not isinstance(document, dict):
        raise UsageError(
            f"{path}: ranges must be a JSON object {{tensor or module path: [min, max]}}"
        )
    return document


def _read_batches(paths: Sequence[str]) -> list[dict[str, Any]]:
    """One calibration batch per .npz file, arrays by graph input name (never unpickled)."""
    import numpy as np

    batches: list[dict[str, Any]] = []
    for path in paths:
        try:
            with np.load(path, allow_pickle=False) as arrays:
                batches.append({name: arrays[name] for name in arrays.files})
        except (OSError, ValueError) as error:
            raise UsageError(
                f"{path}: cannot read a calibration batch ({error}); give .npz files with "
                "one array per graph input, named like the input (numpy.savez)"
            ) from None
    return batches


def _quantize_options(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "format": args.format,
        "activation_type": args.activation_type,
        "weight_type": args.weight_type,
        "per_channel": args.per_channel,
    }


def _report_quantized(model: ir.Model, as_json: bool) -> None:
    from modelprov.onnx._quant_params import quantized_tensors, table_json, table_text

    tensors = quantized_tensors(model)
    print(table_json(tensors) if as_json else table_text(tensors))


def _cmd_quantize(args: argparse.Namespace) -> int:
    from modelprov.onnx._quantize import quantize

    output = check_output(args.output, [args.model], in_place=args.in_place)
    ranges = _read_ranges(args.ranges) if args.ranges else None
    batches = _read_batches(args.calibrate_from) if args.calibrate_from else None
    with _status(f"loading {args.model}"):
        model = model_from_proto(load_model_proto(args.model, load_weights=True), args.model)
    with _status("quantizing with onnxruntime"):
        result = quantize(
            model, ranges=ranges, calibration_batches=batches, **_quantize_options(args)
        )
    with _status(f"writing {output}"):
        save_model(result, output)
    _report_quantized(result, args.json)
    return EXIT_OK


def _add_quantize_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--format",
        choices=("qdq", "qoperator"),
        default="qdq",
        help="QuantizeLinear/DequantizeLinear pairs (qdq, the default) or QLinear ops",
    )
    for role in ("activation", "weight"):
        parser.add_argument(
            f"--{role}-type",
            choices=("int8", "uint8", "int16", "uint16"),
            default="int8",
            help=f"integer type of the {role}s (default int8, as onnxruntime)",
        )
    parser.add_argument(
        "--per-channel", action="store_true", help="one weight scale per output channel"
    )


def _add_quantize_command(commands: Any) -> None:
    quantize = commands.add_parser(
        "quantize",
        help="quantize with onnxruntime, scales from the model's calibrated ranges",
        description="modelprov.quantize on a file: onnxruntime.quantization.quantize_static "
        "with each activation's range from its custom.min/custom.max (modelprov export "
        "--calibrate) or --ranges; tensors without a range are calibrated by onnxruntime "
        "from --calibrate-from. Every node of the result keeps its sources. Prints each "
        "quantized tensor's range, scale and zero point.",
    )
    quantize.add_argument("model", metavar="MODEL.onnx", help="the float model (not modified)")
    _add_output(quantize)
    quantize.add_argument(
        "--calibrate-from",
        nargs="+",
        metavar="BATCH.npz",
        help="calibration batches for tensors without a range: one .npz per batch, one "
        "array per graph input, named like the input",
    )
    quantize.add_argument(
        "--ranges",
        metavar="FILE.json",
        help="ranges by tensor name or module path, JSON {name: [min, max]}; win over the "
        "model's custom.min/custom.max",
    )
    _add_quantize_options(quantize)
    quantize.add_argument("--json", action="store_true", help="print the table as JSON")
    quantize.set_defaults(run=_cmd_quantize)


# --- the parser -----------------------------------------------------------------------------


def _add_output(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="OUT.onnx",
        help="output .onnx file, written atomically (weights over 2 GB or kept on disk go "
        "to OUT.onnx.data)",
    )
    parser.add_argument(
        "--in-place",
        action="store_true",
        help="allow OUT.onnx to be an input (it is replaced atomically)",
    )


def _cmd_report(args: argparse.Namespace) -> int:
    from modelprov.report import write_report

    check_output(args.output, [args.model, *([args.before] if args.before else [])])
    with _status(f"writing the report {args.output}"):
        path = write_report(args.model, args.output, before=args.before)
    _progress.summary(f"wrote {path}: open it in a browser (it loads nothing)")
    return EXIT_OK


def _cmd_overlay(args: argparse.Namespace) -> int:
    from modelprov.report import write_overlay

    check_output(args.output, [args.model], in_place=False)
    with _status(f"writing node data {args.output}"):
        path = write_overlay(args.model, args.output, key=args.key, coverage=args.coverage)
    _progress.summary(f"wrote {path}: Model Explorer node data")
    return EXIT_OK


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("modelprov")
    except metadata.PackageNotFoundError:
        import modelprov

        return str(modelprov.__version__)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not positive; give 1 or more")
    return value


def _recall(text: str) -> float:
    """A recall threshold: a number in [0, 1] (nan and out-of-range values refused)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if math.isnan(value) or not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{value} is not a recall; give a number in 0..1")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``modelprov`` command."""
    parser = _ArgumentParser(
        prog="modelprov",
        description="Keep every operation's provenance through ONNX export and optimization. "
        "Exit codes: 0 ok, 1 a check failed, 2 usage or input error.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details")
    parser.add_argument(
        "--debug", action="store_true", help="print the traceback of an error (for bug reports)"
    )
    parser.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="print no progress and no summary line (reports and errors still print)",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    export = commands.add_parser(
        "export",
        help="export a PyTorch model to ONNX (and StableHLO) with provenance",
        description="Export MODULE:FACTORY, a callable returning (model, args) or "
        "(model, args, kwargs), with modelprov.export / modelprov.export_stablehlo.",
    )
    export.add_argument("factory", metavar="MODULE:FACTORY", help="importable model factory")
    export.add_argument("--onnx", metavar="OUT.onnx", help="write the ONNX model here")
    export.add_argument(
        "--stablehlo",
        metavar="OUT.mlir",
        help="write StableHLO text here (plus OUT.mlir.jaxexport and OUT.mlir.weights.npz); "
        "needs the stablehlo extra",
    )
    export.add_argument(
        "--calibrate",
        type=_positive_int,
        metavar="N",
        help="run N random batches shaped like the example inputs through modelprov.calibrate "
        "and attach the per-module output ranges (custom.min, custom.max); tensors get random "
        "values of their shape and dtype, other arguments (use_cache=False) stay as given",
    )
    export.add_argument(
        "--batches",
        metavar="MODULE:FACTORY",
        help="calibrate on the batches this callable returns (an iterable of tensors, tuples "
        "or dicts) instead of random ones; --calibrate N then caps their number",
    )
    export.add_argument(
        "--annotations",
        metavar="FILE.json",
        help="per-module metadata, JSON {module_path: {key: value}}; overrides --calibrate per key",
    )
    export.add_argument(
        "--no-optimize",
        action="store_true",
        help="skip optimization (torch.onnx.export(optimize=False) plus annotations)",
    )
    export.add_argument(
        "--quantize",
        nargs="?",
        const="",
        metavar="QUANT.onnx",
        help="also quantize the ONNX model with modelprov.quantize (ranges from --calibrate; "
        "its batches calibrate the graph inputs) into QUANT.onnx (default OUT.quant.onnx)",
    )
    _add_quantize_options(export)
    export.set_defaults(run=_cmd_export)

    optimize = commands.add_parser(
        "optimize",
        help="optimize an ONNX model like torch.onnx does, keeping provenance",
        description="modelprov.optimize on a file (loads the weights: constant folding needs "
        "them).",
    )
    optimize.add_argument("model", metavar="MODEL.onnx", help="input .onnx file (not modified)")
    _add_output(optimize)
    optimize.add_argument(
        "--report",
        action="store_true",
        help="print what each step merged and lost, then the overall diff",
    )
    optimize.add_argument("--json", action="store_true", help="print the report as JSON")
    optimize.set_defaults(run=_cmd_optimize)

    recover = commands.add_parser(
        "recover",
        help="give a model optimized by another tool the provenance of its original",
        description="modelprov.recover(ORIGINAL, OPTIMIZED): works on the graphs alone; "
        "weights are never loaded into memory.",
    )
    recover.add_argument("original", metavar="ORIGINAL.onnx", help="the model before the tool")
    recover.add_argument("optimized", metavar="OPTIMIZED.onnx", help="the tool's output")
    _add_output(recover)
    recover.add_argument(
        "--force",
        action="store_true",
        help="recover even when OPTIMIZED does not look made from ORIGINAL (different "
        "interface, op kinds or size)",
    )
    recover.add_argument(
        "--report",
        action="store_true",
        help="print how sure each attribution is, unattributed nodes and lost sources",
    )
    recover.add_argument(
        "--json", action="store_true", help="print that report as JSON (implies --report)"
    )
    recover.set_defaults(run=_cmd_recover)

    functionize = commands.add_parser(
        "functionize",
        help="wrap ops into model-local functions named after their ATen ops",
        description="modelprov.functionize on a file: works on the graph alone.",
    )
    functionize.add_argument("model", metavar="MODEL.onnx", help="input .onnx file")
    _add_output(functionize)
    functionize.add_argument(
        "--level",
        choices=("aten", "module"),
        default="aten",
        help="one function per ATen op (aten, the default) or per nn.Module call (module)",
    )
    functionize.set_defaults(run=_cmd_functionize)

    inline = commands.add_parser(
        "inline",
        help="inline model-local functions, keeping provenance",
        description="modelprov.inline on a file: works on the graph alone.",
    )
    inline.add_argument("model", metavar="MODEL.onnx", help="input .onnx file")
    _add_output(inline)
    inline.set_defaults(run=_cmd_inline)

    audit = commands.add_parser(
        "audit",
        help="report the provenance a model carries",
        description="Nodes, nodes without sources, per-key coverage, FX nodes, source lines, "
        "module paths, metadata bytes and the largest values, invalid metadata, functions "
        "and overloads. Weights are never loaded.",
    )
    audit.add_argument("model", metavar="MODEL.onnx", help="the model to audit")
    audit.add_argument("--json", action="store_true", help="print JSON (modelprov.audit v1)")
    audit.set_defaults(run=_cmd_audit)

    diff = commands.add_parser(
        "diff",
        help="provenance recall of AFTER against BEFORE",
        description="Recall of FX nodes, source lines and module paths (overall and for nodes "
        "computing on graph inputs, 'dyn'), the lost FX nodes with their source lines, and "
        "nodes without sources. Weights are never loaded.",
    )
    diff.add_argument("before", metavar="BEFORE.onnx", help="the model before (e.g. the export)")
    diff.add_argument("after", metavar="AFTER.onnx", help="the model after (e.g. optimized)")
    diff.add_argument("--json", action="store_true", help="print JSON (modelprov.diff v1)")
    diff.add_argument(
        "--fail-under",
        type=_recall,
        metavar="RECALL",
        help="exit 1 when the FX-node recall (dyn) is under RECALL (0..1), for CI",
    )
    diff.set_defaults(run=_cmd_diff)

    demo = commands.add_parser(
        "demo", help="export bundled examples with and without modelprov, compare"
    )
    demo.add_argument(
        "--output-dir", metavar="DIR", help="folder for the demo models (default: a temp folder)"
    )
    demo.set_defaults(run=_cmd_demo)
    report = commands.add_parser("report", help="write a self-contained HTML provenance report")
    report.add_argument("model", help="the .onnx model to show")
    report.add_argument(
        "--before", metavar="ORIGINAL", help="the model before the change: recall, lost sources"
    )
    report.add_argument("-o", "--output", required=True, help="output .html file")
    report.set_defaults(run=_cmd_report)

    overlay = commands.add_parser(
        "overlay", help="Model Explorer node data: provenance coverage or a numeric key"
    )
    overlay.add_argument("model", help="the .onnx model")
    overlay.add_argument("-o", "--output", required=True, help="output .json file")
    shown = overlay.add_mutually_exclusive_group()
    shown.add_argument("--key", help="a numeric metadata key to colour by, e.g. custom.max")
    shown.add_argument(
        "--coverage", action="store_true", help="sources per node, coloured by state (default)"
    )
    overlay.set_defaults(run=_cmd_overlay)
    _add_quantize_command(commands)
    return parser


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    if not isinstance(error, ModelprovError):
        text = f"{type(error).__name__}: {text}"
    return text if len(text) <= 2000 else text[:1997] + "..."


def _say(text: str) -> None:
    """One line on stderr, whatever characters it holds."""
    encoding = getattr(sys.stderr, "encoding", None) or "utf-8"
    sys.stderr.write(text.encode(encoding, "backslashreplace").decode(encoding) + "\n")
    sys.stderr.flush()


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _silence_stdout() -> None:
    """After the reader of stdout left: no more writes, and no error at exit's flush."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line; returns the exit code (:class:`ExitCode`).

    Every error modelprov raises on purpose is one line on stderr and its class's exit
    code; any other exception is an internal error (exit 70) shown as one line, with the
    traceback only under ``--debug``. Ctrl-C and SIGTERM stop quietly (exit 130; partial
    outputs are removed); a closed stdout (``| head``) ends quietly (exit 141).
    """
    debug = "--debug" in (sys.argv[1:] if argv is None else argv)
    previous = None
    with contextlib.suppress(ValueError):  # not the main thread: leave SIGTERM alone
        previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        return _run(argv)
    except ModelprovError as error:
        if debug:
            traceback.print_exc()
        _say(f"modelprov: error: {_one_line(error)}")
        return error.exit_code
    except KeyboardInterrupt:
        _say("modelprov: interrupted; nothing was left half-written")
        return ExitCode.INTERRUPTED
    except BrokenPipeError:
        _silence_stdout()
        return ExitCode.BROKEN_PIPE
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else ExitCode.BAD_INPUT
    except Exception as error:
        if debug:
            traceback.print_exc()
        _say(
            f"modelprov: internal error: {_one_line(error)} (a bug: rerun with --debug and "
            "report the traceback)"
        )
        return ExitCode.INTERNAL_ERROR
    finally:
        if previous is not None:
            with contextlib.suppress(ValueError):
                signal.signal(signal.SIGTERM, previous)


def _run(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(message)s", force=True
    )
    _progress.QUIET.set(bool(args.quiet))
    if not args.verbose:
        logging.getLogger("torch").setLevel(logging.ERROR)
        for category in (DeprecationWarning, FutureWarning, UserWarning):
            warnings.simplefilter("ignore", category)
    try:
        # A short-lived process: collecting cycles would walk every node. Run as the program
        # (no argv given), the process exits next, so nothing is collected at the end either.
        with gc_paused(freeze_after=argv is None):
            code: int = args.run(args)
    except ImportError as error:
        if isinstance(error, ModelprovError):
            raise
        if getattr(error, "name", "") and str(error.name).startswith("modelprov."):
            raise UsageError(
                f"{args.command} is not available in this installation ({error})"
            ) from error
        raise
    sys.stdout.flush()
    return code


if __name__ == "__main__":
    sys.exit(main())
