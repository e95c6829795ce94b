"""The ``modelprov`` command line: thin over the Python API.

Exit codes: 0 ok, 1 a check failed (``--fail-under``), 2 usage or input error.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence

from modelprov._io import load_model_proto, save_model
from modelprov.errors import ModelprovError

__all__ = ["main"]

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_USAGE = 2


def _output_path(args: argparse.Namespace) -> str:
    out = os.path.abspath(args.output)
    if (
        os.path.exists(out)
        and any(os.path.exists(i) and os.path.samefile(out, i) for i in args.inputs_for_check)
        and not args.in_place
    ):
        raise ModelprovError(
            f"{args.output}: the output is also an input; pass --in-place to overwrite it"
        )
    return str(args.output)


def _cmd_demo(args: argparse.Namespace) -> int:
    from modelprov._demo import run_demo

    folder = run_demo(sys.stdout, folder=args.output_dir)
    print(f"demo models written to {folder}")
    return EXIT_OK


def _cmd_optimize(args: argparse.Namespace) -> int:
    import onnx_ir as ir

    from modelprov.onnx._optimize import OptimizeProvenancePass

    args.inputs_for_check = [args.model]
    output = _output_path(args)
    model = ir.from_proto(load_model_proto(args.model))
    optimize_pass = OptimizeProvenancePass()
    optimize_pass(model)
    save_model(model, output)
    if args.report:
        for step in optimize_pass.steps:
            print(
                f"{step.name}: nodes {step.nodes_before} -> {step.nodes_after}, "
                f"{step.new_nodes} new, {step.removed_nodes} removed, "
                f"{step.eliminated_nodes} eliminated as dead, "
                f"{len(step.lost_sources)} sources lost"
                + (f": {', '.join(step.lost_sources[:10])}" if step.lost_sources else "")
            )
    return EXIT_OK


def _cmd_diff(args: argparse.Namespace) -> int:
    from modelprov.audit import diff

    before = load_model_proto(args.before, load_weights=False)
    after = load_model_proto(args.after, load_weights=False)
    report = diff(before, after)
    print(json.dumps(report.to_json(), indent=2) if args.json else report.to_text())
    if args.fail_under is not None and report.fx_nodes_dyn.value < args.fail_under:
        print(
            f"FX-node recall (dyn) {report.fx_nodes_dyn.value:.3f} is under {args.fail_under}",
            file=sys.stderr,
        )
        return EXIT_CHECK_FAILED
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``modelprov`` command."""
    parser = argparse.ArgumentParser(
        prog="modelprov",
        description="Keep every operation's provenance through ONNX export and optimization.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = commands.add_parser("demo", help="export bundled examples with and without modelprov")
    demo.add_argument("--output-dir", help="folder for the demo models (default: a temp folder)")
    demo.set_defaults(run=_cmd_demo)

    optimize = commands.add_parser(
        "optimize", help="optimize an ONNX model like torch.onnx does, keeping provenance"
    )
    optimize.add_argument("model", help="input .onnx file")
    optimize.add_argument("-o", "--output", required=True, help="output .onnx file")
    optimize.add_argument("--in-place", action="store_true", help="allow OUTPUT == MODEL")
    optimize.add_argument("--report", action="store_true", help="print what each step did")
    optimize.set_defaults(run=_cmd_optimize)

    diff = commands.add_parser("diff", help="provenance recall of AFTER against BEFORE")
    diff.add_argument("before", help="the model before (e.g. the unoptimized export)")
    diff.add_argument("after", help="the model after")
    diff.add_argument("--json", action="store_true", help="print JSON")
    diff.add_argument(
        "--fail-under",
        type=float,
        metavar="RECALL",
        help="exit 1 when the FX-node recall (dyn) is under RECALL",
    )
    diff.set_defaults(run=_cmd_diff)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(message)s"
    )
    try:
        code: int = args.run(args)
    except ModelprovError as error:
        print(f"modelprov: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    return code


if __name__ == "__main__":
    sys.exit(main())
