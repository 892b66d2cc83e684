"""Label-free autoencoder with a Gaussian distribution on every weight.

**An extension beyond the papers.** The uncertainty framework of FIRES and ERICS (J. Haug et
al., KDD 2020, §2; J. Haug and G. Kasneci, ICPR 2020) is supervised: it maximises the log
marginal likelihood of the labels. Here the same machinery (independent Gaussian weights, plain
gradient ascent on a Monte-Carlo log marginal likelihood, no prior) is applied to the
reconstruction likelihood of the input itself, ``x ~ N(g_theta(x), noise_std**2 I)``, so that
ERICS can watch the weight distributions move when the input distribution ``P(X)`` changes,
without labels.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Literal

import torch
from torch import Tensor
from torch.nn import functional as F

from torchstream.models._common import check_hidden, check_int
from torchstream.models.distributional._base import check_rows
from torchstream.models.distributional._monte_carlo import MonteCarloHead

__all__ = ["AutoencoderHead"]

FeatureLayer = Literal["path", "encoder", "decoder"]
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


class AutoencoderHead(MonteCarloHead):
    """Bias-free autoencoder ``d -> hidden... -> latent -> reversed(hidden)... -> d`` with an
    independent Gaussian ``N(mu, sigma)`` on every weight, trained without labels.

    Every encoder layer, the code included, and every decoder layer but the last is followed by
    a Softplus; the reconstruction ``g_theta(x)`` is linear. The likelihood is Gaussian with a
    fixed, stated variance: ``log p(x | theta) = sum_j log N(x_j; g_theta(x)_j, noise_std**2)``
    (standardise the features, or set ``noise_std`` to their scale). :meth:`learn` takes ``X``
    only and follows the gradient of the Monte-Carlo log marginal likelihood
    ``log (1/L) sum_l p(x | theta^(l))`` (batch mean, ``epochs`` steps, ``sigma`` clamped).

    :meth:`feature_stats` gives one ``(mu_j, sigma_j)`` per input feature, by
    ``feature_layer``:

    * ``"path"`` (default): the path aggregation of the FIRES paper (§2.1.4) applied to the
      autoencoder. Feature ``j``'s path starts at input node ``j`` and ends at reconstruction
      node ``j``; averaging the weights per layer along it gives the mean of column ``j`` of the
      encoder's first layer, plus the mean of every middle layer (the same offset for all
      features), plus the mean of row ``j`` of the decoder's last layer. Both ends react to a
      change of ``x_j``: the first-layer column through ``x_j`` itself (its ``sigma``
      gradient grows with ``x_j**2``, as in the Probit), the last-layer row through the
      residual of feature ``j`` alone (``d log p / d W[j, i] = (x_j - g_j) h_i /
      noise_std**2`` with ``h_i > 0``, so the whole row moves with one sign).
    * ``"encoder"``: the column mean of the encoder's first layer only.
    * ``"decoder"``: the row mean of the decoder's last layer only.

    :meth:`param_stats` flattens every layer (``encoder0``, ..., ``decoder0``, ...). There are
    no labels, so :meth:`predict_proba` raises; :meth:`reconstruct` gives the Monte-Carlo mean
    reconstruction.

    Parameters
    ----------
    n_features
        ``d``, the input width.
    latent
        Width of the code.
    hidden
        Widths of the encoder's hidden layers (the decoder mirrors them).
    noise_std
        Standard deviation of the Gaussian reconstruction likelihood (> 0).
    n_samples
        ``L``, the weight draws per estimate.
    feature_layer
        ``"path"``, ``"encoder"`` or ``"decoder"`` (see above).
    lr_mu, lr_sigma, epochs, sigma_min, mu_init, sigma_init, mu_init_std, seed, dtype, device
        As for :class:`~torchstream.models.distributional.MLPHead`.

    Example
    -------
    >>> g = torch.Generator().manual_seed(0)
    >>> X = torch.randn(100, 4, generator=g)
    >>> head = AutoencoderHead(4, latent=2, seed=0, lr_mu=0.05, sigma_init=0.1)
    >>> before = head.log_marginal_likelihood(X).mean().item()
    >>> for _ in range(30):
    ...     head.learn(X)
    >>> head.log_marginal_likelihood(X).mean().item() > before
    True
    >>> [round(v, 3) for v in head.feature_stats()[0].tolist()]
    [-0.005, 0.095, 0.154, 0.007]
    """

    def __init__(
        self,
        n_features: int,
        *,
        latent: int = 4,
        hidden: Sequence[int] = (),
        noise_std: float = 1.0,
        n_samples: int = 5,
        feature_layer: FeatureLayer = "path",
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
        super().__init__({**locals(), "likelihood": "gaussian", "n_classes": 2})
        self.latent = check_int(latent, "latent")
        self.hidden = check_hidden(hidden)
        if feature_layer not in ("path", "encoder", "decoder"):
            raise ValueError(
                f"feature_layer must be 'path', 'encoder' or 'decoder', got {feature_layer!r}"
            )
        self.feature_layer: FeatureLayer = feature_layer
        enc = (self.n_features, *self.hidden, self.latent)
        dec = enc[::-1]
        shapes = {f"encoder{i}": (enc[i + 1], enc[i]) for i in range(len(enc) - 1)}
        shapes |= {f"decoder{i}": (dec[i + 1], dec[i]) for i in range(len(dec) - 1)}
        self._n_enc = len(enc) - 1
        self._init_groups(shapes)
        self.mu_init_std = self._random_mu(mu_init_std)

    def _forward(self, theta: Mapping[str, Tensor], X: Tensor) -> Tensor:
        h = X
        for i in range(self._n_enc):
            h = F.softplus(torch.matmul(h, theta[f"encoder{i}"].transpose(-1, -2)))
        for i in range(self._n_enc):
            h = torch.matmul(h, theta[f"decoder{i}"].transpose(-1, -2))
            if i < self._n_enc - 1:
                h = F.softplus(h)
        return h  # [L, B, d]

    def _log_lik_samples(self, out: Tensor, y: Tensor) -> Tensor:
        resid = (y - out) / self.noise_std  # y is X here
        return (-0.5 * resid * resid).sum(-1) - self.n_features * (
            math.log(self.noise_std) + _HALF_LOG_2PI
        )

    def _prepare(self, X: Tensor, y: Tensor | None) -> tuple[Tensor, Tensor]:
        owner = type(self).__name__
        if y is not None:
            raise ValueError(f"{owner} is label-free: y must be None, got {type(y).__name__}")
        X = check_rows(X, self.n_features, self.dtype, self.device, owner)
        return X, X

    def predict_proba(self, X: Tensor, n_samples: int | None = None) -> Tensor:
        """Not available: the autoencoder has no labels (see :meth:`reconstruct`)."""
        raise NotImplementedError(
            f"{type(self).__name__} is label-free and predicts no classes; use reconstruct(X)"
        )

    def reconstruct(self, X: Tensor, n_samples: int | None = None) -> Tensor:
        """Monte-Carlo mean reconstruction ``(1/L) sum_l g_{theta^(l)}(x)``, ``[B, d]``."""
        L = self.n_samples if n_samples is None else check_int(n_samples, "n_samples")
        X = check_rows(X, self.n_features, self.dtype, self.device, type(self).__name__)
        with torch.no_grad():
            return self._forward(self._sample(L), X).mean(0)

    def feature_stats(self) -> tuple[Tensor, Tensor]:
        """``(mu[d], sigma[d])`` per input feature by ``feature_layer`` (detached copies)."""
        return self._aggregate(self._mu), self._aggregate(self._sigma)

    def _aggregate(self, groups: Mapping[str, Tensor]) -> Tensor:
        first = groups["encoder0"].mean(dim=0)
        last = groups[f"decoder{self._n_enc - 1}"].mean(dim=1)
        if self.feature_layer == "encoder":
            return first.clone()
        if self.feature_layer == "decoder":
            return last.clone()
        names = list(groups)
        middle = sum((groups[k].mean() for k in names[1:-1]), first.new_zeros(()))
        return first + middle + last

    def _config(self) -> dict[str, object]:
        return {
            **super()._config(),
            "latent": self.latent,
            "hidden": self.hidden,
            "feature_layer": self.feature_layer,
        }
