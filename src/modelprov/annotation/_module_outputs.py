"""Which FX node produces each output of a module, for per-output keys (``custom.output1.max``).

A module with several tensor outputs (``nn.LSTM``'s ``output, (h, c)``) gets one statistic per
output from ``modelprov.calibrate``: ``<prefix>output<i>.<stat>``, outputs counted depth first.
Such a key belongs on the op producing output ``i`` only. torch.export records a module's
outputs, in that order, when asked to keep the module's call signature
(``preserve_module_call_signature``); torch.onnx cannot translate such a program, so a
separate export finds them (only for modules with per-output keys). Keeping a signature
renumbers some nodes (``getitem_6`` for ``getitem_2``) but not the sequence of operations, so
the names are translated by position to those of the regular export of the same model and
arguments (the graph both exporters start from).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from typing import Any

import torch

from modelprov.core._scoping import output_index

__all__ = ["module_output_nodes", "output_index", "per_output_modules"]

_LOG = logging.getLogger(__name__)


def per_output_modules(annotations: Mapping[str, Mapping[str, str]]) -> list[str]:
    """Module paths that declare at least one per-output key."""
    return [
        path
        for path, keys in annotations.items()
        if path and any(output_index(key) is not None for key in keys)
    ]


def module_output_nodes(
    model: torch.nn.Module,
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any] | None,
    paths: Collection[str],
    regular: torch.fx.Graph | None = None,
) -> dict[str, tuple[str, ...]]:
    """Module path -> names of the FX nodes producing its tensor outputs, in output order.

    Runs ``torch.export.export`` (non-strict) keeping the call signature of ``paths``; names
    are those of ``regular`` (the graph of the regular export; exported here when None). A
    module whose outputs cannot be found this way is left out (its per-output keys then go
    on every op producing one of its outputs, as other value-scoped keys do), with a warning.
    """
    if not paths:
        return {}
    try:
        if regular is None:
            regular = torch.export.export(
                model, tuple(args), dict(kwargs or {}), strict=False
            ).graph
        exported = torch.export.export(
            model,
            tuple(args),
            dict(kwargs or {}),
            strict=False,
            preserve_module_call_signature=tuple(paths),
        )
    except Exception as error:  # any capture failure: fall back, say so
        _LOG.warning(
            "could not find the outputs of %s (%s: %s); their per-output keys go on every "
            "op producing one of their outputs",
            ", ".join(sorted(paths)),
            type(error).__name__,
            error,
        )
        return {}
    renamed = _by_position(exported.graph, regular)
    if renamed is None:
        _LOG.warning(
            "the export keeping the call signature of %s differs from the regular one; their "
            "per-output keys go on every op producing one of their outputs",
            ", ".join(sorted(paths)),
        )
        return {}
    found: dict[str, tuple[str, ...]] = {}
    for entry in exported.module_call_graph:
        if entry.fqn not in paths or entry.signature is None:
            continue
        names = [getattr(output, "name", None) for output in entry.signature.outputs]
        found[entry.fqn] = tuple(renamed.get(str(name), "") for name in names)
    return found


def _by_position(kept: torch.fx.Graph, regular: torch.fx.Graph) -> dict[str, str] | None:
    """Names of ``kept``'s call nodes -> names of ``regular``'s, when the ops line up."""
    first = [n for n in kept.nodes if n.op == "call_function"]
    second = [n for n in regular.nodes if n.op == "call_function"]
    if len(first) != len(second):
        return None
    if any(str(a.target) != str(b.target) for a, b in zip(first, second, strict=True)):
        return None
    return {a.name: b.name for a, b in zip(first, second, strict=True)}
