"""compare(torch, StableHLOProgram): each FX node's value in torch against XLA's, by provenance.

The candidate's ``main`` also returns, per FX node, the result where the value leaves that
node's ops (``stablehlo._expose``; the op's ``modelprov.node`` names the node); the reference
runs the decomposed program the StableHLO was lowered from, with the reference's weights, so
its FX node names are the ``modelprov.node`` values. Each node's torch value is compared with
its result as ONNX values are (the same rows and first-divergence rule, upstream rows taken
on the def-use graph of ``main``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from modelprov.errors import InvalidModelError, StableHLOError, UsageError
from modelprov.numerics._metrics import Discrepancy, measure
from modelprov.numerics._report import NumericsReport, NumericsRow
from modelprov.numerics._torch_values import run_fx_nodes
from modelprov.stablehlo._expose import ExposedResult, Exposure, expose_node_results
from modelprov.stablehlo._program import StableHLOProgram

__all__ = ["compare_stablehlo"]


def compare_stablehlo(
    reference: Any,
    candidate: StableHLOProgram,
    inputs: Sequence[Any],
    kwargs: Mapping[str, Any] | None,
    *,
    rtol: float,
    atol: float,
) -> NumericsReport:
    """The rows of every FX node whose torch value and XLA value could be joined."""
    if not isinstance(reference, torch.nn.Module | torch.export.ExportedProgram):
        raise UsageError(
            "compare(reference, StableHLOProgram): the reference must be the torch module or "
            f"torch.export.ExportedProgram it was exported from, got {type(reference).__name__}"
        )
    program = candidate.exported_program
    if program is None:
        raise InvalidModelError(
            "candidate: this StableHLOProgram has no exported program (the decomposed program "
            "it was lowered from); make it with modelprov.export_stablehlo"
        )
    if any(not isinstance(d, int) for aval in candidate.exported.in_avals for d in aval.shape):
        raise UsageError(
            "compare needs a StableHLOProgram with static shapes (its values are returned "
            "with their shapes); export it again without dynamic_shapes"
        )
    exposure = expose_node_results(candidate)
    outputs, values = exposure.run(candidate, inputs, kwargs or {})
    plain = candidate.run(*inputs, **dict(kwargs or {}))
    _check_outputs(outputs, plain, rtol=rtol, atol=atol)
    by_node: dict[str, list[int]] = {}
    for position, result in enumerate(exposure.results):
        for node in result.nodes:
            by_node.setdefault(node, []).append(position)
    labelled = {node for op in candidate.ops for node in op.nodes}
    tensors: set[str] = set()
    found: dict[tuple[int, str], Discrepancy | str] = {}

    def seen(name: str, produced: np.ndarray | tuple[np.ndarray | None, ...]) -> None:
        if isinstance(produced, np.ndarray) or any(e is not None for e in produced):
            tensors.add(name)
        for position, error in _joined(produced, by_node.get(name, ()), exposure, values):
            found[(position, name)] = error

    module = _reference_module(reference, program)
    args = tuple(torch.from_numpy(a) if isinstance(a, np.ndarray) else a for a in inputs)
    run_fx_nodes(program, args, dict(kwargs or {}), labelled, seen, module=module)
    return _report(candidate, exposure, found, tensors & labelled, rtol, atol, reference)


def _check_outputs(
    exposed: Sequence[np.ndarray], plain: Sequence[np.ndarray], *, rtol: float, atol: float
) -> None:
    """The module returning more values computes the same ops, but XLA may fuse them
    otherwise (float rounding): its outputs must be the program's within the tolerance."""
    if len(exposed) != len(plain) or any(
        a.shape != b.shape for a, b in zip(exposed, plain, strict=False)
    ):
        raise StableHLOError("exposing the intermediate values changed the program's outputs")
    for position, (a, b) in enumerate(zip(exposed, plain, strict=True)):
        if a.dtype.kind not in "biuf" or np.array_equal(a, b, equal_nan=a.dtype.kind == "f"):
            continue
        error = measure(b, a)
        if error.exceeds(rtol=rtol, atol=atol):
            raise StableHLOError(
                f"with its intermediate values exposed, XLA computes output {position} "
                f"{error.max_abs_error:.3g} away from StableHLOProgram.run's (beyond the "
                "tolerance); the values compare would report are not the program's"
            )


def _joined(
    produced: np.ndarray | tuple[np.ndarray | None, ...],
    positions: Sequence[int],
    exposure: Exposure,
    values: Sequence[np.ndarray],
) -> list[tuple[int, Discrepancy | str]]:
    """(exposed result, error) pairs for one FX node's torch value. A tensor is joined with
    the node's last result of its shape (a computed one before a constant); each element of
    a tuple (batch norm, max with indices) with the results of its shape, the closest when
    several elements share it (the computed results, when the node has any: a constant it
    shares with other nodes is none of its elements)."""
    results = [(p, exposure.results[p]) for p in positions]
    if isinstance(produced, np.ndarray):
        fitting = [(p, r) for p, r in results if _fits(r, produced)]
        if not fitting:
            shapes = ", ".join(str(list(r.shape)) for _, r in results) or "none"
            return [
                (p, f"shape {shapes} against torch's {list(produced.shape)}") for p in positions
            ]
        computed = [(p, r) for p, r in fitting if not r.is_constant]
        position, _ = (computed or fitting)[-1]
        return [(position, _pair(produced, values[position]))]
    joined: list[tuple[int, Discrepancy | str]] = []
    computed = [(p, r) for p, r in results if not r.is_constant]
    for position, result in computed or results:
        elements = [e for e in produced if e is not None and _fits(result, e)]
        if not elements:
            joined.append((position, f"no element of torch's result has shape {result.shape}"))
            continue
        candidate = values[position]
        closest = min(elements, key=lambda e: _distance(e, candidate))
        joined.append((position, _pair(closest, candidate)))
    return joined


