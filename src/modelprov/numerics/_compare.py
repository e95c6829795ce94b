"""modelprov.compare: where a candidate model's values part from a reference's, by provenance.

Values are joined through provenance, never through tensor names: each candidate value that
is a source's output (``modelprov.output_of`` or the default rule) is compared with the
reference's value of that same source (the FX node of torch's program, or the reference ONNX
value that is that source's output). Renaming, fusing and quantizing tools keep this join.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np
import onnx
import onnx_ir as ir
import torch

from modelprov._model_io._convert import model_input
from modelprov._model_io._proto_check import read_proto
from modelprov._torch._compat import flatten_inputs
from modelprov.core._provenance import Provenance
from modelprov.core._sources import Source
from modelprov.core._walks import all_nodes
from modelprov.errors import InvalidModelError, UsageError
from modelprov.numerics._metrics import Discrepancy, measure
from modelprov.numerics._onnx_values import graph_input_names, run_exposing, run_isolated
from modelprov.numerics._qoperator import dequantize, output_quantization
from modelprov.numerics._report import NumericsReport, NumericsRow
from modelprov.numerics._torch_values import run_fx_nodes

if TYPE_CHECKING:
    from modelprov.stablehlo._program import StableHLOProgram

__all__ = ["DEFAULT_ATOL", "DEFAULT_RTOL", "compare"]

DEFAULT_RTOL = 1e-4
"""Relative to the tensor's scale (max |reference|): float32 reassociation stays below it."""
DEFAULT_ATOL = 1e-5

OnnxLike: TypeAlias = ir.Model | onnx.ModelProto | str | os.PathLike[str] | torch.onnx.ONNXProgram
Reference: TypeAlias = torch.nn.Module | torch.export.ExportedProgram | OnnxLike


