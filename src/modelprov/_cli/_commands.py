"""The ``modelprov`` subcommands: their handlers and the table declaring them.

``COMMANDS`` lists every subcommand as data (``_cli_spec.Command``: name, help, handler,
arguments); the flags of the pass-backed commands (optimize, recover, functionize, inline)
are derived from the fields of their passes' options (``OptimizeProvenancePass``,
``RecoverOptions``, ``FunctionizePass``, ``InlineProvenancePass``), so a new pass option is a
new flag.
Handlers return an exit code; errors are raised (``cli.main`` prints them).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import math
import os
import sys
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from modelprov._base._input_files import open_regular, read_regular
from modelprov._cli import _progress
from modelprov._cli._quiet_libraries import libraries_quieted
from modelprov._cli._spec import (
    Command,
    Exclusive,
    OptionsOf,
    argument,
    option_values,
    whole_number_at_least_one,
)
from modelprov._cli._torch_onnx import (
    ONNX_ONLY,
    TORCH_ONNX_OPTIONS,
    batch_dynamic_shapes,
    export_reports,
    names_a_factory,
    read_dynamic_shapes,
    torch_onnx_keywords,
)
from modelprov.core._printable import printable, printable_json, printable_json_text
from modelprov.errors import ExitCode, ModelprovError, UsageError
from modelprov.keys import CONFIDENCE_KEY

if TYPE_CHECKING:
    import onnx_ir as ir

    from modelprov.core._policy import Policies

__all__ = ["COMMANDS", "one_line"]

EXIT_OK = ExitCode.OK
EXIT_CHECK_FAILED = ExitCode.CHECK_FAILED


@contextlib.contextmanager
def _status(message: str) -> Iterator[None]:
    """Progress on stderr while a step runs: a spinner on a terminal, else rate-limited lines."""
    with _progress.status(message):
        yield


def _wrote(path: str, what: str) -> None:
    """The summary line of one written file."""
    _progress.summary(f"wrote {path}: {what}")


def _wrote_model(written: Sequence[str], what: str) -> None:
    """The summary lines of a written model: the model, then its external data file."""
    model, *data_files = written
    _wrote(model, what)
    for path in data_files:
        _wrote(path, f"external data of {os.path.basename(model)}, {_size(path)}")


def _size(path: str) -> str:
    size = os.path.getsize(path)
    return f"{size / 1e6:.1f} MB" if size >= 100_000 else f"{size} bytes"


def _model_summary(model: ir.Model) -> str:
    """``N nodes, P% with sources`` for a summary line."""
    from modelprov.onnx.export._export_report import provenance_counts

    counts = provenance_counts(model)
    share = counts.nodes_with_sources / counts.nodes if counts.nodes else 1.0
    return f"{counts.nodes} nodes, {share:.0%} with sources"


def _fx_recall(before: ir.Model, after: ir.Model) -> str:
    """``FX-node recall R (k/n)`` of ``after`` against ``before``, for a summary line."""
    from modelprov.onnx.export._export_report import provenance_counts

    old, new = provenance_counts(before).fx_nodes, provenance_counts(after).fx_nodes
    kept = len(old & new)
    return f"FX-node recall {kept / len(old) if old else 1.0:.3f} ({kept}/{len(old)})"


def _check_output(args: argparse.Namespace, output: str, inputs: Sequence[str]) -> str:
    """:func:`check_output` for a command: overwriting an input is allowed, and advised in
    the error, only when the command has the ``--in-place`` flag (and it was given)."""
    from modelprov._model_io._files import check_output

    has_flag = hasattr(args, _IN_PLACE_DEST)
    return check_output(
        output,
        inputs,
        in_place=bool(getattr(args, _IN_PLACE_DEST, False)),
        allow_with=_IN_PLACE.flags[0] if has_flag else None,
    )


# --- graph commands -------------------------------------------------------------------------


def _cmd_optimize(args: argparse.Namespace) -> int:
    import onnx_ir as ir

    from modelprov._model_io._files import load_model_proto, model_from_proto, save_model
    from modelprov.onnx.optimize._optimize import OptimizeProvenancePass

    output = _check_output(args, args.output, [args.model])
    with _status(f"loading {args.model}"):
        proto = load_model_proto(args.model, load_weights=True)
        model = model_from_proto(proto, args.model)
    optimize_pass = OptimizeProvenancePass(
        per_pass=bool(args.report or args.json),
        policies=args.policies,
        **option_values(args, _optimize_pass(), _OPTIMIZE_SET_BY_COMMAND),
    )
    with _status("optimizing"):
        result = optimize_pass(model)
    with _status(f"writing {output}"):
        written = save_model(model, output)
    before = ir.from_proto(proto)
    if args.report or args.json:
        from modelprov.audit import optimize_report

        report = optimize_report(before, model, result.steps)
        print(report.to_json() if args.json else report.to_text())
    _wrote_model(
        written,
        f"{len(list(before.graph))} -> {_model_summary(model)}, {_fx_recall(before, model)}",
    )
    return EXIT_OK


def _cmd_recover(args: argparse.Namespace) -> int:

    from modelprov._model_io._files import load_model_proto, save_model, set_base_dir

    output = _check_output(args, args.output, [args.original, args.optimized])
    with _status("loading models"):
        original = load_model_proto(args.original, load_weights=False)
        optimized = load_model_proto(args.optimized, load_weights=False)
    from modelprov.onnx.recover._recover import recover_model

    with _status("recovering provenance"):
        recovered = recover_model(
            original,
            optimized,
            policies=args.policies,
            paths=(args.original, args.optimized),
            **option_values(args, _recover_options()),
        )
    result, recovery = recovered.model, recovered.report
    with _status(f"writing {output}"):
        set_base_dir(result, os.path.dirname(os.path.abspath(args.optimized)))
        written = save_model(result, output)
    levels: dict[str, int] = {}
    for node in result.graph.all_nodes():
        level = node.metadata_props.get(CONFIDENCE_KEY)
        if level:
            levels[level] = levels.get(level, 0) + 1
    how_sure = ", ".join(f"{count} {level}" for level, count in sorted(levels.items()))
    if args.report or args.json:
        print(recovery.to_json() if args.json else recovery.to_text())
    _wrote_model(written, _model_summary(result) + (f" ({how_sure})" if how_sure else ""))
    return EXIT_OK


def _rewrite_model(
    args: argparse.Namespace, doing: str, transform: Callable[[ir.Model], ir.Model]
) -> int:
    """Loads MODEL (graph only), transforms it, writes OUTPUT atomically."""
    from modelprov._model_io._files import load_model, save_model

    output = _check_output(args, args.output, [args.model])
    with _status(f"loading {args.model}"):
        model = load_model(args.model)
    before = (len(list(model.graph)), len(model.functions))
    with _status(doing):
        result = transform(model)
    with _status(f"writing {output}"):
        written = save_model(result, output)
    after = (len(list(result.graph)), len(result.functions))
    _wrote_model(written, f"{before[0]} -> {after[0]} nodes, {before[1]} -> {after[1]} functions")
    return EXIT_OK


def _cmd_functionize(args: argparse.Namespace) -> int:
    from modelprov.onnx.functions._functionize import FunctionizePass

    functionize_pass = FunctionizePass(
        policies=args.policies, **option_values(args, _functionize_pass())
    )
    # The loaded model is ours: the pass changes it in place (no copy).
    return _rewrite_model(
        args, "wrapping ops into functions", lambda model: functionize_pass(model).model
    )


def _cmd_inline(args: argparse.Namespace) -> int:
    from modelprov.onnx.functions._inline import InlineProvenancePass

    return _rewrite_model(
        args,
        "inlining functions",
        lambda model: InlineProvenancePass(**option_values(args, _inline_pass()))(model).model,
    )


# --- reports --------------------------------------------------------------------------------


def _cmd_audit(args: argparse.Namespace) -> int:
    from modelprov._model_io._files import load_model_proto
    from modelprov.audit import audit

    with _status(f"auditing {args.model}"):
        report = audit(load_model_proto(args.model, load_weights=False))
    print(report.to_json() if args.json else report.to_text())
    return EXIT_OK


def _cmd_diff(args: argparse.Namespace) -> int:
    from modelprov.audit import diff

    with _status("comparing"):
        report = diff(args.before, args.after)  # paths: errors name the file
    print(report.to_json() if args.json else report.to_text())
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
        raise UsageError(f"{spec}: the factory raised {one_line(error)}") from error


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


_MAX_JSON_INPUT_BYTES = 1 << 30
"""Largest annotations or ranges file read (1 GiB): per-module numbers, never weights."""


def _read_json(path: str, what: str) -> Any:
    """The JSON document of the regular file ``path`` (UsageError naming it otherwise)."""
    try:
        data = read_regular(path, _MAX_JSON_INPUT_BYTES)
        if len(data) > _MAX_JSON_INPUT_BYTES:
            raise UsageError(
                f"{path}: cannot read {what}: over {_MAX_JSON_INPUT_BYTES} bytes; it should "
                "hold per-module numbers only"
            )
        return json.loads(data.decode("utf-8-sig"))
    except (OSError, ValueError, RecursionError) as error:
        if isinstance(error, UsageError):
            raise
        reason = (
            "nested too deeply"
            if isinstance(error, RecursionError)
            else error.strerror or error
            if isinstance(error, OSError)
            else error
        )
        raise UsageError(f"{path}: cannot read {what}: {reason}") from None


def _read_annotations(path: str) -> dict[str, dict[str, Any]]:
    document = _read_json(path, "annotations")
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
    onnx_only = [flag for flag, dest in ONNX_ONLY if getattr(args, dest) not in (None, False)]
    if args.onnx is None and onnx_only:
        raise UsageError(f"{', '.join(onnx_only)}: give --onnx OUT.onnx (they shape the ONNX)")
    outputs = [path for path in (args.onnx, args.stablehlo) if path is not None]
    for path in outputs:
        _check_output(args, path, [args.annotations] if args.annotations else [])
    if args.compare and args.onnx is None:
        raise UsageError("--compare needs --onnx OUT.onnx (the model it compares with torch)")
    if args.quantize is not None:
        args.quantize = args.quantize or _quantized_name(args.onnx)
        _check_output(args, args.quantize, [args.onnx])
    shapes_factory = bool(args.dynamic_shapes) and names_a_factory(args.dynamic_shapes)
    dynamic_shapes = (
        read_dynamic_shapes(args.dynamic_shapes)
        if args.dynamic_shapes and not shapes_factory
        else None
    )
    annotations: dict[str, dict[str, Any]] = {}
    batches: list[Any] = []
    with _status(f"building {args.factory}"):
        model, example, kwargs = _model_and_inputs(args.factory)
    if args.dynamic_batch:
        dynamic_shapes = batch_dynamic_shapes(model, example, kwargs)
    elif shapes_factory:
        dynamic_shapes = _call_factory(args.dynamic_shapes)
    # torch set its loggers' levels when the factory imported it: quiet them again.
    with libraries_quieted(enabled=not args.verbose):
        if args.calibrate or args.batches:
            batches = _calibration_batches(args, example, kwargs)
            with _status(f"calibrating on {len(batches)} batches"):
                annotations = modelprov.calibrate(model, batches)
        if args.annotations:
            for path, keys in _read_annotations(args.annotations).items():
                annotations.setdefault(path, {}).update(keys)
        if args.onnx is not None:
            _export_onnx(args, model, example, kwargs, annotations, dynamic_shapes)
        if args.quantize is not None:
            _export_quantized(args, batches or None)
        if args.stablehlo is not None:
            _export_stablehlo(args, model, example, kwargs, annotations)
        if args.compare:
            return _export_compare(args, model, example, kwargs)
    return EXIT_OK


def _export_onnx(
    args: argparse.Namespace,
    model: Any,
    example: tuple[Any, ...],
    kwargs: dict[str, Any],
    annotations: dict[str, dict[str, Any]],
    dynamic_shapes: Any,
) -> None:
    """modelprov.export into --onnx, torch.onnx.export's keywords from the flags."""
    import modelprov

    reports_before = export_reports(args.artifacts_dir) if args.report else set()
    with (
        _status(f"exporting {args.onnx}"),
        _user_model_errors(args.factory, "export"),
        contextlib.redirect_stdout(sys.stderr),  # torch.onnx prints its steps (-v)
    ):
        program = modelprov.export(
            model,
            example,
            args.onnx,
            kwargs=kwargs or None,
            annotations=annotations or None,
            policies=args.policies,
            optimize=not args.no_optimize,
            verbose=args.verbose,
            verify=args.verify,
            report=args.report,
            external_data=args.external_data,
            **torch_onnx_keywords(args, dynamic_shapes),
        )
    ranges = f", ranges of {len(annotations)} modules" if annotations else ""
    verified = ", verified against torch" if args.verify else ""
    _wrote_model(_model_files(args.onnx), f"{_model_summary(program.model)}{ranges}{verified}")
    for path in sorted(export_reports(args.artifacts_dir) - reports_before):
        _wrote(path, "the export report (markdown)")


