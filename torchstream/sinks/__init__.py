"""Sinks: where the scalar streams of a run go (memory, TensorBoard); their figures are in
:mod:`torchstream.viz`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchstream._lazy import lazy_names

if TYPE_CHECKING:
    from torchstream.sinks.base import Sink
    from torchstream.sinks.history import History
    from torchstream.sinks.tensorboard import TensorBoardSink

__all__ = ["History", "Sink", "TensorBoardSink"]

__getattr__, __dir__ = lazy_names(__name__, {
    "torchstream.sinks.base": ("Sink",),
    "torchstream.sinks.history": ("History",),
    "torchstream.sinks.tensorboard": ("TensorBoardSink",),
})
