"""Read the metadata that ``torch.fx.traceback.annotate`` records on exported FX nodes.

Inside ``with torch.fx.traceback.annotate({...}):`` torch copies the dict to
``node.meta["custom"]`` of every node traced in the block. As of torch 2.13 that happens with
``torch.export.export(..., strict=True)``, and with the default non-strict export only inside
``torch.fx.traceback.preserve_node_meta()``. Strict export also copies it to the placeholders of
parameters used in the block, and non-strict export adds torch-private ``_torchdynamo_*`` keys.
"""

from __future__ import annotations

import json
import logging
from collections import Counter

import torch

from modelprov.annotation._values import check_key, format_value
from modelprov.errors import AnnotationError

__all__ = ["fx_custom_metadata"]

_LOGGER = logging.getLogger(__name__)

# Node kinds that compute something; placeholders and outputs carry no op of their own.
_OP_NODE_KINDS = frozenset({"call_function", "call_method", "call_module"})


def fx_custom_metadata(exported_program: torch.export.ExportedProgram) -> dict[str, dict[str, str]]:
    """Return, per FX node name, the string-formatted entries of ``node.meta["custom"]``.

    Only op nodes of the top-level graph are read (not placeholders, outputs or nested
    subgraphs). Keys starting with ``_`` are private to torch and skipped. Values go through
    ``format_value``; others are JSON-encoded when JSON can hold them, else skipped with one
    logged warning per key (as are keys that are not valid annotation keys).
    """
    graph = exported_program.graph
    result: dict[str, dict[str, str]] = {}
    skipped: Counter[tuple[str, str]] = Counter()
    for node in graph.nodes:
        custom = node.meta.get("custom")
        if node.op not in _OP_NODE_KINDS or not isinstance(custom, dict):
            continue
        entries: dict[str, str] = {}
        for key, value in custom.items():
            if isinstance(key, str) and key.startswith("_"):
                continue
            try:
                checked = check_key(key)
            except AnnotationError as err:
                skipped[(repr(key), str(err))] += 1
                continue
            text = _format_or_json(value)
            if text is None:
                skipped[(repr(key), f"{type(value).__name__} is neither a scalar nor JSON")] += 1
                continue
            entries[checked] = text
        if entries:
            result[str(node.name)] = entries
    for (key, reason), count in skipped.items():
        _LOGGER.warning(
            "skipped torch.fx.traceback.annotate key %s on %d node(s): %s", key, count, reason
        )
    return result


def _format_or_json(value: object) -> str | None:
    try:
        return format_value(value)
    except AnnotationError:
        pass
    try:
        return json.dumps(value, allow_nan=False, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        return None