def _model_files(path: str) -> list[str]:
    """A written model and the external data files it names."""
    from modelprov._model_io._files import external_data_of, load_model_proto

    proto = load_model_proto(path, load_weights=False)
    locations = sorted({entry.location for entry in external_data_of(proto, path)})
    return [path, *(os.path.join(os.path.dirname(path), location) for location in locations)]


def _export_stablehlo(
    args: argparse.Namespace,
    model: Any,
    example: tuple[Any, ...],
    kwargs: dict[str, Any],
    annotations: dict[str, dict[str, Any]],
) -> None:
    import modelprov

    with _status(f"lowering to StableHLO {args.stablehlo}"):
        program = modelprov.export_stablehlo(
            model,
            example,
            kwargs or None,
            annotations=annotations or None,
            policies=args.policies,
            number_attributes=args.stablehlo_numbers,
            composites=args.stablehlo_composites,
        )
        text_path, export_path, weights_path = program.save(args.stablehlo)
    _wrote(text_path, f"{len(program.ops)} ops, {program.coverage:.0%} name their FX node")
    _wrote(export_path, "the serialized jax.export artifact")
    _wrote(weights_path, f"{len(program.weights)} weights, {_size(weights_path)}")


def _export_compare(
    args: argparse.Namespace, model: Any, example: tuple[Any, ...], kwargs: dict[str, Any]
) -> int:
    """``export --compare``: torch against the ONNX model written (and the quantized one,
    each layer's own error shown); exit 1 when the float model diverges."""
    from modelprov._model_io._files import load_model
    from modelprov.numerics import compare

    with _status(f"comparing {args.onnx} with torch"):
        written = load_model(args.onnx, load_weights=True)
        report = compare(model, written, example, kwargs=kwargs or None)
    print(report.to_text())
    if args.quantize is not None:
        with _status(f"comparing {args.quantize} with torch"):
            quantized = load_model(args.quantize, load_weights=True)
            print()
            print(compare(model, quantized, example, kwargs=kwargs or None, isolate=True).to_text())
    first = report.first_divergence
    if first is None:
        return EXIT_OK
    print(
        f"modelprov: check failed: {args.onnx} differs from torch from {first.source.fx_node} "
        f"in {first.module_path or '<root>'} on (node {first.node})",
        file=sys.stderr,
    )
    return EXIT_CHECK_FAILED


