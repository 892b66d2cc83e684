"""Figures of a :class:`~torchstream.sinks.history.History`, optionally straight to a PNG file."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from torchstream.sinks.history import History, _figsize
from torchstream.viz._figure import finish_figure, new_figure

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["plot_history", "plot_importance"]


def plot_history(
    history: History,
    tags: Sequence[str] | None = None,
    path: str | os.PathLike[str] | None = None,
) -> Figure:
    """One subplot per chart of ``history`` (all tags, or ``tags``); returns the figure.

    With ``path``, the figure is a standalone Agg figure (no pyplot state, nothing to close)
    saved there as PNG; without it, a pyplot figure for interactive use.
    """
    fig = new_figure(path)
    n_charts = len(history.draw_charts(fig, tags))
    fig.set_size_inches(*_figsize(n_charts))
    return finish_figure(fig, path)



def plot_importance(
    history: History,
    prefix: str,
    *,
    metric: str | None = "metrics/accuracy/window",
    batch_size: int = 1,
    drift_positions: Sequence[int] = (),
    detected_positions: Sequence[int] = (),
    path: str | os.PathLike[str] | None = None,
) -> Figure:
    """Feature importance over time (every tag ``"<prefix>/<feature>"``), with the model's
    ``metric`` in a panel above it; known drifts (stream rows) as dashed and detected drifts as
    dotted vertical lines. The x axis is the stream row, ``step * batch_size``: the runner logs
    at the rows seen, so ``batch_size=1`` for its histories."""
    tags = [t for t in history.tags if t.startswith(prefix + "/")]
    if not tags:
        raise ValueError(f"history has no series '{prefix}/<feature>'; tags: {history.tags}")
    if metric is not None and metric not in history.tags:
        raise ValueError(f"history has no series {metric!r}")
    fig = new_figure(path)
    n = 2 if metric is not None else 1
    axes = fig.subplots(n, 1, sharex=True, squeeze=False, height_ratios=[1, 2][-n:])[:, 0]
    if metric is not None:
        axes[0].plot([s * batch_size for s in history.steps(metric)], history.values(metric),
                     color="black", lw=1)
        axes[0].set_ylabel(metric.split("/", 1)[-1])
    ax = axes[-1]
    for tag in tags:
        ax.plot([s * batch_size for s in history.steps(tag)], history.values(tag), lw=1,
                label=tag[len(prefix) + 1 :])
    ax.set_ylabel(prefix)
    ax.set_xlabel("row")
    for a in axes:
        for p in drift_positions:
            a.axvline(p, color="red", ls="--", lw=0.8)
        for p in detected_positions:
            a.axvline(p, color="orange", ls=":", lw=0.8)
    ax.legend(fontsize="small", ncol=2)
    fig.set_size_inches(8, 2.5 * n + 1)
    return finish_figure(fig, path)
