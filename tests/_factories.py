"""Model factories for ``modelprov export MODULE:FACTORY`` in the command-line tests."""

from __future__ import annotations

from typing import Any


def mlp() -> tuple[Any, ...]:
    """Seed 003's MLP and its example input."""
    from modelprov import _examples

    return _examples.mlp()


def double_transpose() -> tuple[Any, ...]:
    """The double-transpose module of seed 000."""
    from modelprov import _examples

    return _examples.double_transpose()


def not_a_model() -> tuple[Any, ...]:
    """Returns something that is not a model, to test the error."""
    return ("model", ())


def raises() -> tuple[Any, ...]:
    """A factory that fails, to test that the command line reports it in one line."""
    raise ValueError("no weights here")


def tiny_gpt2() -> tuple[Any, ...]:
    """A 2-layer GPT-2 of random weights in the Hugging Face factory form:
    ``(model, (input_ids,), {"use_cache": False})``."""
    import torch
    import transformers

    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, n_positions=16, vocab_size=64)
    model = transformers.GPT2Model(config).eval()
    ids = torch.randint(0, 64, (1, 8))
    return model, (ids,), {"use_cache": False}


def tiny_gpt2_batches() -> list[Any]:
    """A user's calibration batches for tiny_gpt2 (``--batches``): token ids of two lengths."""
    import torch

    generator = torch.Generator().manual_seed(1)
    return [torch.randint(0, 64, (2, length), generator=generator) for length in (4, 8)]


def noisy() -> tuple[Any, ...]:
    """A model adding uniform noise: onnxruntime's random numbers are not torch's, so
    ``export --verify`` must fail on it."""
    import torch

    class Noisy(torch.nn.Module):  # type: ignore[misc]
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + torch.rand_like(x)

    return Noisy().eval(), (torch.zeros(2, 8),)


def mlp_dynamic_shapes() -> tuple[Any, ...]:
    """``--dynamic-shapes MODULE:FACTORY`` for :func:`mlp`: torch.export's own Dim, bounded."""
    import torch

    return ({0: torch.export.Dim("rows", min=1, max=64)},)