@contextlib.contextmanager
def _user_model_errors(spec: str, doing: str) -> Iterator[None]:
    """Failures of torch on the user's model become one-line usage errors naming it."""
    try:
        yield
    except (ModelprovError, KeyboardInterrupt):
        raise
    except Exception as error:
        raise UsageError(f"{spec}: {doing} failed: {one_line(error)}") from error


def _quantized_name(path: str) -> str:
    stem, extension = os.path.splitext(path)
    return f"{stem}.quant{extension or '.onnx'}"


def _export_quantized(args: argparse.Namespace, batches: list[Any] | None) -> None:
    """Quantizes the exported --onnx model into --quantize (ranges from --calibrate)."""
    from modelprov._model_io._files import load_model, save_model
    from modelprov.onnx.quantize._quantize import quantize

    with _status(f"quantizing {args.onnx} into {args.quantize}"):
        float_model = load_model(args.onnx, load_weights=True)
        result = quantize(
            float_model,
            calibration_batches=batches,
            policies=args.policies,
            **_quantize_options(args),
        )
        written = save_model(result, args.quantize)
    _wrote_model(written, f"quantized from {args.onnx}: {_quantized_summary(result, args)}")


def _cmd_demo(args: argparse.Namespace) -> int:
    from modelprov._cli._demo import run_demo

    folder = run_demo(sys.stdout, folder=args.output_dir, wrote=_wrote)
    print(f"demo models written to {folder}")
    return EXIT_OK


