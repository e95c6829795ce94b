"""Does an optimized model compute what its original computes? Decided by running both.

Both models run once in onnxruntime (graph optimizations off, so each computes exactly what
its graph says) on the same random inputs: standard-normal floats, small non-negative
integers, random booleans, of the graph inputs' element types and shapes, a symbolic
dimension taking a small size (the same symbol, the same size; a dimension static in one
model takes that size in both). Their outputs are then compared, pair by pair.

Black-box tools reorder float math (onnxruntime's fusions, other kernels, other summation
orders, Conv+BatchNorm folding), which changes results by a few units in the last place per
op, growing with the length of sums and the depth of the graph. Unrelated computations
differ by about their outputs' size. The tolerance sits between the two: half the type's
digits (the square root of its machine epsilon: 3.5e-4 for float32, 3.1e-2 for float16),
relative to the larger of the output's magnitude and the inputs' (standard normal: 1).
Integer and boolean outputs must be equal.

Weights are read only here, by onnxruntime from the model's folder, and only up to
:data:`MAX_WEIGHT_BYTES` per model and :data:`MAX_NODES` nodes; beyond that, for a model
drawing random numbers (RandomNormal, …: two runs would not agree), or when either model
cannot run, :func:`compare_by_running` says why and recover judges by structure.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir

from modelprov._model_io._proto_walk import attribute_graphs, graph_nodes
from modelprov.errors import InvalidModelError

__all__ = [
    "MAX_NODES",
    "MAX_WEIGHT_BYTES",
    "SYMBOLIC_SIZE",
    "OutputDifference",
    "RunComparison",
    "RunnableModel",
    "compare_by_running",
    "runnable",
    "tolerance",
]

MAX_WEIGHT_BYTES = 256 * 2**20
"""Largest model (weights and graph, in bytes) the check runs; bigger ones are judged by
structure."""
MAX_NODES = 20_000
"""Most nodes (all graphs) of a model the check runs."""
SYMBOLIC_SIZE = 2
"""The size a symbolic dimension takes."""
_SEED = 0

_NUMPY_TYPES = {
    "tensor(float)": np.float32,
    "tensor(double)": np.float64,
    "tensor(float16)": np.float16,
    "tensor(int8)": np.int8,
    "tensor(int16)": np.int16,
    "tensor(int32)": np.int32,
    "tensor(int64)": np.int64,
    "tensor(uint8)": np.uint8,
    "tensor(uint16)": np.uint16,
    "tensor(uint32)": np.uint32,
    "tensor(uint64)": np.uint64,
    "tensor(bool)": np.bool_,
}


@dataclasses.dataclass(frozen=True)
class RunnableModel:
    """A model as onnxruntime loads it: the proto and the folder its external data lies in
    (``None``: the model is known in memory only)."""

    proto: onnx.ModelProto
    folder: str | None
    role: str


def runnable(model: onnx.ModelProto | ir.Model, path: str | None, role: str) -> RunnableModel | str:
    """``model`` ready to run, or why it cannot run (its size, unknown external data)."""
    if isinstance(model, ir.Model):
        ops = [node.op_type for node in model.graph.all_nodes()]
        ops += [node.op_type for function in model.functions.values() for node in function]
        problem = _cannot_run(role, ops)
        if problem:
            return problem
        size = sum(
            value.const_value.nbytes
            for value in model.graph.initializers.values()
            if value.const_value is not None
        )
        if size > MAX_WEIGHT_BYTES:
            return _too_big(role, size)
        folders = {
            os.fspath(value.const_value.base_dir)
            for value in model.graph.initializers.values()
            if isinstance(value.const_value, ir.ExternalTensor)
        }
        if len(folders) > 1 or "" in folders:
            return f"the {role} model's external weights lie in no one known folder"
        return RunnableModel(ir.to_proto(model), next(iter(folders), None), role)
    ops = _proto_ops(model.graph)
    ops += [node.op_type for function in model.functions for node in function.node]
    problem = _cannot_run(role, ops)
    if problem:
        return problem
    external = _external_tensors(model)
    if external and path is None:
        return (
            f"the {role} model's weights are stored outside it and its folder is unknown "
            "(pass its path)"
        )
    size = model.ByteSize()
    if external and path is not None:
        from modelprov._model_io._files import external_data_of

        try:
            located = external_data_of(model, path)
        except InvalidModelError as error:
            return str(error)
        size += sum(
            item.length if item.length is not None else os.path.getsize(item.path) - item.offset
            for item in located
        )
    if size > MAX_WEIGHT_BYTES:
        return _too_big(role, size)
    folder = os.path.dirname(os.path.abspath(path)) if external and path is not None else None
    return RunnableModel(model, folder, role)


def _too_big(role: str, size: int) -> str:
    return (
        f"the {role} model holds {size / 2**20:.0f} MiB (the check runs at most "
        f"{MAX_WEIGHT_BYTES / 2**20:.0f} MiB)"
    )


_RANDOM_OPS = frozenset(
    {
        "RandomNormal",
        "RandomNormalLike",
        "RandomUniform",
        "RandomUniformLike",
        "Multinomial",
        "Bernoulli",
    }
)
"""Ops whose outputs differ from run to run: two runs of one model would not agree."""


def _cannot_run(role: str, ops: list[str]) -> str:
    """Why a model of these ops is not run ('' when it is)."""
    if len(ops) > MAX_NODES:
        return f"the {role} model has {len(ops)} nodes (the check runs at most {MAX_NODES})"
    random = sorted(_RANDOM_OPS.intersection(ops))
    if random:
        return f"the {role} model draws random numbers ({', '.join(random)})"
    return ""


def _proto_ops(graph: onnx.GraphProto) -> list[str]:
    """The op types of a graph's nodes, subgraphs included."""
    return [node.op_type for node in graph_nodes(graph)]


