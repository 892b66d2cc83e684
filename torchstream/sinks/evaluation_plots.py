"""Deprecated: the figures moved to :mod:`torchstream.viz.evaluation`; import them from there."""

import warnings

from torchstream.viz.evaluation import (
    SMOOTH_STEPS,
    UNIT_MEASURES,
    detector_colors,
    plot_detections,
    plot_feature_weights,
    plot_metric_over_time,
    plot_selected_features,
    plot_selection_frequency,
    plot_spider,
    selection_frequency,
    smooth_steps,
    spider_radii,
    spider_ranges,
)

__all__ = [
    "SMOOTH_STEPS",
    "UNIT_MEASURES",
    "detector_colors",
    "plot_detections",
    "plot_feature_weights",
    "plot_metric_over_time",
    "plot_selected_features",
    "plot_selection_frequency",
    "plot_spider",
    "selection_frequency",
    "smooth_steps",
    "spider_radii",
    "spider_ranges",
]

warnings.warn(
    "torchstream.sinks.evaluation_plots is deprecated; "
    "import from torchstream.viz.evaluation instead",
    DeprecationWarning,
    stacklevel=2,
)
