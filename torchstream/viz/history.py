"""Figures of a :class:`~torchstream.sinks.history.History`, optionally straight to a PNG file."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from torchstream.sinks.base import group_tags
from torchstream.sinks.history import History
from torchstream.viz._figure import finish_figure, new_figure

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["draw_charts", "plot_history", "plot_importance"]


def plot_history(
    history: History,
    tags: Sequence[str] | None = None,
    ax: Axes | None = None,
    path: str | os.PathLike[str] | None = None,
) -> Figure:
    """The series of ``history`` (all tags, or ``tags``) against the step; returns the figure.

    Without ``ax``, one subplot per chart (tags grouped as in :mod:`torchstream.sinks.base`,
    :func:`draw_charts`), in a standalone Agg figure (no pyplot state, nothing to close) saved
    as PNG to ``path`` when it is given, else in a pyplot figure for interactive use. With
    ``ax``, every line goes on that Axes, labelled by its full tag, and the Axes' figure is
    returned (saved to ``path`` when given). An unknown tag raises ``KeyError``.

    >>> history = History()
    >>> history.log_scalars(0, {"metrics/accuracy/cumulative": 1.0, "learner/loss": 0.5})
    >>> history.log_scalars(10, {"metrics/accuracy/cumulative": 0.75, "learner/loss": 0.25})
    >>> from torchstream.viz._figure import agg_figure
    >>> ax = agg_figure().add_subplot()
    >>> plot_history(history, ["learner/loss"], ax=ax) is ax.figure
    True
    >>> [(line.get_label(), line.get_ydata().tolist()) for line in ax.lines]
    [('learner/loss', [0.5, 0.25])]
    """
    selected = _select(history, tags)
    if ax is not None:
        for tag in selected:
            ax.plot(history.steps(tag), history.values(tag), label=tag)
        ax.set_xlabel("step")
        if selected:
            ax.legend()
        return finish_figure(ax.figure, path)
    fig = new_figure(path)
    n_charts = len(draw_charts(history, fig, selected))
    fig.set_size_inches(*_figsize(n_charts))
    return finish_figure(fig, path)


def draw_charts(history: History, fig: Figure, tags: Sequence[str] | None = None) -> list[Axes]:
    """One subplot per chart of ``history``'s ``tags`` (all by default) on ``fig``, stacked
    vertically with a shared step axis, each line labelled by its tag less the chart's prefix;
    returns the Axes (one empty Axes when there is nothing to draw)."""
    groups = _charts(_select(history, tags))
    if not groups:
        return [fig.add_subplot(1, 1, 1)]
    axes = fig.subplots(len(groups), 1, sharex=True, squeeze=False)[:, 0]
    for ax, (title, chart_tags) in zip(axes, groups.items()):
        prefix = title + "/"
        for tag in chart_tags:
            ax.plot(history.steps(tag), history.values(tag), label=tag.removeprefix(prefix))
        ax.set_title(title)
        ax.legend()
    axes[-1].set_xlabel("step")
    fig.tight_layout()
    return list(axes)


def _select(history: History, tags: Iterable[str] | None) -> list[str]:
    """``tags`` as a list (all of ``history``'s when None); an unknown tag raises ``KeyError``."""
    if tags is None:
        return history.tags
    selected = [tags] if isinstance(tags, str) else list(tags)
    for tag in selected:
        history.steps(tag)
    return selected


def _charts(tags: Iterable[str]) -> dict[str, list[str]]:
    """``{"category/chart": [tags]}`` in order of first appearance."""
    return {
        f"{category}/{chart}": chart_tags
        for category, charts in group_tags(tags).items()
        for chart, chart_tags in charts.items()
    }


def _figsize(n_charts: int) -> tuple[float, float]:
    return (8.0, 1.0 + 2.5 * max(n_charts, 1))


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
