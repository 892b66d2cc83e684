"""Deprecated: the figures moved to :mod:`torchstream.viz.tree`; import them from there."""

import warnings

from torchstream.viz.tree import (
    plot_tree,
)

__all__ = [
    "plot_tree",
]

warnings.warn(
    "torchstream.trees.plot is deprecated; "
    "import from torchstream.viz.tree instead",
    DeprecationWarning,
    stacklevel=2,
)
