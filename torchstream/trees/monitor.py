"""A prequential-runner plug-in that logs the size of a Dynamic Model Tree."""

from __future__ import annotations

from typing import Any

from torchstream.base import PluginBase

__all__ = ["DMTMonitor"]


class DMTMonitor(PluginBase):
    """Plug-in whose ``on_batch`` returns the tree's node count, depth and number of splits
    (the paper's count, Table III), so that the runner sends them to its sinks (TensorBoard).

    >>> import torch
    >>> from torchstream.trees import DynamicModelTree
    >>> tree = DynamicModelTree(n_classes=2)
    >>> tree.learn(torch.rand(10, 3), torch.arange(10) % 2)
    >>> DMTMonitor(tree).on_batch(None)
    {'dmt/n_nodes': 1.0, 'dmt/depth': 0.0, 'dmt/n_splits': 1.0}
    """

    name = "dmt"

    def __init__(self, tree: Any) -> None:
        if not hasattr(tree, "scalars"):
            raise TypeError(f"tree must be a DynamicModelTree, got {type(tree).__name__}")
        self.tree = tree

    def on_batch(self, batch: Any) -> dict[str, float]:
        s = self.tree.scalars()
        return {"dmt/n_nodes": s["n_nodes"], "dmt/depth": s["depth"], "dmt/n_splits": s["n_splits"]}
