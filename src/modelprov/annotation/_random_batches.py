"""Random calibration batches shaped like a model's example inputs."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import torch

from modelprov.errors import AnnotationError

__all__ = ["CallArguments", "random_batches"]


@dataclasses.dataclass(frozen=True)
class CallArguments:
    """One batch given as both positional and keyword arguments: ``model(*args, **kwargs)``."""

    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = dataclasses.field(default_factory=dict)


def _random_like(value: Any, generator: torch.Generator) -> Any:
    """A random tensor like ``value`` (normal floats; integers within [0, max + 1)); containers
    are followed, anything that is not a tensor (flags, None, strings) is kept as it is."""
    if isinstance(value, tuple | list):
        return type(value)(_random_like(item, generator) for item in value)
    if isinstance(value, dict):
        return {key: _random_like(item, generator) for key, item in value.items()}
    if not isinstance(value, torch.Tensor):
        return value
    if value.dtype == torch.bool:
        return torch.randint(0, 2, value.shape, generator=generator).bool()
    if value.is_floating_point():
        return torch.randn(value.shape, generator=generator, dtype=value.dtype)
    high = int(value.max().item()) + 1 if value.numel() else 1
    return torch.randint(0, max(high, 1), value.shape, generator=generator, dtype=value.dtype)


def random_batches(
    count: int, args: tuple[Any, ...], kwargs: Mapping[str, Any], *, seed: int = 0
) -> list[tuple[Any, ...] | dict[str, Any] | CallArguments]:
    """``count`` seeded random batches shaped like the example inputs, for calibrate().

    Tensors (also inside lists, tuples and dicts) get random values of the same shape and
    dtype; other values (``use_cache=False``...) are passed through as constants. With
    both positional and keyword examples each batch is a ``CallArguments``.
    """
    if count < 1:
        raise AnnotationError(f"the number of calibration batches must be positive, got {count}")
    generator = torch.Generator().manual_seed(seed)
    batches: list[tuple[Any, ...] | dict[str, Any] | CallArguments] = []
    for _ in range(count):
        positional = tuple(_random_like(value, generator) for value in args)
        keywords = {key: _random_like(value, generator) for key, value in kwargs.items()}
        if positional and keywords:
            batches.append(CallArguments(positional, keywords))
        else:
            batches.append(keywords if keywords else positional)
    return batches
