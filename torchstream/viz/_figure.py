"""The two kinds of figure every drawing of :mod:`torchstream.viz` starts from."""

from __future__ import annotations

import os

import matplotlib.pyplot as plt
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

__all__ = ["agg_figure", "finish_figure", "new_figure"]


def agg_figure(size: tuple[float, float] | None = None) -> Figure:
    """A standalone Agg figure: no pyplot state, nothing to close."""
    fig = Figure(figsize=size)
    FigureCanvasAgg(fig)
    return fig


def new_figure(path: str | os.PathLike[str] | None) -> Figure:
    """An Agg figure when it is saved to ``path``; a pyplot figure for interactive use when
    ``path`` is None."""
    if path is None:
        return plt.figure()
    return agg_figure()


def finish_figure(fig: Figure, path: str | os.PathLike[str] | None) -> Figure:
    """Lay ``fig`` out tightly, save it as PNG when ``path`` is given, and return it."""
    fig.tight_layout()
    if path is not None:
        fig.savefig(os.fspath(path), format="png")
    return fig
