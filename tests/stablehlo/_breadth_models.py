"""Small models that once failed to lower to StableHLO (issue 24): each a factory giving the
module, example args, ``dynamic_shapes`` (or None) and a function making other inputs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

Inputs = Callable[[torch.Generator], tuple[torch.Tensor, ...]]
Case = tuple[nn.Module, tuple[torch.Tensor, ...], Any, Inputs]


class _Rotary(nn.Module):  # type: ignore[misc]
    """Rotary tables gathered by position ids (``cos[position_ids]``: ``aten.index``)."""

    def __init__(self, head_dim: int, max_positions: int = 16) -> None:
        super().__init__()
        inv_freq = 1.0 / (10000 ** (torch.arange(0, head_dim, 2).float() / head_dim))
        angles = torch.outer(torch.arange(max_positions).float(), inv_freq)
        angles = torch.cat([angles, angles], dim=-1)
        self.register_buffer("cos_cached", angles.cos(), persistent=False)
        self.register_buffer("sin_cached", angles.sin(), persistent=False)

    def forward(self, position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.cos_cached[position_ids].unsqueeze(1), self.sin_cached[position_ids].unsqueeze(
            1
        )


class _MultiQueryAttention(nn.Module):  # type: ignore[misc]
    """Falcon's fused QKV split with index lists (``fused[:, :, [-2]]``: ``aten.index`` on a
    lifted constant), rotary embeddings and a boolean causal mask."""

    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.head_dim = hidden // heads
        self.qkv = nn.Linear(hidden, hidden + 2 * self.head_dim, bias=False)
        self.dense = nn.Linear(hidden, hidden, bias=False)

    @staticmethod
    def _rotate_half(x: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        return torch.cat([-x[..., half:], x[..., :half]], dim=-1)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        batch, seq, _ = x.shape
        fused = self.qkv(x).view(batch, seq, self.heads + 2, self.head_dim)
        q = fused[:, :, :-2].transpose(1, 2)
        k = fused[:, :, [-2]].transpose(1, 2)
        v = fused[:, :, [-1]].transpose(1, 2)
        q = q * cos + self._rotate_half(q) * sin
        k = k * cos + self._rotate_half(k) * sin
        scores = q @ k.transpose(-1, -2) / self.head_dim**0.5
        future = torch.ones(seq, seq, dtype=torch.bool).triu(1)
        scores = scores.masked_fill(future[None, None], float("-inf"))
        out = scores.softmax(-1) @ v
        return self.dense(out.transpose(1, 2).reshape(batch, seq, -1))


class FalconLike(nn.Module):  # type: ignore[misc]
    """Laid out like transformers' FalconModel: the attention (whose index lists torch.export
    lifts as constants) is registered before the rotary module holding buffers, so the
    program's inputs list those constants before the buffers."""

    def __init__(self, hidden: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.attention = _MultiQueryAttention(hidden, heads)
        self.rotary_emb = _Rotary(hidden // heads)

    def forward(self, x: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
        cos, sin = self.rotary_emb(position_ids)
        return self.attention(x, cos, sin)


def falcon_attention() -> Case:
    torch.manual_seed(0)
    model = FalconLike().eval()

    def inputs(generator: torch.Generator) -> tuple[torch.Tensor, ...]:
        positions = torch.randperm(16, generator=generator)[:6].sort().values
        return torch.randn(2, 6, 32, generator=generator), positions.expand(2, 6).clone()

    generator = torch.Generator().manual_seed(0)
    return model, inputs(generator), None, inputs


class KVCacheStep(nn.Module):  # type: ignore[misc]
    """One decoder step: new keys/values appended to the cache with ``torch.cat``."""

    def __init__(self, hidden: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.head_dim = hidden // heads
        self.q = nn.Linear(hidden, hidden)
        self.k = nn.Linear(hidden, hidden)
        self.v = nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, hidden)

    def _split(self, t: torch.Tensor) -> torch.Tensor:
        return t.view(t.shape[0], t.shape[1], self.heads, self.head_dim).transpose(1, 2)

    def forward(
        self, x: torch.Tensor, past_key: torch.Tensor, past_value: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        q, k, v = self._split(self.q(x)), self._split(self.k(x)), self._split(self.v(x))
        keys = torch.cat([past_key, k], dim=2)
        values = torch.cat([past_value, v], dim=2)
        attention = nn.functional.scaled_dot_product_attention(q, keys, values)
        merged = attention.transpose(1, 2).reshape(x.shape[0], x.shape[1], -1)
        return self.out(merged), keys, values


def kv_cache_step() -> Case:
    """A decoder step whose past length is a symbolic dimension."""
    torch.manual_seed(0)
    model = KVCacheStep().eval()
    past = torch.export.Dim("past", min=1, max=64)

    def inputs(generator: torch.Generator) -> tuple[torch.Tensor, ...]:
        length = int(torch.randint(1, 10, (), generator=generator))
        return (
            torch.randn(2, 1, 32, generator=generator),
            torch.randn(2, 4, length, 8, generator=generator),
            torch.randn(2, 4, length, 8, generator=generator),
        )

    generator = torch.Generator().manual_seed(0)
    example = inputs(generator)
    while example[1].shape[2] < 2:  # torch.export specializes sizes 0 and 1
        example = inputs(generator)
    return model, example, (None, {2: past}, {2: past}), inputs


class _LastHiddenState(nn.Module):  # type: ignore[misc]
    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        return self.model(pixel_values=pixel_values).last_hidden_state  # type: ignore[no-any-return]


def efficientnet_block() -> Case:
    """transformers' EfficientNet (tiny config): MBConv blocks with depthwise convolutions,
    squeeze-and-excitation and stochastic depth (eval). Weights and batch-norm statistics
    are drawn again (transformers' init makes the output all zeros)."""
    from transformers import EfficientNetConfig, EfficientNetModel

    config = EfficientNetConfig(
        image_size=32,
        width_coefficient=0.25,
        depth_coefficient=0.25,
        hidden_dim=320,
        num_hidden_layers=4,
    )
    model = _LastHiddenState(EfficientNetModel(config)).eval()
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.3)
        for module in model.modules():
            if isinstance(module, nn.BatchNorm2d):
                module.running_mean.uniform_(-0.5, 0.5, generator=generator)
                module.running_var.uniform_(0.5, 2.0, generator=generator)

    def inputs(generator: torch.Generator) -> tuple[torch.Tensor, ...]:
        return (torch.randn(1, 3, 32, 32, generator=generator),)

    return model, inputs(generator), None, inputs


class CondModel(nn.Module):  # type: ignore[misc]
    """``torch.cond`` whose branches are small layers (a linear in one, a module in the other)."""

    def __init__(self) -> None:
        super().__init__()
        self.positive = nn.Linear(8, 8)
        self.negative = nn.Sequential(nn.Linear(8, 8), nn.Tanh())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        def when_positive(t: torch.Tensor) -> torch.Tensor:
            return self.positive(t).relu()

        def when_negative(t: torch.Tensor) -> torch.Tensor:
            return self.negative(t) * 2.0

        return torch.cond(x.sum() > 0, when_positive, when_negative, (x,))


def cond_model() -> Case:
    torch.manual_seed(0)
    model = CondModel().eval()

    def inputs(generator: torch.Generator) -> tuple[torch.Tensor, ...]:
        sign = 1.0 if torch.rand((), generator=generator) > 0.5 else -1.0
        return (torch.randn(3, 8, generator=generator).abs() * sign,)

    return model, (torch.ones(3, 8),), None, inputs


class TwoDynamicDims(nn.Module):  # type: ignore[misc]
    """Embedding + attention + pooling over a batch and a sequence length that both vary."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(50, 16)
        self.attention = nn.MultiheadAttention(16, 2, batch_first=True)
        self.norm = nn.LayerNorm(16)
        self.head = nn.Linear(16, 3)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        hidden = self.embed(ids)
        attended, _ = self.attention(hidden, hidden, hidden, need_weights=False)
        hidden = self.norm(hidden + attended)
        positions = torch.arange(ids.shape[1]).float().unsqueeze(-1)
        return self.head((hidden * positions).mean(1))


def two_dynamic_dims() -> Case:
    torch.manual_seed(0)
    model = TwoDynamicDims().eval()
    batch = torch.export.Dim("batch", min=1, max=64)
    sequence = torch.export.Dim("sequence", min=2, max=128)

    def inputs(generator: torch.Generator) -> tuple[torch.Tensor, ...]:
        b = int(torch.randint(1, 6, (), generator=generator))
        s = int(torch.randint(2, 12, (), generator=generator))
        return (torch.randint(0, 50, (b, s), generator=generator),)

    return model, (torch.randint(0, 50, (3, 7)),), ({0: batch, 1: sequence},), inputs


CASES: dict[str, Callable[[], Case]] = {
    "falcon_attention": falcon_attention,
    "kv_cache_step": kv_cache_step,
    "efficientnet_block": efficientnet_block,
    "cond_model": cond_model,
    "two_dynamic_dims": two_dynamic_dims,
}
