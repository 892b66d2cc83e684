"""Label-free drift detection: ERICS on the weight distributions of a Gaussian autoencoder.

**An extension beyond the papers.** ERICS (J. Haug and G. Kasneci, "Learning Parameter
Distributions to Detect Concept Drift in Data Streams", ICPR 2020) watches the parameter
distribution of a *supervised* model, a summary of ``P(Y | X)``. Here the model is the
:class:`~torchstream.models.distributional.AutoencoderHead`, whose Gaussian weights are trained on
the reconstruction likelihood of the input itself, so the same test watches ``P(X)`` and needs no
labels; the per-feature (partial) test on the head's ``feature_stats()`` says which input
features changed.

Why the defaults differ from the supervised ones
------------------------------------------------
ERICS scores a step by ``r_k - 1`` with ``r_k = (sigma_tk^2 + (mu_{t-1,k} - mu_tk)^2) /
sigma_{t-1,k}^2``: every weight's move is measured in units of its previous standard deviation.
Without a prior the marginal likelihood is largest for ``sigma -> 0``, so plain stochastic ascent
pushes the ``sigma`` of well-determined autoencoder weights down to the clamp ``sigma_min`` while
``mu`` keeps moving by about ``lr`` times the (Monte-Carlo and mini-batch) gradient noise, which
does not vanish at a constant learning rate. With the head's default ``sigma_min = 1e-6`` a
``sigma`` that bounces off the clamp gives ``r_k`` of order ``1e6``: the moving average of the
score, driven by the learning dynamics alone, explodes on a stationary stream (in the
measurements behind this module every stationary run raised its first alert within two batches
of the first ``sigma`` falling below ``1e-3``). Hence:

* ``sigma_min`` is a floor of the order of a few stationary ``mu`` steps (0.05 for ``lr`` 0.02):
  it bounds ``r_k - 1``, so the score settles at a stationary level;
* ``sigma_init`` starts just above that floor (0.1, not the supervised 1): the fall of ``sigma``
  from 1 to the floor is itself a long transient of the score (hundreds of batches at
  ``lr`` 0.02) that hides a change of ``P(X)`` happening during it;
* ERICS's threshold starts at the height its own windows reach while they fill (the first
  ``M + W`` steps, inside ``warm_up``), i.e. at the stationary level of the score, and a small
  ``beta`` (1e-6) keeps its decay slow: after ``n`` steps without an alert it is
  ``~exp(-beta n^2 / 2)`` of that level, 0.6 after 1,000 steps (0.007 with ``beta = 1e-5``,
  which then flagged the stationary noise after 470-680 batches in 10 of 10 seeds, and ~0
  with the supervised default ``1e-4``).

The three go together with ``lr``: with ``lr`` 0.01 and the same floor the fall of ``sigma``
outlasted the warm-up and gave stationary alerts at batches 170-216 in 3 of 5 seeds; with
``lr`` 0.03 the defaults behaved as with 0.02. Scale ``sigma_min`` and ``sigma_init`` with
``lr`` when changing it.

A moved input mean forces the autoencoder to re-learn its weights; their moves, in units of the
floored ``sigma``, lift the score well above the stationary level within a few batches. The
per-feature score rises most for the features whose reconstruction is wrong, the moved ones.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor

from torchstream.base import DriftDetectorBase
from torchstream.checkpoint import check_settings
from torchstream.drift.erics import ERICS
from torchstream.models.distributional import AutoencoderHead, check_positive
from torchstream.typing import BatchView

__all__ = ["LabelFreeERICS"]


class LabelFreeERICS(DriftDetectorBase):
    """ERICS on an :class:`~torchstream.models.distributional.AutoencoderHead`: detects a change
    of the input distribution ``P(X)`` without labels (an extension, module docstring).

    Every :meth:`learn` call trains the autoencoder one step on ``X`` and runs one ERICS update:
    the global test on all weights (``param_stats()``), the partial test per input feature on the
    path-aggregated ``feature_stats()``. :attr:`alerts` lists the rows of the global alerts
    (:attr:`alert_steps` their steps), :attr:`partial_alerts` the ``(step, feature)`` pairs,
    and :meth:`feature_drift_scores` the per-feature increase of the moving average,
    ``D_tj = MA_tj - MA_{t-W,j}``, which is largest for the features that moved.

    The defaults were chosen on standardised inputs (unit variance per feature; the likelihood
    uses ``noise_std``) of a few to a few tens of features, batches of about 50 rows.

    Parameters
    ----------
    n_features
        ``d``, the input width.
    latent, hidden, noise_std, n_samples, mu_init_std
        Of the :class:`~torchstream.models.distributional.AutoencoderHead`.
    lr
        Learning rate of ``mu`` and ``sigma`` (one gradient step per batch).
    sigma_min
        Floor of every ``sigma`` (> 0). It sets the unit in which ERICS measures the moves of
        the weights; far smaller floors let ``sigma`` collapse and the score explode on a
        stationary stream (module docstring). Default 0.05.
    sigma_init
        Initial ``sigma`` of every weight, just above the floor (module docstring). Default 0.1.
    window_mvg_average, window_drift_detect, beta, warm_up, refractory
        Of :class:`~torchstream.drift.ERICS`. ``refractory`` defaults to
        ``window_drift_detect`` (one report per jump of the score). ``warm_up`` should cover the
        fill of both windows (``M + W`` steps) and the first fast training of the head.
    seed, dtype, device
        Of the head (its own generator draws the initial means and the Monte-Carlo noise).

    Attributes
    ----------
    head
        The :class:`~torchstream.models.distributional.AutoencoderHead`.
    erics
        The :class:`~torchstream.drift.ERICS` detector that owns it (traces, thresholds).

    Example
    -------
    Eight correlated, standardised features; the means of features 0 and 1 move by two
    standard deviations at batch 200:

    >>> g = torch.Generator().manual_seed(0)
    >>> mix = torch.randn(8, 8, generator=g)
    >>> mix = mix / mix.norm(dim=1, keepdim=True)
    >>> det = LabelFreeERICS(8, seed=0)
    >>> for t in range(211):
    ...     X = torch.randn(50, 8, generator=g) @ mix.T
    ...     if t >= 200:
    ...         X[:, :2] += 2.0
    ...     det.learn(X)
    >>> det.alert_steps, det.alerts  # batch 201: rows 10050..10099
    ([201], [10099])
    >>> torch.topk(det.feature_drift_scores(), 2).indices.sort().values.tolist()
    [0, 1]
    """

    def __init__(
        self,
        n_features: int,
        *,
        latent: int = 3,
        hidden: Sequence[int] = (),
        noise_std: float = 1.0,
        n_samples: int = 5,
        lr: float = 0.02,
        sigma_min: float = 0.05,
        sigma_init: float = 0.1,
        mu_init_std: float = 0.3,
        window_mvg_average: int = 30,
        window_drift_detect: int = 30,
        beta: float = 1e-6,
        warm_up: int = 100,
        refractory: int | None = None,
        seed: int | None = 0,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ) -> None:
        lr = check_positive(lr, "lr")
        self.head = AutoencoderHead(
            n_features,
            latent=latent,
            hidden=hidden,
            noise_std=noise_std,
            n_samples=n_samples,
            lr_mu=lr,
            lr_sigma=lr,
            sigma_min=sigma_min,
            sigma_init=sigma_init,
            mu_init_std=mu_init_std,
            seed=seed,
            dtype=dtype,
            device=device,
        )
        super().__init__()
        self.erics = ERICS(
            self.head,
            window_mvg_average=window_mvg_average,
            window_drift_detect=window_drift_detect,
            beta=beta,
            warm_up=warm_up,
            refractory=window_drift_detect if refractory is None else refractory,
        )
        self.n_features = self.head.n_features

    # ------------------------------------------------------------------ learning
    def learn(self, X: Tensor, y: Any = None, *, start: int | None = None) -> None:
        """One step: the autoencoder learns from ``X``, then the ERICS update (the batch's
        rows, the first at ``start``). ``y`` is ignored (accepted so that labelled streams can
        be fed unchanged)."""
        self.erics.learn(X, None, start=start)
        self._advance(int(X.shape[0]), start)
        self._alarm(self.erics.new_alerts)

    def update(self, batch: BatchView) -> None:
        """The runner's update: :meth:`learn` on ``batch.X`` (labels unused)."""
        self.learn(batch.X, start=batch.start)

    def _scalars(self) -> dict[str, float]:
        """The scalars of :meth:`ERICS._scalars <torchstream.drift.ERICS._scalars>`."""
        er = self.erics
        return {
            "erics/ma": er.ma,
            "erics/drift_statistic": er.drift_statistic,
            "erics/threshold": er.threshold,
            "erics/partial_drifts": float(er.partial_detected.numel()),
        }

    # ------------------------------------------------------------------ results
    @property
    def alert_steps(self) -> list[int]:
        """Steps (0-based) of the reported global alerts."""
        return list(self.erics.alert_steps)

    @property
    def partial_alerts(self) -> list[tuple[int, int]]:
        """``(step, feature)`` pairs of the reported per-feature alerts."""
        return list(self.erics.partial_alerts)

    @property
    def partial_detected(self) -> Tensor:
        """Features with a reported partial alert at the last step."""
        return self.erics.partial_detected.clone()

    def feature_drift_scores(self) -> Tensor:
        """``D_tj = MA_tj - MA_{t-W,j}`` per input feature ``[d]`` (float64): how much the
        moving average of feature ``j``'s score rose over the detection window."""
        scores = self.erics.partial_drift_statistic
        if scores is None:
            raise RuntimeError("feature_drift_scores() needs at least one learn() step")
        return scores

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, object]:
        """The ERICS state, the head's included (exact resume)."""
        return {"class": type(self).__name__, "erics": self.erics.state_dict()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        check_settings(state, {"class": type(self).__name__}, type(self).__name__)
        self.erics.load_state_dict(state["erics"])
        self.alerts = list(self.erics.alerts)
        self.drift_detected = self.erics.drift_detected
        self.n_rows = self.erics.n_rows

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(n_features={self.n_features}, "
            f"sigma_min={self.head.sigma_min}, alerts={len(self.erics.alerts)})"
        )