def _external_tensors(proto: onnx.ModelProto) -> bool:
    """True when a tensor of the model (graphs, subgraphs, functions) is stored outside it."""
    graphs = [proto.graph]
    attributes = [
        attribute
        for function in proto.functions
        for node in function.node
        for attribute in node.attribute
    ]
    while graphs or attributes:
        if graphs:
            graph = graphs.pop()
            if any(t.data_location == onnx.TensorProto.EXTERNAL for t in graph.initializer):
                return True
            attributes.extend(attribute for node in graph.node for attribute in node.attribute)
            continue
        attribute = attributes.pop()
        tensors = [attribute.t] if attribute.HasField("t") else []
        if any(
            t.data_location == onnx.TensorProto.EXTERNAL for t in [*tensors, *attribute.tensors]
        ):
            return True
        graphs.extend(attribute_graphs(attribute))
    return False


@dataclasses.dataclass(frozen=True)
class OutputDifference:
    """How far one output of the optimized model is from the original's."""

    output: str
    largest: float
    tolerance: float
    dtype: str
    problem: str = ""
    """Set when the outputs cannot be compared value by value (shape, element type)."""

    @property
    def equal(self) -> bool:
        return not self.problem and self.largest <= self.tolerance

    def describe(self) -> str:
        if self.problem and not self.output:
            return f"it {self.problem}"
        if self.problem:
            return f"its output {self.output!r} {self.problem}"
        return (
            f"its output {self.output!r} differs from the original's by up to "
            f"{self.largest:.3g} (tolerance {self.tolerance:.2g} for {self.dtype})"
        )


