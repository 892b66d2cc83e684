"""Interpretable online trees: the Dynamic Model Tree, its reports, drawing and monitor."""

from torchstream.trees._report import replay_events
from torchstream.trees.dmt import DynamicModelTree
from torchstream.trees.monitor import DMTMonitor
from torchstream.trees.plot import plot_tree

__all__ = ["DMTMonitor", "DynamicModelTree", "plot_tree", "replay_events"]
