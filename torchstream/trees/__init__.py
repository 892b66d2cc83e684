"""Interpretable online trees: the Dynamic Model Tree (its own runner plug-in) and its reports
(its drawing is :func:`torchstream.viz.plot_tree`)."""

from torchstream.trees._report import replay_events
from torchstream.trees.dmt import DynamicModelTree

__all__ = ["DynamicModelTree", "replay_events"]
