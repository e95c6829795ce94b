"""Pairing a reference value with a candidate's: shapes that differ only by unit dims."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from modelprov.numerics._compare import _pair
from modelprov.numerics._metrics import Discrepancy

_dims = st.lists(st.integers(min_value=2, max_value=5), min_size=1, max_size=3)


@given(_dims, st.integers(min_value=0, max_value=3), st.integers(min_value=0, max_value=2**31))
def test_unit_dims_inserted_anywhere_pair_the_same_elements(
    dims: list[int], where: int, seed: int
) -> None:
    reference = np.random.default_rng(seed).standard_normal(dims).astype(np.float32)
    shape = list(dims)
    shape.insert(min(where, len(shape)), 1)
    paired = _pair(reference.reshape(shape), reference)
    assert isinstance(paired, Discrepancy)
    assert paired.max_abs_error == 0.0


@given(st.integers(min_value=2, max_value=6), st.integers(min_value=2, max_value=6))
def test_transposed_shapes_stay_unpaired(rows: int, columns: int) -> None:
    if rows == columns:
        columns += 1
    reference = np.zeros((1, rows, columns), np.float32)
    candidate = np.zeros((columns, rows), np.float32)
    assert isinstance(_pair(reference, candidate), str)
