"""The picture of an incremental partial dependence plot (iPDP, Muschalik et al. 2023, Fig. 1):
the current PD with the recent ICE curves and the kept snapshots of earlier plots."""

from __future__ import annotations

from matplotlib.axes import Axes
import torch

from torchstream.explain.ipdp import IncrementalPDP
from torchstream.viz._figure import agg_figure

__all__ = ["plot_ipdp"]


def _marker(points: torch.Tensor) -> str | None:
    """A one-point grid is drawn as a dot."""
    return "o" if points.numel() == 1 else None


def plot_ipdp(ipdp: IncrementalPDP, ax: Axes | None = None) -> Axes:
    """Draw the PD of ``ipdp`` (thick line) with its recent ICE curves (thin, transparent) and
    its history snapshots (faded, older = lighter) on ``ax`` (default: a new standalone Agg
    figure, no pyplot state); returns the Axes."""
    if ax is None:
        ax = agg_figure((6, 4)).add_subplot()
    n_hist = len(ipdp.history)
    for i, (row, g, p) in enumerate(ipdp.history):
        ax.plot(g.tolist(), p.tolist(), color="tab:blue", lw=1, marker=_marker(g),
                alpha=0.15 + 0.35 * (i + 1) / n_hist, label=f"row {row}")
    for g, c in zip(ipdp.ice_grid.cpu().tolist(), ipdp.ice.cpu().tolist()):
        ax.plot(g, c, color="grey", lw=0.5, alpha=0.3)
    if ipdp.n_explained:
        grid = ipdp.grid
        ax.plot(grid.tolist(), ipdp.pd.tolist(), color="tab:red", lw=2.5, marker=_marker(grid),
                label=f"iPDP (row {ipdp.n_seen})")
    ax.set_xlabel(ipdp.feature_name)
    ax.set_ylabel("partial dependence")
    ax.set_title(f"iPDP of {ipdp.feature_name}")
    if n_hist or ipdp.n_explained:
        ax.legend(fontsize="x-small")
    return ax
