"""Measures of an online predictor: noise variability, drift deterioration and restoration.

From A.6 §5.1 [^1] (Eqs. 1-3). ``L`` is a reference measure, ``t_d`` a known drift step and
``W`` a window of steps.

* **Noise variability** (Eq. 1), the algorithmic stability of the model ``f_t`` at step ``t``
  (before it learns from batch ``t``)::

      NV_t = (1/N) sum_{n=1..N} [ L(y_t, f_t(x_t + z_n)) - L(y_t, f_t(x_t)) ],  z_n ~ Z

  For a loss, a positive value means the model gets worse under noise; for a score (F1) a
  negative one does.
* **Drift performance deterioration** (Eq. 2; printed "DTD" in the paper)::

      DPD_{t_d} = (1/W) [ sum_{w=0}^{W-1} L_{t_d+w} - sum_{w=1}^{W} L_{t_d-w} ]

  the mean score of the ``W`` steps from ``t_d`` minus that of the ``W`` steps before it.
* **Drift restoration time** (Eq. 3): ``DRT_{t_d} = t_res - t_d`` with
  ``t_res = min{t >= t_d : L_t <= (1/W) sum_{w=1}^{W} L_{t_d-w}}`` for a loss and ``>=`` for a
  score; the direction comes from the metric (:func:`~.direction.higher_is_better`).

Windows are clipped at the start and the end of the series (the float package does the same);
NaN scores (steps that were not evaluated) are skipped. Drift positions here are *step*
indices into the score series; :func:`~.detection.step_index` converts observation indices.

>>> losses = [0.1] * 5 + [0.5, 0.4, 0.3, 0.1, 0.1]
>>> round(drift_performance_deterioration(losses, drift=5, window=5), 4)
0.18
>>> drift_restoration_time(losses, drift=5, window=5, metric="zero_one")
3.0

References
----------
[^1]: Haug, J., Tramountani, E. and Kasneci, G. (2022). Standardized evaluation of machine
    learning methods for evolving data streams. arXiv:2204.13625.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from torchstream.evaluate.measures._common import Series, as_int, as_series
from torchstream.evaluate.measures.direction import higher_is_better as _direction
from torchstream.evaluate.measures.metric_spec import MetricSpec
from torchstream.losses import get_loss

__all__ = [
    "drift_performance_deterioration",
    "drift_restoration_time",
    "mean_drift_performance_deterioration",
    "mean_drift_restoration_time",
    "noise_variability",
]

Drift = int | tuple[int, int]


def _loss_fn(loss: Any) -> Callable[[Any, Any], float]:
    """``loss`` as ``(y_true, y_pred) -> float``: a torchstream loss name (batch mean of the
    per-sample loss), a :class:`MetricSpec`, or any callable ``(y_true, y_pred) -> number``."""
    if isinstance(loss, str):
        per_sample = get_loss(loss)
        return lambda t, p: float(per_sample(p, t).double().mean())
    if isinstance(loss, MetricSpec):
        return loss
    if callable(loss):
        return lambda t, p: float(loss(t, p))
    raise TypeError(f"loss must be a loss name, a MetricSpec or a callable, got {loss!r}")


def noise_variability(
    predict: Callable[[torch.Tensor], Any],
    X: Any,
    y: Any,
    loss: Any = "zero_one",
    *,
    generator: torch.Generator,
    n_samples: int = 10,
    noise_loc: float = 0.0,
    noise_scale: float = 0.1,
    cat_features: Sequence[int] = (),
    cat_values: Mapping[int, Any] | None = None,
    y_pred: Any = None,
) -> float:
    """Noise variability ``NV_t`` (A.6 Eq. 1) of ``predict`` on the batch ``(X, y)``.

    Continuous columns get additive noise ``z ~ N(noise_loc, noise_scale^2)`` (``noise_scale``
    is a standard deviation); the columns in ``cat_features`` are instead *replaced* by a value
    drawn uniformly from ``cat_values[j]`` (default: the distinct values of column ``j`` in
    ``X``). All ``n_samples`` noisy copies go through ``predict`` in one call of
    ``n_samples * B`` rows. The noise comes from ``generator`` only.

    Parameters
    ----------
    predict
        The model at step ``t`` as a pure function ``X [n, d] -> outputs [n] or [n, k]``.
    X, y
        The batch ``[B, d]`` and its targets ``[B]``.
    loss
        The reference measure ``L``: a torchstream loss name (``"zero_one"``, ...), a
        :class:`MetricSpec` or a callable ``(y_true, y_pred) -> number``.
    generator
        A seeded ``torch.Generator`` (required, so the value is reproducible).
    n_samples
        ``N``, the number of noise draws.
    y_pred
        ``predict(X)`` when already computed (saves one call).
    """
    if not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    if not callable(predict):
        raise TypeError(f"predict must be callable, got {type(predict).__name__}")
    n = as_int(n_samples, "n_samples", minimum=1)
    scale = float(noise_scale)
    if not np.isfinite(scale) or scale < 0:
        raise ValueError(f"noise_scale must be a finite number >= 0, got {noise_scale!r}")
    loc = float(noise_loc)
    if not np.isfinite(loc):
        raise ValueError(f"noise_loc must be finite, got {noise_loc!r}")
    Xt = X if isinstance(X, torch.Tensor) else torch.as_tensor(np.asarray(X, dtype=np.float64))
    if Xt.ndim != 2:
        raise ValueError(f"X must be a [B, d] batch, got shape {tuple(Xt.shape)}")
    if not Xt.is_floating_point():
        Xt = Xt.to(torch.get_default_dtype())
    B, d = Xt.shape
    yt = y if isinstance(y, torch.Tensor) else torch.as_tensor(np.asarray(y))
    if yt.shape[:1] != (B,):
        raise ValueError(f"y must have {B} rows (one per row of X), got shape {tuple(yt.shape)}")
    cats = [as_int(j, f"cat_features[{i}]") for i, j in enumerate(cat_features)]
    for j in cats:
        if not 0 <= j < d:
            raise ValueError(f"cat_features has column {j} outside [0, {d})")
    if cat_values is not None:
        extra = sorted(set(cat_values) - set(cats))
        if extra:
            raise ValueError(f"cat_values has columns {extra} that are not in cat_features")
    L = _loss_fn(loss)

    ref = predict(Xt) if y_pred is None else y_pred
    base = L(yt, ref)
    z = torch.randn(n, B, d, generator=generator, device=generator.device, dtype=Xt.dtype)
    noisy = Xt.unsqueeze(0) + (loc + scale * z).to(Xt.device)
    for j in cats:
        vals = (cat_values or {}).get(j)
        vals = Xt[:, j].unique() if vals is None else torch.as_tensor(vals, dtype=Xt.dtype)
        if vals.ndim != 1 or vals.numel() == 0:
            raise ValueError(f"cat_values[{j}] must be a non-empty 1-d collection")
        pick = torch.randint(vals.numel(), (n, B), generator=generator, device=generator.device)
        noisy[:, :, j] = vals.to(Xt.device)[pick.to(vals.device)].to(Xt.device)
    out = predict(noisy.reshape(n * B, d))
    if isinstance(loss, str):  # a per-sample torch loss: all draws at once
        per_draw = get_loss(loss)(out, yt.repeat(n)).double().reshape(n, B).mean(1)
        return float((per_draw - base).mean())
    out = out.reshape(n, B, *out.shape[1:])
    diffs = [L(yt, out[i]) - base for i in range(n)]
    return float(np.mean(diffs))


def _drift_step(drift: Drift, n_steps: int, name: str) -> int:
    if isinstance(drift, tuple):
        if len(drift) != 2:
            raise ValueError(f"{name} must be a step or a (start, end) pair, got {drift!r}")
        start = as_int(drift[0], f"{name} start")
        end = as_int(drift[1], f"{name} end")
        if end < start:
            raise ValueError(f"{name} ends before it starts: {drift!r}")
    else:
        start = as_int(drift, name)
    if not 1 <= start < n_steps:
        raise ValueError(
            f"{name} = {start} is outside the score series: a drift needs at least one step "
            f"before it and must lie in [1, {n_steps})"
        )
    return start


def _windows(scores: Series, drift: Drift, window: int, name: str = "drift"):
    x = as_series(scores, "scores")
    w = as_int(window, "window", minimum=1)
    td = _drift_step(drift, x.size, name)
    return x, td, x[max(0, td - w) : td], x[td : td + w]


def _nanmean(v: np.ndarray) -> float:
    v = v[~np.isnan(v)]
    return float(v.mean()) if v.size else float("nan")


def drift_performance_deterioration(scores: Series, drift: Drift, window: int = 10) -> float:
    """``DPD`` (A.6 Eq. 2): mean of ``scores[t_d : t_d + W]`` minus mean of
    ``scores[t_d - W : t_d]``; ``drift`` is a step index (or ``(start, end)``, using ``start``).

    The sign is that of the measure: positive is worse for a loss, better for a score.
    """
    _, _, before, after = _windows(scores, drift, window)
    return _nanmean(after) - _nanmean(before)


def drift_restoration_time(
    scores: Series,
    drift: Drift,
    window: int = 10,
    metric: Any = None,
    *,
    higher_is_better: bool | None = None,
    atol: float = 1e-12,
) -> float:
    """``DRT`` (A.6 Eq. 3): steps from ``drift`` until the score is back at the mean of the
    ``window`` steps before it (``<=`` for a loss, ``>=`` for a score; 0 if the drift step
    already is).

    The direction comes from ``metric`` (name, function, river metric, :class:`MetricSpec`)
    or from ``higher_is_better``; one of the two is required. Scores within ``atol`` of the
    threshold count as restored, so rounding in the threshold's mean (``(0.8+0.8+0.8)/3 >
    0.8``) cannot change the result. If the series ends before the score is restored, the
    result is the number of steps observed from the drift on, ``len(scores) - t_d`` (a lower
    bound). NaN when the pre-drift window holds only NaN.
    """
    if metric is None and higher_is_better is None:
        raise ValueError(
            "drift_restoration_time needs the measure's direction: pass metric=... (a name, "
            "function or metric object) or higher_is_better=True/False"
        )
    up = _direction(metric, higher_is_better)
    tol = float(atol)
    if not tol >= 0:
        raise ValueError(f"atol must be >= 0, got {atol!r}")
    x, td, before, _ = _windows(scores, drift, window)
    threshold = _nanmean(before)
    if np.isnan(threshold):
        return float("nan")
    after = x[td:]
    ok = after >= threshold - tol if up else after <= threshold + tol  # NaN compares False
    hits = np.flatnonzero(ok)
    return float(hits[0]) if hits.size else float(after.size)


def _mean_over(values: list[float]) -> float:
    return _nanmean(np.asarray(values, dtype=np.float64))


def mean_drift_performance_deterioration(
    scores: Series, drifts: Sequence[Drift], window: int = 10
) -> float:
    """Mean of :func:`drift_performance_deterioration` over the known ``drifts`` (steps)."""
    if len(drifts) == 0:
        raise ValueError("drifts must hold at least one known drift step")
    return _mean_over([drift_performance_deterioration(scores, d, window) for d in drifts])


def mean_drift_restoration_time(
    scores: Series,
    drifts: Sequence[Drift],
    window: int = 10,
    metric: Any = None,
    *,
    higher_is_better: bool | None = None,
    atol: float = 1e-12,
) -> float:
    """Mean of :func:`drift_restoration_time` over the known ``drifts`` (steps)."""
    if len(drifts) == 0:
        raise ValueError("drifts must hold at least one known drift step")
    return _mean_over(
        [
            drift_restoration_time(
                scores, d, window, metric, higher_is_better=higher_is_better, atol=atol
            )
            for d in drifts
        ]
    )
