"""Probit GLM with a Gaussian distribution on every weight, closed-form marginal likelihood.

The base model of FIRES-GLM (J. Haug, M. Pawelczyk, K. Broelemann and G. Kasneci, "Leveraging
Model Inherent Variable Importance for Stable Online Feature Selection", KDD 2020, §2.1.1) and of
ERICS (J. Haug and G. Kasneci, "Learning Parameter Distributions to Detect Concept Drift in Data
Streams", ICPR 2020). With ``theta_j ~ N(mu_j, sigma_j)`` independent and ``y in {-1, +1}``,

    s = sum_j mu_j x_j,   rho = sqrt(1 + sum_j sigma_j**2 x_j**2),   z = y s / rho,
    P(y | x, psi) = Phi(z),

and the gradients of ``log P`` are ``lambda(z) y x_j / rho`` for ``mu_j`` and
``-lambda(z) y s x_j**2 sigma_j / rho**3`` for ``sigma_j``, with ``lambda = phi / Phi`` the
inverse Mills ratio. Both are computed from ``log_ndtr`` so that they stay finite far in the
tails (``z = -50`` and beyond in float64).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from torchstream.models.distributional._base import GaussianHead, binary_labels, check_rows

__all__ = ["ProbitHead", "probit_log_likelihood", "probit_log_likelihood_grad"]

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


def _moments(
    X: Tensor, y: Tensor, mu: Tensor, sigma: Tensor, X2: Tensor | None = None
) -> tuple[Tensor, Tensor, Tensor]:
    """``(s, rho, z)`` of the module docstring; ``X2`` is ``X * X`` when the caller has it."""
    s = X @ mu
    rho = torch.sqrt(1.0 + (X * X if X2 is None else X2) @ (sigma * sigma))
    return s, rho, y * s / rho


def probit_log_likelihood(X: Tensor, y: Tensor, mu: Tensor, sigma: Tensor) -> Tensor:
    """``log Phi(y s / rho)`` for every row, ``[B]`` (``y`` in ``{-1, +1}``).

    A pure function of its tensors (differentiable by autograd); no input checks."""
    return torch.special.log_ndtr(_moments(X, y, mu, sigma)[2])


def inverse_mills_ratio(z: Tensor) -> Tensor:
    """``phi(z) / Phi(z)`` computed as ``exp(log phi(z) - log Phi(z))`` (finite for every
    finite ``z``; about ``-z`` for very negative ``z``)."""
    return torch.exp(-0.5 * z * z - _HALF_LOG_2PI - torch.special.log_ndtr(z))


def probit_log_likelihood_grad(
    X: Tensor, y: Tensor, mu: Tensor, sigma: Tensor
) -> tuple[Tensor, Tensor]:
    """Batch-mean gradients ``(d/dmu, d/dsigma)`` of :func:`probit_log_likelihood`, each ``[d]``,
    from the hand-derived closed forms."""
    X2 = X * X  # read by rho and by the sigma gradient: computed once
    s, rho, z = _moments(X, y, mu, sigma, X2)
    lam = inverse_mills_ratio(z)
    batch = X.shape[0]
    g_mu = (lam * y / rho) @ X / batch
    g_sigma = ((-lam * y * s / rho**3) @ X2) * sigma / batch
    return g_mu, g_sigma


class ProbitHead(GaussianHead):
    """Probit GLM ``P(y = 1 | x, theta) = Phi(x @ theta)`` with ``theta_j ~ N(mu_j, sigma_j)``.

    Learns ``(mu, sigma)`` by gradient ascent on the closed-form log marginal likelihood (see the
    module docstring): every :meth:`learn` call is one time step of ``epochs`` full-batch steps
    with the batch-mean gradient, ``mu += lr_mu * grad``, ``sigma += lr_sigma * grad`` and then
    ``sigma = max(sigma, sigma_min)``. All computations run in ``dtype`` (float64 by default,
    which keeps ``log Phi`` exact far into the tails).

    Labels are binary: ``1`` (or ``True``) is the positive class, ``0`` or ``-1`` (or
    ``False``) the negative one, so both the ``{0, 1}`` and the ``{-1, +1}`` encodings work;
    other values raise an error. Map other class names to these explicitly.

    There is **no intercept**, as in the reference implementation of FIRES; the paper's
    intercept would in any case be discarded from the feature scores because it belongs to no
    feature. Centre the features, or append a constant column (which then counts as a feature).
    Each weight belongs to exactly one feature, so :meth:`feature_stats` and
    :meth:`param_stats` are the same ``(mu[d], sigma[d])``.

    Parameters
    ----------
    n_features
        ``d``, the number of input features (and of weights).
    lr_mu, lr_sigma
        Learning rates of ``mu`` and ``sigma`` (> 0).
    epochs
        Gradient steps per :meth:`learn` call (>= 1).
    sigma_min
        Lower bound of every ``sigma`` (> 0), applied after each step.
    mu_init, sigma_init
        Initial ``mu`` and ``sigma`` of every weight (``N(0, 1)`` as in the paper).
    dtype, device
        Where ``mu`` and ``sigma`` live; ``X`` must be on ``device`` and is cast to ``dtype``.

    Example
    -------
    >>> g = torch.Generator().manual_seed(0)
    >>> X = torch.randn(200, 4, generator=g, dtype=torch.float64)
    >>> y = (X[:, 0] - 2 * X[:, 2] > 0).long()
    >>> head = ProbitHead(4, lr_mu=0.1, epochs=5)
    >>> head.learn(X, y)
    >>> mu, sigma = head.feature_stats()
    >>> [round(v, 3) for v in mu.tolist()]
    [0.062, 0.012, -0.124, -0.024]
    >>> [round(v, 3) for v in sigma.tolist()]
    [1.0, 1.0, 1.0, 1.0]
    >>> round(head.log_marginal_likelihood(X, y).mean().item(), 4)
    -0.6534
    """

    def __init__(
        self,
        n_features: int,
        *,
        lr_mu: float = 0.01,
        lr_sigma: float = 0.01,
        epochs: int = 1,
        sigma_min: float = 1e-6,
        mu_init: float = 0.0,
        sigma_init: float = 1.0,
        dtype: torch.dtype = torch.float64,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__(locals())
        self._init_groups({"weight": (self.n_features,)})

    @property
    def mu(self) -> Tensor:
        """``mu[d]`` (a detached copy)."""
        return self._mu["weight"].clone()

    @property
    def sigma(self) -> Tensor:
        """``sigma[d]`` (a detached copy)."""
        return self._sigma["weight"].clone()

    def _prepare(self, X: Tensor, y: Tensor | None) -> tuple[Tensor, Tensor]:
        owner = type(self).__name__
        X = check_rows(X, self.n_features, self.dtype, self.device, owner)
        return X, binary_labels(y, X.shape[0], self.dtype, self.device, owner)

    def _gradients(
        self, X: Tensor, y: Tensor | None
    ) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
        assert y is not None
        g_mu, g_sigma = probit_log_likelihood_grad(X, y, self._mu["weight"], self._sigma["weight"])
        return {"weight": g_mu}, {"weight": g_sigma}

    def log_marginal_likelihood(self, X: Tensor, y: Tensor | None = None) -> Tensor:
        """``log P(y | x, psi) = log Phi(y s / rho)`` for every row, ``[B]``."""
        X, y = self._prepare(X, y)
        return probit_log_likelihood(X, y, self._mu["weight"], self._sigma["weight"])

    def predict_proba(self, X: Tensor) -> Tensor:
        """``P(y = 1 | x, psi) = Phi(s / rho)`` for every row, ``[B]``."""
        X = check_rows(X, self.n_features, self.dtype, self.device, type(self).__name__)
        ones = torch.ones(X.shape[0], dtype=self.dtype, device=self.device)
        s, rho, _ = _moments(X, ones, self._mu["weight"], self._sigma["weight"])
        return torch.special.ndtr(s / rho)

    def feature_stats(self) -> tuple[Tensor, Tensor]:
        """``(mu[d], sigma[d])``: weight ``j`` belongs to feature ``j`` (detached copies)."""
        return self.mu, self.sigma
