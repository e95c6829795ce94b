"""Expose the value each FX node's ops hand on: the same StableHLO module, its ``main``
also returning those results, run on XLA CPU.

An FX node's result is the result of one of its ops (``modelprov.node``) that is used by an
op of another node or returned: where the value leaves that node's ops. Only ``main``'s
top-level ops are exposed (ops in regions or in other functions are reached through the op
that holds or calls them). Nothing else changes: the ops, their order and the original
results are the module's, so the original outputs are those of ``StableHLOProgram.run``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from modelprov.errors import StableHLOError
from modelprov.stablehlo._program import StableHLOProgram, _to_numpy
from modelprov.stablehlo._records import OpRecord
from modelprov.stablehlo.lower._jax_compat import (
    exported_with_results,
    ir_context,
    module_to_bytecode,
)
from modelprov.stablehlo.read._op_walk import STRUCTURAL_OPS, main_function, pre_order

__all__ = ["ExposedResult", "Exposure", "expose_node_results"]

_DTYPES = {
    "f16": "float16",
    "f32": "float32",
    "f64": "float64",
    "i1": "bool",
    **{f"i{bits}": f"int{bits}" for bits in (8, 16, 32, 64)},
    **{f"si{bits}": f"int{bits}" for bits in (8, 16, 32, 64)},
    **{f"ui{bits}": f"uint{bits}" for bits in (8, 16, 32, 64)},
}


@dataclasses.dataclass(frozen=True)
class ExposedResult:
    """One op result ``main`` also returns.

    Attributes:
        op: the op's index in ``StableHLOProgram.ops``.
        name: the result's SSA name in ``main`` (``%8``, ``%3#1``).
        nodes: the FX nodes whose ops it leaves (the op's ``modelprov.node`` nodes).
        shape: its static shape.
        is_constant: it is computed from no argument of ``main``: a ``stablehlo.constant``
            (JAX shares those among nodes), an op reading only such values, or a call of a
            function without arguments (export's small-splat calls).
        reads: positions (in ``Exposure.results``) of the nearest exposed results it is
            computed from, on the def-use graph of ``main``.
    """

    op: int
    name: str
    nodes: tuple[str, ...]
    shape: tuple[int, ...]
    is_constant: bool
    reads: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class Exposure:
    """The exposed results, in ``main``'s order, and the function returning them."""

    results: tuple[ExposedResult, ...]
    exported: Any
    """A ``jax.export.Exported``: the program's own results, then one per exposed result."""
    outputs: int
    """How many results the program itself returns."""

    def run(
        self, program: StableHLOProgram, args: Sequence[Any], kwargs: Mapping[str, Any]
    ) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """(the program's outputs, the exposed results' values) on XLA, for the model's
        arguments taken as :meth:`StableHLOProgram.run` takes them."""
        inputs = tuple(_to_numpy(arg) for arg in program._flat_inputs(tuple(args), kwargs))
        try:
            values = self.exported.call(program.weights, inputs)
        except Exception as exc:
            raise StableHLOError(
                f"running the StableHLO program with its intermediate values exposed failed: "
                f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            ) from exc
        arrays = [np.asarray(value) for value in values]
        return arrays[: self.outputs], arrays[self.outputs :]


def expose_node_results(program: StableHLOProgram) -> Exposure:
    """The program's module with every FX node's result also returned by ``main``."""
    from jaxlib.mlir import ir

    with ir_context():
        module = program.exported.mlir_module(serialized=False)
        index_of = _record_indices(module, program.ops)
        main = _main(module)
        block = main.regions[0].blocks[0]
        state = ir.AsmState(main)
        returned = list(block.operations)[-1]
        exposed: list[tuple[Any, ExposedResult]] = []
        frontier: dict[Any, frozenset[int]] = {}
        constant: set[Any] = set()  # values computed from no argument of main
        for op in list(block.operations)[:-1]:
            operation = op.operation
            read = _reads(operation)
            reads = frozenset().union(*(frontier.get(v, frozenset()) for v in read))
            record = program.ops[index_of[operation]]
            computes_constant = all(value in constant for value in read)
            if computes_constant:
                constant.update(operation.results)
            for result in operation.results:
                nodes = _left_nodes(result, record, program.ops, index_of)
                shape = _static_shape(result.type)
                if not nodes or shape is None or _dtype(result.type) is None:
                    frontier[result] = reads
                    continue
                frontier[result] = frozenset((len(exposed),))
                exposed.append(
                    (
                        result,
                        ExposedResult(
                            op=record.index,
                            name=result.get_name(state),
                            nodes=nodes,
                            shape=shape,
                            is_constant=computes_constant,
                            reads=tuple(sorted(reads)),
                        ),
                    )
                )
        outputs = len(list(returned.operands))
        _return_also(main, returned, [value for value, _ in exposed])
        if not module.operation.verify():
            raise StableHLOError("the StableHLO module does not verify with its values exposed")
        serialized = module_to_bytecode(module)
        avals = tuple(_aval(value.type) for value, _ in exposed)
    return Exposure(
        results=tuple(item for _, item in exposed),
        exported=exported_with_results(program.exported, serialized, avals),
        outputs=outputs,
    )


def _record_indices(module: Any, records: Sequence[OpRecord]) -> dict[Any, int]:
    """Op -> its index in ``records`` (the same pre-order walk ``_attach`` numbered)."""
    from jaxlib.mlir import ir

    operations = pre_order(ir, module, skip=STRUCTURAL_OPS)
    names = [op.name for op in operations]
    if names != [record.op_name for record in records]:
        raise StableHLOError(
            f"the program's module has {len(names)} ops, its records {len(records)} (or in "
            "another order); compare a StableHLOProgram as export_stablehlo returned it"
        )
    return {op: index for index, op in enumerate(operations)}


def _main(module: Any) -> Any:
    from jaxlib.mlir import ir

    main = main_function(ir, module)
    if main is not None:
        return main
    raise StableHLOError("the StableHLO module has no main function")


def _reads(operation: Any) -> list[Any]:
    """The values ``operation`` computes from: its operands and those its regions' ops use."""
    from jaxlib.mlir import ir

    values = list(operation.operands)
    if len(operation.regions):
        for inner in pre_order(ir, operation)[1:]:  # the op itself aside
            values.extend(inner.operands)
    return values


def _left_nodes(
    result: Any, record: OpRecord, records: Sequence[OpRecord], index_of: Mapping[Any, int]
) -> tuple[str, ...]:
    """The op's FX nodes whose ops ``result`` leaves: used by an op of no such node (one
    of another node, an unlabelled one, or the function's return)."""
    left: list[str] = []
    for node in record.nodes:
        for use in result.uses:
            owner = getattr(use.owner, "operation", use.owner)
            index = index_of.get(owner)
            if index is None or node not in records[index].nodes:
                left.append(node)
                break
    return tuple(left)


def _static_shape(kind: Any) -> tuple[int, ...] | None:
    from jaxlib.mlir import ir

    if kind.typeid != ir.RankedTensorType.static_typeid:
        return None
    ranked = ir.RankedTensorType(kind)
    return tuple(int(d) for d in ranked.shape) if ranked.has_static_shape else None


def _dtype(kind: Any) -> np.dtype | None:
    from jaxlib.mlir import ir

    element = str(ir.RankedTensorType(kind).element_type)
    if element == "bf16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)  # type: ignore[no-any-return]
    name = _DTYPES.get(element)
    return None if name is None else np.dtype(name)


def _aval(kind: Any) -> Any:
    import jax

    return jax.core.ShapedArray(_static_shape(kind), _dtype(kind))


def _return_also(main: Any, returned: Any, values: Sequence[Any]) -> None:
    """Replace ``main``'s return with one returning ``values`` too, and its type."""
    from jaxlib.mlir import ir

    operands = [*returned.operands, *values]
    with ir.InsertionPoint(returned), returned.location:
        ir.Operation.create("func.return", operands=operands)
    returned.erase()
    kind = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value)
    main.attributes["function_type"] = ir.TypeAttr.get(
        ir.FunctionType.get(list(kind.inputs), [value.type for value in operands])
    )
    if "res_attrs" in main.attributes:
        kept = list(ir.ArrayAttr(main.attributes["res_attrs"]))
        main.attributes["res_attrs"] = ir.ArrayAttr.get(
            kept + [ir.DictAttr.get({}) for _ in values]
        )
