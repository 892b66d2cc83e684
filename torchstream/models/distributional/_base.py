"""The interface of the parameter-distribution heads and the machinery they share.

Every head keeps an independent Gaussian ``N(mu_k, sigma_k)`` (``sigma`` a standard deviation)
over each of its weights and learns ``(mu, sigma)`` by plain stochastic gradient *ascent* on the
log marginal likelihood ``log P(y | x, psi) = log E_theta[P(y | x, theta)]`` (no prior, no KL
term), as in the uncertainty framework of FIRES and ERICS (J. Haug et al., "Leveraging Model
Inherent Variable Importance for Stable Online Feature Selection", KDD 2020, §2; J. Haug and
G. Kasneci, "Learning Parameter Distributions to Detect Concept Drift in Data Streams",
ICPR 2020). One call of ``learn`` is one time step: ``epochs`` full-batch steps whose gradient
is the batch *mean* of the per-sample log-likelihood gradients, with separate learning rates for
``mu`` and ``sigma`` and ``sigma`` clamped at ``sigma_min`` after every step.
"""

from __future__ import annotations

import math
import operator
import secrets
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

import torch
from torch import Tensor

from torchstream.checkpoint import check_settings
from torchstream.devices import as_device
from torchstream.models._common import check_input, check_int

__all__ = ["ParameterDistribution"]


@runtime_checkable
class ParameterDistribution(Protocol):
    """What FIRES, ERICS and other consumers may rely on (structural type).

    ``learn`` performs one time step and returns the head; ``log_marginal_likelihood`` gives
    ``[B]`` values; ``feature_stats`` gives one ``(mu, sigma)`` pair per input feature (the
    aggregation of the FIRES paper, §2.1.4), ``param_stats`` the flattened ``(mu, sigma)`` of
    every weight with a distribution. Both return detached copies.
    """

    n_features: int

    def learn(self, X: Tensor, y: Tensor | None = None) -> None: ...

    def log_marginal_likelihood(self, X: Tensor, y: Tensor | None = None) -> Tensor: ...

    def feature_stats(self) -> tuple[Tensor, Tensor]: ...

    def param_stats(self) -> tuple[Tensor, Tensor]: ...

    def predict_proba(self, X: Tensor) -> Tensor: ...

    def state_dict(self) -> dict[str, object]: ...

    def load_state_dict(self, state: Mapping[str, Any]) -> None: ...


