"""The picture of an incremental partial dependence plot (iPDP, Muschalik et al. 2023, Fig. 1):
the current PD with the recent ICE curves and the kept snapshots of earlier plots. A one-hot
feature is drawn as bars over its category names, the "missing" point of a nullable numeric as a
dashed level beside its curve."""

from __future__ import annotations

from matplotlib.axes import Axes
import torch

from torchstream.explain.ipdp import IncrementalPDP
from torchstream.viz._figure import agg_figure

__all__ = ["plot_ipdp"]


def _marker(points: torch.Tensor) -> str | None:
    """A one-point grid is drawn as a dot."""
    return "o" if points.numel() == 1 else None


def _plot_categories(ipdp: IncrementalPDP, ax: Axes) -> None:
    """Bars of the PD per category (labelled by name), the recent ICE values as grey points and
    the history snapshots as faded markers."""
    labels = ipdp.grid_labels
    positions = list(range(len(labels)))
    n_hist = len(ipdp.history)
    for i, (row, _, p) in enumerate(ipdp.history):
        ax.plot(positions, p.tolist(), ls="none", marker="_", ms=14, color="tab:blue",
                alpha=0.15 + 0.35 * (i + 1) / n_hist, label=f"row {row}")
    for c in ipdp.ice.cpu().tolist():
        ax.plot(positions, c, ls="none", marker=".", color="grey", alpha=0.3)
    if ipdp.n_explained:
        ax.bar(positions, ipdp.pd.tolist(), color="tab:red", alpha=0.8,
               label=f"iPDP (row {ipdp.n_seen})")
    ax.set_xticks(positions)
    ax.set_xticklabels(labels, rotation=45 if len(labels) > 6 else 0, ha="right"
                       if len(labels) > 6 else "center", fontsize="small")


def _plot_numeric(ipdp: IncrementalPDP, ax: Axes) -> None:
    """The PD curve with its ICE curves and snapshots; a nullable numeric's "missing" point
    (the last one) as a dashed horizontal level."""
    extra = 1 if ipdp.kind == "nullable" else 0
    n_hist = len(ipdp.history)
    for i, (row, g, p) in enumerate(ipdp.history):
        g, p = g[: g.numel() - extra], p[: p.numel() - extra]
        ax.plot(g.tolist(), p.tolist(), color="tab:blue", lw=1, marker=_marker(g),
                alpha=0.15 + 0.35 * (i + 1) / n_hist, label=f"row {row}")
    for g, c in zip(ipdp.ice_grid.cpu().tolist(), ipdp.ice.cpu().tolist()):
        ax.plot(g[: len(g) - extra], c[: len(c) - extra], color="grey", lw=0.5, alpha=0.3)
    if ipdp.n_explained:
        grid, pd = ipdp.grid, ipdp.pd
        numeric = grid[: grid.numel() - extra]
        ax.plot(numeric.tolist(), pd[: pd.numel() - extra].tolist(), color="tab:red", lw=2.5,
                marker=_marker(numeric), label=f"iPDP (row {ipdp.n_seen})")
        if extra:
            ax.axhline(float(pd[-1]), color="tab:purple", ls="--", lw=1.5,
                       label=f"missing: {float(pd[-1]):.4g}")


def plot_ipdp(ipdp: IncrementalPDP, ax: Axes | None = None) -> Axes:
    """Draw the PD of ``ipdp`` (thick line) with its recent ICE curves (thin, transparent) and
    its history snapshots (faded, older = lighter) on ``ax`` (default: a new standalone Agg
    figure, no pyplot state); returns the Axes. A one-hot feature (``ipdp.kind ==
    "categorical"``) is drawn as bars over its category names (``ipdp.grid_labels``), its ICE
    values as points; the "missing" point of a nullable numeric as a dashed level."""
    if ax is None:
        ax = agg_figure((6, 4)).add_subplot()
    if ipdp.kind == "categorical":
        _plot_categories(ipdp, ax)
    else:
        _plot_numeric(ipdp, ax)
    ax.set_xlabel(ipdp.feature_name)
    ax.set_ylabel("partial dependence")
    ax.set_title(f"iPDP of {ipdp.feature_name}")
    if len(ipdp.history) or ipdp.n_explained:
        ax.legend(fontsize="x-small")
    return ax
