"""The error metrics on generated arrays."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from modelprov.numerics._metrics import measure

_ARRAYS = hnp.arrays(
    np.float32,
    hnp.array_shapes(min_dims=1, max_dims=3, max_side=6),
    elements=st.floats(-1e3, 1e3, width=32),
)


@settings(max_examples=200, deadline=None)
@given(_ARRAYS)
def test_equal_arrays_have_no_error(array: np.ndarray) -> None:
    found = measure(array, array.copy())
    assert found.max_abs_error == 0 and found.mean_abs_error == 0
    assert found.sqnr_db == math.inf
    assert not found.exceeds(rtol=0, atol=0)


@settings(max_examples=200, deadline=None)
@given(_ARRAYS, st.floats(1e-3, 10))
def test_errors_scale_with_the_noise(array: np.ndarray, size: float) -> None:
    noise = np.full_like(array, size)
    found = measure(array, array + noise)
    assert math.isclose(found.max_abs_error, size, rel_tol=1e-3, abs_tol=1e-3 * size + 1e-4)
    scale = float(np.abs(array).max())
    assert found.reference_scale == scale
    assert found.exceeds(rtol=0, atol=size / 2)
    assert not found.exceeds(rtol=0, atol=size * 2)


def test_sqnr_and_cosine_of_a_known_pair() -> None:
    reference = np.array([3.0, 4.0])
    found = measure(reference, np.array([3.0, 4.5]))
    assert math.isclose(found.sqnr_db, 10 * math.log10(25 / 0.25))
    assert 0.99 < found.cosine_similarity < 1.0
    assert math.isclose(found.max_rel_error, 0.5 / 4.0)


def test_nan_in_the_candidate_always_exceeds() -> None:
    found = measure(np.ones(3), np.array([1.0, math.nan, 1.0]))
    assert found.exceeds(rtol=1.0, atol=1.0)
    assert measure(np.array([math.inf]), np.array([math.inf])).max_abs_error == 0
