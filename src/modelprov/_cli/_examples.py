"""Small example models built in code with seeded random weights (no downloads).

Used by the demo, the tests and the benchmarks. Each factory returns ``(module, args)``
with the module in eval mode.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable

import torch
from torch import nn

__all__ = [
    "EXAMPLES",
    "cnn",
    "double_transpose",
    "gpt2",
    "mlp",
    "optimized_export_bytes",
    "plain_export_bytes",
    "transformer_encoder",
]

Example = tuple[nn.Module, tuple[torch.Tensor, ...]]


class DoubleTranspose(nn.Module):  # type: ignore[misc]
    """The module of the upstream report: two transposes onnxscript fuses into one."""

    def forward(self, k: torch.Tensor) -> torch.Tensor:
        k = k.transpose(1, 2)
        k = k.transpose(-2, -1)
        return 2 * k


def double_transpose() -> Example:
    """Seed 000's module on a (1, 128, 12, 32) input."""
    torch.manual_seed(0)
    return DoubleTranspose().eval(), (torch.rand(1, 128, 12, 32),)


class ConvBnRelu(nn.Module):  # type: ignore[misc]
    """Two Conv-BN-ReLU blocks, max pooling and a linear head."""

    def __init__(self) -> None:
        super().__init__()
        self.block1 = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.block2 = nn.Sequential(nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU())
        self.pool = nn.MaxPool2d(2)
        self.head = nn.Linear(16 * 8 * 8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(self.block2(self.block1(x)))
        return self.head(torch.flatten(x, 1))


def cnn() -> Example:
    """A Conv-BN-ReLU CNN (eval) with non-trivial BatchNorm statistics."""
    torch.manual_seed(0)
    model = ConvBnRelu()
    for module in model.modules():
        if isinstance(module, nn.BatchNorm2d):
            module.running_mean.uniform_(-0.5, 0.5)
            module.running_var.uniform_(0.5, 1.5)
    return model.eval(), (torch.randn(2, 3, 16, 16),)


def transformer_encoder(layers: int = 2, d_model: int = 64) -> Example:
    """nn.TransformerEncoder (batch first) on a (2, 10, d_model) input."""
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(d_model, nhead=4, dim_feedforward=128, batch_first=True)
    model = nn.TransformerEncoder(layer, num_layers=layers, enable_nested_tensor=False)
    return model.eval(), (torch.randn(2, 10, d_model),)


def mlp() -> Example:
    """Seed 003's MLP: Linear(784, 512), ReLU, Linear(512, 10)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 10))
    return model.eval(), (torch.randn(4, 784),)


class _GPT2Hidden(nn.Module):  # type: ignore[misc]
    """GPT2Model returning only the last hidden state (no cache), for export."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        output = self.model(input_ids, use_cache=False, return_dict=False)
        return output[0]  # type: ignore[no-any-return]


def gpt2(layers: int = 2, width: int = 64, *, sequence: int = 16) -> Example:
    """GPT-2 from transformers' GPT2Config with random weights (needs transformers)."""
    from transformers import GPT2Config, GPT2Model

    torch.manual_seed(0)
    heads = 12 if width % 12 == 0 and width >= 384 else 4
    config = GPT2Config(
        n_layer=layers,
        n_embd=width,
        n_head=heads,
        vocab_size=1000,
        n_positions=max(64, sequence),
        bos_token_id=0,
        eos_token_id=0,
        use_cache=False,
    )
    model = _GPT2Hidden(GPT2Model(config))
    return model.eval(), (torch.randint(0, 1000, (1, sequence)),)


EXAMPLES: dict[str, Callable[[], Example]] = {
    "double_transpose": double_transpose,
    "cnn": cnn,
    "transformer_encoder": transformer_encoder,
    "mlp": mlp,
    "gpt2": gpt2,
}


@functools.cache
def plain_export_bytes(name: str) -> bytes:
    """The example's ``torch.onnx.export`` (dynamo, ``optimize=False``), serialized; made
    once per process (tests read fresh copies of it)."""
    import onnx_ir as ir

    module, args = EXAMPLES[name]()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(module, args, dynamo=True, optimize=False, verbose=False)
    if program is None:  # pragma: no cover - dynamo always returns a program
        raise RuntimeError(f"torch.onnx.export returned no program for {name!r}")
    data: bytes = ir.to_proto(program.model).SerializeToString()
    return data


@functools.cache
def optimized_export_bytes(name: str) -> bytes:
    """:func:`plain_export_bytes` after ``modelprov.optimize``, serialized; made once."""
    import onnx
    import onnx_ir as ir

    from modelprov.onnx.optimize._optimize import optimize

    model = optimize(ir.from_proto(onnx.load_from_string(plain_export_bytes(name))))
    data: bytes = ir.to_proto(model).SerializeToString()
    return data
