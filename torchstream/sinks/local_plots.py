"""Deprecated: the figures moved to :mod:`torchstream.viz.local`; import them from there."""

import warnings

from torchstream.viz.local import (
    plot_attributions,
    plot_neighbourhoods,
)

__all__ = [
    "plot_attributions",
    "plot_neighbourhoods",
]

warnings.warn(
    "torchstream.sinks.local_plots is deprecated; "
    "import from torchstream.viz.local instead",
    DeprecationWarning,
    stacklevel=2,
)
