"""Random calibration batches."""

from __future__ import annotations

import pytest
import torch

from modelprov.annotation._random_batches import CallArguments, random_batches
from modelprov.errors import AnnotationError


def test_shapes_dtypes_and_ranges_follow_the_example() -> None:
    example = (torch.randn(2, 3), torch.tensor([[0, 4, 9]]), torch.tensor([True, False]))
    batches = random_batches(3, example, {})
    assert len(batches) == 3
    for batch in batches:
        assert isinstance(batch, tuple)
        floats, ints, flags = batch
        assert floats.shape == (2, 3) and floats.dtype == torch.float32
        assert ints.dtype == torch.int64 and int(ints.min()) >= 0 and int(ints.max()) <= 9
        assert flags.dtype == torch.bool
    again = random_batches(3, example, {})
    assert all(
        torch.equal(a[0], b[0])  # type: ignore[index]
        for a, b in zip(batches, again, strict=True)
    )


def test_keyword_examples_and_errors() -> None:
    (batch,) = random_batches(1, (), {"x": torch.zeros(4)})
    assert isinstance(batch, dict) and batch["x"].shape == (4,)
    with pytest.raises(AnnotationError, match="must be positive"):
        random_batches(0, (torch.zeros(1),), {})


def test_mixed_examples_pass_constants_through() -> None:
    ids = torch.tensor([[1, 7, 3]])
    past = [torch.randn(1, 2), None]
    (batch,) = random_batches(
        1, (ids,), {"use_cache": False, "mask": torch.ones(1, 3), "past": past}
    )
    assert isinstance(batch, CallArguments)
    (new_ids,) = batch.args
    assert new_ids.shape == ids.shape and new_ids.dtype == ids.dtype and int(new_ids.max()) <= 7
    assert batch.kwargs["use_cache"] is False and batch.kwargs["mask"].shape == (1, 3)
    assert isinstance(batch.kwargs["past"], list) and batch.kwargs["past"][1] is None
    assert batch.kwargs["past"][0].shape == (1, 2)