# --- quantize -------------------------------------------------------------------------------


def _read_ranges(path: str) -> dict[str, Any]:
    document = _read_json(path, "ranges")
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
        advice = (
            "give .npz files with one array per graph input, named like the input (numpy.savez)"
        )
        try:
            with open_regular(path) as stream:
                loaded = np.load(stream, allow_pickle=False)
                if not isinstance(loaded, np.lib.npyio.NpzFile):
                    raise UsageError(f"{path}: holds one array (.npy), not a batch; {advice}")
                with loaded as arrays:
                    batches.append({name: arrays[name] for name in arrays.files})
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as error:
            if isinstance(error, UsageError):
                raise
            reason = error.strerror if isinstance(error, OSError) and error.strerror else error
            shown = " ".join(str(reason).split())
            raise UsageError(
                f"{path}: cannot read a calibration batch ({shown}); {advice}"
            ) from None
    return batches


def _quantize_options(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "format": args.format,
        "activation_type": args.activation_type,
        "weight_type": args.weight_type,
        "per_channel": args.per_channel,
        "reduce_range": args.reduce_range,
    }


def _quantized_summary(model: ir.Model, args: argparse.Namespace) -> str:
    """``N nodes, P% with sources, K quantized tensors; qdq, int8 activations, ...`` and the
    reduce-range choice, for a summary line."""
    from modelprov.onnx.quantize._quant_params import quantized_tensors
    from modelprov.onnx.quantize._quantize import choose_reduce_range

    reduced = choose_reduce_range(args.activation_type, args.weight_type, args.reduce_range)
    return (
        f"{_model_summary(model)}, {len(quantized_tensors(model))} quantized tensors; "
        f"{args.format}, {args.activation_type} activations, {args.weight_type} weights, "
        f"{reduced.text(cli=True)}"
    )


def _report_quantized(model: ir.Model, as_json: bool) -> None:
    from modelprov.onnx.quantize._quant_params import quantized_tensors, table_json, table_text

    tensors = quantized_tensors(model)
    print(table_json(tensors) if as_json else table_text(tensors))


def _cmd_quantize(args: argparse.Namespace) -> int:
    from modelprov._model_io._files import load_model_proto, model_from_proto, save_model
    from modelprov.onnx.quantize._quantize import quantize

    output = _check_output(args, args.output, [args.model])
    ranges = _read_ranges(args.ranges) if args.ranges else None
    batches = _read_batches(args.calibrate_from) if args.calibrate_from else None
    with _status(f"loading {args.model}"):
        model = model_from_proto(load_model_proto(args.model, load_weights=True), args.model)
    with _status("quantizing with onnxruntime"):
        result = quantize(
            model,
            ranges=ranges,
            calibration_batches=batches,
            policies=args.policies,
            **_quantize_options(args),
        )
    with _status(f"writing {output}"):
        written = save_model(result, output)
    _report_quantized(result, args.json)
    _wrote_model(written, _quantized_summary(result, args))
    return EXIT_OK


def _cmd_policies(args: argparse.Namespace) -> int:
    from modelprov.core._policy import DEFAULT_POLICIES
    from modelprov.core._policy_file import dump_policies, policy_json

    policies = args.file if args.file is not None else DEFAULT_POLICIES
    if not args.key:
        sys.stdout.write(printable_json_text(dump_policies(policies, full=args.full)))
        return EXIT_OK
    decided: dict[str, dict[str, Any]] = {}
    for key in args.key:
        entry = policies.deciding_entry(key)
        chosen = policies.resolve(key)
        decided[key] = {
            "policy": policy_json(chosen, f"key {key!r}"),
            "entry": entry,
            "value_scoped": policies.is_value_scoped(key),
        }
    if args.json:
        print(printable_json(decided, indent=2))
        return EXIT_OK
    for key, found in decided.items():
        policy = found["policy"]
        shown = policy if isinstance(policy, str) else json.dumps(policy, ensure_ascii=False)
        scope = "value-scoped" if found["value_scoped"] else "module-scoped"
        origin = f"entry {found['entry']!r}" if found["entry"] is not None else "the default"
        print(printable(f"{key}: {shown} ({scope}; from {origin})"))
    return EXIT_OK


