"""Fully connected autoencoder (for reconstruction-based anomaly scores)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import torch
from torch import nn

from torchstream.models._common import check_hidden, check_input, check_int, make_activation

__all__ = ["Autoencoder"]


def _stack(widths: Sequence[int], activation: str) -> nn.Sequential:
    """Linear layers through ``widths`` with ``activation`` between them (not after the last)."""
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(itertools.pairwise(widths)):
        if i > 0:
            layers.append(make_activation(activation))
        layers.append(nn.Linear(a, b))
    return nn.Sequential(*layers)


class Autoencoder(nn.Module):
    """Autoencoder ``[B, n_features] -> [B, latent] -> [B, n_features]``.

    The encoder goes through the ``hidden`` widths down to ``latent``; the decoder mirrors it
    (``hidden`` reversed). The code and the reconstruction are linear (no final activation).

    Parameters
    ----------
    n_features
        Input (and reconstruction) width ``d``.
    latent
        Width of the code.
    hidden
        Widths of the encoder's hidden layers (the decoder uses them reversed).
    activation
        ``"relu"``, ``"tanh"``, ``"sigmoid"``, ``"gelu"`` or ``"leaky_relu"``.

    Example
    -------
    >>> _ = torch.manual_seed(0)
    >>> ae = Autoencoder(6, latent=2, hidden=(4,))
    >>> x = torch.randn(5, 6)
    >>> ae.encode(x).shape, ae(x).shape, ae.reconstruction_error(x).shape
    (torch.Size([5, 2]), torch.Size([5, 6]), torch.Size([5]))
    """

    def __init__(
        self,
        n_features: int,
        latent: int = 8,
        hidden: Sequence[int] = (32,),
        activation: str = "relu",
    ) -> None:
        super().__init__()
        self.n_features = check_int(n_features, "n_features")
        self.latent = check_int(latent, "latent")
        self.hidden = check_hidden(hidden)
        make_activation(activation)  # validate the name even when there is no hidden layer
        self.activation = activation
        widths = (self.n_features, *self.hidden, self.latent)
        self.encoder = _stack(widths, activation)
        self.decoder = _stack(widths[::-1], activation)

    @property
    def n_outputs(self) -> int:
        """Output width: the reconstruction has ``n_features`` columns."""
        return self.n_features

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """``[B, n_features] -> [B, latent]``."""
        check_input(x, self.n_features, type(self).__name__)
        return self.encoder(x)

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """``[B, latent] -> [B, n_features]``."""
        check_input(z, self.latent, type(self).__name__, argument="z")
        return self.decoder(z)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Reconstruction ``[B, n_features] -> [B, n_features]``."""
        return self.decode(self.encode(x))

    def reconstruction_error(self, x: torch.Tensor) -> torch.Tensor:
        """Per-sample mean squared error ``((x - forward(x)) ** 2).mean(1)``, shape ``[B]``."""
        return (x - self(x)).pow(2).mean(dim=1)

    def extra_repr(self) -> str:
        return f"n_features={self.n_features}, latent={self.latent}"
