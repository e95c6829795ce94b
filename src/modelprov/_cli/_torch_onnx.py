"""``modelprov export``'s torch.onnx flags: declared once, turned into torch.onnx.export's
keywords (which modelprov.export passes on).

``--opset`` is ``opset_version``; ``--dynamic-batch`` makes dim 0 of every tensor input the
symbolic dim ``batch`` and ``--dynamic-shapes FILE.json`` reads ``dynamic_shapes`` by argument
name (names as torch.onnx takes them: each becomes the ONNX dim's name), or
``--dynamic-shapes MODULE:FACTORY`` calls a factory returning them (``torch.export.Dim``
objects with bounds); ``--input-names``,
``--output-names``, ``--external-data``, ``--verify`` and ``--report`` / ``--artifacts-dir``
are the keywords of the same names.
"""

from __future__ import annotations

import argparse
import json
import os
import re
from typing import Any

from modelprov._cli._spec import Exclusive, argument, whole_number_at_least_one
from modelprov.errors import UsageError

__all__ = [
    "ONNX_ONLY",
    "TORCH_ONNX_OPTIONS",
    "batch_dynamic_shapes",
    "export_reports",
    "names_a_factory",
    "read_dynamic_shapes",
    "torch_onnx_keywords",
]


def _opset(text: str) -> int:
    return whole_number_at_least_one(text, hint="an opset (e.g. 18)")


TORCH_ONNX_OPTIONS = (
    argument(
        "--opset",
        type=_opset,
        metavar="N",
        keywords=("opset_version",),
        help="the ONNX opset to export to (torch.onnx.export's opset_version; default: torch's)",
    ),
    Exclusive(
        (
            argument(
                "--dynamic-batch",
                action="store_true",
                help="make dim 0 of every tensor input the symbolic dim 'batch' (the model "
                "then runs on any batch size)",
            ),
            argument(
                "--dynamic-shapes",
                metavar="FILE.json|MODULE:FACTORY",
                help="torch.onnx.export's dynamic_shapes: JSON {argument: {dim: name}}, "
                'e.g. {"input_ids": {"0": "batch", "1": "sequence"}}; a name is the symbolic '
                "dim in the ONNX model. Or MODULE:FACTORY, a callable returning "
                "dynamic_shapes (torch.export.Dim objects, bounds included)",
            ),
        )
    ),
    argument(
        "--input-names",
        nargs="+",
        metavar="NAME",
        help="names of the ONNX graph inputs, in order (torch.onnx.export's input_names)",
    ),
    argument(
        "--output-names",
        nargs="+",
        metavar="NAME",
        help="names of the ONNX graph outputs, in order (torch.onnx.export's output_names)",
    ),
    argument(
        "--external-data",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="weights in OUT.onnx.data beside the model, or (--no-external-data) inside it "
        "(default: inside unless over 2 GB)",
    ),
    argument(
        "--verify",
        action="store_true",
        help="run the saved model with onnxruntime against torch on the example inputs; "
        "exit 1, writing nothing, when an output differs beyond torch's thresholds",
    ),
    argument(
        "--report",
        action="store_true",
        help="write the export report modelprov_export_<time>.md (provenance counts, the "
        "--verify results) into --artifacts-dir",
    ),
    argument(
        "--artifacts-dir",
        metavar="DIR",
        default=".",
        help="the folder of the --report file (default: the current folder)",
    ),
)
"""torch.onnx.export's keywords as export flags (modelprov.export passes them on)."""

ONNX_ONLY = (
    ("--quantize", "quantize"),
    ("--opset", "opset"),
    ("--dynamic-batch", "dynamic_batch"),
    ("--dynamic-shapes", "dynamic_shapes"),
    ("--input-names", "input_names"),
    ("--output-names", "output_names"),
    ("--external-data", "external_data"),
    ("--verify", "verify"),
    ("--report", "report"),
)
"""The export flags that need ``--onnx`` (flag, argparse dest)."""


def torch_onnx_keywords(args: argparse.Namespace, dynamic_shapes: Any) -> dict[str, Any]:
    """torch.onnx.export's keywords the flags give (those left out keep torch's defaults)."""
    keywords: dict[str, Any] = {
        "opset_version": args.opset,
        "dynamic_shapes": dynamic_shapes,
        "input_names": args.input_names,
        "output_names": args.output_names,
        "artifacts_dir": args.artifacts_dir if args.report else None,
    }
    return {key: value for key, value in keywords.items() if value is not None}


def export_reports(folder: str) -> set[str]:
    """The export reports (``modelprov_export_*.md``) in ``folder``."""
    if not os.path.isdir(folder):
        return set()
    return {
        os.path.join(folder, name)
        for name in os.listdir(folder)
        if name.startswith("modelprov_export_") and name.endswith(".md")
    }


def names_a_factory(value: str) -> bool:
    """Whether ``--dynamic-shapes VALUE`` is ``MODULE:FACTORY`` (a callable returning
    torch's ``dynamic_shapes``, ``torch.export.Dim`` objects included) rather than a file."""
    return re.fullmatch(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*", value) is not None and not (
        os.path.exists(value)
    )


def read_dynamic_shapes(path: str) -> dict[str, Any]:
    """``--dynamic-shapes FILE.json``: ``{argument: {dim: name}}`` as torch.onnx takes it
    (dims as ints; a list gives one entry per dim, null for a static one)."""
    try:
        with open(path, encoding="utf-8") as stream:
            document = json.load(stream)
    except (OSError, ValueError, RecursionError) as error:
        reason = "nested too deeply" if isinstance(error, RecursionError) else error
        raise UsageError(f"{path}: cannot read dynamic shapes: {reason}") from None
    if not isinstance(document, dict):
        raise UsageError(
            f"{path}: dynamic shapes must be a JSON object {{argument: {{dim: name}}}}, "
            'e.g. {"x": {"0": "batch"}}'
        )
    return {name: _dims(spec, f"{path}: {name!r}") for name, spec in document.items()}


def _dims(spec: Any, where: str) -> Any:
    """One argument's dynamic dims from JSON: dim-index keys become ints, names stay."""
    if spec is None or isinstance(spec, str):
        return spec
    if isinstance(spec, list):
        return [_dims(item, f"{where}[{index}]") for index, item in enumerate(spec)]
    if isinstance(spec, dict):
        if all(key.isdigit() for key in spec) and all(
            value is None or isinstance(value, str) for value in spec.values()
        ):
            return {int(key): value for key, value in spec.items()}
        return {key: _dims(value, f"{where}[{key!r}]") for key, value in spec.items()}
    raise UsageError(
        f'{where}: give dims as {{dim: name}} (e.g. {{"0": "batch"}}), a list or null, '
        f"not {type(spec).__name__}"
    )


def batch_dynamic_shapes(model: Any, example: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``--dynamic-batch``: dim 0 of every tensor input is the symbolic dim ``batch``."""
    import inspect

    import torch

    def batch(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            return {0: "batch"} if value.dim() >= 1 else None
        if isinstance(value, list | tuple):
            return type(value)(batch(item) for item in value)
        if isinstance(value, dict):
            return {key: batch(item) for key, item in value.items()}
        return None

    if not kwargs:
        return tuple(batch(value) for value in example)
    bound = inspect.signature(model.forward).bind(*example, **kwargs)
    return {name: batch(value) for name, value in bound.arguments.items()}
