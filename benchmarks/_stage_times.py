"""Per-stage CPU time of one ``modelprov.optimize`` call (bench_optimize ``--own``).

Wraps the functions modelprov.optimize calls (the names its modules look up) for the time
of one run, and charges each stage its own thread CPU time: a stage's time without the
stages it calls. onnxscript's optimizer is one stage, so everything else is modelprov's own
work. Benchmark code only: the wrappers are put back when the run ends.
"""

from __future__ import annotations

import contextlib
import importlib
import time
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["STAGES", "stage_times"]

STAGES: tuple[tuple[str, str, str], ...] = (
    # (label, module, attribute path): where modelprov.optimize looks each one up
    ("check metadata text", "modelprov._model_io._convert", "check_metadata_text"),
    ("clone", "modelprov._model_io._convert", "checked_clone"),
    ("detach attribute tensors", "modelprov._model_io._convert", "_detach_attribute_tensors"),
    ("check functions", "modelprov.onnx.optimize._optimize", "check_functions"),
    ("inline modelprov calls", "modelprov.onnx.optimize._optimize", "inline_modelprov_calls"),
    ("walk", "modelprov.onnx.optimize._optimize", "nodes_and_graphs"),
    ("read provenance", "modelprov.core._provenance", "Provenance.read"),
    ("calls functions", "modelprov.onnx.optimize._optimize", "calls_functions"),
    ("snapshot", "modelprov.core._correspond._graph", "Snapshot.of"),
    ("onnxscript optimize_ir", "modelprov.onnx.optimize._optimize", "_optimize_ir"),
    ("correspond (walk)", "modelprov.core._correspond", "nodes_and_graphs"),
    ("value replacements", "modelprov.core._correspond._anchors_identity", "_value_replacements"),
    ("rename anchors", "modelprov.core._correspond._anchors_identity", "_rename_anchors"),
    ("CSE twins", "modelprov.core._correspond._anchors_identity", "_merged_twins"),
    ("superseded", "modelprov.core._correspond._anchors_identity", "_superseded"),
    ("match (rest)", "modelprov.core._correspond", "match_by_identity"),
    ("claims", "modelprov.core._correspond", "assign_claims"),
    ("constant nodes", "modelprov.core._correspond._graph", "Snapshot.constant_nodes"),
    ("correspond (rest)", "modelprov.onnx.optimize._optimize", "correspond"),
    ("apply", "modelprov.core._provenance", "Provenance.apply"),
    ("write", "modelprov.core._provenance", "Provenance.write"),
    ("model state", "modelprov.onnx.optimize._optimize", "model_state"),
)
"""Stages timed, innermost last where they nest (each is charged its own time only)."""


def _resolve(module: str, path: str) -> tuple[Any, str, Any]:
    holder: Any = importlib.import_module(module)
    *parents, name = path.split(".")
    for parent in parents:
        holder = getattr(holder, parent)
    raw = holder.__dict__[name] if isinstance(holder, type) else getattr(holder, name)
    return holder, name, raw


@contextlib.contextmanager
def stage_times() -> Iterator[dict[str, float]]:
    """Within the block, every call of a stage adds its own thread CPU seconds to the
    returned dict (by label), and ``total`` gets the block's."""
    times: dict[str, float] = {label: 0.0 for label, _, _ in STAGES}
    stack: list[float] = []  # per active stage: time spent in the stages it called

    def timed(label: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            stack.append(0.0)
            started = time.thread_time()
            try:
                return function(*args, **kwargs)
            finally:
                spent = time.thread_time() - started
                inner = stack.pop()
                times[label] += spent - inner
                if stack:
                    stack[-1] += spent

        return run

    restore: list[tuple[Any, str, Any]] = []
    for label, module, path in STAGES:
        holder, name, raw = _resolve(module, path)
        restore.append((holder, name, raw))
        if isinstance(raw, classmethod):
            wrapped: Any = classmethod(timed(label, raw.__func__))
        else:
            wrapped = timed(label, raw)
        setattr(holder, name, wrapped)
    started = time.thread_time()
    try:
        yield times
    finally:
        times["total"] = time.thread_time() - started
        for holder, name, raw in reversed(restore):
            setattr(holder, name, raw)