def compare(
    reference: Reference,
    candidate: OnnxLike | StableHLOProgram,
    inputs: Sequence[Any],
    *,
    kwargs: Mapping[str, Any] | None = None,
    rtol: float = DEFAULT_RTOL,
    atol: float = DEFAULT_ATOL,
    isolate: bool = False,
) -> NumericsReport:
    """Compares every candidate value with the reference value of the source producing it.

    ``reference``: a torch module or ExportedProgram (run eagerly on the program
    :func:`modelprov.export` exports, every FX node's output captured as it is produced),
    the ``ONNXProgram`` modelprov.export returned (its program), or an ONNX model (run with
    onnxruntime). ``candidate``: any ONNX model carrying provenance (modelprov's export,
    optimized, recovered after a black-box tool, QDQ/QOperator quantized, fp16...), or the
    ``StableHLOProgram`` :func:`modelprov.export_stablehlo` returned, run on XLA CPU with
    each FX node's value (the result of its ops that leaves them) also returned, against a
    torch reference run on the decomposed program it was lowered from (the reference's
    weights).
    ``inputs``: the model's positional arguments (tensors or arrays), ``kwargs`` its keyword
    arguments. A value diverges when ``max |c - r| > atol + rtol · max |r|``.

    ``isolate=True`` also runs the candidate once more with each compared value's readers fed
    the reference's value, so each row's ``own_*`` errors are what its node adds by itself
    (a quantized layer's own error, not the error it inherits); this holds the reference
    values of every compared value in memory, where the default holds only the candidate's.
    """
    if rtol < 0 or atol < 0:
        raise UsageError(f"rtol and atol must be >= 0, got rtol={rtol}, atol={atol}")
    if isinstance(candidate, _stablehlo_program()):
        if isolate:
            raise UsageError("isolate=True needs an ONNX candidate (onnxruntime feeds values)")
        from modelprov.numerics._stablehlo_compare import compare_stablehlo

        return compare_stablehlo(reference, candidate, inputs, kwargs, rtol=rtol, atol=atol)
    cand_model, cand_name = _onnx_model(candidate, "candidate")
    joined = _joined_values(cand_model)
    flat = flatten_inputs(tuple(inputs), dict(kwargs or {}))
    arrays = [_as_array(item) for item in flat if isinstance(item, torch.Tensor | np.ndarray)]
    cand_values = run_exposing(cand_model, [j.value for j in joined], arrays, where=cand_name)
    wanted: dict[str, list[int]] = {}
    for index, item in enumerate(joined):
        wanted.setdefault(item.source.fx_node or item.source.id, []).append(index)
    errors: dict[int, Discrepancy | str] = {}
    kept: dict[str, np.ndarray] = {}

    def seen(name: str, produced: np.ndarray | tuple[np.ndarray | None, ...]) -> None:
        for index in wanted.get(name, ()):
            value_name = joined[index].value.name or ""
            value = cand_values.pop(value_name, None)
            if value is None:
                continue
            quantization = (
                output_quantization(joined[index].value) if value.dtype.kind in "iu" else None
            )
            if quantization is not None:  # QOperator: compared as the real value it holds
                value = dequantize(value, quantization)
            reference_value = _element(produced, value, joined[index].value)
            if isinstance(reference_value, str):
                errors[index] = reference_value
                continue
            found = _pair(reference_value, value)
            if isinstance(found, str) and joined[index].node.op_type == "Constant":
                found = _NOT_A_RESULT  # a constant the operation reads, not what it computes
            errors[index] = found
            if (
                isolate
                and isinstance(errors[index], Discrepancy)
                and not isinstance(joined[index].value.type, ir.SequenceType)
                and quantization is None
            ):  # a sequence, or an integer QOperator tensor, cannot be fed a float tensor
                kept[value_name] = reference_value.reshape(value.shape).astype(value.dtype)

    torch_inputs = tuple(_as_tensor(item) for item in inputs)
    program = _torch_program(reference, torch_inputs, kwargs)
    if program is not None:
        ref_name = type(reference).__name__
        run_fx_nodes(program, torch_inputs, dict(kwargs or {}), wanted, seen)
    else:
        ref_model, ref_name = _onnx_model(reference, "reference")  # type: ignore[arg-type]
        ref_joined = _joined_values(ref_model)
        ref_values = run_exposing(ref_model, [j.value for j in ref_joined], arrays, where=ref_name)
        for item in ref_joined:
            array = ref_values.pop(item.value.name or "", None)
            if array is not None:
                seen(item.source.fx_node or item.source.id, array)
    own: dict[int, Discrepancy] = {}
    if isolate and kept:
        alone = run_isolated(cand_model, kept, arrays, where=cand_name)
        for index, item in enumerate(joined):
            name = item.value.name or ""
            if name in alone and name in kept:
                found = _pair(kept[name], alone[name])
                if isinstance(found, Discrepancy):
                    own[index] = found
    return _report(joined, errors, own, cand_model, rtol, atol, ref_name, cand_name)


_NOT_A_RESULT = "a constant its operation reads (of another shape than its result)"


class _Joined:
    """A candidate value and the source whose output it is."""

    __slots__ = ("modules", "node", "source", "value")

    def __init__(
        self, value: ir.Value, node: ir.Node, source: Source, modules: tuple[str, ...]
    ) -> None:
        self.value = value
        self.node = node
        self.source = source
        self.modules = modules


def _joined_values(model: ir.Model) -> list[_Joined]:
    """Main-graph values that are a source's output, in topological order. A value that is
    the output of several sources (a chain of no-ops) is joined with the last of them; a
    value that is quantized is compared as its dequantized value (:func:`_dequantized`)."""
    provenance = Provenance.read(model)
    main = set(model.graph)
    joined: list[_Joined] = []
    compared: set[ir.Value] = set()
    for node in all_nodes(model.graph):
        if node not in main:
            continue
        for value in node.outputs:
            ids = frozenset(
                i for i in provenance.value_sources.get(value, ()) if provenance.table[i].fx_node
            )  # sources without an FX node (a tool's own unattributed nodes) have no reference
            if not ids or not value.name:
                continue
            shown = _dequantized(value)
            if shown in compared:
                continue
            compared.add(shown)
            modules = tuple(
                dict.fromkeys(
                    provenance.table[i].module_path
                    for i in sorted(provenance.node_sources.get(node, ids))
                )
            )
            joined.append(_Joined(shown, node, provenance.table[max(ids)], modules))
    return joined


