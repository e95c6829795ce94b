import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from modelprov.annotation._values import check_key, format_value
from modelprov.errors import AnnotationError


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("int8", "int8"),
        ("", ""),
        (True, "true"),
        (False, "false"),
        (0, "0"),
        (-3, "-3"),
        (2**70, "1180591620717411303424"),
        (0.0, "0.0"),
        (-0.0, "-0.0"),
        (0.1, "0.1"),
        (1e-7, "1e-07"),
        (1.5e300, "1.5e+300"),
        (np.float32(0.5), "0.5"),
        (np.float32(0.1), repr(float(np.float32(0.1)))),
        (np.float64(0.25), "0.25"),
        (np.int64(7), "7"),
        (np.bool_(True), "true"),
        (np.array(2.5), "2.5"),
        (torch.tensor(3), "3"),
        (torch.tensor(0.5), "0.5"),
        (torch.tensor(False), "false"),
    ],
)
def test_format_value_documented_strings(value: object, text: str) -> None:
    assert format_value(value) == text
    assert type(format_value(value)) is str


def test_format_value_str_subclass_becomes_plain_str() -> None:
    class Tag(str):
        pass

    formatted = format_value(Tag("x"))
    assert formatted == "x"
    assert type(formatted) is str


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, np.float32("nan")])
def test_format_value_rejects_non_finite_naming_key(value: float) -> None:
    with pytest.raises(AnnotationError, match=r"'scale'.*(nan|inf)"):
        format_value(value, key="scale")


@pytest.mark.parametrize(
    ("value", "type_name"),
    [
        (None, "NoneType"),
        ([1, 2], "list"),
        ({"a": 1}, "dict"),
        (1 + 2j, "complex"),
        (torch.zeros(2), "Tensor"),
        (np.zeros(3), "ndarray"),
        (np.complex64(1j), "complex64"),
    ],
)
def test_format_value_rejects_unsupported_types(value: object, type_name: str) -> None:
    with pytest.raises(AnnotationError) as info:
        format_value(value, key="bits")
    message = str(info.value)
    assert "'bits'" in message
    assert type_name in message
    assert "str, bool, int, float" in message


def test_check_key_accepts_ordinary_keys() -> None:
    assert check_key("custom.bits") == "custom.bits"
    assert check_key("layer name é") == "layer name é"


@pytest.mark.parametrize(
    ("key", "fragment"),
    [
        ("", "empty"),
        (3, "int"),
        ("a\nb", "control character"),
        ("a\x00", "control character"),
        ("modelprov.sources", "reserved prefix 'modelprov.'"),
        ("pkg.torch.onnx.stack_trace", "reserved prefix 'pkg.torch.'"),
    ],
)
def test_check_key_rejects_bad_keys(key: object, fragment: str) -> None:
    with pytest.raises(AnnotationError, match=fragment):
        check_key(key)


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_floats_round_trip_exactly(value: float) -> None:
    text = format_value(value)
    assert float(text) == value
    assert math.copysign(1.0, float(text)) == math.copysign(1.0, value)


@given(st.floats(allow_nan=False, allow_infinity=False, width=32))
def test_float32_values_round_trip_exactly(value: float) -> None:
    as_float32 = np.float32(value)
    assert np.float32(float(format_value(as_float32))) == as_float32
    assert float(format_value(as_float32)) == float(as_float32)


@given(st.integers())
def test_ints_round_trip(value: int) -> None:
    assert int(format_value(value)) == value


@given(st.text())
def test_strings_are_kept(value: str) -> None:
    assert format_value(value) == value
