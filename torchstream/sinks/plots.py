"""Plot a :class:`~torchstream.sinks.history.History`, optionally straight to a PNG file."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from torchstream.sinks.history import History, _figsize

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["plot_history"]


def plot_history(
    history: History,
    tags: Sequence[str] | None = None,
    path: str | os.PathLike[str] | None = None,
) -> Figure:
    """One subplot per chart of ``history`` (all tags, or ``tags``); returns the figure.

    With ``path``, the figure is a standalone Agg figure (no pyplot state, nothing to close)
    saved there as PNG; without it, a pyplot figure for interactive use.
    """
    if path is None:
        import matplotlib.pyplot as plt

        fig = plt.figure()
    else:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        fig = Figure()
        FigureCanvasAgg(fig)
    n_charts = len(history.draw_charts(fig, tags))
    fig.set_size_inches(*_figsize(n_charts))
    fig.tight_layout()
    if path is not None:
        fig.savefig(os.fspath(path), format="png")
    return fig