@dataclasses.dataclass(frozen=True)
class RunComparison:
    """The outcome of running both models: ``ran`` false says ``why_not``."""

    ran: bool
    why_not: str = ""
    differences: tuple[OutputDifference, ...] = ()

    @property
    def equal(self) -> bool:
        return self.ran and all(difference.equal for difference in self.differences)

    @property
    def worst(self) -> OutputDifference | None:
        """The output furthest out of its tolerance (a shape or type problem first)."""
        if not self.differences:
            return None
        return max(self.differences, key=_badness)

    def summary(self) -> str:
        """One phrase: what running both models showed."""
        if not self.ran:
            return f"the models could not run: {self.why_not}"
        worst = self.worst
        if worst is None:
            return "run on the same random inputs, the models have no outputs to compare"
        if not self.equal:
            return f"run on the same random inputs, {worst.describe()}"
        return (
            f"run on the same random inputs, {len(self.differences)} output(s) agree (largest "
            f"difference {worst.largest:.2g}, tolerance {worst.tolerance:.2g} for {worst.dtype})"
        )


def _badness(difference: OutputDifference) -> float:
    if difference.problem:
        return math.inf
    if difference.tolerance == 0:
        return math.inf if difference.largest > 0 else 0.0
    return difference.largest / difference.tolerance


def tolerance(dtype: np.dtype[Any], reference: np.ndarray) -> float:
    """The largest difference reordered float math may make in an output like ``reference``
    (see the module docstring); 0 for integers and booleans."""
    if not np.issubdtype(dtype, np.floating):
        return 0.0
    finite = reference[np.isfinite(reference)]
    scale = float(np.max(np.abs(finite))) if finite.size else 0.0
    return math.sqrt(float(np.finfo(dtype).eps)) * max(scale, 1.0)


def _session(model: RunnableModel) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3
    options.enable_cpu_mem_arena = False
    if model.folder is not None:
        options.add_session_config_entry(
            "session.model_external_initializers_file_folder_path", model.folder
        )
    return ort.InferenceSession(
        model.proto.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return (text[0] if text else type(error).__name__)[:300]


def _feeds(
    original_inputs: Sequence[Any], optimized_inputs: Sequence[Any]
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]] | str:
    """The same random inputs for both sessions (paired by name, else by position), or why
    there are none."""
    if len(original_inputs) != len(optimized_inputs):
        return (
            f"the optimized model has {len(optimized_inputs)} graph inputs, the original "
            f"{len(original_inputs)}"
        )
    by_name = {arg.name: arg for arg in optimized_inputs}
    if set(by_name) == {arg.name for arg in original_inputs}:
        pairs = [(arg, by_name[arg.name]) for arg in original_inputs]
    else:
        pairs = list(zip(original_inputs, optimized_inputs, strict=True))
    generator = np.random.default_rng(_SEED)
    sizes: dict[str, int] = {}
    original_feed: dict[str, np.ndarray] = {}
    optimized_feed: dict[str, np.ndarray] = {}
    for old, new in pairs:
        if old.type != new.type:
            return f"graph input {new.name!r} is {new.type}, the original's {old.type}"
        dtype = _NUMPY_TYPES.get(old.type)
        if dtype is None:
            return f"graph input {old.name!r} is {old.type}, which the check does not generate"
        shape = _shape(old.shape, new.shape, sizes)
        if shape is None:
            return f"graph input {new.name!r} has shape {new.shape}, the original's {old.shape}"
        value = random_array(generator, np.dtype(dtype), shape)
        original_feed[old.name] = value
        optimized_feed[new.name] = value
    return original_feed, optimized_feed


def _shape(old: Sequence[object], new: Sequence[object], sizes: dict[str, int]) -> list[int] | None:
    if old is None or new is None or len(old) != len(new):
        return None
    shape = []
    for a, b in zip(old, new, strict=True):
        if isinstance(a, int) and isinstance(b, int) and a != b:
            return None
        static = a if isinstance(a, int) else b if isinstance(b, int) else None
        if static is None:
            name = a if isinstance(a, str) and a else b if isinstance(b, str) and b else ""
            static = sizes.setdefault(name, SYMBOLIC_SIZE) if name else SYMBOLIC_SIZE
        shape.append(static)
    return shape


