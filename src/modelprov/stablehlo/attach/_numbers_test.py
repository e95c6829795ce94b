"""Which user keys become numbers, and what a merged value becomes."""

from __future__ import annotations

import hypothesis
import hypothesis.strategies as st

from modelprov.stablehlo.attach._numbers import attribute_value, number_kinds


def test_a_key_is_numeric_only_when_every_value_is_a_number() -> None:
    kinds = number_kinds(
        [
            {"0": {"custom.min": -1.5, "bits": 8, "flag": True, "name": "fc", "mixed": 1}},
            {"1": {"custom.min": 0.0, "bits": 4, "mixed": 2.5, "text": "3"}},
        ]
    )
    assert kinds == {"custom.min": float, "bits": int, "mixed": float}
    assert number_kinds([{"0": {"k": 1}}, {"1": {"k": "1"}}]) == {}  # one str: a string key


def test_merged_values_become_numbers_when_they_still_are_one() -> None:
    kinds = {"custom.max": float, "bits": int}
    assert attribute_value("custom.max", "18.9", kinds) == 18.9
    assert attribute_value("custom.max", "4", kinds) == 4.0
    assert type(attribute_value("custom.max", "4", kinds)) is float
    assert attribute_value("bits", "-8", kinds) == -8
    # A merge that made a list (union), an i64 overflow, or a key not numeric: the string.
    assert attribute_value("custom.max", "[1.0, 2.0]", kinds) == "[1.0, 2.0]"
    assert attribute_value("bits", str(2**63), kinds) == str(2**63)
    assert attribute_value("bits", "2.5", kinds) == "2.5"
    assert attribute_value("custom.max", "inf", kinds) == "inf"
    assert attribute_value("name", "7", kinds) == "7"


# No timing checks: the suite also runs under CPU emulation (qemu) and on a busy machine.
@hypothesis.settings(deadline=None, suppress_health_check=[hypothesis.HealthCheck.too_slow])
@hypothesis.given(st.floats(allow_nan=False, allow_infinity=False))
def test_every_float_reads_back_exactly(number: float) -> None:
    assert attribute_value("k", repr(number), {"k": float}) == number


# No timing checks: the suite also runs under CPU emulation (qemu) and on a busy machine.
@hypothesis.settings(deadline=None, suppress_health_check=[hypothesis.HealthCheck.too_slow])
@hypothesis.given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_every_i64_reads_back_exactly(number: int) -> None:
    assert attribute_value("k", str(number), {"k": int}) == number
