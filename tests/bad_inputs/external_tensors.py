"""Corpus class "external tensors": tensors stored as external data outside the main graph's
initializers (a Constant's value, in the graph, in a function body, in an If branch, and
an If branch's initializer).

An output naming ``w.bin`` beside itself computes whatever file is there (issue 23: the
output gave [100, 200, 300] where the input gave [0, 1, 2]). Each case's check runs the
output and the case's own model with onnxruntime on the same random inputs and requires
equal results, so a dropped or re-pointed tensor fails it; ``decoy_data`` writes a file of
the same name with other values for tests that put one beside the output.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

__all__ = ["DATA_FILE", "KIND", "cases", "decoy_data", "same_results"]

KIND = "external tensors"
DATA_FILE = "w.bin"
"""The data file every case's tensors point at, beside the case."""
_VALUES = np.array([0.25, 1.5, -2.0, 3.0], np.float32)
_DECOY = np.array([100.0, 200.0, 300.0, 400.0], np.float32)
_INTS_AT = _VALUES.nbytes
"""Where the function case's int64 tensor starts in ``w.bin``."""
_WRITES = ("optimize", "functionize", "inline", "recover PLAIN M")
"""The writing commands whose output computes what the case does (``recover M GOOD``
writes GOOD's graph)."""
_WRITES_FROM_FUNCTIONS = ("optimize", "inline")
"""The same for the functionized base: functionize's output of a functionized model does
not load in onnxruntime, external data or not (its calls of calls)."""

Mutation = Callable[[onnx.ModelProto], None]


def decoy_data(folder: str) -> None:
    """Writes ``w.bin`` with other values into ``folder`` (beside an output)."""
    with open(os.path.join(folder, DATA_FILE), "wb") as stream:
        stream.write(_DECOY.tobytes() + np.full(4, 7, np.int64).tobytes())


def _external(name: str, index: int) -> onnx.TensorProto:
    """A [1] float tensor holding ``_VALUES[index]``, stored in ``w.bin``."""
    tensor = numpy_helper.from_array(_VALUES[index : index + 1], name)
    tensor.ClearField("raw_data")
    tensor.data_location = TensorProto.EXTERNAL
    for key, value in (("location", DATA_FILE), ("offset", str(4 * index)), ("length", "4")):
        tensor.external_data.add(key=key, value=value)
    return tensor


def _add_to_output(nodes: list[onnx.NodeProto], output: str, node: onnx.NodeProto) -> list:
    """``nodes`` with ``output`` renamed ``<output>_pre`` and ``output = Add(pre, k)``,
    ``k`` the single output of ``node`` (inserted before the Add)."""
    pre = f"{output}_pre"
    for each in nodes:
        each.output[:] = [pre if o == output else o for o in each.output]
        each.input[:] = [pre if i == output else i for i in each.input]
    add = helper.make_node("Add", [pre, node.output[0]], [output], name=f"{output}_add")
    return [*nodes, node, add]


def _constant_in_graph(proto: onnx.ModelProto) -> None:
    graph = proto.graph
    constant = helper.make_node("Constant", [], ["ext_k"], name="ext_k", value=_external("k", 0))
    nodes = _add_to_output(list(graph.node), graph.output[0].name, constant)
    del graph.node[:]
    graph.node.extend(nodes)


def _constant_in_function(folder: str) -> Mutation:
    """The view function's Constant ``[1024]`` (``value_ints``) as an external int64 tensor
    at byte 16 of ``w.bin`` (the body keeps its node count, so ``modelprov.inline`` records
    stay right)."""

    def mutate(proto: onnx.ModelProto) -> None:
        function = next(f for f in proto.functions if f.name == "aten_view_default")
        constant = [n for n in function.node if n.op_type == "Constant"][-1]
        (ints,) = constant.attribute
        values = np.array(list(ints.ints), np.int64)
        with open(os.path.join(folder, DATA_FILE), "r+b") as stream:
            stream.seek(_INTS_AT)
            stream.write(values.tobytes())
        tensor = numpy_helper.from_array(values, "shape")
        tensor.ClearField("raw_data")
        tensor.data_location = TensorProto.EXTERNAL
        for key, value in (("location", DATA_FILE), ("offset", str(_INTS_AT))):
            tensor.external_data.add(key=key, value=value)
        tensor.external_data.add(key="length", value=str(values.nbytes))
        del constant.attribute[:]
        constant.attribute.append(helper.make_attribute("value", tensor))

    return mutate