def random_array(
    generator: np.random.Generator,
    dtype: np.dtype[Any],
    shape: Sequence[int],
    *,
    integers_below: int = 2,
) -> np.ndarray:
    """Random values of a graph input: floats standard normal, booleans random, integers in
    ``[0, integers_below)`` (small, so that index inputs stay in range)."""
    if dtype == np.bool_:
        return generator.integers(0, 2, size=shape).astype(np.bool_)
    if np.issubdtype(dtype, np.integer):
        return generator.integers(0, integers_below, size=shape).astype(dtype)
    return generator.standard_normal(size=shape).astype(dtype)


def _difference(name: str, expected: object, actual: object) -> OutputDifference:
    if not isinstance(expected, np.ndarray) or not isinstance(actual, np.ndarray):
        return OutputDifference(name, 0.0, 0.0, "", "is not a tensor in both models")
    if expected.dtype != actual.dtype:
        return OutputDifference(
            name, 0.0, 0.0, str(actual.dtype), f"is {actual.dtype}, the original's {expected.dtype}"
        )
    if expected.shape != actual.shape:
        return OutputDifference(
            name,
            0.0,
            0.0,
            str(actual.dtype),
            f"has shape {list(actual.shape)}, the original's {list(expected.shape)}",
        )
    allowed = tolerance(expected.dtype, expected)
    if expected.size == 0:
        return OutputDifference(name, 0.0, allowed, str(expected.dtype))
    if np.issubdtype(expected.dtype, np.floating):
        a, b = expected.astype(np.float64), actual.astype(np.float64)
        same = (a == b) | (np.isnan(a) & np.isnan(b))
        with np.errstate(invalid="ignore"):  # inf - inf: compared just above
            gaps = np.where(same, 0.0, np.abs(a - b))
        gaps = np.where(np.isnan(gaps), math.inf, gaps)
        largest = float(np.max(gaps))
    else:
        largest = 0.0 if np.array_equal(expected, actual) else math.inf
        if largest and np.issubdtype(expected.dtype, np.integer):
            largest = float(np.max(np.abs(expected.astype(np.float64) - actual.astype(np.float64))))
    return OutputDifference(name, largest, allowed, str(expected.dtype))


def compare_by_running(
    original: RunnableModel | str, optimized: RunnableModel | str
) -> RunComparison:
    """Runs both models on the same random inputs and compares their outputs (module
    docstring); a model that cannot be loaded or run gives ``ran=False`` and the reason."""
    for model in (original, optimized):
        if isinstance(model, str):
            return RunComparison(False, model)
    assert isinstance(original, RunnableModel) and isinstance(optimized, RunnableModel)
    try:
        import onnxruntime  # noqa: F401
    except ImportError as error:
        return RunComparison(False, f"onnxruntime is not installed ({error})")
    sessions = []
    for model in (original, optimized):
        try:
            sessions.append(_session(model))
        except Exception as error:  # onnxruntime raises its own untyped errors
            return RunComparison(
                False, f"onnxruntime cannot load the {model.role} model: {_first_line(error)}"
            )
    old_session, new_session = sessions
    feeds = _feeds(old_session.get_inputs(), new_session.get_inputs())
    if isinstance(feeds, str):
        return RunComparison(False, feeds)
    outputs = []
    for session, feed, model in zip(sessions, feeds, (original, optimized), strict=True):
        try:
            outputs.append(session.run(None, feed))
        except Exception as error:  # onnxruntime raises its own untyped errors
            return RunComparison(
                False,
                f"onnxruntime cannot run the {model.role} model on random inputs: "
                f"{_first_line(error)}",
            )
    expected, actual = outputs
    names = [arg.name for arg in new_session.get_outputs()]
    if len(expected) != len(actual):
        return RunComparison(
            True,
            differences=(
                OutputDifference(
                    "", 0.0, 0.0, "", f"has {len(actual)} outputs, the original {len(expected)}"
                ),
            ),
        )
    return RunComparison(
        True,
        differences=tuple(
            _difference(name, old, new)
            for name, old, new in zip(names, expected, actual, strict=True)
        ),
    )
