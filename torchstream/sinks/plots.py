"""Deprecated: the figures moved to :mod:`torchstream.viz.history`; import them from there."""

import warnings

from torchstream.viz.history import (
    plot_history,
    plot_importance,
)

__all__ = [
    "plot_history",
    "plot_importance",
]

warnings.warn(
    "torchstream.sinks.plots is deprecated; "
    "import from torchstream.viz.history instead",
    DeprecationWarning,
    stacklevel=2,
)
