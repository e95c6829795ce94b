"""Small models that several comparison tests share, built in code with seeded random weights."""

from __future__ import annotations

import torch


def relu_gelu_mlp(seed: int = 0) -> torch.nn.Module:
    """A 16 → 32 → 32 → 4 MLP with a ReLU and a GELU, in eval mode."""
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Linear(16, 32),
        torch.nn.ReLU(),
        torch.nn.Linear(32, 32),
        torch.nn.GELU(),
        torch.nn.Linear(32, 4),
    ).eval()
