"""The run check's parts: tolerances, shared input shapes, output differences."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import onnx
import pytest

from modelprov.onnx.recover import _correspondence_run as run


@pytest.mark.parametrize(
    ("dtype", "expected"),
    [(np.float32, 3.45e-4), (np.float16, 3.13e-2), (np.float64, 1.49e-8)],
)
def test_tolerance_is_half_the_digits_relative_to_the_output_or_the_inputs(
    dtype: type[np.floating[Any]], expected: float
) -> None:
    small = np.array([0.01, -0.2], dtype=dtype)
    assert run.tolerance(np.dtype(dtype), small) == pytest.approx(expected, rel=0.01)
    large = np.array([100.0, -300.0, np.inf], dtype=dtype)
    assert run.tolerance(np.dtype(dtype), large) == pytest.approx(300 * expected, rel=0.01)


def test_integer_and_boolean_outputs_must_be_equal() -> None:
    assert run.tolerance(np.dtype(np.int64), np.arange(3)) == 0.0
    assert run.tolerance(np.dtype(np.bool_), np.ones(2, bool)) == 0.0
    assert run._difference("i", np.arange(3), np.arange(3)).equal
    different = run._difference("i", np.arange(3), np.array([0, 1, 5]))
    assert not different.equal and different.largest == 3


def test_nan_in_both_is_equal_nan_in_one_is_infinitely_far() -> None:
    a = np.array([1.0, np.nan, np.inf], np.float32)
    assert run._difference("y", a, a.copy()).largest == 0.0
    b = np.array([1.0, 2.0, np.inf], np.float32)
    assert run._difference("y", a, b).largest == math.inf


def test_shape_and_type_differences_are_named() -> None:
    a = np.zeros((2, 3), np.float32)
    assert "has shape [3, 2], the original's [2, 3]" in run._difference("y", a, a.T).describe()
    assert (
        "is float64, the original's float32"
        in run._difference("y", a, a.astype(np.float64)).describe()
    )


def test_symbolic_dimensions_share_a_size_and_static_ones_win() -> None:
    sizes: dict[str, int] = {}
    assert run._shape(["n", 3, None], ["n", 3, "s"], sizes) == [2, 3, 2]
    assert run._shape([5, "n"], ["m", "n"], sizes) == [5, 2]
    assert run._shape([5], [4], sizes) is None
    assert run._shape([5], [5, 1], sizes) is None


def test_a_model_with_external_weights_and_no_folder_cannot_run() -> None:
    tensor = onnx.TensorProto(name="w", data_type=onnx.TensorProto.FLOAT, dims=[1])
    tensor.data_location = onnx.TensorProto.EXTERNAL
    tensor.external_data.add(key="location", value="w.bin")
    graph = onnx.helper.make_graph([], "g", [], [], [tensor])
    reason = run.runnable(onnx.helper.make_model(graph), None, "original")
    assert isinstance(reason, str) and "stored outside it" in reason
    comparison = run.compare_by_running(reason, reason)
    assert not comparison.ran and "could not run" in comparison.summary()


def test_a_model_drawing_random_numbers_is_not_run() -> None:
    node = onnx.helper.make_node("RandomNormal", [], ["y"], shape=[2])
    graph = onnx.helper.make_graph(
        [node], "g", [], [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])]
    )
    reason = run.runnable(onnx.helper.make_model(graph), None, "optimized")
    assert reason == "the optimized model draws random numbers (RandomNormal)"
