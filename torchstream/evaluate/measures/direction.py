"""Which way is better: the direction of a metric, read from the metric itself (A.6 §5.1 [^1]).

Drift restoration time compares scores with a pre-drift threshold using ``<=`` for a loss and
``>=`` for a score such as accuracy or F1; noise variability and drift performance deterioration
change sign with the direction. The direction is therefore taken from the metric, never from a
separate flag that can disagree with it. :func:`higher_is_better` looks, in order, at

1. a ``higher_is_better`` attribute (a :class:`~torchstream.evaluate.measures.MetricSpec`, or
   anything that sets it);
2. a ``bigger_is_better`` attribute (river metrics and :mod:`torchstream.evaluate.metrics`);
3. the metric's name (a string, or the ``__name__`` of a function or class) in
   :data:`KNOWN_DIRECTIONS` (scikit-learn metric functions and the losses of
   :mod:`torchstream.losses`).

An unknown metric raises a ``ValueError`` that asks for an explicit direction.

>>> from sklearn.metrics import f1_score, zero_one_loss
>>> higher_is_better(f1_score), higher_is_better(zero_one_loss), higher_is_better("accuracy")
(True, False, True)

References
----------
[^1]: Haug, J., Tramountani, E. and Kasneci, G. (2022). Standardized evaluation of machine
    learning methods for evolving data streams. arXiv:2204.13625.
"""

from __future__ import annotations

from typing import Any

__all__ = ["KNOWN_DIRECTIONS", "higher_is_better"]

_HIGHER = (
    # scikit-learn metric functions
    "accuracy_score",
    "balanced_accuracy_score",
    "top_k_accuracy_score",
    "f1_score",
    "fbeta_score",
    "precision_score",
    "recall_score",
    "jaccard_score",
    "cohen_kappa_score",
    "matthews_corrcoef",
    "roc_auc_score",
    "average_precision_score",
    "r2_score",
    "explained_variance_score",
    "d2_absolute_error_score",
    # torchstream metric names
    "accuracy",
    "f1",
    "kappa",
)
_LOWER = (
    # scikit-learn metric functions
    "zero_one_loss",
    "hamming_loss",
    "log_loss",
    "brier_score_loss",
    "hinge_loss",
    "mean_squared_error",
    "root_mean_squared_error",
    "mean_absolute_error",
    "median_absolute_error",
    "mean_absolute_percentage_error",
    "mean_squared_log_error",
    "max_error",
    "mean_pinball_loss",
    # torchstream loss and metric names (torchstream.losses, torchstream.evaluate.metrics)
    "zero_one",
    "cross_entropy",
    "mse",
    "squared",
    "absolute",
    "mae",
)

#: Known metric names and whether higher values are better.
KNOWN_DIRECTIONS: dict[str, bool] = {**dict.fromkeys(_HIGHER, True), **dict.fromkeys(_LOWER, False)}


def _name(metric: Any) -> str | None:
    if isinstance(metric, str):
        return metric
    name = getattr(metric, "__name__", None)
    if name is None:
        name = type(metric).__name__
    return name if isinstance(name, str) else None


def higher_is_better(metric: Any, explicit: bool | None = None) -> bool:
    """Whether higher values of ``metric`` are better (see the module docstring).

    ``explicit`` (a bool) overrides everything; it is needed for a metric that is not known.
    """
    if explicit is not None:
        if not isinstance(explicit, bool):
            raise TypeError(f"higher_is_better must be a bool or None, got {explicit!r}")
        return explicit
    if isinstance(metric, bool):
        raise TypeError(
            "metric must be a metric (name, function, class or object), not a bool; "
            "pass the direction as higher_is_better=..."
        )
    for attr in ("higher_is_better", "bigger_is_better"):
        value = getattr(metric, attr, None)
        if isinstance(value, bool):
            return value
    if isinstance(metric, type):  # a river metric class: bigger_is_better is a property
        try:
            value = getattr(metric(), "bigger_is_better", None)
        except TypeError:  # needs constructor arguments
            value = None
        if isinstance(value, bool):
            return value
    name = _name(metric)
    if name is not None and name in KNOWN_DIRECTIONS:
        return KNOWN_DIRECTIONS[name]
    known = ", ".join(sorted(KNOWN_DIRECTIONS))
    raise ValueError(
        f"the direction of metric {name or metric!r} is unknown; pass higher_is_better=True "
        f"or False explicitly (known names: {known})"
    )