def _cmd_report(args: argparse.Namespace) -> int:
    from modelprov.report import write_report

    _check_output(args, args.output, [args.model, *([args.before] if args.before else [])])
    numerics = None
    if args.numerics:
        from modelprov._base._input_files import read_regular
        from modelprov.numerics import NumericsReport

        try:
            text = read_regular(args.numerics, 64 << 20)
        except OSError as error:
            raise UsageError(f"--numerics {args.numerics}: cannot read it: {error}") from None
        numerics = NumericsReport.from_json(text, where=f"--numerics {args.numerics}")
    with _status(f"writing the report {args.output}"):
        path = write_report(
            args.model,
            args.output,
            before=args.before,
            numerics=numerics,
            source_roots=args.source_root or (),
        )
    _progress.summary(f"wrote {path}: open it in a browser (it loads nothing)")
    return EXIT_OK


def _cmd_overlay(args: argparse.Namespace) -> int:
    from modelprov.report import write_overlay

    _check_output(args, args.output, [args.model])
    with _status(f"writing node data {args.output}"):
        path = write_overlay(args.model, args.output, key=args.key, coverage=args.coverage)
    _progress.summary(f"wrote {path}: Model Explorer node data")
    return EXIT_OK


def _compare_inputs(args: argparse.Namespace, names: Sequence[str]) -> list[tuple[Any, ...]]:
    """The input batches of ``compare``: ``--inputs`` files (arrays by graph input name),
    else ``--random N`` batches of the candidate's graph input types."""
    import numpy as np

    if args.inputs:
        batches = []
        for batch in _read_batches(args.inputs):
            missing = [name for name in names if name not in batch]
            if missing:
                raise UsageError(
                    f"--inputs: a batch lacks {', '.join(missing)}; give one array per graph "
                    f"input of the candidate ({', '.join(names)}), named like the input"
                )
            batches.append(tuple(batch[name] for name in names))
        return batches
    from modelprov.numerics._random_inputs import random_inputs

    generator = np.random.default_rng(args.seed)
    return [random_inputs(args.candidate_model, generator) for _ in range(args.random or 1)]


def _cmd_compare(args: argparse.Namespace) -> int:
    from modelprov._model_io._files import check_output, load_model_proto, model_from_proto
    from modelprov.numerics import compare
    from modelprov.numerics._report import worst_of
    from modelprov.report import numerics_overlay

    if args.overlay:
        check_output(args.overlay, [args.reference, args.candidate], in_place=False)
    if ":" in args.reference and not os.path.exists(args.reference):
        with _user_model_errors(args.reference, "building the reference"):
            reference, example, kwargs = _model_and_inputs(args.reference)
    else:
        reference = model_from_proto(
            load_model_proto(args.reference, load_weights=True), args.reference
        )
        example, kwargs = (), {}
    with _status(f"loading {args.candidate}"):
        candidate = model_from_proto(
            load_model_proto(args.candidate, load_weights=True), args.candidate
        )
    args.candidate_model = candidate
    from modelprov.numerics._onnx_values import graph_input_names

    batches = (
        [example]
        if example and not args.inputs and args.random is None
        else _compare_inputs(args, graph_input_names(candidate))
    )
    reports = []
    for number, batch in enumerate(batches, 1):
        with _status(f"comparing batch {number} of {len(batches)}"):
            reports.append(
                compare(
                    reference,
                    candidate,
                    batch,
                    kwargs=kwargs if batch is example else None,
                    rtol=args.rtol,
                    atol=args.atol,
                    isolate=args.isolate,
                )
            )
    report = worst_of(reports)
    print(report.to_json() if args.json else report.to_text())
    if args.overlay:
        text = json.dumps(numerics_overlay(candidate, report), indent=1)
        from modelprov._model_io._files import atomic_write_bytes

        atomic_write_bytes(args.overlay, text.encode("utf-8"))
        _progress.summary(f"wrote {args.overlay}: Model Explorer node data (log10 max rel error)")
    first = report.first_divergence
    if first is not None:
        print(
            f"modelprov: check failed: {sum(r.diverges for r in report.rows)} values diverge; "
            f"the first is {first.source.fx_node} in {first.module_path or '<root>'} "
            f"(node {first.node})",
            file=sys.stderr,
        )
        return EXIT_CHECK_FAILED
    return EXIT_OK


def _policies_file(path: str) -> Policies:
    """``--policies FILE``: the file's policies (a bad file is a PolicyError naming it)."""
    from modelprov.core._policy import load_policies

    return load_policies(path)


def _positive_int(text: str) -> int:
    return whole_number_at_least_one(text)


