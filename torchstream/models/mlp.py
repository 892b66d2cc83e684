"""Multi-layer perceptron."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from torchstream.models._common import (
    OutputLayerWidth,
    check_hidden,
    check_input,
    check_int,
    make_activation,
)

__all__ = ["MLP"]


class MLP(OutputLayerWidth, nn.Module):
    """Fully connected network ``[B, n_features] -> [B, n_outputs]``.

    The output is raw: logits for classification (no softmax), values for regression.

    Parameters
    ----------
    n_features
        Input width ``d``.
    n_outputs
        Output width (number of classes, or of regression targets).
    hidden
        Widths of the hidden layers; ``()`` gives a linear model.
    activation
        ``"relu"``, ``"tanh"``, ``"sigmoid"``, ``"gelu"`` or ``"leaky_relu"``.
    dropout
        Dropout probability after each hidden activation, in ``[0, 1)``.

    Attributes
    ----------
    body
        The hidden layers (``nn.Sequential``; empty for ``hidden=()``).
    output_layer
        The final ``nn.Linear``. A learner may replace it with a wider one when a new class
        appears; :attr:`n_outputs` follows it.

    Example
    -------
    >>> _ = torch.manual_seed(0)
    >>> model = MLP(3, 2, hidden=(8, 8), activation="tanh")
    >>> model(torch.zeros(5, 3)).shape
    torch.Size([5, 2])
    >>> model.output_layer
    Linear(in_features=8, out_features=2, bias=True)
    """

    def __init__(
        self,
        n_features: int,
        n_outputs: int,
        hidden: Sequence[int] = (64,),
        activation: str = "relu",
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        self.n_features = check_int(n_features, "n_features")
        n_outputs = check_int(n_outputs, "n_outputs")
        self.hidden = check_hidden(hidden)
        self.activation = activation
        dropout = float(dropout)
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        self.dropout = dropout

        layers: list[nn.Module] = []
        width = self.n_features
        for h in self.hidden:
            layers.append(nn.Linear(width, h))
            layers.append(make_activation(activation))
            if dropout > 0.0:
                layers.append(nn.Dropout(dropout))
            width = h
        if not self.hidden:
            make_activation(activation)  # validate the name even when unused
        self.body = nn.Sequential(*layers)
        self.output_layer = nn.Linear(width, n_outputs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``[B, n_features] -> [B, n_outputs]`` raw scores."""
        check_input(x, self.n_features, type(self).__name__)
        return self.output_layer(self.body(x))

    def extra_repr(self) -> str:
        return f"n_features={self.n_features}, n_outputs={self.n_outputs}"