def _branch(output: str, *, initializer: bool, index: int) -> onnx.GraphProto:
    info = helper.make_tensor_value_info(output, TensorProto.FLOAT, [1])
    if initializer:
        weight = _external(f"{output}_w", index)
        node = helper.make_node("Identity", [weight.name], [output], name=f"{output}_id")
        return helper.make_graph([node], f"{output}_g", [], [info], initializer=[weight])
    node = helper.make_node("Constant", [], [output], name=output, value=_external("k", index))
    return helper.make_graph([node], f"{output}_g", [], [info])


def _if_branch(*, initializer: bool) -> Mutation:
    def mutate(proto: onnx.ModelProto) -> None:
        graph = proto.graph
        cond = helper.make_node(
            "Constant", [], ["ext_cond"], name="ext_cond", value=helper.make_tensor("c", 9, [], [1])
        )
        branches = {
            "then_branch": _branch("ext_then", initializer=initializer, index=2),
            "else_branch": _branch("ext_else", initializer=initializer, index=3),
        }
        choose = helper.make_node("If", ["ext_cond"], ["ext_k"], name="ext_if", **branches)
        graph.node.insert(0, cond)
        nodes = _add_to_output(list(graph.node), graph.output[0].name, choose)
        del graph.node[:]
        graph.node.extend(nodes)

    return mutate


def _feeds(session: object) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    feeds = {}
    for item in session.get_inputs():  # type: ignore[attr-defined]
        assert item.type == "tensor(float)", item
        shape = [d if isinstance(d, int) else 1 for d in item.shape]
        feeds[item.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


def _run(path: str) -> list[np.ndarray]:
    import onnxruntime as ort

    try:
        session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        return list(session.run(None, _feeds(session)))
    except Exception as error:
        raise AssertionError(f"{path}: does not run in onnxruntime: {error}"[:300]) from None


def same_results(expected_model: str) -> Callable[[str], None]:
    """A check: the output computes what ``expected_model`` does (onnxruntime, same inputs)."""

    def check(path: str) -> None:
        expected, got = _run(expected_model), _run(path)
        assert len(expected) == len(got), f"{path}: {len(got)} outputs, not {len(expected)}"
        for want, have in zip(expected, got, strict=True):
            assert np.allclose(want, have, rtol=1e-5, atol=1e-6), (
                f"{path} computes {have.ravel()[:4]} where the input gives {want.ravel()[:4]}"
            )

    return check


def cases(folder: str) -> list[tuple[str, str, str, Mutation, dict[str, object]]]:
    """The cases, as corpus.py's ``_cases`` gives them; writes ``w.bin`` into ``folder``."""
    from tests.bad_inputs.corpus import FUNCTIONS, PLAIN

    with open(os.path.join(folder, DATA_FILE), "wb") as stream:
        stream.write(_VALUES.tobytes() + bytes(32))
    made: list[tuple[str, str, Mutation]] = [
        ("external_constant", PLAIN, _constant_in_graph),
        ("external_constant_in_function", FUNCTIONS, _constant_in_function(folder)),
        ("external_constant_in_branch", PLAIN, _if_branch(initializer=False)),
        ("external_initializer_in_branch", PLAIN, _if_branch(initializer=True)),
    ]
    return [
        (
            name,
            KIND,
            base,
            mutation,
            {
                "check": same_results(os.path.join(os.path.abspath(folder), f"{name}.onnx")),
                "check_on": _WRITES_FROM_FUNCTIONS if base == FUNCTIONS else _WRITES,
            },
        )
        for name, base, mutation in made
    ]
