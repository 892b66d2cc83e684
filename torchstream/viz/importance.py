"""The explanations of a run over stream rows, with its known drifts and detector alarms: the
figure a :class:`~torchstream.sinks.tensorboard.TensorBoardSink` logs periodically
(``TensorBoardSink(figures=explanation_figures)``), drawn from the sink's own record of what it
logged (:class:`~torchstream.sinks.tensorboard.ExplanationLog`)."""

from __future__ import annotations

from matplotlib.figure import Figure

from torchstream.sinks.tensorboard import ExplanationLog
from torchstream.viz._figure import agg_figure

__all__ = ["FIGURE_TAG", "explanation_figures", "plot_explanations"]

#: The tag of the figure in TensorBoard's IMAGES tab.
FIGURE_TAG = "importance/over_rows"

_DRIFT = {"color": "red", "ls": "--", "lw": 1.0}
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
        for i, row in enumerate(log.drifts):
            ax.axvline(row, **_DRIFT, label="known drift" if i == 0 else None)
        for k, (detector, steps) in enumerate(log.alarms.items()):
            color = _ALARM_COLORS[k % len(_ALARM_COLORS)]
            for i, row in enumerate(steps):
                ax.axvline(row, color=color, ls=":", lw=1.0,
                           label=f"alarm {detector}" if i == 0 else None)
        ax.set_title(f"{explainer}: feature importance")
        ax.set_ylabel("importance")
        ax.legend(fontsize="small", ncol=2, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    axes[-1].set_xlabel("rows seen")
    fig.tight_layout()
    return fig


def explanation_figures(log: ExplanationLog) -> dict[str, Figure]:
    """``{FIGURE_TAG: plot_explanations(log)}``, or nothing while no explainer has a series."""
    if not any(log.features(e) for e in log.explainers):
        return {}
    return {FIGURE_TAG: plot_explanations(log)}
