"""Bias-free Softplus MLP with a Gaussian distribution on every weight (FIRES-ANN).

J. Haug, M. Pawelczyk, K. Broelemann and G. Kasneci, "Leveraging Model Inherent Variable
Importance for Stable Online Feature Selection", KDD 2020, §2.1.2 (Monte-Carlo marginal
likelihood with the reparameterisation trick) and §2.1.4 (aggregation of the weights to one
``(mu, sigma)`` per input feature).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

import torch
from torch import Tensor
from torch.nn import functional as F

from torchstream.models._common import check_hidden
from torchstream.models.distributional._monte_carlo import Likelihood, MonteCarloHead

__all__ = ["MLPHead", "mlp_feature_aggregation"]

Aggregation = Literal["paper", "abs_first_layer"]


def mlp_feature_aggregation(layers: Sequence[Tensor], aggregation: Aggregation = "paper") -> Tensor:
    """One value per input feature from per-layer weight matrices ``[out, in]`` (first layer
    ``[H1, d]``), applied alike to the ``mu`` and to the ``sigma`` matrices.

    ``"paper"`` (KDD 2020, §2.1.4, fully connected case): the mean of feature ``j``'s column of
    the first layer plus, for every later layer, the mean of all its weights (the same offset
    for every feature). ``"abs_first_layer"`` (an extension): the column mean of the absolute
    first-layer values, with no offset; it does not let weights of mixed sign cancel."""
    first = layers[0]
    if aggregation == "abs_first_layer":
        return first.abs().mean(dim=0)
    if aggregation != "paper":
        raise ValueError(f"aggregation must be 'paper' or 'abs_first_layer', got {aggregation!r}")
    offset = sum((w.mean() for w in layers[1:]), first.new_zeros(()))
    return first.mean(dim=0) + offset


class MLPHead(MonteCarloHead):
    """Fully connected, bias-free MLP ``d -> hidden... -> n_outputs`` with Softplus hidden
    activations and an independent Gaussian ``N(mu, sigma)`` on every weight.

    The log marginal likelihood is the Monte-Carlo estimate ``log (1/L) sum_l
    f_{theta^(l)}(x)_y`` with ``L = n_samples`` reparameterised weight draws, all pushed through
    the network in one batched forward pass; :meth:`learn` follows its autograd gradient
    (ascent, batch mean, ``epochs`` steps, ``sigma`` clamped at ``sigma_min``).

    Output likelihoods (``likelihood``):

    * ``"sigmoid"`` (default) and ``"probit"``: binary classification, one output unit with a
      logistic or a standard-normal link, labels ``0/1`` or ``-1/+1`` as in the paper;
    * ``"softmax"``: **extension** (not evaluated in the paper), categorical over
      ``n_classes`` classes, labels ``0..n_classes-1``; with ``n_classes=2`` it is the
      two-unit log-softmax output of the authors' reference code;
    * ``"gaussian"``: **extension** (the paper covers no regression), ``y ~ N(f(x),
      noise_std**2)`` with a fixed ``noise_std``.

    :meth:`feature_stats` follows the paper's path aggregation (see
    :func:`mlp_feature_aggregation`): ``mu_j = mean_i mu1[i, j] + sum_{h >= 2} mean(mu_h)``
    over every later weight matrix including the output layer, and the same, linearly, for
    ``sigma``. ``aggregation="abs_first_layer"`` is a documented extension. :meth:`param_stats`
    flattens all layers (``layer0``, ``layer1``, ..., ``output``).

    Parameters
    ----------
    n_features
        ``d``, the input width.
    hidden
        Hidden widths; ``(100, 100, 100)`` as in the paper, smaller ones are fine, ``()`` gives a
        linear model.
    likelihood, n_classes, noise_std
        The output likelihood (see above); ``n_classes`` only for ``"softmax"``, ``noise_std``
        only for ``"gaussian"``.
    n_samples
        ``L``, the weight draws per estimate (5 in the paper).
    aggregation
        ``"paper"`` or ``"abs_first_layer"``.
    lr_mu, lr_sigma, epochs, sigma_min, mu_init, sigma_init
        As for :class:`~torchstream.models.distributional.ProbitHead` (init ``N(0, 1)``).
    mu_init_std
        Extension: if > 0, every ``mu`` starts at ``mu_init`` plus ``N(0, mu_init_std**2 /
        fan_in)`` noise from the head's generator. With the paper's ``mu = 0`` and a hidden
        layer, the output is symmetric in sign (``P(y | x) = 1/2`` in expectation) and ``mu = 0``
        is a stationary point of the expected objective; only the Monte-Carlo noise moves it.
    seed
        Seed of the head's own generator for the Monte-Carlo noise.
    dtype, device
        Where ``mu`` and ``sigma`` live (float32 by default).

    Example
    -------
    The paper's initialisation ``mu = 0`` is a stationary point for a net with hidden layers
    (every weight draw and its negation are equally likely), so this example breaks the
    symmetry with ``mu_init_std`` and ranks by the absolute first-layer aggregation:

    >>> g = torch.Generator().manual_seed(0)
    >>> X = torch.randn(100, 3, generator=g)
    >>> y = (X[:, 0] > 0).long()
    >>> head = MLPHead(3, hidden=(8,), lr_mu=1.0, lr_sigma=1.0, sigma_init=0.1,
    ...                mu_init_std=0.3, aggregation="abs_first_layer", seed=0)
    >>> for _ in range(20):
    ...     head.learn(X, y)
    >>> [tuple(m.shape) for m, _ in head.groups.values()]
    [(8, 3), (1, 8)]
    >>> mu, sigma = head.feature_stats()
    >>> [round(v, 3) for v in mu.tolist()]
    [0.594, 0.167, 0.092]
    >>> [round(v, 3) for v in sigma.tolist()]
    [0.102, 0.092, 0.092]
    """

    def __init__(
        self,
        n_features: int,
        *,
        hidden: Sequence[int] = (100, 100, 100),
        likelihood: Likelihood = "sigmoid",
        n_classes: int = 2,
        noise_std: float = 1.0,
        n_samples: int = 5,
        aggregation: Aggregation = "paper",
        lr_mu: float = 0.01,
        lr_sigma: float = 0.01,
        epochs: int = 1,
        sigma_min: float = 1e-6,
        mu_init: float = 0.0,
        sigma_init: float = 1.0,
        mu_init_std: float = 0.0,
        seed: int | None = 0,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__(locals())
        self.hidden = check_hidden(hidden)
        if aggregation not in ("paper", "abs_first_layer"):
            raise ValueError(
                f"aggregation must be 'paper' or 'abs_first_layer', got {aggregation!r}"
            )
        self.aggregation: Aggregation = aggregation
        widths = (self.n_features, *self.hidden)
        shapes = {f"layer{i}": (widths[i + 1], widths[i]) for i in range(len(self.hidden))}
        shapes["output"] = (self.n_outputs, widths[-1])
        self._init_groups(shapes)
        self.mu_init_std = self._random_mu(mu_init_std)

    def _forward(self, theta: Mapping[str, Tensor], X: Tensor) -> Tensor:
        h = X  # [B, d], broadcast against [L, out, in] weights
        for i in range(len(self.hidden)):
            h = F.softplus(torch.matmul(h, theta[f"layer{i}"].transpose(-1, -2)))
        return torch.matmul(h, theta["output"].transpose(-1, -2))  # [L, B, n_outputs]

    def feature_stats(self) -> tuple[Tensor, Tensor]:
        """``(mu[d], sigma[d])`` by the path aggregation of the paper (or the
        ``"abs_first_layer"`` extension), from detached copies."""
        mus = [m.clone() for m in self._mu.values()]
        sigmas = [s.clone() for s in self._sigma.values()]
        return (
            mlp_feature_aggregation(mus, self.aggregation),
            mlp_feature_aggregation(sigmas, self.aggregation),
        )

    def _config(self) -> dict[str, object]:
        return {**super()._config(), "hidden": self.hidden, "aggregation": self.aggregation}
