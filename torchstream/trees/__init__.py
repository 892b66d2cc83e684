"""Interpretable online trees: the Dynamic Model Tree, its reports and monitor (its drawing is
:func:`torchstream.viz.plot_tree`)."""

from torchstream.trees._report import replay_events
from torchstream.trees.dmt import DynamicModelTree
from torchstream.trees.monitor import DMTMonitor

__all__ = ["DMTMonitor", "DynamicModelTree", "replay_events"]
