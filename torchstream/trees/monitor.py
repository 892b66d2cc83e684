"""Deprecated: the tree is its own plug-in (``plugins=[tree]``)."""

from __future__ import annotations

import warnings

from torchstream.base import PluginBase

__all__ = ["DMTMonitor"]


class DMTMonitor(PluginBase):
    """Deprecated: pass the :class:`~torchstream.trees.DynamicModelTree` itself in ``plugins``
    (its ``on_batch`` returns the same ``dmt/n_nodes``, ``dmt/depth``, ``dmt/n_splits``).

    >>> import torch, warnings
    >>> from torchstream.trees import DynamicModelTree
    >>> tree = DynamicModelTree(n_classes=2)
    >>> tree.learn(torch.rand(10, 3), torch.arange(10) % 2)
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     DMTMonitor(tree).on_batch(None) == tree.on_batch(None)
    True
    """

    name = "dmt"

    def __init__(self, tree: object) -> None:
        warnings.warn("DMTMonitor is deprecated: pass the tree itself in plugins=[tree]",
                      DeprecationWarning, stacklevel=2)
        if not callable(getattr(tree, "on_batch", None)):
            raise TypeError(f"tree must be a DynamicModelTree, got {type(tree).__name__}")
        self.tree = tree

    def on_batch(self, batch: object) -> dict[str, float]:
        return self.tree.on_batch(batch)  # type: ignore[attr-defined]