def _fits(result: ExposedResult, array: np.ndarray) -> bool:
    return result.shape == array.shape or (array.size == 1 and _size(result.shape) == 1)


def _size(shape: tuple[int, ...]) -> int:
    return int(np.prod(shape)) if shape else 1


def _distance(reference: np.ndarray, candidate: np.ndarray) -> float:
    difference = np.abs(reference.astype(np.float64).reshape(candidate.shape) - candidate)
    return float(difference.max()) if difference.size else 0.0


def _pair(reference: np.ndarray, candidate: np.ndarray) -> Discrepancy | str:
    if reference.dtype.kind not in "biuf" or candidate.dtype.kind not in "biuf":
        return f"dtype {candidate.dtype} against torch's {reference.dtype}"
    return measure(reference.reshape(candidate.shape), candidate)


def _reference_module(reference: Any, program: torch.export.ExportedProgram) -> Any:
    """The decomposed program as a module, holding the reference's parameters and buffers
    (so an edited module, or the one the program came from, is what runs)."""
    module = program.module()
    exported = isinstance(reference, torch.export.ExportedProgram)
    source = reference.module() if exported else reference
    given = dict(source.named_parameters()) | dict(source.named_buffers())
    own = dict(module.named_parameters()) | dict(module.named_buffers())
    for name, tensor in own.items():
        replacement = given.get(name)
        if replacement is None or replacement.shape != tensor.shape:
            what = "lacks" if replacement is None else f"has shape {list(replacement.shape)} for"
            raise InvalidModelError(
                f"reference: the {type(reference).__name__} {what} {name!r} "
                f"({list(tensor.shape)} in the StableHLO program's module); pass the module "
                "the program was exported from"
            )
        owner, _, attribute = name.rpartition(".")
        holder = module.get_submodule(owner) if owner else module
        copy = replacement.detach().clone()
        if isinstance(tensor, torch.nn.Parameter):
            setattr(holder, attribute, torch.nn.Parameter(copy, requires_grad=False))
        else:
            setattr(holder, attribute, copy)
    return module


def _report(
    candidate: StableHLOProgram,
    exposure: Exposure,
    found: Mapping[tuple[int, str], Discrepancy | str],
    tensor_nodes: set[str],
    rtol: float,
    atol: float,
    reference: Any,
) -> NumericsReport:
    measured = sorted(
        ((key, error) for key, error in found.items() if isinstance(error, Discrepancy)),
        key=lambda item: item[0],
    )
    rows_of: dict[int, list[int]] = {}
    for row, ((position, _), _) in enumerate(measured):
        rows_of.setdefault(position, []).append(row)
    nearest: dict[int, frozenset[int]] = {}

    def upstream_rows(position: int) -> frozenset[int]:
        # positions only read earlier positions, so this recursion ends
        if position not in nearest:
            rows: set[int] = set()
            for read in exposure.results[position].reads:
                rows |= set(rows_of[read]) if read in rows_of else upstream_rows(read)
            nearest[position] = frozenset(rows)
        return nearest[position]

    for position in range(len(exposure.results)):  # in order, so recursion stays shallow
        upstream_rows(position)
    diverges = [error.exceeds(rtol=rtol, atol=atol) for _, error in measured]
    rows = []
    for index, ((position, name), error) in enumerate(measured):
        result = exposure.results[position]
        op = candidate.ops[result.op]
        reads = nearest[position]
        rows.append(
            NumericsRow.of(
                candidate.nodes[name],
                f"{op.op_name}#{op.index}",
                result.name,
                result.shape,
                error,
                diverges=diverges,
                position=index,
                upstream=reads,
                node_modules=tuple(dict.fromkeys(candidate.nodes[n].module_path for n in op.nodes)),
            )
        )
    compared = {name for (_, name), _ in measured}
    skipped = [
        (exposure.results[position].name, f"{name}: {error}")
        for (position, name), error in sorted(found.items())
        if isinstance(error, str) and name not in compared
    ]
    reached = {name for _, name in found}
    skipped += [
        (name, "no result of its ops leaves them in main (all in a region or another function)")
        for name in sorted(tensor_nodes - reached)
    ]
    return NumericsReport(
        rows=tuple(rows),
        rtol=rtol,
        atol=atol,
        reference=type(reference).__name__,
        candidate="candidate StableHLOProgram",
        candidate_sources=len(tensor_nodes | compared),
        skipped=tuple(skipped),
    )