def _dequantized(value: ir.Value) -> ir.Value:
    """The value the model computes with in place of ``value``: for a tensor read only by a
    QuantizeLinear → DequantizeLinear pair (QDQ format, e.g. a Relu folded into its Q),
    the DequantizeLinear's output; else ``value`` itself."""
    uses = list(value.uses())
    if len(uses) != 1 or uses[0].node.op_type != "QuantizeLinear" or uses[0].idx != 0:
        return value
    quantized = uses[0].node.outputs[0]
    readers = [use.node for use in quantized.uses()]
    if len(readers) == 1 and readers[0].op_type == "DequantizeLinear" and readers[0].outputs:
        return readers[0].outputs[0]
    return value


def _element(
    produced: np.ndarray | tuple[np.ndarray | None, ...], candidate: np.ndarray, value: ir.Value
) -> np.ndarray | str:
    """The reference tensor a candidate value stands for. An operation returning several
    tensors (batch norm, split, max with indices) is matched by shape: the one element of the
    candidate's shape; else the element at the value's position among its node's outputs
    when the node has one output per element; else (a split rewritten into slices) the
    element of that shape closest to the candidate."""
    if isinstance(produced, np.ndarray):
        return produced
    elements = [e for e in produced if e is not None]
    if (
        len(elements) == len(produced)
        and candidate.shape == (len(elements), *elements[0].shape)
        and all(e.shape == elements[0].shape for e in elements)
    ):
        return np.stack(elements)  # a sequence of tensors held as one stacked tensor
    matching = [i for i, e in enumerate(produced) if e is not None and e.shape == candidate.shape]
    if len(matching) == 1:
        return produced[matching[0]]  # type: ignore[return-value]
    producer = value.producer()
    if producer is not None and len(producer.outputs) == len(produced):
        found = produced[value.index() or 0]
        if found is not None:
            return found
    if not matching:
        return f"its operation returns {len(produced)} values, none of shape {candidate.shape}"
    return min(
        (element for i in matching if (element := produced[i]) is not None),
        key=lambda element: float(np.abs(element.astype(np.float64) - candidate).max()),  # type: ignore[union-attr]
    )


def _pair(reference: np.ndarray, candidate: np.ndarray) -> Discrepancy | str:
    if reference.shape != candidate.shape:
        if _without_unit_dims(reference.shape) != _without_unit_dims(candidate.shape):
            return f"shape {list(candidate.shape)} against the reference's {list(reference.shape)}"
        # Equal but for dimensions of size 1 (a tool moved a Reshape across an elementwise
        # op, as onnxsim does around GPT-2's GELU): the same elements in the same order.
        reference = reference.reshape(candidate.shape)
    if not (_numeric(reference) and _numeric(candidate)):
        return f"dtype {candidate.dtype} against the reference's {reference.dtype}"
    return measure(reference, candidate)


