"""Sinks: where the scalar streams of a run go (memory, TensorBoard, plots)."""

from torchstream.sinks.base import Sink
from torchstream.sinks.history import History
from torchstream.sinks.plots import plot_history, plot_importance
from torchstream.sinks.tensorboard import TensorBoardSink

__all__ = ["History", "Sink", "TensorBoardSink", "plot_history", "plot_importance"]