def _recall(text: str) -> float:
    """A recall threshold: a number in [0, 1] (nan and out-of-range values refused)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if math.isnan(value) or not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{value} is not a recall; give a number in 0..1")
    return value


def one_line(error: BaseException, flags: Mapping[str, str] | None = None) -> str:
    """The error as one line; with ``flags`` (keyword -> flag, ``command_line_keywords``)
    the API keywords it names are spelled as the command line's flags."""
    said = error.said_with(flags) if flags and isinstance(error, ModelprovError) else str(error)
    text = " ".join(said.split()) or type(error).__name__
    if not isinstance(error, ModelprovError):
        text = f"{type(error).__name__}: {text}"
    return text if len(text) <= 2000 else text[:1997] + "..."


# --- the options the pass-backed commands derive their flags from ----------------------------


# Light classes (no onnx): `modelprov optimize --help` loads none of the passes.


def _optimize_pass() -> type:
    from modelprov.onnx._pass_options import OptimizeOptions

    return OptimizeOptions


def _recover_options() -> type:
    from modelprov.onnx._pass_options import RecoverOptions

    return RecoverOptions


def _functionize_pass() -> type:
    from modelprov.onnx._pass_options import FunctionizeOptions

    return FunctionizeOptions


def _inline_pass() -> type:
    from modelprov.onnx._pass_options import InlineOptions

    return InlineOptions


# per_pass is what --report and --json choose: the per-step report needs it.
_OPTIMIZE_SET_BY_COMMAND = ("per_pass",)


# --- the table ------------------------------------------------------------------------------

_IN_PLACE = argument(
    "--in-place",
    action="store_true",
    help="allow OUT.onnx to be an input (it is replaced atomically)",
)
_IN_PLACE_DEST = _IN_PLACE.flags[0].lstrip("-").replace("-", "_")
"""The attribute argparse stores ``--in-place`` under: present only on commands with it."""

_OUTPUT = (
    argument(
        "-o",
        "--output",
        required=True,
        metavar="OUT.onnx",
        help="output .onnx file, written atomically (weights over 2 GB or kept on disk go "
        "to OUT.onnx.data)",
    ),
    _IN_PLACE,
)

_POLICIES = argument(
    "--policies",
    type=_policies_file,
    metavar="FILE.json",
    help="how metadata keys merge: a JSON policies file (format modelprov.policies, "
    "docs/metadata-format.md) naming built-in policies per key or glob, layered over "
    "DEFAULT_POLICIES",
)
"""The one ``--policies`` flag of every command that merges metadata by policies."""

_QUANTIZE_OPTIONS = (
    argument(
        "--format",
        choices=("qdq", "qoperator"),
        default="qdq",
        help="QuantizeLinear/DequantizeLinear pairs (qdq, the default) or QLinear ops",
    ),
    *(
        argument(
            f"--{role}-type",
            choices=("int8", "uint8", "int16", "uint16"),
            default="int8",
            help=f"integer type of the {role}s (default int8, as onnxruntime)",
        )
        for role in ("activation", "weight")
    ),
    argument("--per-channel", action="store_true", help="one weight scale per output channel"),
    argument(
        "--reduce-range",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="7-bit weights (default: chosen for this CPU, on for int8 weights on x86 "
        "without VNNI, where onnxruntime's 8-bit kernels saturate full 8-bit weights); the "
        "choice is printed",
    ),
)

