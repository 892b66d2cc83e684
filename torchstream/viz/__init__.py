"""Every matplotlib figure of the package: histories, evaluations, feature selection, local
explanations, partial dependence and Dynamic Model Trees; :mod:`torchstream.viz.figures` draws
the figures of a run's plug-ins. The layer above the algorithms, the evaluation and the
sinks: it draws what they computed and none of them draws."""

from torchstream.viz.evaluation import (
    plot_detections,
    plot_feature_weights,
    plot_metric_over_time,
    plot_selected_features,
    plot_selection_frequency,
    plot_spider,
)
from torchstream.viz.history import plot_history, plot_importance
from torchstream.viz.importance import explanation_figures, plot_explanations
from torchstream.viz.local import plot_attributions, plot_neighbourhoods
from torchstream.viz.pdp import plot_ipdp
from torchstream.viz.selection import plot_erics, plot_fires_weights, plot_selection_heatmap
from torchstream.viz.tree import plot_tree

__all__ = [
    "explanation_figures",
    "plot_attributions",
    "plot_detections",
    "plot_erics",
    "plot_explanations",
    "plot_feature_weights",
    "plot_fires_weights",
    "plot_history",
    "plot_importance",
    "plot_ipdp",
    "plot_metric_over_time",
    "plot_neighbourhoods",
    "plot_selected_features",
    "plot_selection_frequency",
    "plot_selection_heatmap",
    "plot_spider",
    "plot_tree",
]
