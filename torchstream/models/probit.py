"""Linear probit model."""

from __future__ import annotations

import torch
from torch import nn

from torchstream.models._common import OutputLayerWidth, check_input, check_int

__all__ = ["Probit"]


class Probit(OutputLayerWidth, nn.Module):
    """Linear probit model ``[B, n_features] -> [B, n_outputs]``.

    :meth:`forward` returns the probit score ``s = x @ w + b``; the model reads it as
    ``P(y = 1 | x) = Phi(s)``, with ``Phi`` the standard normal CDF (:meth:`proba`). With
    ``n_outputs > 1`` every output column is an independent probit (one per binary target).

    The class attribute ``link = "probit"`` tells a learner to map a single score to a
    probability with ``Phi`` (not the logistic function); the Bernoulli log-likelihood is then
    ``log Phi(s)`` for ``y = 1`` and ``log Phi(-s)`` for ``y = 0``.

    Note: the parameters are point estimates here. A Gaussian distribution over ``w`` (a mean
    and a standard deviation per weight, as the FIRES feature-importance method needs) is meant
    to be added as a separate head on top of :attr:`output_layer`, not by changing this
    interface.

    Parameters
    ----------
    n_features
        Input width ``d``.
    n_outputs
        Number of independent binary targets.

    Attributes
    ----------
    output_layer
        The ``nn.Linear`` holding ``w`` and ``b``.
    link
        ``"probit"``.

    Example
    -------
    >>> model = Probit(2)
    >>> with torch.no_grad():
    ...     _ = model.output_layer.weight.copy_(torch.tensor([[1.0, -1.0]]))
    ...     _ = model.output_layer.bias.zero_()
    >>> x = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 1.96]])
    >>> model(x).flatten().tolist()
    [0.0, 1.0, -1.9600000381469727]
    >>> [round(p, 4) for p in model.proba(x).flatten().tolist()]
    [0.5, 0.8413, 0.025]
    """

    link: str = "probit"

    def __init__(self, n_features: int, n_outputs: int = 1) -> None:
        super().__init__()
        self.n_features = check_int(n_features, "n_features")
        self.output_layer = nn.Linear(self.n_features, check_int(n_outputs, "n_outputs"))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Probit scores ``[B, n_features] -> [B, n_outputs]``."""
        check_input(x, self.n_features, type(self).__name__)
        return self.output_layer(x)

    def proba(self, x: torch.Tensor) -> torch.Tensor:
        """``P(y = 1 | x) = Phi(x @ w + b)``, shape ``[B, n_outputs]``."""
        return torch.special.ndtr(self(x))

    def extra_repr(self) -> str:
        return f"n_features={self.n_features}, n_outputs={self.n_outputs}"
