"""Deprecated: the figures moved to :mod:`torchstream.viz.selection`; import them from there."""

import warnings

from torchstream.viz.selection import (
    plot_erics,
    plot_fires_weights,
    plot_selection_heatmap,
)

__all__ = [
    "plot_erics",
    "plot_fires_weights",
    "plot_selection_heatmap",
]

warnings.warn(
    "torchstream.sinks.selection_plots is deprecated; "
    "import from torchstream.viz.selection instead",
    DeprecationWarning,
    stacklevel=2,
)
