"""Soft decision tree with a Gaussian distribution on every weight (FIRES-SDT).

J. Haug, M. Pawelczyk, K. Broelemann and G. Kasneci, "Leveraging Model Inherent Variable
Importance for Stable Online Feature Selection", KDD 2020, §2.1.3-2.1.4; the tree and its
balance penalty follow N. Frosst and G. Hinton, "Distilling a Neural Network Into a Soft Decision
Tree", arXiv:1711.09784, 2017.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Literal

import torch
from torch import Tensor
from torch.nn import functional as F

from torchstream.models._common import check_int
from torchstream.models.distributional._base import check_finite_float
from torchstream.models.distributional._monte_carlo import Likelihood, MonteCarloHead

__all__ = ["SoftTreeHead", "tree_feature_aggregation"]

TreeAggregation = Literal["paper", "abs"]


def tree_feature_aggregation(inner: Tensor, aggregation: TreeAggregation = "paper") -> Tensor:
    """One value per feature from the inner-node weights ``[n_inner, d]`` (``mu`` or ``sigma``).

    ``"paper"`` (KDD 2020, §2.1.4): the mean over the inner nodes, ``(1/N) sum_n w[n, j]``
    (standard deviations are averaged linearly too). ``"abs"`` (an extension): the mean of the
    absolute values, so that nodes using a feature with opposite signs do not cancel."""
    if aggregation == "abs":
        return inner.abs().mean(dim=0)
    if aggregation != "paper":
        raise ValueError(f"aggregation must be 'paper' or 'abs', got {aggregation!r}")
    return inner.mean(dim=0)


class SoftTreeHead(MonteCarloHead):
    """Complete binary soft decision tree of depth ``D`` with Gaussian weights.

    Inner node ``n`` (breadth-first, root ``0``, children ``2n+1`` left and ``2n+2`` right)
    goes right with probability ``p_n(x) = sigmoid(sum_j theta_nj x_j)`` (no bias, one weight
    per node and feature); a leaf's path probability is the product of the branch probabilities
    on its path, and the leaf layer maps the ``2**D`` path probabilities linearly (no bias) to the
    model output: ``f(x) = P_path(x) @ W_leaf^T``. Every weight, inner and leaf, has an
    independent Gaussian ``N(mu, sigma)``; the leaf weights are part of :meth:`param_stats` but
    belong to no feature, so :meth:`feature_stats` uses the inner nodes only: the mean over the
    ``2**D - 1`` inner nodes of ``mu`` and, linearly, of ``sigma`` (``aggregation="paper"``), or
    the mean of their absolute values (``"abs"``, an extension).

    The objective of :meth:`learn` is the Monte-Carlo log marginal likelihood (as for
    :class:`~torchstream.models.distributional.MLPHead`) minus the Frosst-Hinton balance penalty
    averaged over the weight draws: for inner node ``n`` at depth ``k``,
    ``a_n = sum_b P_b(n) p_n(x_b) / sum_b P_b(n)`` (``P_b(n)`` the probability that row ``b``
    reaches ``n``) and the penalty is ``-sum_n penalty * 2**-k * (log a_n + log(1 - a_n)) / 2``,
    computed in log space. ``a_n`` is a ratio of batch sums, so duplicating rows changes nothing.

    Likelihoods as for :class:`~torchstream.models.distributional.MLPHead`: ``"sigmoid"`` or
    ``"probit"`` for binary labels (one leaf output), ``"softmax"`` over ``n_classes`` (the
    class logits of the reference implementation; an extension beyond the binary experiments)
    and ``"gaussian"`` regression (an extension).

    Parameters
    ----------
    n_features
        ``d``, the input width.
    depth
        ``D >= 1`` (3 in the paper): ``2**D - 1`` inner nodes and ``2**D`` leaves.
    penalty
        Coefficient of the balance penalty (0.01 in the paper; 0 switches it off).
    likelihood, n_classes, noise_std, n_samples, aggregation
        See above; ``n_samples`` is ``L`` (5 in the paper).
    lr_mu, lr_sigma, epochs, sigma_min, mu_init, sigma_init, seed, dtype, device
        As for :class:`~torchstream.models.distributional.MLPHead`.
    mu_init_std
        Extension: if > 0, every ``mu`` starts at ``mu_init`` plus ``N(0, mu_init_std**2 /
        fan_in)`` noise from the head's generator. With the paper's ``mu = 0`` every weight
        sample and its negation are equally likely, which makes ``mu = 0`` a stationary point
        of the expected objective; the noise breaks that symmetry.

    Example
    -------
    >>> g = torch.Generator().manual_seed(0)
    >>> X = torch.randn(100, 3, generator=g)
    >>> y = (X[:, 1] > 0).long()
    >>> head = SoftTreeHead(3, depth=2, lr_mu=1.0, lr_sigma=1.0, epochs=3, sigma_init=0.1,
    ...                     mu_init_std=1.0, aggregation="abs", seed=0)
    >>> for _ in range(20):
    ...     head.learn(X, y)
    >>> {k: tuple(m.shape) for k, (m, _) in head.groups.items()}
    {'inner': (3, 3), 'leaves': (1, 4)}
    >>> [round(v, 3) for v in head.feature_stats()[0].tolist()]
    [0.349, 1.52, 0.536]
    """

    def __init__(
        self,
        n_features: int,
        *,
        depth: int = 3,
        penalty: float = 0.01,
        likelihood: Likelihood = "sigmoid",
        n_classes: int = 2,
        noise_std: float = 1.0,
        n_samples: int = 5,
        aggregation: TreeAggregation = "paper",
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
        self.depth = check_int(depth, "depth")
        self.penalty = check_finite_float(penalty, "penalty")
        if self.penalty < 0:
            raise ValueError(f"penalty must be >= 0, got {penalty!r}")
        if aggregation not in ("paper", "abs"):
            raise ValueError(f"aggregation must be 'paper' or 'abs', got {aggregation!r}")
        self.aggregation: TreeAggregation = aggregation
        self.n_inner = 2**self.depth - 1
        self.n_leaves = 2**self.depth
        self._init_groups(
            {"inner": (self.n_inner, self.n_features), "leaves": (self.n_outputs, self.n_leaves)}
        )
        self.mu_init_std = self._random_mu(mu_init_std)

    def _routing(self, inner: Tensor, X: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """``(log_reach [L, B, n_inner], z [L, B, n_inner], log_leaf [L, B, n_leaves])``."""
        z = torch.matmul(X, inner.transpose(-1, -2))  # [L, B, n_inner]
        log_right, log_left = F.logsigmoid(z), F.logsigmoid(-z)
        L, B = z.shape[0], z.shape[1]
        log_path = z.new_zeros(L, B, 1)
        reach = []
        for level in range(self.depth):
            lo, hi = 2**level - 1, 2 ** (level + 1) - 1
            reach.append(log_path)
            left = log_path + log_left[..., lo:hi]
            right = log_path + log_right[..., lo:hi]
            # node i of this level has children 2i (left) and 2i + 1 (right) on the next one
            log_path = torch.stack((left, right), dim=-1).reshape(L, B, 2 * (hi - lo))
        return torch.cat(reach, dim=-1), z, log_path

    def _forward(self, theta: Mapping[str, Tensor], X: Tensor) -> Tensor:
        _, _, log_leaf = self._routing(theta["inner"], X)
        return torch.matmul(log_leaf.exp(), theta["leaves"].transpose(-1, -2))

    def balance_penalty(self, inner: Tensor, X: Tensor) -> Tensor:
        """The Frosst-Hinton penalty ``[L]`` for inner weights ``[L, n_inner, d]`` on ``X``
        (without the coefficient ``penalty``)."""
        log_reach, z, _ = self._routing(inner, X)
        norm = torch.logsumexp(log_reach, dim=1)  # [L, n_inner]
        log_a = torch.logsumexp(log_reach + F.logsigmoid(z), dim=1) - norm
        log_1ma = torch.logsumexp(log_reach + F.logsigmoid(-z), dim=1) - norm
        depth_of = torch.tensor(
            [math.floor(math.log2(n + 1)) for n in range(self.n_inner)],
            dtype=self.dtype,
            device=self.device,
        )
        return -(0.5 * torch.exp2(-depth_of) * (log_a + log_1ma)).sum(dim=-1)

    def _penalty(self, theta: Mapping[str, Tensor], X: Tensor) -> Tensor | None:
        if self.penalty == 0:
            return None
        return self.penalty * self.balance_penalty(theta["inner"], X).mean()

    def feature_stats(self) -> tuple[Tensor, Tensor]:
        """``(mu[d], sigma[d])`` aggregated over the inner nodes (detached copies)."""
        return (
            tree_feature_aggregation(self._mu["inner"].clone(), self.aggregation),
            tree_feature_aggregation(self._sigma["inner"].clone(), self.aggregation),
        )

    def _config(self) -> dict[str, object]:
        return {**super()._config(), "depth": self.depth, "aggregation": self.aggregation}

    def _hyper(self) -> dict[str, object]:
        return {**super()._hyper(), "penalty": self.penalty}
