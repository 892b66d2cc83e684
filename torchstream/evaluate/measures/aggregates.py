"""Forgetting aggregates of a per-step score series (A.6 §4.2 [^1]; Gama et al. [^2]).

A prequential run records one score per step (NaN where a step was not evaluated). Early steps
describe a model that is still learning, so two kinds of forgetting are used:

* a **sliding window** of the last ``w`` scores (the old values are kept);
* **fading**, memory-less. Two parameterisations are common and both are given here:

  - Gama's fading factor ``alpha`` in ``(0, 1]`` [^2]: ``S_t = L_t + alpha S_{t-1}``,
    ``N_t = 1 + alpha N_{t-1}``, ``P_t = S_t / N_t`` (``alpha = 1``: the cumulative mean);
  - float's EWMA with ``decay_rate`` ``lam`` in ``(0, 1]`` (``lam`` weights the *new* value):
    ``m_t = m_{t-1} + lam (x_t - m_{t-1})``, ``v_t = (1 - lam)(v_{t-1} + lam (x_t - m_{t-1})^2)``,
    ``m_1 = x_1``, ``v_1 = 0``. With ``lam = 1 - alpha`` it differs from Gama's ratio only in
    how the start is normalised.

Every function returns the whole aggregated series (``float64`` array, one entry per step).
NaN scores are skipped: a window averages the scores it holds that are not NaN (NaN when it
holds none), and both fading forms carry the previous value over a NaN step.

>>> losses = [1, 0, 0, 1, 0]
>>> sliding_window_mean(losses, window=2).tolist()
[1.0, 0.5, 0.0, 0.5, 0.5]
>>> round(float(fading_mean(losses, alpha=0.9)[-1]), 4)
0.38
>>> ewma(losses, decay_rate=0.5)[0].tolist()
[1.0, 0.5, 0.25, 0.625, 0.3125]

References
----------
[^1]: Haug, J., Tramountani, E. and Kasneci, G. (2022). Standardized evaluation of machine
    learning methods for evolving data streams. arXiv:2204.13625 (thesis paper A.6).
[^2]: Gama, J., Sebastiao, R. and Rodrigues, P. P. (2013). On evaluating stream learning
    algorithms. Machine Learning 90(3), 317-346.
"""

from __future__ import annotations

import numpy as np

from torchstream.evaluate.measures._common import Series, as_int, as_series

__all__ = ["ewma", "fading_mean", "sliding_window_mean", "sliding_window_var"]


def _window_stat(values: Series, window: int, stat: str, ddof: int = 0) -> np.ndarray:
    x = as_series(values, "values")
    w = as_int(window, "window", minimum=1)
    ok = ~np.isnan(x)
    xz = np.where(ok, x, 0.0)
    # Prefix sums of count, sum and sum of squares make each window O(1).
    zero = np.zeros(1)
    c = np.concatenate([zero, np.cumsum(ok)])
    s = np.concatenate([zero, np.cumsum(xz)])
    t = np.arange(1, x.size + 1)
    lo = np.maximum(t - w, 0)
    n = c[t] - c[lo]
    total = s[t] - s[lo]
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = total / n
        if stat == "mean":
            return np.where(n > 0, mean, np.nan)
    # Variance from the window's own values (exact; the windows are short).
    out = np.full(x.size, np.nan)
    for i in range(x.size):
        v = x[lo[i] : i + 1]
        v = v[~np.isnan(v)]
        if v.size > ddof:
            out[i] = float(np.var(v, ddof=ddof))
    return out


def sliding_window_mean(values: Series, window: int) -> np.ndarray:
    """Mean of the last ``window`` scores at every step: ``mean(L_{t-w+1}, ..., L_t)``.

    The first ``window - 1`` steps average the scores seen so far. NaN scores are skipped.
    """
    return _window_stat(values, window, "mean")


def sliding_window_var(values: Series, window: int, ddof: int = 0) -> np.ndarray:
    """Variance of the last ``window`` scores at every step (``ddof=0``: population variance).

    NaN when the window holds ``ddof`` or fewer scores that are not NaN.
    """
    ddof = as_int(ddof, "ddof", minimum=0)
    return _window_stat(values, window, "var", ddof)


def fading_mean(values: Series, alpha: float) -> np.ndarray:
    """Gama's fading-factor mean ``P_t = S_t / N_t`` with ``S_t = L_t + alpha S_{t-1}`` and
    ``N_t = 1 + alpha N_{t-1}`` (Gama et al. 2013, used by A.6 §4.2).

    ``alpha`` in ``(0, 1]``; ``alpha = 1`` is the cumulative mean. A NaN score leaves ``S`` and
    ``N`` unchanged (the step is not counted and nothing decays); leading NaNs give NaN.
    """
    x = as_series(values, "values")
    a = float(alpha)
    if not 0.0 < a <= 1.0:
        raise ValueError(f"alpha must lie in (0, 1], got {alpha!r}")
    out = np.full(x.size, np.nan)
    s = n = 0.0
    for i, v in enumerate(x):
        if not np.isnan(v):
            s = v + a * s
            n = 1.0 + a * n
        if n > 0:
            out[i] = s / n
    return out


def ewma(values: Series, decay_rate: float) -> tuple[np.ndarray, np.ndarray]:
    """float's exponentially weighted mean and variance; returns ``(mean, var)`` series.

    ``m_t = m_{t-1} + lam (x_t - m_{t-1})`` and ``v_t = (1 - lam)(v_{t-1} + lam (x_t -
    m_{t-1})^2)`` with ``m_1 = x_1``, ``v_1 = 0`` and ``lam = decay_rate`` in ``(0, 1]``. A NaN
    score repeats the previous values; leading NaNs give NaN.
    """
    x = as_series(values, "values")
    lam = float(decay_rate)
    if not 0.0 < lam <= 1.0:
        raise ValueError(f"decay_rate must lie in (0, 1], got {decay_rate!r}")
    mean = np.full(x.size, np.nan)
    var = np.full(x.size, np.nan)
    m = v = float("nan")
    for i, xi in enumerate(x):
        if not np.isnan(xi):
            if np.isnan(m):
                m, v = float(xi), 0.0
            else:
                d = xi - m
                m = m + lam * d
                v = (1.0 - lam) * (v + lam * d * d)
        mean[i], var[i] = m, v
    return mean, var
