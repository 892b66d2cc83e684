"""Streaming evaluation: the prequential runner, its plug-in protocol and metrics."""

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
from torchstream.evaluate.plugins import Batch, Plugin
from torchstream.evaluate.prequential import Prequential, RunResult

__all__ = [
    "F1",
    "MAE",
    "METRICS",
    "MSE",
    "Accuracy",
    "Batch",
    "LogLoss",
    "Metric",
    "Plugin",
    "Prequential",
    "RunResult",
    "default_metrics",
]
