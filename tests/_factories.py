"""Model factories for ``modelprov export MODULE:FACTORY`` in the command-line tests."""

from __future__ import annotations

from typing import Any


def mlp() -> tuple[Any, ...]:
    """Seed 003's MLP and its example input."""
    from modelprov._cli import _examples

    return _examples.mlp()


def double_transpose() -> tuple[Any, ...]:
    """The double-transpose module of seed 000."""
    from modelprov._cli import _examples

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


def cond_model() -> tuple[Any, ...]:
    """torch.cond, three lines: sin when the sum is positive, cos otherwise."""
    import torch

    class Cond(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.cond(x.sum() > 0, lambda t: t.sin(), lambda t: t.cos(), (x,))

    return Cond().eval(), (torch.randn(2, 4),)


def nested_cond() -> tuple[Any, ...]:
    """torch.cond inside torch.cond, branches closing over a module, a parameter and a
    value computed before the cond."""
    import torch

    class NestedCond(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.proj = torch.nn.Linear(4, 4)
            self.scale = torch.nn.Parameter(torch.linspace(0.5, 2.0, 4))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            mean = x.mean()

            def positive(t: torch.Tensor) -> torch.Tensor:
                return torch.cond(
                    t.max() > 1, lambda u: self.proj(u) * mean, lambda u: u - mean, (t,)
                )

            return torch.cond(x.sum() > 0, positive, lambda t: t * self.scale, (x,))

    torch.manual_seed(0)
    return NestedCond().eval(), (torch.randn(2, 4),)


def while_loop_model() -> tuple[Any, ...]:
    """torch.while_loop: doubles its input three times, a Linear after the loop."""
    import torch

    class WhileLoop(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.proj = torch.nn.Linear(4, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            def body(i: torch.Tensor, t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
                return i + 1, t * 2

            start = torch.zeros((), dtype=torch.int64)
            return self.proj(torch.while_loop(lambda i, t: i < 3, body, (start, x))[1])

    torch.manual_seed(0)
    return WhileLoop().eval(), (torch.randn(2, 4),)


def no_grad_block() -> tuple[Any, ...]:
    """A ``with torch.no_grad():`` block in forward (torch.export's wrap_with_set_grad_enabled)."""
    import torch

    class NoGradBlock(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.proj = torch.nn.Linear(4, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            with torch.no_grad():
                hidden = self.proj(x)
            return hidden.relu()

    torch.manual_seed(0)
    return NoGradBlock(), (torch.randn(2, 4),)


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