def _without_unit_dims(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(size for size in shape if size != 1)


def _numeric(array: np.ndarray) -> bool:
    return array.dtype.kind in "biuf"


def _report(
    joined: Sequence[_Joined],
    errors: Mapping[int, Discrepancy | str],
    own: Mapping[int, Discrepancy],
    model: ir.Model,
    rtol: float,
    atol: float,
    reference: str,
    candidate: str,
) -> NumericsReport:
    row_of: dict[ir.Value, int] = {}
    measured: list[tuple[_Joined, Discrepancy]] = []
    skipped: list[tuple[str, str]] = []
    own_of: list[Discrepancy | None] = []
    for index, item in enumerate(joined):
        error = errors.get(index)
        if isinstance(error, Discrepancy):
            row_of[item.value] = len(measured)
            measured.append((item, error))
            own_of.append(own.get(index))
        else:
            why = error if isinstance(error, str) else "the reference has no value for its source"
            skipped.append((item.value.name or "", why))
    upstream = _upstream_rows(model, row_of)
    diverges = [error.exceeds(rtol=rtol, atol=atol) for _, error in measured]
    rows = []
    for position, (item, error) in enumerate(measured):
        reads = upstream[item.node]
        alone = own_of[position]
        rows.append(
            NumericsRow.of(
                item.source,
                item.node.name or item.node.op_type,
                item.value.name or "",
                tuple(int(d) if isinstance(d, int) else -1 for d in (item.value.shape or ())),
                error,
                diverges=diverges,
                position=position,
                upstream=reads,
                node_modules=item.modules,
                own=alone,
            )
        )
    results = {
        item.source.id for index, item in enumerate(joined) if errors.get(index) != _NOT_A_RESULT
    }
    sources = results | {row.source.id for row in rows}
    return NumericsReport(
        rows=tuple(rows),
        rtol=rtol,
        atol=atol,
        reference=reference,
        candidate=candidate,
        candidate_sources=len(sources),
        skipped=tuple(skipped),
    )


def _upstream_rows(
    model: ir.Model, row_of: Mapping[ir.Value, int]
) -> dict[ir.Node, frozenset[int]]:
    """Per main-graph node, the rows of the nearest compared values its inputs come from."""
    frontier: dict[ir.Value, frozenset[int]] = {}
    empty: frozenset[int] = frozenset()
    result: dict[ir.Node, frozenset[int]] = {}
    for node in model.graph:  # topological order
        reads: set[int] = set()
        for value in node.inputs:
            if value is not None:
                reads |= frontier.get(value, empty)
        read = frozenset(reads)
        result[node] = read
        for value in node.outputs:
            row = row_of.get(value)
            frontier[value] = frozenset((row,)) if row is not None else read
    return result


def _stablehlo_program() -> type[StableHLOProgram]:
    """The StableHLOProgram class (its module imports no JAX)."""
    from modelprov.stablehlo._program import StableHLOProgram

    return StableHLOProgram


def _onnx_model(model: Any, role: str) -> tuple[ir.Model, str]:
    """The model to run (weights loaded) and how messages name it."""
    found = model_input(model, where=f"compare({role}=...)", load_weights=True)
    name = os.fspath(model) if isinstance(model, str | os.PathLike) else f"{role} model"
    if isinstance(model, torch.onnx.ONNXProgram):
        name = f"{role} ONNXProgram"
    return (found if isinstance(found, ir.Model) else read_proto(found)), name


def _torch_program(
    reference: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any] | None
) -> torch.export.ExportedProgram | None:
    """The decomposed program the ONNX sources name, or None for an ONNX reference."""
    if isinstance(reference, torch.onnx.ONNXProgram):
        if reference.exported_program is None:
            raise InvalidModelError(
                "reference: this ONNXProgram has no exported program to run; pass the torch "
                "module, or the ONNX model to compare against"
            )
        return reference.exported_program
    if isinstance(reference, torch.nn.Module | torch.export.ExportedProgram):
        from modelprov.onnx.export._export import export

        extra: dict[str, Any] = {"kwargs": dict(kwargs)} if kwargs else {}
        program = export(reference, args, optimize=False, **extra).exported_program
        assert program is not None
        return program
    return None


def _as_array(item: Any) -> np.ndarray:
    if isinstance(item, torch.Tensor):
        return np.asarray(item.detach().cpu().numpy())
    return np.asarray(item)


def _as_tensor(item: Any) -> Any:
    return torch.from_numpy(item) if isinstance(item, np.ndarray) else item


def input_names(model: ir.Model) -> list[str]:
    """The graph inputs a caller feeds (for the command line's ``--inputs FILE.npz``)."""
    return graph_input_names(model)
