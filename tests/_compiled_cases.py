"""Small models and streams shared by the tests of the compiled steps."""

from __future__ import annotations

import torch
from torch import nn

D = 4
N_BATCHES = 6


def mlp(out: int, dtype: torch.dtype, softmax: bool = False, d: int = D,
        activation: type[nn.Module] = nn.ReLU) -> nn.Module:
    """A seeded ``d``-16-``out`` MLP (a softmax on top when asked) in ``dtype``."""
    torch.manual_seed(0)
    layers: list[nn.Module] = [nn.Linear(d, 16), activation(), nn.Linear(16, out)]
    if softmax:
        layers.append(nn.Softmax(dim=1))
    return nn.Sequential(*layers).to(dtype)


def stream(b: int, dtype: torch.dtype, classes: bool) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """``N_BATCHES`` seeded batches of ``b`` rows of ``D`` features: three classes, or a linear
    regression target."""
    g = torch.Generator().manual_seed(5)
    X = torch.randn(b * N_BATCHES, D, generator=g, dtype=dtype)
    y = (X[:, 0] > 0).long() + (X[:, 1] > 1).long() if classes else 2 * X[:, 0] - X[:, 2]
    return [(X[i : i + b], y[i : i + b]) for i in range(0, X.shape[0], b)]
