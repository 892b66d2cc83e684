"""ERICS: concept drift detection from the parameter distribution of an online model [^1].

A model whose parameters are independent Gaussians ``theta_k ~ N(mu_k, sigma_k)`` (see
:mod:`torchstream.models.distributional`) summarises the current concept ``P(Y | X)``. ERICS
watches how that distribution moves between consecutive steps: the change of its differential
entropy plus the KL divergence from the previous step. For diagonal Gaussians the log terms
cancel::

    (h_t - h_{t-1}) + KL(P_t || P_{t-1}) = 1/2 sum_k (r_tk - 1),
    r_tk = (sigma_tk^2 + (mu_{t-1,k} - mu_tk)^2) / sigma_{t-1,k}^2

Per step (paper Eq. 8 and Fig. 2; ``M`` = ``window_mvg_average``, ``W`` =
``window_drift_detect``)::

    MA_t  = 1/(2M) sum over the last M pairs i of |sum_k (r_ik - 1)|     (global)
    MA_tk = 1/(2M) sum over the last M pairs i of |r_ik - 1|             (partial, per k)
    D_t   = MA_t - MA_{t-W}                   (the telescoped sum of W differences)
    T <- T - T * beta * Delta;  Delta <- Delta + 1            (decay of the threshold T)
    drift at t  <=>  D_t > T;  then T <- D_t, Delta <- 1

The same test runs per parameter (or per feature, on the head's ``feature_stats()``) with its
own threshold: *partial* drift, which says which features moved.

With ``feature_groups`` (user features spanning several encoded columns, e.g. a one-hot block)
the partial test also runs per group ``g`` on the joint diagonal Gaussian of its columns. By the
identity above its entropy change plus KL divergence is ``1/2 sum_{c in g} (r_tc - 1)``, so the
group's score is Eq. 8's global form restricted to the group::

    MA_tg = 1/(2M) sum over the last M pairs i of |sum_{c in g} (r_ic - 1)|

with its own ``D_tg`` and threshold. This is the same divergence the global test uses, on the
feature's own distribution; an "any column alarms" rule would instead count a block of ``m``
columns ``m`` times as likely to alarm by chance. A one-column group gives exactly its
column's test. The initial window holds the
starting snapshot (the head's state when ERICS is built, or ``(mu_init, sigma_init)``), so
``MA`` and ``D`` are 0 before anything changes; the first step sets ``T = |D_0|``. Running
sums make a step ``O(K)``.

Three departures from the published behaviour (spec of this package, §5.5, §5.8; the
reasons are in the drift guide, ``docs/guide/drift.md``):

* ``clamp_threshold`` (default on): ``T = max(T, 0)`` after the decay (the factor
  ``1 - beta * Delta`` is negative once ``Delta > 1 / beta``).
* ``refractory`` (default ``W``): after a reported alert, alerts in the next ``refractory``
  steps are not reported (the threshold still follows them).
* ``warm_up`` (default ``M + W``): alerts in the first ``warm_up`` steps are not reported (the
  threshold still follows them).

``reference_compat=True`` reproduces the authors' code: ``M - 1`` pairs in the window (divisor
still ``2M``), ``D_t = MA_t - MA_{t-W+1}`` over the available values (``D_0 = MA_0``, ``W >= 2``),
no clamp, no warm-up and no cool-down unless given, and after an alert the threshold is unset
and re-initialised to ``|D|`` at the next step, so alerts come at most every second step.

References
----------
[^1]: Haug, J. and Kasneci, G. (2021). Learning parameter distributions to detect concept
    drift in data streams. ICPR 2020, 9452-9459.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import numpy as np
import torch

from torchstream.base import DriftDetectorBase
from torchstream.checkpoint import check_settings
from torchstream.explain.groups import FeatureGroups, check_feature_groups
from torchstream.learners.scaling import RunningStandardizer
from torchstream.models.distributional import ParameterDistribution
from torchstream.models.distributional.placement import to_head
from torchstream.typing import BatchView

__all__ = ["ERICS", "gaussian_entropy", "gaussian_kl", "r_statistic"]

_F64 = torch.float64

#: Tensors or numpy arrays (the detector computes in numpy, callers may pass tensors).
_Array = TypeVar("_Array", torch.Tensor, np.ndarray)


def gaussian_entropy(sigma: torch.Tensor) -> torch.Tensor:
    """Differential entropy of ``N(mu, diag(sigma^2))``: ``1/2 (K + K ln 2 pi + sum ln sigma^2)``."""
    K = sigma.shape[-1]
    return 0.5 * (
        K
        + K * torch.log(torch.tensor(2 * torch.pi, dtype=sigma.dtype))
        + torch.log(sigma * sigma).sum(-1)
    )


def gaussian_kl(
    mu: torch.Tensor, sigma: torch.Tensor, mu_prev: torch.Tensor, sigma_prev: torch.Tensor
) -> torch.Tensor:
    """``KL(N(mu, sigma^2) || N(mu_prev, sigma_prev^2))`` for diagonal Gaussians (sum over the
    last dimension)."""
    v, vp = sigma * sigma, sigma_prev * sigma_prev
    K = mu.shape[-1]
    return 0.5 * (
        ((v + (mu_prev - mu) ** 2) / vp).sum(-1) - K + torch.log(vp).sum(-1) - torch.log(v).sum(-1)
    )


def r_statistic(mu: _Array, sigma: _Array, mu_prev: _Array, sigma_prev: _Array) -> _Array:
    """``r_k - 1`` with ``r_k = (sigma_k^2 + (mu_prev_k - mu_k)^2) / sigma_prev_k^2``; summed
    over ``k`` and halved it equals the entropy change plus the KL divergence."""
    return (sigma * sigma + (mu_prev - mu) ** 2) / (sigma_prev * sigma_prev) - 1


def _int_arg(value: Any, name: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return value


class _Channel:
    """The ERICS tests of one step: entry 0 the global score, entries 1..J the partial ones.

    Small per-step vectors, kept as float64 numpy arrays (cheaper per operation than tensors
    for the O(K) bookkeeping; same IEEE arithmetic)."""

    def __init__(self, size: int, n_pairs: int, W: int, reference: bool) -> None:
        self.ring = np.zeros((n_pairs, size))  # |contributions| of the last pairs
        self.pos = 0
        self.sum = np.zeros(size)
        n_ma = W if reference else W + 1
        self.ma_hist: deque[np.ndarray] = deque(maxlen=n_ma)
        self.alpha = np.full(size, np.nan)  # nan: not set
        self.dt = np.zeros(size)
        self.last_reported = np.full(size, -(2**62), dtype=np.int64)
        self.ma = np.zeros(size)
        self.d = np.zeros(size)
        self.threshold = np.zeros(size)

    def state_dict(self) -> dict[str, object]:
        out: dict[str, Any] = {
            k: (torch.from_numpy(v.copy()) if isinstance(v, np.ndarray) else v)
            for k, v in vars(self).items()
            if k != "ma_hist"
        }
        out["ma_hist"] = [torch.from_numpy(m.copy()) for m in self.ma_hist]
        return out

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        maxlen = self.ma_hist.maxlen
        for k, v in state.items():
            if k == "ma_hist":
                self.ma_hist = deque((np.array(m.numpy()) for m in v), maxlen=maxlen)
            elif isinstance(v, torch.Tensor):
                setattr(self, k, np.array(v.numpy()))
            else:
                setattr(self, k, v)


class ERICS(DriftDetectorBase):
    """ERICS drift detector on a stream of parameter-distribution snapshots ``(mu, sigma)``:
    the global and partial tests of the module docstring, one step per :meth:`observe` (or per
    :meth:`learn` / :meth:`update` with a batch, which train the head first).

    Parameters
    ----------
    head
        A parameter-distribution head (``learn``, ``param_stats()``, ``feature_stats()``);
        ``None`` to feed raw snapshots. Its state at construction is the initial snapshot.
    window_mvg_average
        ``M``, the moving-average window (number of snapshot pairs; >= 1, >= 2 with
        ``pairs="reference"``). Default 50.
    window_drift_detect
        ``W``, the detection window: ``D_t = MA_t - MA_{t-W}``. Default 50.
    beta
        Threshold decay rate in ``[0, 1)``. Default 1e-4.
    pairs
        ``"paper"``: ``M`` pairs in the moving average; ``"reference"``: ``M - 1`` pairs (the
        authors' code). Default: ``"reference"`` with ``reference_compat``, else ``"paper"``.
    clamp_threshold
        Keep the threshold >= 0 (default: on, off with ``reference_compat``).
    warm_up
        Alerts at steps ``< warm_up`` are not reported. Default (``None``): ``M + W``; 0 with
        ``reference_compat``.
    refractory
        After a reported alert, alerts in the next ``refractory`` steps are not reported (per
        feature for partial alerts). Default (``None``): ``W``; 0 with ``reference_compat``.
    reference_compat
        Reproduce the reference implementation exactly (module docstring); ``warm_up`` and
        ``refractory`` then default to 0.
    partial
        Also run the per-feature (partial) test.
    mu_init, sigma_init
        The initial snapshot without a head (numbers or tensors). Default ``(0, 1)``.
    history
        How many steps of the traces :attr:`ma_trace`, :attr:`drift_trace`,
        :attr:`threshold_trace` to keep (default: the last 10,000; ``None``: all).
    feature_groups
        ``{feature name: column indices}`` over the partial test's ``J`` features (e.g.
        :meth:`torchstream.schema.Schema.feature_groups`), every column in exactly one group:
        the partial test then also runs per group (module docstring) and :attr:`partial_alerts`
        / :attr:`partial_detected` speak of the groups, the per-column results staying in
        :attr:`column_partial_alerts` / :attr:`column_partial_detected`. Needs ``partial``.
    scale_inputs
        The head learns from inputs standardised with running statistics, updated with each
        batch before it is used (default False: the inputs as given).

    Attributes
    ----------
    alerts
        Rows of the reported global alerts: the last row of the alerting update (a snapshot
        counts as ``rows`` rows, default 1; a batch given to :meth:`learn` as its rows).
    alert_steps
        Steps (0-based update counts) of the reported global alerts.
    partial_alerts
        ``(step, feature)`` pairs of the reported partial alerts; with ``feature_groups``
        ``(step, feature name)`` pairs of the group tests.
    new_partial_alerts
        The features of the last update's partial alerts (indices; names of groups with
        ``feature_groups``).
    partial_detected
        The features (indices) with a reported partial alert at the last step; with
        ``feature_groups`` the group indices (into :attr:`feature_names`).
    column_partial_alerts, column_partial_detected
        The per-column ``(step, column)`` pairs and last-step column indices (equal to
        :attr:`partial_alerts` / :attr:`partial_detected` without ``feature_groups``).
    ma, drift_statistic, threshold
        ``MA_t``, ``D_t`` and the threshold ``T_t`` tested at the last step.
    partial_ma, partial_drift_statistic, partial_threshold
        The same per feature ``[J]``.
    feature_partial_ma, feature_partial_drift_statistic, feature_partial_threshold
        The same per group ``[G]`` with ``feature_groups`` (else ``None``).

    Examples
    --------
    Parameter 0 of five moves its mean from 0 to 1 at step 100 (``sigma = 1`` throughout):

    >>> import torch
    >>> erics = ERICS(window_mvg_average=50, window_drift_detect=50)
    >>> mu = torch.zeros(5, dtype=torch.float64)
    >>> for t in range(300):
    ...     mu[0] = 1.0 if t >= 100 else 0.0
    ...     _ = erics.observe(mu, torch.ones(5, dtype=torch.float64))
    >>> erics.alerts, erics.alert_steps, erics.partial_alerts, round(erics.ma_trace[120], 4)
    ([100], [100], [(100, 0)], 0.01)
    >>> erics.warm_up, erics.refractory
    (100, 50)

    With a Probit head on a seeded stream whose labels flip at batch 150:

    >>> from torchstream.models.distributional import ProbitHead
    >>> g = torch.Generator().manual_seed(0)
    >>> erics = ERICS(ProbitHead(4, epochs=10))
    >>> for t in range(250):
    ...     X = torch.randn(100, 4, generator=g, dtype=torch.float64)
    ...     y = (X[:, 0] + X[:, 1] > 0).long()
    ...     erics.learn(X, y if t < 150 else 1 - y)
    >>> erics.alert_steps, erics.alerts  # batch 150 holds rows 15000..15099
    ([150], [15099])

    Per user feature: the one-hot feature ``colour`` spans columns 1 and 2, and column 2 moves:

    >>> erics = ERICS(feature_groups={"size": [0], "colour": [1, 2]})
    >>> mu = torch.zeros(3, dtype=torch.float64)
    >>> for t in range(300):
    ...     mu[2] = 1.0 if t >= 100 else 0.0
    ...     _ = erics.observe(mu, torch.ones(3, dtype=torch.float64))
    >>> erics.partial_alerts, erics.column_partial_alerts
    ([(100, 'colour')], [(100, 2)])
    """

    name = "erics"

    def __init__(
        self,
        head: ParameterDistribution | None = None,
        *,
        window_mvg_average: int = 50,
        window_drift_detect: int = 50,
        beta: float = 1e-4,
        pairs: str | None = None,
        clamp_threshold: bool | None = None,
        warm_up: int | None = None,
        refractory: int | None = None,
        reference_compat: bool = False,
        partial: bool = True,
        mu_init: float | torch.Tensor = 0.0,
        sigma_init: float | torch.Tensor = 1.0,
        history: int | None = 10_000,
        feature_groups: Mapping[str, Sequence[int]] | None = None,
        scale_inputs: bool = False,
    ) -> None:
        self.reference_compat = bool(reference_compat)
        if pairs is None:
            pairs = "reference" if self.reference_compat else "paper"
        if pairs not in ("paper", "reference"):
            raise ValueError(f"pairs must be 'paper' or 'reference', got {pairs!r}")
        self.pairs = pairs
        self.M = _int_arg(
            window_mvg_average, "window_mvg_average", 2 if pairs == "reference" else 1
        )
        W = _int_arg(window_drift_detect, "window_drift_detect", 1)
        self.W = max(W, 2) if self.reference_compat else W
        if isinstance(beta, bool) or not isinstance(beta, (int, float)) or not 0.0 <= beta < 1.0:
            raise ValueError(f"beta must be a number in [0, 1), got {beta!r}")
        self.beta = float(beta)
        self.clamp_threshold = (
            (not self.reference_compat) if clamp_threshold is None else bool(clamp_threshold)
        )
        if warm_up is None:
            warm_up = 0 if self.reference_compat else self.M + self.W
        if refractory is None:
            refractory = 0 if self.reference_compat else self.W
        self.warm_up = _int_arg(warm_up, "warm_up", 0)
        self.refractory = _int_arg(refractory, "refractory", 0)
        self.partial = bool(partial)
        if feature_groups is not None:
            if not self.partial:
                raise ValueError("feature_groups needs partial=True (it groups the partial test)")
            if not isinstance(feature_groups, Mapping):
                raise TypeError(
                    f"feature_groups must be a mapping {{name: column indices}}, got "
                    f"{type(feature_groups).__name__}"
                )
        self.feature_groups = None if feature_groups is None else dict(feature_groups)
        self.groups: FeatureGroups | None = None
        if history is not None:
            _int_arg(history, "history", 1)
        self.history_size = history
        self.head = head
        self.scale_inputs = bool(scale_inputs)
        self._scaler: RunningStandardizer | None = None
        self._init: tuple[Any, Any, Any, Any] = (mu_init, sigma_init, mu_init, sigma_init)
        if head is not None:
            for attr in ("learn", "param_stats") + (("feature_stats",) if self.partial else ()):
                if not callable(getattr(head, attr, None)):
                    raise TypeError(
                        f"head must have learn(), param_stats() and feature_stats(); "
                        f"{type(head).__name__} has no {attr}()"
                    )
            mu, sigma = head.param_stats()
            fmu, fsig = head.feature_stats() if self.partial else (mu, sigma)
            self._init = (mu, sigma, fmu, fsig)
        self.n_params: int | None = None
        self.n_features: int | None = None
        self._prev: list[np.ndarray] | None = None  # mu, sigma, feature mu, feature sigma
        self._ch: _Channel | None = None  # entry 0: the global test, 1..J: the partial tests
        self.n_updates = 0
        super().__init__()  # alerts, new_alerts, drift_detected, n_rows (a snapshot: its rows)
        self.partial_detected = torch.zeros(0, dtype=torch.long)
        self.column_partial_detected = torch.zeros(0, dtype=torch.long)
        self.alert_steps: list[int] = []
        self.partial_alerts: list[tuple[int, int | str]] = []
        self.column_partial_alerts: list[tuple[int, int]] = []
        self.ma_trace: deque[float] = deque(maxlen=history)
        self.drift_trace: deque[float] = deque(maxlen=history)
        self.threshold_trace: deque[float] = deque(maxlen=history)
        self._trace_start = 0

    # ------------------------------------------------------------------ input checks
    @staticmethod
    def _check(mu: Any, sigma: Any, names: tuple[str, str], size: int | None) -> list[np.ndarray]:
        if not isinstance(mu, torch.Tensor) or not isinstance(sigma, torch.Tensor):
            raise TypeError(f"{names[0]} and {names[1]} must be tensors")
        if mu.ndim != 1:
            raise ValueError(f"{names[0]} must be 1-dimensional, got shape {tuple(mu.shape)}")
        if sigma.shape != mu.shape:
            raise ValueError(
                f"{names[1]} must have the shape of {names[0]} {tuple(mu.shape)}, got "
                f"{tuple(sigma.shape)}"
            )
        if size is not None and mu.shape[0] != size:
            raise ValueError(
                f"snapshot shape changed: {names[0]} has {mu.shape[0]} entries, the earlier "
                f"snapshots had {size}"
            )
        mu = np.array(mu.detach().to(device="cpu", dtype=_F64).numpy())  # copies
        sigma = np.array(sigma.detach().to(device="cpu", dtype=_F64).numpy())
        if np.isfinite(mu).all() and np.isfinite(sigma).all() and (sigma > 0).all():
            return [mu, sigma]
        for name, v in zip(names, (mu, sigma)):
            bad = np.flatnonzero(~np.isfinite(v))
            if bad.size:
                raise ValueError(f"{name}[{bad[0]}] is not finite ({v[bad[0]]})")
        k = int(np.flatnonzero(sigma <= 0)[0])
        raise ValueError(
            f"{names[1]}[{k}] = {sigma[k]}; ERICS needs sigma > 0 (it divides by sigma^2)"
        )

    def _start(self, K: int, J: int) -> None:
        mu0, s0, fmu0, fs0 = self._init
        prev: list[np.ndarray] = []
        for m, s, n in ((mu0, s0, K), (fmu0, fs0, J)):
            m = torch.as_tensor(m, dtype=_F64)
            s = torch.as_tensor(s, dtype=_F64)
            prev += self._check(
                m.expand(n) if m.ndim == 0 else m,
                s.expand(n) if s.ndim == 0 else s,
                ("mu_init", "sigma_init"),
                n,
            )
        if self.feature_groups is not None:
            self.groups = check_feature_groups(self.feature_groups, J)
        n_groups = 0 if self.groups is None else self.groups.n_groups
        self._prev = prev
        self.n_params, self.n_features = K, J
        n_pairs = self.M - 1 if self.pairs == "reference" else self.M
        size = 1 + J + n_groups if self.partial else 1
        self._ch = _Channel(size, n_pairs, self.W, self.reference_compat)

    # ------------------------------------------------------------------ the test
    def _step(self, ch: _Channel, contrib: np.ndarray, t: int) -> np.ndarray:
        """One ERICS step on a channel; returns the boolean alert vector (before reporting)."""
        # unset thresholds are nan and stay nan through the decay and the clamp
        ch.alpha = ch.alpha - ch.alpha * self.beta * ch.dt
        if self.clamp_threshold:
            ch.alpha = np.maximum(ch.alpha, 0.0)
        ch.dt = ch.dt + 1
        old = ch.ring[ch.pos].copy()
        ch.ring[ch.pos] = contrib
        ch.pos = (ch.pos + 1) % ch.ring.shape[0]
        if ch.pos == 0:  # re-sum once per window to keep rounding errors from accumulating
            ch.sum = ch.ring.sum(0)
        else:
            ch.sum = ch.sum + contrib - old
        ma = ch.sum / (2 * self.M)
        ch.ma_hist.append(ma)
        if self.reference_compat:
            d = ma.copy() if len(ch.ma_hist) == 1 else ma - ch.ma_hist[0]
        else:
            d = ma - ch.ma_hist[0] if len(ch.ma_hist) == ch.ma_hist.maxlen else ma.copy()
        ch.alpha = np.where(np.isnan(ch.alpha), np.abs(d), ch.alpha)
        ch.ma, ch.d, ch.threshold = ma, d, ch.alpha
        alert = d > ch.alpha
        if self.reference_compat:
            ch.alpha = np.where(alert, np.nan, ch.alpha)
            ch.dt = np.where(alert, 0.0, ch.dt)
        else:
            ch.alpha = np.where(alert, d, ch.alpha)
            ch.dt = np.where(alert, 1.0, ch.dt)
        report = alert & (t - ch.last_reported > self.refractory)
        if t < self.warm_up:
            report = np.zeros_like(alert)
        ch.last_reported = np.where(report, t, ch.last_reported)
        return report

    def observe(
        self,
        mu: torch.Tensor | None = None,
        sigma: torch.Tensor | None = None,
        *,
        feature_mu: torch.Tensor | None = None,
        feature_sigma: torch.Tensor | None = None,
        rows: int = 1,
        start: int | None = None,
    ) -> None:
        """Consume one snapshot.

        ``mu``, ``sigma`` ``[K]``: the parameter distribution (global test). ``feature_mu``,
        ``feature_sigma`` ``[J]``: the per-feature distribution for the partial test (default:
        ``mu``, ``sigma``). With no arguments, read the head's ``param_stats()`` and
        ``feature_stats()``. ``rows``: how many rows the snapshot stands for; ``start``: the
        row of the first (default: the rows seen so far); an alert is at the last row.
        """
        rows = _int_arg(rows, "rows", 1)
        if mu is None and sigma is None:
            if self.head is None:
                raise ValueError("observe() without (mu, sigma) needs a head")
            mu, sigma = self.head.param_stats()
            if self.partial and feature_mu is None:
                feature_mu, feature_sigma = self.head.feature_stats()
        elif mu is None or sigma is None:
            raise ValueError("pass both mu and sigma, or neither")
        if (feature_mu is None) != (feature_sigma is None):
            raise ValueError("pass both feature_mu and feature_sigma, or neither")
        g = self._check(mu, sigma, ("mu", "sigma"), self.n_params)
        if self.partial and feature_mu is not None:
            f = self._check(
                feature_mu, feature_sigma, ("feature_mu", "feature_sigma"), self.n_features
            )
        else:
            f = g
        if self._prev is None:
            self._start(g[0].shape[0], f[0].shape[0])
        assert self._prev is not None and self._ch is not None
        t = self.n_updates
        r = r_statistic(g[0], g[1], self._prev[0], self._prev[1])
        contrib = np.abs(r.sum()).reshape(1)
        if self.partial:
            rp = r if f is g else r_statistic(f[0], f[1], self._prev[2], self._prev[3])
            contrib = np.concatenate([contrib, np.abs(rp)])
            if self.groups is not None:
                rg = np.bincount(
                    self.groups.column_group.numpy(), weights=rp, minlength=self.groups.n_groups
                )
                contrib = np.concatenate([contrib, np.abs(rg)])
        report = self._step(self._ch, contrib, t)
        first = self._advance(rows, start)
        if report[0]:
            self.alert_steps.append(t)
        features: list[int | str] = []
        if self.partial:
            J = self.n_features
            assert J is not None
            hits = np.flatnonzero(report[1 : 1 + J])
            self.column_partial_detected = torch.from_numpy(hits).long()
            self.column_partial_alerts.extend((t, int(k)) for k in hits)
            if self.groups is None:
                self.partial_detected = self.column_partial_detected.clone()
                features = [int(k) for k in hits]
            else:
                ghits = np.flatnonzero(report[1 + J :])
                self.partial_detected = torch.from_numpy(ghits).long()
                features = [self.groups.names[g] for g in ghits]
            self.partial_alerts.extend((t, k) for k in features)
        self._alarm([first + rows - 1] if report[0] else [], features=features)
        self._prev = g + f
        if self.history_size is not None and len(self.ma_trace) == self.history_size:
            self._trace_start += 1
        self.ma_trace.append(self.ma)
        self.drift_trace.append(self.drift_statistic)
        self.threshold_trace.append(self.threshold)
        self.n_updates += 1

    def learn(self, X: torch.Tensor, y: torch.Tensor | None = None, *,
              start: int | None = None) -> None:
        """The head learns one step from ``(X, y)``, then :meth:`observe` its state (the
        batch's rows, the first at ``start``)."""
        if self.head is None:
            raise RuntimeError("ERICS has no head: feed snapshots with observe(mu, sigma)")
        if self.scale_inputs:  # running statistics, updated with the batch before it is used
            if self._scaler is None:
                self._scaler = RunningStandardizer(int(X.shape[1])).to(X.device)
            self._scaler.update(X)
            X = self._scaler.transform(X)
        self.head.learn(*to_head(self.head, X, y))
        self.observe(rows=int(X.shape[0]), start=start)

    # ------------------------------------------------------------------ views
    @property
    def ma(self) -> float:
        return float("nan") if self._ch is None else float(self._ch.ma[0])

    @property
    def drift_statistic(self) -> float:
        return float("nan") if self._ch is None else float(self._ch.d[0])

    @property
    def threshold(self) -> float:
        """The threshold tested at the last step."""
        return float("nan") if self._ch is None else float(self._ch.threshold[0])

    def _columns(self, v: np.ndarray) -> torch.Tensor | None:
        if self._ch is None or not self.partial or self.n_features is None:
            return None
        return torch.from_numpy(v[1 : 1 + self.n_features].copy())

    def _groups(self, v: np.ndarray) -> torch.Tensor | None:
        if self._ch is None or self.groups is None or self.n_features is None:
            return None
        return torch.from_numpy(v[1 + self.n_features :].copy())

    @property
    def partial_ma(self) -> torch.Tensor | None:
        return None if self._ch is None else self._columns(self._ch.ma)

    @property
    def partial_drift_statistic(self) -> torch.Tensor | None:
        return None if self._ch is None else self._columns(self._ch.d)

    @property
    def partial_threshold(self) -> torch.Tensor | None:
        return None if self._ch is None else self._columns(self._ch.threshold)

    @property
    def feature_partial_ma(self) -> torch.Tensor | None:
        """``MA_tg`` per feature group ``[G]`` (``None`` without ``feature_groups``)."""
        return None if self._ch is None else self._groups(self._ch.ma)

    @property
    def feature_partial_drift_statistic(self) -> torch.Tensor | None:
        """``D_tg`` per feature group ``[G]`` (``None`` without ``feature_groups``)."""
        return None if self._ch is None else self._groups(self._ch.d)

    @property
    def feature_partial_threshold(self) -> torch.Tensor | None:
        """The group thresholds ``[G]`` (``None`` without ``feature_groups``)."""
        return None if self._ch is None else self._groups(self._ch.threshold)

    @property
    def feature_names(self) -> list[str] | None:
        """The feature (group) names with ``feature_groups`` (known after the first update)."""
        return None if self.groups is None else list(self.groups.names)

    @property
    def trace_steps(self) -> range:
        """The steps of :attr:`ma_trace`, :attr:`drift_trace` and :attr:`threshold_trace`."""
        return range(self._trace_start, self._trace_start + len(self.ma_trace))

    # ------------------------------------------------------------------ plug-in
    def update(self, batch: BatchView) -> None:
        """The runner's update: the head learns from the batch, then :meth:`observe` reads
        its parameter distribution (:meth:`learn`)."""
        self.learn(batch.X, batch.y, start=batch.start)

    def _scalars(self) -> dict[str, float]:
        """``erics/ma``, ``erics/drift_statistic``, ``erics/threshold`` and
        ``erics/partial_drifts`` (the number of features flagged; of feature groups with
        ``feature_groups``); the alarms are logged by the runner at their rows
        (``alarms/<name>``)."""
        out = {
            "erics/ma": self.ma,
            "erics/drift_statistic": self.drift_statistic,
            "erics/threshold": self.threshold,
        }
        if self.partial:
            out["erics/partial_drifts"] = float(self.partial_detected.numel())
        return out

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, object]:
        """Everything needed to resume exactly, including the head's state."""
        return {
            "n_params": self.n_params,
            "n_features": self.n_features,
            "prev": None
            if self._prev is None
            else [torch.from_numpy(p.copy()) for p in self._prev],
            "partial": self.partial,
            "channel": None if self._ch is None else self._ch.state_dict(),
            "n_updates": self.n_updates,
            "drift_detected": self.drift_detected,
            "partial_detected": self.partial_detected.clone(),
            "alerts": list(self.alerts),
            "alert_steps": list(self.alert_steps),
            "n_rows": self.n_rows,
            "partial_alerts": list(self.partial_alerts),
            "column_partial_detected": self.column_partial_detected.clone(),
            "column_partial_alerts": list(self.column_partial_alerts),
            "feature_groups": None
            if self.feature_groups is None
            else {str(k): [int(c) for c in v] for k, v in self.feature_groups.items()},
            "traces": (list(self.ma_trace), list(self.drift_trace), list(self.threshold_trace)),
            "trace_start": self._trace_start,
            "head": None if self.head is None else self.head.state_dict(),
            "scale_inputs": self.scale_inputs,
            "scaler": None if self._scaler is None else list(self._scaler.snapshot()),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if (state["head"] is None) != (self.head is None):
            raise ValueError("state and this ERICS differ in having a head")
        check_settings(state, {"partial": self.partial}, "ERICS")
        if bool(state.get("scale_inputs", False)) != self.scale_inputs:
            raise ValueError(f"state has scale_inputs={state.get('scale_inputs', False)}, this "
                             f"ERICS has scale_inputs={self.scale_inputs}")
        scaler = state.get("scaler")
        self._scaler = None if scaler is None else RunningStandardizer.from_snapshot(scaler)
        own = (
            None
            if self.feature_groups is None
            else {str(k): [int(c) for c in v] for k, v in self.feature_groups.items()}
        )
        if state.get("feature_groups") != own:
            raise ValueError(
                f"state has feature_groups={state.get('feature_groups')}, this ERICS has "
                f"feature_groups={own}"
            )
        if self.head is not None:
            self.head.load_state_dict(state["head"])
        self.n_params, self.n_features = state["n_params"], state["n_features"]
        if state["channel"] is None:
            self._prev, self._ch = None, None
        else:
            self._start(int(state["n_params"]), int(state["n_features"]))
            assert self._ch is not None
            self._prev = [np.array(p.numpy()) for p in state["prev"]]
            self._ch.load_state_dict(state["channel"])
        self.n_updates = int(state["n_updates"])
        self.drift_detected = bool(state["drift_detected"])
        self.partial_detected = state["partial_detected"].clone()
        self.alerts = [int(t) for t in state["alerts"]]
        self.alert_steps = [int(t) for t in state["alert_steps"]]
        self.n_rows = int(state["n_rows"])
        self.partial_alerts = [
            (int(t), k if isinstance(k, str) else int(k)) for t, k in state["partial_alerts"]
        ]
        # states saved without feature_groups support: the partial alerts are per column
        self.column_partial_alerts = [
            (int(t), int(k)) for t, k in state.get("column_partial_alerts", state["partial_alerts"])
        ]
        self.column_partial_detected = state.get(
            "column_partial_detected", state["partial_detected"]
        ).clone()
        ma, d, a = state["traces"]
        self.ma_trace = deque(ma, maxlen=self.history_size)
        self.drift_trace = deque(d, maxlen=self.history_size)
        self.threshold_trace = deque(a, maxlen=self.history_size)
        self._trace_start = int(state["trace_start"])

    def __repr__(self) -> str:
        head = "None" if self.head is None else type(self.head).__name__
        return (
            f"ERICS(head={head}, window_mvg_average={self.M}, window_drift_detect={self.W}, "
            f"beta={self.beta}, warm_up={self.warm_up}, refractory={self.refractory}, "
            f"alerts={len(self.alerts)})"
        )
