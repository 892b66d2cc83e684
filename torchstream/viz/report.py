"""The figures of a drift report (:class:`~torchstream.report.reporter.DriftReporter`): each
explainer's importance before and after the alarm with the report's bounds, and the iPDP curves
at the alarm and at the end of the after window."""

from __future__ import annotations

import math

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from torchstream.report.reporter import Change, Curve, Report
from torchstream.viz._figure import agg_figure

__all__ = ["figure_pixels", "plot_report_curve", "plot_report_importance", "plot_report_inputs",
           "report_figures"]

_COLOURS = {"gained": "tab:green", "lost": "tab:red", "unchanged": "tab:grey"}


def plot_report_importance(report: Report, explainer: str, *, top: int = 12) -> Figure:
    """Horizontal bars of ``explainer``'s importance before (light) and after (dark) the
    alarm with their bounds, the ``top`` features of the report's ranking (changed verdicts
    first); a feature's label is coloured by its verdict."""
    changes = [c for c in report["changes"] if c["explainer"] == explainer][:top]
    fig = agg_figure((7.0, 1.2 + 0.45 * max(len(changes), 1)))
    ax = fig.add_subplot(1, 1, 1)
    positions = list(range(len(changes)))[::-1]
    h = 0.38
    for pos, c in zip(positions, changes):
        colour = _COLOURS.get(c["verdict"], "tab:grey")
        ax.barh(pos + h / 2, _finite(c["importance_before"]), h, xerr=_finite(c["bound_before"]),
                color=colour, alpha=0.35, ecolor="black", capsize=2)
        ax.barh(pos - h / 2, _finite(c["importance_after"]), h, xerr=_finite(c["bound_after"]),
                color=colour, alpha=0.9, ecolor="black", capsize=2)
    ax.set_yticks(positions)
    ax.set_yticklabels([f"{c['feature']} ({c['verdict']})" for c in changes],
                       fontsize="small")
    for label, c in zip(ax.get_yticklabels(), changes):
        label.set_color(_COLOURS.get(c["verdict"], "black"))
    ax.axvline(0.0, color="black", lw=0.5)
    ax.set_xlabel("importance (light: before the row, dark: after)")
    ax.set_title(f"{explainer} around row {report['row']:,} ({report['detector']})",
                 fontsize="medium")
    fig.tight_layout()
    return fig


def _finite(v: float) -> float:
    return v if math.isfinite(v) else 0.0


def _draw_curve(ax: Axes, labels: list[str], grid: list[float], pd: list[float], *,
                colour: str, label: str) -> None:
    numeric = [(g, p) for g, p in zip(grid, pd) if math.isfinite(g)]
    if numeric:
        xs, ys = zip(*numeric)
        ax.plot(xs, ys, color=colour, lw=2, marker="o" if len(xs) == 1 else None, label=label)
    else:  # categories: points over their labels
        ax.plot(range(len(pd)), pd, ls="none", marker="o", ms=7, color=colour, label=label)
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels(labels, rotation=45 if len(labels) > 6 else 0, fontsize="small")


def plot_report_curve(report: Report, curve: Curve) -> Figure:
    """The iPDP of ``curve``'s feature at the alarm (blue) and at the end of the after window
    (red), with their distance in the title."""
    fig = agg_figure((6.0, 3.6))
    ax = fig.add_subplot(1, 1, 1)
    _draw_curve(ax, curve["labels_before"], curve["grid_before"], curve["pd_before"],
                colour="tab:blue", label=f"at row {report['row']:,}")
    end = report["row"] + report["settle"] + report["rows_after"]
    _draw_curve(ax, curve["labels_after"], curve["grid_after"], curve["pd_after"],
                colour="tab:red", label=f"at row {end:,}")
    ax.set_xlabel(curve["feature"])
    ax.set_ylabel(f"partial dependence, {curve['output']}")
    ax.set_title(f"PD of {curve['feature']}: shape moved by {curve['distance']:.3g}, level by "
                 f"{curve['level_shift']:.3g}", fontsize="medium")
    ax.legend(fontsize="small")
    fig.tight_layout()
    return fig


def plot_report_inputs(report: Report, *, top: int = 6) -> Figure:
    """The distributions of the ``top`` inputs that moved most (moved first, then by their
    statistic), before (blue) and after (red) the row: a numeric feature's deciles, a
    categorical feature's shares; each panel titled with its test, statistic and p-value."""
    seen: dict[str, Change] = {}
    for c in report["changes"]:
        seen.setdefault(c["feature"], c)
    ranked = sorted(seen.values(), key=lambda c: (not c["input_moved"],
                                                  -_finite(c["input_statistic"])))[:top]
    cols = min(3, max(len(ranked), 1))
    rows = max(1, math.ceil(len(ranked) / cols))
    fig = agg_figure((3.4 * cols, 2.6 * rows + 0.4))
    for i, c in enumerate(ranked):
        ax = fig.add_subplot(rows, cols, i + 1)
        labels = [str(v) for v in c["input_labels"]]
        before = [_finite(float(v)) for v in c["input_before"]]
        after = [_finite(float(v)) for v in c["input_after"]]
        x = np.arange(len(labels))
        if str(c["input_test"]).startswith("ks"):  # deciles: the quantile function
            ax.plot(x, before, color="tab:blue", marker="o", ms=3, label="before")
            ax.plot(x, after, color="tab:red", marker="o", ms=3, label="after")
            ax.set_ylabel("value", fontsize="small")
        else:  # shares of the categories
            ax.bar(x - 0.2, before, 0.4, color="tab:blue", label="before")
            ax.bar(x + 0.2, after, 0.4, color="tab:red", label="after")
            ax.set_ylabel("share", fontsize="small")
        ax.set_xticks(x)
        ax.set_xticklabels(labels, rotation=45 if len(labels) > 4 else 0, fontsize="x-small")
        mark = " (moved)" if c["input_moved"] else ""
        ax.set_title(f"{c['feature']}{mark}: {c['input_test']} "
                     f"{_finite(c['input_statistic']):.3g}, "
                     f"p {c['input_p']:.2g}", fontsize="small")
        if i == 0:
            ax.legend(fontsize="x-small")
    fig.suptitle(f"inputs around row {report['row']:,}: before and after", fontsize="medium")
    fig.tight_layout()
    return fig


def report_figures(report: Report, *, curves: int = 4) -> list[tuple[str, Figure]]:
    """``(name, figure)`` of a report: one importance figure per explainer
    (``importance_<explainer>``), the inputs' distributions (``inputs``), then the PD curves
    of the features whose importance changed, at most ``curves`` (``pdp_<feature>``)."""
    out: list[tuple[str, Figure]] = []
    for explainer in dict.fromkeys(c["explainer"] for c in report["changes"]):
        out.append((f"importance_{explainer}", plot_report_importance(report, explainer)))
    if report["changes"]:
        out.append(("inputs", plot_report_inputs(report)))
    changed = [c for c in report["curves"] if c["verdict_changed"]]
    for curve in changed[:curves]:
        out.append((f"pdp_{curve['feature']}", plot_report_curve(report, curve)))
    return out


def figure_pixels(fig: Figure) -> np.ndarray:
    """The figure drawn once: its RGBA pixels ``[H, W, 4]`` (uint8) at 100 dpi."""
    fig.set_dpi(100)
    fig.canvas.draw()
    return np.asarray(fig.canvas.buffer_rgba()).copy()  # type: ignore[attr-defined]
