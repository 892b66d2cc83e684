"""Streaming evaluation: the prequential runner, its plug-in protocol and metrics."""

from torchstream.evaluate.metrics import F1, MAE, METRICS, MSE, Accuracy, LogLoss, Metric, default_metrics
from torchstream.evaluate.plugins import Batch, Plugin
from torchstream.evaluate.prequential import Prequential, RunResult

__all__ = [
    "Prequential",
    "RunResult",
    "Batch",
    "Plugin",
    "Metric",
    "Accuracy",
    "F1",
    "LogLoss",
    "MSE",
    "MAE",
    "METRICS",
    "default_metrics",
]
