"""Plots of online feature selection (FIRES) and parameter-distribution drift detection (ERICS).

Every function returns a standalone Agg figure (no pyplot state, nothing to close) and, with
``path``, also saves it there as PNG.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch

from torchstream.viz._figure import agg_figure, finish_figure

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["plot_erics", "plot_fires_weights", "plot_selection_heatmap"]


def _history(history: Any) -> Mapping[str, Any]:
    """A FIRES history mapping (``FIRES.history``), from a FIRES, a selector or the mapping."""
    for attr in ("fires", None):
        obj = getattr(history, attr, None) if attr else history
        if obj is not None and hasattr(obj, "history") and not isinstance(obj, Mapping):
            history = obj.history
            break
    if not isinstance(history, Mapping) or not {"steps", "weights", "selected"} <= set(history):
        raise TypeError(
            "history must be FIRES.history (a mapping with 'steps', 'weights', 'selected'), "
            f"a FIRES or a FIRESSelector; got {type(history).__name__}"
        )
    if len(history["steps"]) == 0:
        raise ValueError("the history is empty: FIRES has not been updated yet")
    return history





def plot_fires_weights(
    history: Any,
    *,
    features: Sequence[int] | None = None,
    top: int | None = 10,
    path: str | os.PathLike[str] | None = None,
) -> Figure:
    """FIRES weights over time, one line per feature.

    ``features`` picks feature indices; by default the ``top`` features by their last weight
    (``None``: all). ``history`` is ``FIRES.history`` (or a FIRES / FIRESSelector).
    """
    h = _history(history)
    W: torch.Tensor = h["weights"]
    names = list(h.get("feature_names") or [f"x{j}" for j in range(W.shape[1])])
    if features is None:
        order = torch.sort(W[-1], descending=True, stable=True).indices.tolist()
        features = order if top is None else order[:top]
    else:
        for j in features:
            if not 0 <= int(j) < W.shape[1]:
                raise ValueError(f"features has index {j} outside [0, {W.shape[1]})")
    fig = agg_figure()
    ax = fig.subplots()
    steps = list(h["steps"])
    for j in features:
        ax.plot(steps, W[:, int(j)].tolist(), lw=1, label=str(names[int(j)]))
    ax.set_xlabel("step")
    ax.set_ylabel("FIRES weight")
    ax.legend(fontsize="small", ncol=2)
    fig.set_size_inches(8, 3.5)
    return finish_figure(fig, path)


def plot_selection_heatmap(history: Any, *, path: str | os.PathLike[str] | None = None) -> Figure:
    """Which features were selected at each step: a ``features x steps`` 0/1 heat map."""
    h = _history(history)
    n, d = h["weights"].shape
    Z = torch.zeros(n, d)
    sel: torch.Tensor = h["selected"]
    Z.scatter_(1, sel.long(), 1.0)
    names = list(h.get("feature_names") or [f"x{j}" for j in range(d)])
    steps = list(h["steps"])
    fig = agg_figure()
    ax = fig.subplots()
    ax.imshow(
        Z.T.numpy(),
        aspect="auto",
        interpolation="nearest",
        cmap="Greys",
        extent=(steps[0] - 0.5, steps[-1] + 0.5, d - 0.5, -0.5),
        vmin=0,
        vmax=1,
    )
    if d <= 40:
        ax.set_yticks(range(d))
        ax.set_yticklabels([str(v) for v in names], fontsize="small")
    ax.set_xlabel("step")
    ax.set_ylabel("feature")
    ax.set_title("selected features (black)")
    fig.set_size_inches(8, max(2.5, min(10.0, 0.2 * d + 1)))
    return finish_figure(fig, path)


def plot_erics(
    erics: Any,
    metric: Sequence[float] | Mapping[int, float] | None = None,
    *,
    path: str | os.PathLike[str] | None = None,
) -> Figure:
    """ERICS traces: the moving average ``MA_t``, the statistic ``D_t`` with the threshold
    ``T_t``, and (optionally) a ``metric`` curve (a sequence indexed by step, or
    ``{step: value}``); reported global alerts are marked as vertical lines on every panel."""
    for attr in ("ma_trace", "drift_trace", "threshold_trace", "alert_steps", "trace_steps"):
        if not hasattr(erics, attr):
            raise TypeError(f"erics must be an ERICS detector, got {type(erics).__name__}")
    steps = list(erics.trace_steps)
    if not steps:
        raise ValueError("ERICS has no updates to plot")
    n = 3 if metric is not None else 2
    fig = agg_figure()
    axes = fig.subplots(n, 1, sharex=True, squeeze=False)[:, 0]
    if metric is not None:
        if isinstance(metric, Mapping):
            ms, mv = list(metric.keys()), list(metric.values())
        else:
            ms, mv = list(range(len(metric))), list(metric)
        axes[0].plot(ms, mv, color="black", lw=1)
        axes[0].set_ylabel("metric")
    axes[-2].plot(steps, list(erics.ma_trace), lw=1, color="tab:blue")
    axes[-2].set_ylabel("MA")
    axes[-1].plot(steps, list(erics.drift_trace), lw=1, color="tab:blue", label="D")
    axes[-1].plot(steps, list(erics.threshold_trace), lw=1, color="tab:orange", label="threshold")
    axes[-1].set_ylabel("D, threshold")
    axes[-1].set_xlabel("step")
    axes[-1].legend(fontsize="small")
    for a in axes:
        for t in erics.alert_steps:
            if steps[0] <= t <= steps[-1]:
                a.axvline(t, color="red", ls=":", lw=0.8)
    fig.set_size_inches(8, 2.2 * n + 1)
    return finish_figure(fig, path)
