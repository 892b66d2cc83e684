"""Streaming evaluation: the runner and its strategies, the plug-in protocol, metrics."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchstream._lazy import lazy_names

if TYPE_CHECKING:
    from torchstream.evaluate.delay import LabelDelay
    from torchstream.evaluate.metrics import (
        F1,
        MAE,
        METRICS,
        MSE,
        Accuracy,
        LogLoss,
        Metric,
        default_metrics,
    )
    from torchstream.evaluate.plugins import Plugin
    from torchstream.evaluate.prequential import Prequential
    from torchstream.evaluate.result import RunResult
    from torchstream.evaluate.runner import Evaluator
    from torchstream.evaluate.strategies import (
        DistributedKFold,
        PeriodicHoldout,
        StepPlan,
        Strategy,
        TestThenTrain,
    )

__all__ = [
    "F1",
    "MAE",
    "METRICS",
    "MSE",
    "Accuracy",
    "DistributedKFold",
    "Evaluator",
    "LabelDelay",
    "LogLoss",
    "Metric",
    "PeriodicHoldout",
    "Plugin",
    "Prequential",
    "RunResult",
    "StepPlan",
    "Strategy",
    "TestThenTrain",
    "default_metrics",
]

__getattr__, __dir__ = lazy_names(__name__, {
    "torchstream.evaluate.delay": ("LabelDelay",),
    "torchstream.evaluate.metrics": (
        "F1", "MAE", "METRICS", "MSE", "Accuracy", "LogLoss", "Metric", "default_metrics",
    ),
    "torchstream.evaluate.plugins": ("Plugin",),
    "torchstream.evaluate.prequential": ("Prequential",),
    "torchstream.evaluate.result": ("RunResult",),
    "torchstream.evaluate.runner": ("Evaluator",),
    "torchstream.evaluate.strategies": (
        "DistributedKFold", "PeriodicHoldout", "StepPlan", "Strategy", "TestThenTrain",
    ),
})
