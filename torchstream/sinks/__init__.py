"""Sinks: where the scalar streams of a run go (memory, TensorBoard); their figures are in
:mod:`torchstream.viz`."""

from torchstream.sinks.base import Sink
from torchstream.sinks.history import History
from torchstream.sinks.tensorboard import TensorBoardSink

__all__ = ["History", "Sink", "TensorBoardSink"]
