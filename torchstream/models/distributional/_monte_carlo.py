"""Monte-Carlo heads: the marginal likelihood of a non-linear model by reparameterised sampling.

FIRES-ANN and FIRES-SDT (J. Haug et al., KDD 2020, §2.1.2-2.1.3) estimate

    P(y | x, psi) ~= (1/L) sum_l f_{theta^(l)}(x)_y,   theta^(l) = mu + sigma * r^(l),  r ~ N(0, I),

and follow the gradient of ``log`` of that estimate with respect to ``mu`` and ``sigma`` (the
reparameterisation trick). Here the ``L`` weight samples are stacked on a leading dimension and
go through the model in one batched forward pass; ``log`` of the estimate is a log-mean-exp of
the per-sample log-likelihoods, and autograd gives exactly the paper's gradients divided by the
MC estimate of ``P``. The noise comes from the head's own seeded ``torch.Generator``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal

import torch
from torch import Tensor
from torch.nn import functional as F

from torchstream.models._common import check_int
from torchstream.models.distributional._base import (
    GaussianHead,
    binary_labels,
    check_finite_float,
    check_positive,
    check_rows,
    class_labels,
    make_generator,
    real_targets,
)

__all__ = ["LIKELIHOODS", "Likelihood", "MonteCarloHead"]

Likelihood = Literal["sigmoid", "probit", "softmax", "gaussian"]
LIKELIHOODS: tuple[str, ...] = ("sigmoid", "probit", "softmax", "gaussian")
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


class MonteCarloHead(GaussianHead):
    """Base of the heads whose marginal likelihood is estimated with ``n_samples`` draws.

    Subclasses implement :meth:`_forward` (weight samples ``{name: [L, *shape]}`` and rows
    ``[B, d]`` to outputs ``[L, B, n_outputs]``) and may add a penalty (:meth:`_penalty`) that
    is subtracted from the objective. The output likelihood is chosen by ``likelihood``:

    * ``"sigmoid"``: one output ``f``, ``P(y = +1) = sigmoid(f)`` (binary labels);
    * ``"probit"``: one output ``f``, ``P(y = +1) = Phi(f)`` (binary labels);
    * ``"softmax"``: ``n_classes`` outputs, categorical over class indices ``0..n_classes-1``;
    * ``"gaussian"``: one output ``f``, ``y ~ N(f, noise_std**2)`` (real targets).
    """

    def __init__(self, settings: Mapping[str, Any]) -> None:
        """``settings`` as for :class:`GaussianHead`, plus ``likelihood``, ``n_classes``,
        ``noise_std``, ``n_samples`` and ``seed``."""
        super().__init__(settings)
        likelihood = settings["likelihood"]
        if likelihood not in LIKELIHOODS:
            known = ", ".join(repr(k) for k in LIKELIHOODS)
            raise ValueError(f"likelihood must be one of {known}, got {likelihood!r}")
        self.likelihood: str = likelihood
        self.n_classes = check_int(settings["n_classes"], "n_classes", minimum=2)
        self.noise_std = check_positive(settings["noise_std"], "noise_std")
        self.n_samples = check_int(settings["n_samples"], "n_samples")
        self.seed, self.generator = make_generator(settings["seed"], self.device)

    @property
    def n_outputs(self) -> int:
        """Width of the model output: ``n_classes`` for ``"softmax"``, else 1."""
        return self.n_classes if self.likelihood == "softmax" else 1

    def _random_mu(self, mu_init_std: float) -> float:
        """Add ``N(0, mu_init_std**2 / fan_in)`` noise to every ``mu`` (``fan_in`` = the last
        dimension of its group), drawn from the head's generator; returns ``mu_init_std``."""
        std = check_finite_float(mu_init_std, "mu_init_std")
        if std < 0:
            raise ValueError(f"mu_init_std must be >= 0, got {mu_init_std!r}")
        if std > 0:
            for m in self._mu.values():
                noise = torch.randn(
                    m.shape, generator=self.generator, dtype=self.dtype, device=self.device
                )
                m.add_(noise, alpha=std / math.sqrt(m.shape[-1]))
        return std

    # ------------------------------------------------------------------ model
    def _forward(self, theta: Mapping[str, Tensor], X: Tensor) -> Tensor:
        raise NotImplementedError  # pragma: no cover

    def _penalty(self, theta: Mapping[str, Tensor], X: Tensor) -> Tensor | None:
        """A scalar subtracted from the objective (mean over the weight samples); none here."""
        return None

    def _sample(
        self,
        n_samples: int,
        mu: Mapping[str, Tensor] | None = None,
        sigma: Mapping[str, Tensor] | None = None,
    ) -> dict[str, Tensor]:
        """``theta = mu + sigma * r`` with fresh ``r ~ N(0, I)``, ``{name: [L, *shape]}``
        (``mu``, ``sigma`` default to the head's own)."""
        mu = self._mu if mu is None else mu
        sigma = self._sigma if sigma is None else sigma
        out = {}
        for k in self._mu:
            r = torch.randn(
                (n_samples, *mu[k].shape),
                generator=self.generator,
                dtype=self.dtype,
                device=self.device,
            )
            out[k] = mu[k] + sigma[k] * r
        return out

    def _log_lik_samples(self, out: Tensor, y: Tensor) -> Tensor:
        """``log f_theta(x)_y`` per weight sample and row, ``[L, B]``."""
        if self.likelihood == "sigmoid":
            return F.logsigmoid(y * out[..., 0])
        if self.likelihood == "probit":
            return torch.special.log_ndtr(y * out[..., 0])
        if self.likelihood == "softmax":
            logp = torch.log_softmax(out, dim=-1)
            return logp.gather(-1, y.expand(out.shape[0], -1).unsqueeze(-1)).squeeze(-1)
        resid = (y - out[..., 0]) / self.noise_std
        return -0.5 * resid * resid - math.log(self.noise_std) - _HALF_LOG_2PI

    def _prepare(self, X: Tensor, y: Tensor | None) -> tuple[Tensor, Tensor]:
        owner = type(self).__name__
        X = check_rows(X, self.n_features, self.dtype, self.device, owner)
        batch = X.shape[0]
        if self.likelihood in ("sigmoid", "probit"):
            return X, binary_labels(y, batch, self.dtype, self.device, owner)
        if self.likelihood == "softmax":
            return X, class_labels(y, batch, self.n_classes, self.device, owner)
        return X, real_targets(y, batch, self.dtype, self.device, owner)

    def _log_marginal(self, theta: Mapping[str, Tensor], X: Tensor, y: Tensor) -> Tensor:
        """``log (1/L) sum_l f_{theta^(l)}(x)_y``, ``[B]``."""
        logp = self._log_lik_samples(self._forward(theta, X), y)
        return torch.logsumexp(logp, dim=0) - math.log(logp.shape[0])

    def _gradients(
        self, X: Tensor, y: Tensor | None
    ) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
        assert y is not None
        names = list(self._mu)
        with torch.enable_grad():
            mu = {k: self._mu[k].detach().requires_grad_() for k in names}
            sigma = {k: self._sigma[k].detach().requires_grad_() for k in names}
            theta = self._sample(self.n_samples, mu, sigma)
            objective = self._log_marginal(theta, X, y).mean()
            penalty = self._penalty(theta, X)
            if penalty is not None:
                objective = objective - penalty
            grads = torch.autograd.grad(
                objective, [mu[k] for k in names] + [sigma[k] for k in names]
            )
        n = len(names)
        return dict(zip(names, grads[:n], strict=True)), dict(zip(names, grads[n:], strict=True))

    # ------------------------------------------------------------------ public
    def log_marginal_likelihood(
        self, X: Tensor, y: Tensor | None = None, n_samples: int | None = None
    ) -> Tensor:
        """MC estimate ``log (1/L) sum_l f_{theta^(l)}(x)_y`` for every row, ``[B]``, with
        ``L = n_samples`` (default: the head's ``n_samples``) fresh draws from the generator."""
        L = self.n_samples if n_samples is None else check_int(n_samples, "n_samples")
        X, y = self._prepare(X, y)
        with torch.no_grad():
            return self._log_marginal(self._sample(L), X, y)

    def predict_proba(self, X: Tensor, n_samples: int | None = None) -> Tensor:
        """MC mean prediction over ``n_samples`` weight draws: ``P(y = 1 | x)`` ``[B]`` for the
        binary likelihoods, class probabilities ``[B, n_classes]`` for ``"softmax"`` and the
        predictive mean ``[B]`` for ``"gaussian"``."""
        L = self.n_samples if n_samples is None else check_int(n_samples, "n_samples")
        X = check_rows(X, self.n_features, self.dtype, self.device, type(self).__name__)
        with torch.no_grad():
            out = self._forward(self._sample(L), X)
            if self.likelihood == "sigmoid":
                return torch.sigmoid(out[..., 0]).mean(0)
            if self.likelihood == "probit":
                return torch.special.ndtr(out[..., 0]).mean(0)
            if self.likelihood == "softmax":
                return torch.softmax(out, dim=-1).mean(0)
            return out[..., 0].mean(0)

    # ------------------------------------------------------------------ state
    def _config(self) -> dict[str, object]:
        return {
            **super()._config(),
            "likelihood": self.likelihood,
            "n_classes": self.n_classes,
        }

    def _hyper(self) -> dict[str, object]:
        return {**super()._hyper(), "noise_std": self.noise_std, "n_samples": self.n_samples}

    def state_dict(self) -> dict[str, object]:
        """As :meth:`GaussianHead.state_dict`, plus the seed and the generator state, so that
        a resumed head draws the same noise as the original would have."""
        return {**super().state_dict(), "seed": self.seed, "generator": self.generator.get_state()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        super().load_state_dict(state)
        self.seed = int(state["seed"])
        self.generator.set_state(torch.as_tensor(state["generator"]).cpu().clone())
