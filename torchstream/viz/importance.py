"""The explanations of a run over stream rows, with its known drifts and detector alarms: the
figures a :class:`~torchstream.sinks.tensorboard.TensorBoardSink` logs periodically
(``TensorBoardSink(figures=explanation_figures)``), drawn from the sink's own record of what it
logged (:class:`~torchstream.sinks.tensorboard.ExplanationLog`): every explainer's series, and
the pairs of an :class:`~torchstream.explain.IncrementalInteraction` as a heat map over the
rows."""

from __future__ import annotations

import math

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from torchstream.explain.interaction import IncrementalInteraction
from torchstream.sinks.tensorboard import ExplanationLog
from torchstream.viz._figure import agg_figure

__all__ = ["FIGURE_TAG", "INTERACTIONS_TAG", "explanation_figures", "plot_explanations",
           "plot_interactions"]

#: The tag of the figure in TensorBoard's IMAGES tab.
FIGURE_TAG = "importance/over_rows"
#: The tag of the interactions' heat map over the rows.
INTERACTIONS_TAG = "interactions/over_rows"

_DRIFT_COLOR = "red"
_ALARM_COLORS = ("darkorange", "purple", "teal", "saddlebrown", "olive")


def plot_explanations(log: ExplanationLog) -> Figure:
    """One panel per explainer of ``log`` with a series: each feature's importance over the rows
    seen (one labelled line per feature), known drifts as red dashed and each detector's alarms
    as dotted vertical lines (one colour per detector) in every panel. A standalone Agg figure.
    ``ValueError`` when no explainer has a series yet."""
    panels = [(e, log.features(e)) for e in log.explainers if log.features(e)]
    if not panels:
        raise ValueError(f"no explainer series to draw; explainers {list(log.explainers)}, "
                         f"logged tags {log.history.tags}")
    fig = agg_figure((9.0, 1.2 + 2.8 * len(panels)))
    axes = fig.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
    for ax, (explainer, features) in zip(axes, panels):
        for feature in features:
            tag = f"{explainer}/{feature}"
            ax.plot(log.history.steps(tag), log.history.values(tag), lw=1.2, label=feature)
        _mark_changes(ax, log)
        ax.set_title(f"{explainer}: feature importance")
        ax.set_ylabel("importance")
        ax.legend(fontsize="small", ncol=2, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    axes[-1].set_xlabel("rows seen")
    fig.tight_layout()
    return fig


def _mark_changes(ax: Axes, log: ExplanationLog) -> None:
    """Known drifts as red dashed and each detector's alarms as dotted vertical lines (one
    colour per detector), each labelled once."""
    for i, row in enumerate(log.drifts):
        ax.axvline(row, color=_DRIFT_COLOR, ls="--", lw=1.0,
                   label="known drift" if i == 0 else None)
    for k, (detector, steps) in enumerate(log.alarms.items()):
        color = _ALARM_COLORS[k % len(_ALARM_COLORS)]
        for i, row in enumerate(steps):
            ax.axvline(row, color=color, ls=":", lw=1.0,
                       label=f"alarm {detector}" if i == 0 else None)


def interaction_cells(log: ExplanationLog, explainer: str, bins: int
                      ) -> tuple[list[str], np.ndarray, np.ndarray]:
    """The pairs of ``explainer`` with a series (in order of first appearance), the edges
    ``[n + 1]`` of ``n = min(bins, logged steps)`` equal spans of the rows logged, and the
    cells ``[pairs, n]``: each pair's last logged value in each span, NaN where it has none
    (the pair was not explained there: outside the ``top_k``)."""
    pairs = log.features(explainer)
    series = [(log.history.steps(f"{explainer}/{p}"), log.history.values(f"{explainer}/{p}"))
              for p in pairs]
    steps = sorted({s for st, _ in series for s in st})
    if not steps:
        return pairs, np.zeros(1), np.zeros((len(pairs), 0))
    n = min(bins, len(steps))
    lo, hi = float(steps[0]), float(steps[-1])
    edges = np.linspace(lo, hi, n + 1) if hi > lo else np.array([lo - 0.5, lo + 0.5])
    n = len(edges) - 1
    cells = np.full((len(pairs), n), math.nan)
    for i, (st, values) in enumerate(series):
        span = np.clip(np.searchsorted(edges, np.asarray(st, dtype=float), side="right") - 1,
                       0, n - 1)
        for j, v in zip(span.tolist(), values):  # in logged order: the last one stays
            cells[i, j] = v
    return pairs, edges, cells


def plot_interactions(log: ExplanationLog, explainer: str = IncrementalInteraction.name, *,
                      bins: int = 200) -> Figure:
    """The interaction matrix over the rows: one row of cells per pair of ``explainer`` with a
    series (:func:`interaction_cells`), coloured by its SII (red: the pair acts together,
    blue: redundancy, blank: not explained there), with the known drifts and the alarms as in
    :func:`plot_explanations`. A standalone Agg figure; ``ValueError`` without a series."""
    pairs, edges, cells = interaction_cells(log, explainer, bins)
    if not pairs:
        raise ValueError(f"no series of {explainer!r} to draw; logged tags {log.history.tags}")
    fig = agg_figure((9.0, 1.6 + 0.3 * len(pairs)))
    ax = fig.add_subplot(1, 1, 1)
    finite = np.abs(cells[np.isfinite(cells)])
    scale = float(finite.max()) if finite.size and finite.max() > 0 else 1.0
    mesh = ax.pcolormesh(edges, np.arange(len(pairs) + 1) - 0.5,
                         np.ma.masked_invalid(cells), cmap="RdBu_r", vmin=-scale, vmax=scale)
    ax.set_yticks(range(len(pairs)))
    ax.set_yticklabels(pairs, fontsize="small")
    ax.set_ylim(len(pairs) - 0.5, -0.5)  # the first pair on top
    _mark_changes(ax, log)
    if log.drifts or any(log.alarms.values()):
        ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.2, 1.0))
    fig.colorbar(mesh, ax=ax, label="interaction (SII)", pad=0.02)
    ax.set_title(f"{explainer}: pairs over the rows")
    ax.set_xlabel("rows seen")
    fig.tight_layout()
    return fig


def explanation_figures(log: ExplanationLog) -> dict[str, Figure]:
    """``{FIGURE_TAG: plot_explanations(log)}`` and, where an interactions explainer
    (:class:`~torchstream.explain.IncrementalInteraction`) has a series,
    ``{INTERACTIONS_TAG: plot_interactions(log)}``; nothing while no explainer has a
    series."""
    if not any(log.features(e) for e in log.explainers):
        return {}
    out = {FIGURE_TAG: plot_explanations(log)}
    name = IncrementalInteraction.name
    if name in log.explainers and log.features(name):
        out[INTERACTIONS_TAG] = plot_interactions(log, name)
    return out
