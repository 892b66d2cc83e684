"""Measures by name, so a command line or a run configuration can refer to them as strings.

``measure(name, **kwargs)`` returns a :class:`BoundMeasure`: the measure function with some
keyword arguments bound (checked against its signature at once) and its direction
``higher_is_better`` (``None`` where the direction is that of the underlying score, e.g. a
windowed mean; for noise variability it is read from a bound ``loss``).

>>> dcr = measure("detected_change_rate", window=50)
>>> dcr([100, 300], [110, 150, 250, 420], n_total=500), dcr.higher_is_better
(0.5, True)
>>> sorted(MEASURES)[:3]
['count_parameters', 'detected_change_rate', 'drift_performance_deterioration']
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from torchstream.evaluate.measures import aggregates, complexity, detection, predictor, selection
from torchstream.evaluate.measures.direction import higher_is_better as _direction
from torchstream.evaluate.measures.metric_spec import check_kwargs

__all__ = ["MEASURES", "BoundMeasure", "MeasureInfo", "measure"]


@dataclass(frozen=True)
class MeasureInfo:
    """A registered measure: its function and direction (``None``: that of its score)."""

    fn: Callable[..., Any]
    higher_is_better: bool | None


MEASURES: dict[str, MeasureInfo] = {
    "sliding_window_mean": MeasureInfo(aggregates.sliding_window_mean, None),
    "sliding_window_var": MeasureInfo(aggregates.sliding_window_var, False),
    "fading_mean": MeasureInfo(aggregates.fading_mean, None),
    "ewma": MeasureInfo(aggregates.ewma, None),
    "noise_variability": MeasureInfo(predictor.noise_variability, None),
    "drift_performance_deterioration": MeasureInfo(predictor.drift_performance_deterioration, None),
    "mean_drift_performance_deterioration": MeasureInfo(
        predictor.mean_drift_performance_deterioration, None
    ),
    "drift_restoration_time": MeasureInfo(predictor.drift_restoration_time, False),
    "mean_drift_restoration_time": MeasureInfo(predictor.mean_drift_restoration_time, False),
    "detected_change_rate": MeasureInfo(detection.detected_change_rate, True),
    "missed_detection_rate": MeasureInfo(detection.missed_detection_rate, False),
    "false_discovery_rate": MeasureInfo(detection.false_discovery_rate, False),
    "mean_detection_delay": MeasureInfo(detection.mean_detection_delay, False),
    "mean_time_between_false_alarms": MeasureInfo(detection.mean_time_between_false_alarms, True),
    "mean_time_ratio": MeasureInfo(detection.mean_time_ratio, True),
    "feature_set_stability": MeasureInfo(selection.feature_set_stability, True),
    "windowed_feature_set_stability": MeasureInfo(selection.windowed_feature_set_stability, True),
    "reduction_rate": MeasureInfo(selection.reduction_rate, True),
    "count_parameters": MeasureInfo(complexity.count_parameters, False),
}


class BoundMeasure:
    """A registered measure with bound keyword arguments; call it with the rest."""

    def __init__(self, name: str, info: MeasureInfo, kwargs: dict[str, Any]) -> None:
        self.name = name
        self.fn = info.fn
        self.kwargs = kwargs
        direction = info.higher_is_better
        if name == "noise_variability":
            # NV is a difference of the reference measure: read it in that measure's direction.
            direction = _direction(kwargs.get("loss", "zero_one"))
        self.higher_is_better = direction

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        clash = sorted(set(kwargs) & set(self.kwargs))
        if clash:
            raise TypeError(f"measure {self.name!r} already has {clash} bound")
        return self.fn(*args, **self.kwargs, **kwargs)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.kwargs.items())
        return f"measure({self.name!r}{', ' if args else ''}{args})"


def measure(name: str, **kwargs: Any) -> BoundMeasure:
    """The measure registered as ``name`` with ``kwargs`` bound (unknown keywords raise)."""
    if name not in MEASURES:
        raise ValueError(f"unknown measure {name!r}; known measures: {', '.join(sorted(MEASURES))}")
    info = MEASURES[name]
    try:
        check_kwargs(info.fn, kwargs, skip=0, what=f"measure {name!r}")
    except TypeError as exc:
        if "requires" not in str(exc):  # required arguments may come at call time
            raise
    return BoundMeasure(name, info, dict(kwargs))
