"""Evaluation measures for online learning (A.6 "float" paper, thesis chapter 5).

Small pure functions over per-step series, batches, detections and feature selections; numpy
arrays or torch tensors in, floats (or per-step float arrays) out. Grouped by what they
evaluate:

* :mod:`.aggregates`: sliding-window, Gama fading and float-style EWMA aggregates of scores;
* :mod:`.predictor`: noise variability, drift performance deterioration, drift restoration time;
* :mod:`.metric_spec`: :class:`MetricSpec`, a per-batch metric with validated keyword arguments;
* :mod:`.direction`: whether higher is better for a metric;
* :mod:`.complexity`: tree complexity by the DMT counting rules, parameter counts;
* :mod:`.detection`: drift-detection measures and the step -> observation converter;
* :mod:`.selection`: feature-set stability and reduction rate;
* :mod:`.registry`: :func:`measure`, measures by name.
"""

from torchstream.evaluate.measures.aggregates import (
    ewma,
    fading_mean,
    sliding_window_mean,
    sliding_window_var,
)
from torchstream.evaluate.measures.complexity import count_parameters, tree_complexity
from torchstream.evaluate.measures.detection import (
    detected_change_rate,
    detection_delays,
    detection_measures,
    false_discovery_rate,
    mean_detection_delay,
    mean_time_between_false_alarms,
    mean_time_ratio,
    missed_detection_rate,
    observation_index,
    observation_indices,
    step_index,
)
from torchstream.evaluate.measures.direction import KNOWN_DIRECTIONS, higher_is_better
from torchstream.evaluate.measures.metric_spec import MetricSpec
from torchstream.evaluate.measures.predictor import (
    drift_performance_deterioration,
    drift_restoration_time,
    mean_drift_performance_deterioration,
    mean_drift_restoration_time,
    noise_variability,
)
from torchstream.evaluate.measures.registry import MEASURES, BoundMeasure, MeasureInfo, measure
from torchstream.evaluate.measures.selection import (
    feature_set_stability,
    reduction_rate,
    windowed_feature_set_stability,
)

__all__ = [
    "KNOWN_DIRECTIONS",
    "MEASURES",
    "BoundMeasure",
    "MeasureInfo",
    "MetricSpec",
    "count_parameters",
    "detected_change_rate",
    "detection_delays",
    "detection_measures",
    "drift_performance_deterioration",
    "drift_restoration_time",
    "ewma",
    "fading_mean",
    "false_discovery_rate",
    "feature_set_stability",
    "higher_is_better",
    "mean_detection_delay",
    "mean_drift_performance_deterioration",
    "mean_drift_restoration_time",
    "mean_time_between_false_alarms",
    "mean_time_ratio",
    "measure",
    "missed_detection_rate",
    "noise_variability",
    "observation_index",
    "observation_indices",
    "reduction_rate",
    "sliding_window_mean",
    "sliding_window_var",
    "step_index",
    "tree_complexity",
    "windowed_feature_set_stability",
]