COMMANDS: tuple[Command, ...] = (
    Command(
        "export",
        "export a PyTorch model to ONNX (and StableHLO) with provenance",
        _cmd_export,
        (
            argument("factory", metavar="MODULE:FACTORY", help="importable model factory"),
            argument("--onnx", metavar="OUT.onnx", help="write the ONNX model here"),
            argument(
                "--stablehlo",
                metavar="OUT.mlir",
                help="write StableHLO text here (plus OUT.mlir.jaxexport and "
                "OUT.mlir.weights.npz); needs the stablehlo extra",
            ),
            argument(
                "--stablehlo-numbers",
                choices=("typed", "string"),
                default="typed",
                help="numeric user keys (custom.min...) as f64/i64 attributes (typed, the "
                'default) or as strings (custom.min = "0.0")',
            ),
            argument(
                "--stablehlo-composites",
                action="store_true",
                help="each ATen call as a stablehlo.composite named by its ATen name "
                "(aten.linear.default), its decomposition the ops it lowers to",
            ),
            argument(
                "--calibrate",
                type=_positive_int,
                metavar="N",
                help="run N random batches shaped like the example inputs through "
                "modelprov.calibrate and attach the per-module output ranges (custom.min, "
                "custom.max); tensors get random values of their shape and dtype, other "
                "arguments (use_cache=False) stay as given",
            ),
            argument(
                "--batches",
                metavar="MODULE:FACTORY",
                keywords=("calibration_batches", "batches"),
                help="calibrate on the batches this callable returns (an iterable of tensors, "
                "tuples or dicts) instead of random ones; --calibrate N then caps their number",
            ),
            argument(
                "--annotations",
                metavar="FILE.json",
                help="per-module metadata, JSON {module_path: {key: value}}; overrides "
                "--calibrate per key",
            ),
            _POLICIES,
            argument(
                "--no-optimize",
                action="store_true",
                keywords=("optimize",),
                help="skip optimization (torch.onnx.export(optimize=False) plus annotations)",
            ),
            argument(
                "--quantize",
                nargs="?",
                const="",
                metavar="QUANT.onnx",
                help="also quantize the ONNX model with modelprov.quantize (ranges from "
                "--calibrate; its batches calibrate the graph inputs) into QUANT.onnx "
                "(default OUT.quant.onnx)",
            ),
            *_QUANTIZE_OPTIONS,
            *TORCH_ONNX_OPTIONS,
            argument(
                "--compare",
                action="store_true",
                help="run torch and the written model on the example inputs and compare every "
                "value by provenance (modelprov.compare; with --quantize, the quantized model "
                "too, each layer's own error shown); exit 1 when the ONNX model diverges",
            ),
        ),
        keywords={"ranges": "--annotations FILE.json"},
        description="Export MODULE:FACTORY, a callable returning (model, args) or "
        "(model, args, kwargs), with modelprov.export / modelprov.export_stablehlo. The "
        "torch.onnx flags (--opset ... --report) are torch.onnx.export's keywords and apply "
        "to the ONNX model.",
    ),
    Command(
        "optimize",
        "optimize an ONNX model like torch.onnx does, keeping provenance",
        _cmd_optimize,
        (
            argument("model", metavar="MODEL.onnx", help="input .onnx file (not modified)"),
            *_OUTPUT,
            OptionsOf(_optimize_pass, skip=_OPTIMIZE_SET_BY_COMMAND),
            _POLICIES,
            argument(
                "--report",
                action="store_true",
                help="print what each step merged and lost, then the overall diff",
            ),
            argument("--json", action="store_true", help="print the report as JSON"),
        ),
        description="modelprov.optimize on a file (loads the weights: constant folding needs "
        "them).",
    ),
    Command(
        "recover",
        "give a model optimized by another tool the provenance of its original",
        _cmd_recover,
        (
            argument("original", metavar="ORIGINAL.onnx", help="the model before the tool"),
            argument("optimized", metavar="OPTIMIZED.onnx", help="the tool's output"),
            *_OUTPUT,
            OptionsOf(_recover_options),
            _POLICIES,
            argument(
                "--report",
                action="store_true",
                help="print how sure each attribution is, unattributed nodes and lost sources",
            ),
            argument(
                "--json", action="store_true", help="print that report as JSON (implies --report)"
            ),
        ),
        description="modelprov.recover(ORIGINAL, OPTIMIZED): works on the graphs; weights "
        "are read only by onnxruntime, to run both models once on random inputs (models up "
        "to 256 MiB) and refuse OPTIMIZED when its outputs differ.",
    ),
    Command(
        "functionize",
        "wrap ops into model-local functions named after their ATen ops",
        _cmd_functionize,
        (
            argument("model", metavar="MODEL.onnx", help="input .onnx file"),
            *_OUTPUT,
            OptionsOf(_functionize_pass),
            _POLICIES,
        ),
        description="modelprov.functionize on a file: works on the graph alone.",
    ),
    Command(
        "inline",
        "inline model-local functions, keeping provenance",
        _cmd_inline,
        (
            argument("model", metavar="MODEL.onnx", help="input .onnx file"),
            *_OUTPUT,
            OptionsOf(_inline_pass),
        ),
        description="modelprov.inline on a file: works on the graph alone.",
    ),
    Command(
        "audit",
        "report the provenance a model carries",
        _cmd_audit,
        (
            argument("model", metavar="MODEL.onnx", help="the model to audit"),
            argument("--json", action="store_true", help="print JSON (modelprov.audit v1)"),
        ),
        description="Nodes, nodes without sources, per-key coverage, FX nodes, source lines, "
        "module paths, metadata bytes and the largest values, invalid metadata, functions "
        "and overloads. Weights are never loaded.",
    ),
    Command(
        "diff",
        "provenance recall of AFTER against BEFORE",
        _cmd_diff,
        (
            argument("before", metavar="BEFORE.onnx", help="the model before (e.g. the export)"),
            argument("after", metavar="AFTER.onnx", help="the model after (e.g. optimized)"),
            argument("--json", action="store_true", help="print JSON (modelprov.diff v1)"),
            argument(
                "--fail-under",
                type=_recall,
                metavar="RECALL",
                help="exit 1 when the FX-node recall (dyn) is under RECALL (0..1), for CI",
            ),
        ),
        description="Recall of FX nodes, source lines and module paths (overall and for nodes "
        "computing on graph inputs, 'dyn'), the lost FX nodes with their source lines, and "
        "nodes without sources. Weights are never loaded.",
    ),
    Command(
        "demo",
        "export bundled examples with and without modelprov, compare",
        _cmd_demo,
        (
            argument(
                "--output-dir",
                metavar="DIR",
                help="folder for the demo models (default: a temp folder)",
            ),
        ),
    ),
    Command(
        "policies",
        "show merge policies: the defaults or a policies file, or which policy a key gets",
        _cmd_policies,
        (
            argument(
                "file",
                nargs="?",
                type=_policies_file,
                metavar="FILE.json",
                help="a policies file to check and show (default: DEFAULT_POLICIES)",
            ),
            argument(
                "--key",
                action="append",
                metavar="KEY",
                help="print the policy KEY gets and the entry that decides it (repeatable)",
            ),
            argument(
                "--full",
                action="store_true",
                help="write every entry, defaults included (a file to start from)",
            ),
            argument("--json", action="store_true", help="with --key: print JSON"),
        ),
        description="Without --key, prints the policies as a policies file (JSON, format "
        "modelprov.policies, docs/metadata-format.md) that --policies reads back: the keys a "
        "file changes over DEFAULT_POLICIES, or every entry with --full. With --key, prints "
        "for each key its policy, whether it follows tensors (value-scoped) or operations, "
        "and the exact key or glob that decides it.",
    ),
    Command(
        "report",
        "write a self-contained HTML provenance report",
        _cmd_report,
        (
            argument("model", help="the .onnx model to show"),
            argument(
                "--before",
                metavar="ORIGINAL",
                help="the model before the change: recall, lost sources",
            ),
            argument("-o", "--output", required=True, help="output .html file"),
            argument(
                "--numerics",
                metavar="NUMERICS.json",
                help="colour nodes by their error against a reference: the JSON of "
                "`modelprov compare REF MODEL --json` (format modelprov.numerics-report)",
            ),
            argument(
                "--source-root",
                action="append",
                metavar="FOLDER",
                help="a folder the model's source files may be read from, besides the working "
                "folder and the installed packages' (repeatable)",
            ),
        ),
    ),
    Command(
        "overlay",
        "Model Explorer node data: provenance coverage or a numeric key",
        _cmd_overlay,
        (
            argument("model", help="the .onnx model"),
            argument("-o", "--output", required=True, help="output .json file"),
            Exclusive(
                (
                    argument("--key", help="a numeric metadata key to colour by, e.g. custom.max"),
                    argument(
                        "--coverage",
                        action="store_true",
                        help="sources per node, coloured by state (default)",
                    ),
                )
            ),
        ),
    ),
    Command(
        "compare",
        "where a model's values part from its reference's, joined by provenance",
        _cmd_compare,
        (
            argument(
                "reference",
                metavar="REF",
                help="the reference: an .onnx model, or MODULE:FACTORY (a torch model run "
                "eagerly, its example inputs used unless --inputs/--random)",
            ),
            argument(
                "candidate", metavar="CAND.onnx", help="the model to check (carries provenance)"
            ),
            Exclusive(
                (
                    argument(
                        "--inputs",
                        nargs="+",
                        metavar="FILE.npz",
                        help="input batches: one .npz per batch, one array per graph input, "
                        "named like the input",
                    ),
                    argument(
                        "--random",
                        type=_positive_int,
                        metavar="N",
                        help="N random batches of the candidate's input types (floats normal, "
                        "integers 0..9); the worst error per value is kept",
                    ),
                )
            ),
            argument("--seed", type=int, default=0, help="seed of --random (default 0)"),
            argument(
                "--rtol",
                type=float,
                default=1e-4,
                help="relative tolerance, times max |reference| of each value (default 1e-4)",
            ),
            argument("--atol", type=float, default=1e-5, help="absolute tolerance (default 1e-5)"),
            argument(
                "--isolate",
                action="store_true",
                help="also feed each layer the reference's inputs, to show the error it adds "
                "by itself (own SQNR per module)",
            ),
            argument(
                "--json", action="store_true", help="print JSON (modelprov.numerics-report v1)"
            ),
            argument(
                "--overlay",
                metavar="OUT.json",
                help="write Model Explorer node data: log10 of each node's max relative error",
            ),
        ),
        description="modelprov.compare: run both models on the same inputs and compare each "
        "candidate value with the reference value of the operation producing it (joined by "
        "provenance, not tensor names). Exit 1 when a value diverges beyond the tolerances.",
    ),
    Command(
        "quantize",
        "quantize with onnxruntime, scales from the model's calibrated ranges",
        _cmd_quantize,
        (
            argument("model", metavar="MODEL.onnx", help="the float model (not modified)"),
            *_OUTPUT,
            argument(
                "--calibrate-from",
                nargs="+",
                metavar="BATCH.npz",
                keywords=("calibration_batches",),
                help="calibration batches for tensors without a range: one .npz per batch, "
                "one array per graph input, named like the input",
            ),
            argument(
                "--ranges",
                metavar="FILE.json",
                help="ranges by tensor name or module path, JSON {name: [min, max]}; win over "
                "the model's custom.min/custom.max",
            ),
            _POLICIES,
            *_QUANTIZE_OPTIONS,
            argument("--json", action="store_true", help="print the table as JSON"),
        ),
        keywords={"calibrate": "modelprov export --calibrate N"},
        description="modelprov.quantize on a file: onnxruntime.quantization.quantize_static "
        "with each activation's range from its custom.min/custom.max (modelprov export "
        "--calibrate) or --ranges; tensors without a range are calibrated by onnxruntime "
        "from --calibrate-from. Every node of the result keeps its sources. Prints each "
        "quantized tensor's range, scale and zero point.",
    ),
)