# --------------------------------------------------------------------------- validators
def check_positive(value: Any, argument: str) -> float:
    """``value`` as a finite ``float > 0``; the error names ``argument``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{argument} must be a number > 0, got {value!r}")
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{argument} must be a finite number > 0, got {value!r}")
    return float(value)


def check_finite_float(value: Any, argument: str) -> float:
    """``value`` as a finite ``float``; the error names ``argument``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{argument} must be a finite number, got {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{argument} must be a finite number, got {value!r}")
    return float(value)


def check_dtype(dtype: Any) -> torch.dtype:
    """A floating torch dtype (the heads compute in it)."""
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(f"dtype must be a floating torch.dtype, got {dtype!r}")
    return dtype


def make_generator(seed: int | None, device: torch.device) -> tuple[int, torch.Generator]:
    """A ``torch.Generator`` on ``device`` seeded with ``seed`` (a fresh random seed if None)."""
    if seed is None:
        seed = secrets.randbits(63)
    if isinstance(seed, bool):
        raise TypeError(f"seed must be None or an integer, got {seed!r}")
    try:
        value = operator.index(seed)
    except TypeError:
        raise TypeError(f"seed must be None or an integer, got {seed!r}") from None
    if not -(2**63) <= value < 2**64:
        raise ValueError(f"seed must be in [-2**63, 2**64), got {seed!r}")
    return value, torch.Generator(device=device).manual_seed(value)


def check_rows(X: Any, n_features: int, dtype: torch.dtype, device: torch.device, owner: str):
    """``X`` as a finite ``[B, n_features]`` tensor of ``dtype`` on ``device`` (B >= 1)."""
    check_input(X, n_features, owner, argument="X")
    if X.is_complex() or X.dtype == torch.bool:
        raise TypeError(f"{owner}: X must hold real numbers, got dtype {X.dtype}")
    if X.device != device:
        raise ValueError(f"{owner}: X is on {X.device}, the head's parameters are on {device}")
    if X.shape[0] == 0:
        raise ValueError(f"{owner}: X has no rows (shape {tuple(X.shape)})")
    X = X.to(dtype=dtype)
    # one read: a NaN or inf makes the sum non-finite; only then (or when finite values
    # overflow the sum) is the element-wise check run, to name the row and column
    if not math.isfinite(X.sum().item()):
        finite = torch.isfinite(X)
        if not bool(finite.all()):
            row, col = (~finite).nonzero()[0].tolist()
            raise ValueError(
                f"{owner}: X row {row}, column {col} is not finite ({X[row, col].item()})"
            )
    return X


def _check_label_vector(y: Any, batch: int, owner: str, device: torch.device) -> Tensor:
    if y is None:
        raise ValueError(f"{owner}: y is required (labels for the {batch} rows of X)")
    if not isinstance(y, Tensor):
        raise TypeError(f"{owner}: y must be a torch.Tensor, got {type(y).__name__}")
    if y.dim() != 1 or y.shape[0] != batch:
        raise ValueError(
            f"{owner}: expected y of shape [{batch}] (one per row of X), got {tuple(y.shape)}"
        )
    if y.device != device:
        raise ValueError(f"{owner}: y is on {y.device}, the head's parameters are on {device}")
    if y.is_complex():
        raise TypeError(f"{owner}: y must hold real numbers, got dtype {y.dtype}")
    return y


def binary_labels(y: Any, batch: int, dtype: torch.dtype, device: torch.device, owner: str):
    """Binary labels as ``-1.0 / +1.0`` of ``dtype``.

    ``1`` (or ``True``) is the positive class; ``0``, ``-1`` (or ``False``) the negative one, so
    both the ``{0, 1}`` and the ``{-1, +1}`` encodings are accepted. Any other value raises an
    error naming its row."""
    y = _check_label_vector(y, batch, owner, device)
    y = y.to(dtype=dtype)
    ok = (y == 1) | (y == 0) | (y == -1)
    if not bool(ok.all()):
        row = int((~ok).nonzero()[0, 0])
        raise ValueError(
            f"{owner}: y row {row} is {y[row].item()!r}; binary labels must be 0/1 or -1/+1"
        )
    return torch.where(y == 1, 1.0, -1.0).to(dtype)


def class_labels(y: Any, batch: int, n_classes: int, device: torch.device, owner: str) -> Tensor:
    """Class indices in ``[0, n_classes)`` as a ``long`` tensor (integer-valued floats pass)."""
    y = _check_label_vector(y, batch, owner, device)
    if y.dtype == torch.bool:
        y = y.long()
    ok = torch.isfinite(y.double()) & (y == torch.round(y.double()).to(y.dtype))
    ok &= (y >= 0) & (y < n_classes)
    if not bool(ok.all()):
        row = int((~ok).nonzero()[0, 0])
        raise ValueError(
            f"{owner}: y row {row} is {y[row].item()!r}; class labels must be integers in "
            f"[0, {n_classes})"
        )
    return y.long()


def real_targets(y: Any, batch: int, dtype: torch.dtype, device: torch.device, owner: str):
    """Finite real regression targets as ``dtype``."""
    y = _check_label_vector(y, batch, owner, device)
    y = y.to(dtype=dtype)
    finite = torch.isfinite(y)
    if not bool(finite.all()):
        row = int((~finite).nonzero()[0, 0])
        raise ValueError(f"{owner}: y row {row} is not finite ({y[row].item()})")
    return y


# --------------------------------------------------------------------------- base class
class GaussianHead:
    """Shared state and update rule: named weight groups, each a pair of tensors ``mu``,
    ``sigma`` of the same shape, updated by clamped SGD ascent.

    Subclasses pass their constructor arguments (``locals()``) to ``__init__``, call
    :meth:`_init_groups` with the group shapes, implement
    :meth:`_gradients` (batch-mean gradients of the objective for every group) and
    :meth:`feature_stats`, and list their hyperparameters in :meth:`_config`.
    """

    n_features: int

    def __init__(self, settings: Mapping[str, Any]) -> None:
        """``settings``: the concrete head's constructor arguments by name (its ``locals()``);
        read here are ``n_features``, ``lr_mu``, ``lr_sigma``, ``epochs``, ``sigma_min``,
        ``mu_init``, ``sigma_init``, ``dtype`` and ``device``."""
        self.n_features = check_int(settings["n_features"], "n_features")
        self.lr_mu = check_positive(settings["lr_mu"], "lr_mu")
        self.lr_sigma = check_positive(settings["lr_sigma"], "lr_sigma")
        self.epochs = check_int(settings["epochs"], "epochs")
        self.sigma_min = check_positive(settings["sigma_min"], "sigma_min")
        self.mu_init = check_finite_float(settings["mu_init"], "mu_init")
        self.sigma_init = check_positive(settings["sigma_init"], "sigma_init")
        if self.sigma_init < self.sigma_min:
            raise ValueError(
                f"sigma_init={settings['sigma_init']!r} is below "
                f"sigma_min={settings['sigma_min']!r}"
            )
        self.dtype = check_dtype(settings["dtype"])
        device = settings["device"]
        self.device = as_device(device)
        self.n_steps = 0
        self._mu: dict[str, Tensor] = {}
        self._sigma: dict[str, Tensor] = {}

    # ------------------------------------------------------------------ parameters
    def _init_groups(self, shapes: Mapping[str, tuple[int, ...]]) -> None:
        kw = {"dtype": self.dtype, "device": self.device}
        self._mu = {k: torch.full(s, self.mu_init, **kw) for k, s in shapes.items()}
        self._sigma = {k: torch.full(s, self.sigma_init, **kw) for k, s in shapes.items()}

    @property
    def groups(self) -> dict[str, tuple[Tensor, Tensor]]:
        """``{name: (mu, sigma)}`` of every weight group (detached copies)."""
        return {k: (self._mu[k].clone(), self._sigma[k].clone()) for k in self._mu}

    @property
    def n_params(self) -> int:
        """``K``, the number of weights with a distribution."""
        return sum(m.numel() for m in self._mu.values())

    def param_stats(self) -> tuple[Tensor, Tensor]:
        """``(mu[K], sigma[K])`` of every weight, groups in :attr:`groups` order, flattened
        row-major (detached copies)."""
        mu = torch.cat([m.reshape(-1) for m in self._mu.values()])
        sigma = torch.cat([s.reshape(-1) for s in self._sigma.values()])
        return mu, sigma

    def feature_stats(self) -> tuple[Tensor, Tensor]:  # pragma: no cover - abstract
        raise NotImplementedError

    # ------------------------------------------------------------------ learning
    def _gradients(
        self, X: Tensor, y: Tensor | None
    ) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
        raise NotImplementedError  # pragma: no cover

    def _prepare(self, X: Tensor, y: Tensor | None) -> tuple[Tensor, Tensor | None]:
        raise NotImplementedError  # pragma: no cover

    def _ascent(self, g_mu: Mapping[str, Tensor], g_sigma: Mapping[str, Tensor]) -> None:
        for k in self._mu:
            self._mu[k].add_(g_mu[k], alpha=self.lr_mu)
            self._sigma[k].add_(g_sigma[k], alpha=self.lr_sigma).clamp_(min=self.sigma_min)

    def learn(self, X: Tensor, y: Tensor | None = None) -> None:
        """One time step: ``epochs`` full-batch gradient-ascent steps on the batch-mean log
        marginal likelihood of ``(X, y)``; ``sigma`` is clamped at ``sigma_min`` after each."""
        X, y = self._prepare(X, y)
        for _ in range(self.epochs):
            g_mu, g_sigma = self._gradients(X, y)
            self._ascent(g_mu, g_sigma)
        self.n_steps += 1

    # ------------------------------------------------------------------ state
    def _config(self) -> dict[str, object]:
        return {
            "class": type(self).__name__,
            "n_features": self.n_features,
            "shapes": {k: tuple(v.shape) for k, v in self._mu.items()},
        }

    def _hyper(self) -> dict[str, object]:
        return {
            "lr_mu": self.lr_mu,
            "lr_sigma": self.lr_sigma,
            "epochs": self.epochs,
            "sigma_min": self.sigma_min,
        }

    def state_dict(self) -> dict[str, object]:
        """Everything needed to resume exactly: the configuration (checked on load), the
        learning hyperparameters, ``mu`` / ``sigma`` of every group and the step counter."""
        return {
            **self._config(),
            **self._hyper(),
            "mu": {k: v.clone() for k, v in self._mu.items()},
            "sigma": {k: v.clone() for k, v in self._sigma.items()},
            "n_steps": self.n_steps,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a :meth:`state_dict`; the configuration must match this head's."""
        check_settings(state, self._config(), type(self).__name__, stored="is for")
        for key in self._hyper():
            setattr(self, key, state[key])
        kw = {"dtype": self.dtype, "device": self.device}
        self._mu = {k: torch.as_tensor(state["mu"][k]).to(**kw).clone() for k in self._mu}
        self._sigma = {k: torch.as_tensor(state["sigma"][k]).to(**kw).clone() for k in self._sigma}
        self.n_steps = int(state["n_steps"])

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(n_features={self.n_features}, n_params={self.n_params}, "
            f"lr_mu={self.lr_mu}, lr_sigma={self.lr_sigma}, epochs={self.epochs}, "
            f"n_steps={self.n_steps})"
        )
