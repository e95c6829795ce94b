"""The ``modelprov`` command line: thin over the Python API.

Exit codes: 0 ok, 1 a check failed (``--fail-under``), 2 usage or input error. Reports go
to stdout, errors and progress to stderr; progress spinners only when stderr is a terminal.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import logging
import os
import sys
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from modelprov._gc import gc_paused
from modelprov._io import (
    check_output,
    load_model,
    load_model_proto,
    model_from_proto,
    save_model,
)
from modelprov.errors import ModelprovError

if TYPE_CHECKING:
    import onnx_ir as ir

__all__ = ["build_parser", "main"]

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_USAGE = 2


class UsageError(ModelprovError):
    """A command-line argument is wrong (exit code 2)."""


@contextlib.contextmanager
def _status(message: str) -> Iterator[None]:
    """A spinner on stderr while work runs, only when stderr is a terminal."""
    if not sys.stderr.isatty():
        yield
        return
    from rich.console import Console

    with Console(stderr=True).status(message):
        yield


def _print_json(document: Mapping[str, Any]) -> None:
    print(json.dumps(document, indent=2, ensure_ascii=False))


# --- graph commands -------------------------------------------------------------------------


def _cmd_optimize(args: argparse.Namespace) -> int:
    import onnx_ir as ir

    from modelprov.onnx._optimize import OptimizeProvenancePass

    output = check_output(args.output, [args.model], in_place=args.in_place)
    with _status(f"loading {args.model}"):
        proto = load_model_proto(args.model, load_weights=True)
        model = ir.from_proto(proto)
    optimize_pass = OptimizeProvenancePass(per_pass=bool(args.report or args.json))
    with _status("optimizing"):
        optimize_pass(model)
    with _status(f"writing {output}"):
        save_model(model, output)
    if args.report or args.json:
        from modelprov.audit import optimize_report

        report = optimize_report(ir.from_proto(proto), model, optimize_pass.steps)
        print(report.to_json_text() if args.json else report.to_text())
    return EXIT_OK


def _cmd_recover(args: argparse.Namespace) -> int:
    import onnx_ir as ir

    output = check_output(args.output, [args.original, args.optimized], in_place=args.in_place)
    with _status("loading models"):
        original = load_model_proto(args.original, load_weights=False)
        optimized = load_model_proto(args.optimized, load_weights=False)
    from modelprov.onnx._recover import recover

    with _status("recovering provenance"):
        result = recover(original, optimized)
    with _status(f"writing {output}"):
        if not isinstance(result, ir.Model):
            result = model_from_proto(result, args.optimized)
        save_model(result, output)
    return EXIT_OK


def _rewrite_model(
    args: argparse.Namespace, doing: str, transform: Callable[[ir.Model], ir.Model]
) -> int:
    """Loads MODEL (graph only), transforms it, writes OUTPUT atomically."""
    output = check_output(args.output, [args.model], in_place=args.in_place)
    with _status(f"loading {args.model}"):
        model = load_model(args.model)
    with _status(doing):
        result = transform(model)
    with _status(f"writing {output}"):
        save_model(result, output)
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


def _model_and_inputs(spec: str) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    import torch

    made = _load_factory(spec)()
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
    except (OSError, ValueError) as error:
        raise UsageError(f"{path}: cannot read annotations: {error}") from None
    if not isinstance(document, dict) or not all(isinstance(v, dict) for v in document.values()):
        raise UsageError(
            f"{path}: annotations must be a JSON object {{module_path: {{key: value}}}}"
        )
    return document


def _cmd_export(args: argparse.Namespace) -> int:
    import modelprov

    if args.onnx is None and args.stablehlo is None:
        raise UsageError("give --onnx OUT.onnx, --stablehlo OUT.mlir or both")
    if args.calibrate is not None and args.calibrate < 1:
        raise UsageError(f"--calibrate {args.calibrate}: give a positive number of batches")
    outputs = [path for path in (args.onnx, args.stablehlo) if path is not None]
    for path in outputs:
        check_output(path, [args.annotations] if args.annotations else [])
    annotations: dict[str, dict[str, Any]] = {}
    with _status(f"building {args.factory}"):
        model, example, kwargs = _model_and_inputs(args.factory)
    if args.calibrate:
        with _status(f"calibrating on {args.calibrate} random batches"):
            from modelprov.annotation._random_batches import random_batches

            batches = random_batches(args.calibrate, example, kwargs)
            annotations = modelprov.calibrate(model, batches)
    if args.annotations:
        for path, keys in _read_annotations(args.annotations).items():
            annotations.setdefault(path, {}).update(keys)
    if args.onnx is not None:
        with _status(f"exporting {args.onnx}"):
            modelprov.export(
                model,
                example,
                args.onnx,
                kwargs=kwargs or None,
                annotations=annotations or None,
                optimize=not args.no_optimize,
                verbose=args.verbose,
            )
    if args.stablehlo is not None:
        with _status(f"lowering to StableHLO {args.stablehlo}"):
            program = modelprov.export_stablehlo(
                model, example, kwargs or None, annotations=annotations or None
            )
            program.save(args.stablehlo)
    return EXIT_OK


def _cmd_demo(args: argparse.Namespace) -> int:
    from modelprov._demo import run_demo

    folder = run_demo(sys.stdout, folder=args.output_dir)
    print(f"demo models written to {folder}")
    return EXIT_OK


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

    check_output(args.output, [args.model], in_place=False)
    path = write_report(args.model, args.output, before=args.before)
    print(f"report written to {path}")
    return EXIT_OK


def _cmd_overlay(args: argparse.Namespace) -> int:
    from modelprov.report import write_overlay

    check_output(args.output, [args.model], in_place=False)
    path = write_overlay(args.model, args.output, key=args.key, coverage=args.coverage)
    print(f"Model Explorer node data written to {path}")
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``modelprov`` command."""
    parser = argparse.ArgumentParser(
        prog="modelprov",
        description="Keep every operation's provenance through ONNX export and optimization. "
        "Exit codes: 0 ok, 1 a check failed, 2 usage or input error.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details")
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
        type=int,
        metavar="N",
        help="run N random batches shaped like the example inputs through modelprov.calibrate "
        "and attach the per-module output ranges (custom.min, custom.max)",
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
        type=float,
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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(message)s"
    )
    if not args.verbose:
        logging.getLogger("torch").setLevel(logging.ERROR)
        for category in (DeprecationWarning, FutureWarning, UserWarning):
            warnings.simplefilter("ignore", category)
    try:
        with gc_paused():  # a short-lived process: collecting cycles would walk every node
            code: int = args.run(args)
    except ModelprovError as error:
        print(f"modelprov: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except ImportError as error:
        if getattr(error, "name", "") and str(error.name).startswith("modelprov."):
            print(
                f"modelprov: error: {args.command} is not available in this installation ({error})",
                file=sys.stderr,
            )
            return EXIT_USAGE
        raise
    return code


if __name__ == "__main__":
    sys.exit(main())
