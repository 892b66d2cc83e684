"""torchstream: explainable online learning on data streams with PyTorch.

The public classes below are imported on first use (``torchstream.OnlineClassifier``, or
``from torchstream import OnlineClassifier``), so ``import torchstream`` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchstream._lazy import lazy_names
from torchstream._version import __version__

if TYPE_CHECKING:
    from torchstream.evaluate.prequential import Prequential
    from torchstream.evaluate.runner import Evaluator
    from torchstream.learners.online import OnlineLearner
    from torchstream.learners.tasks import OnlineClassifier, OnlineRegressor, online_learner
    from torchstream.schema import Feature, Schema
    from torchstream.streams.base import Stream

__all__ = [
    "Evaluator",
    "Feature",
    "OnlineClassifier",
    "OnlineLearner",
    "OnlineRegressor",
    "Prequential",
    "Schema",
    "Stream",
    "__version__",
    "online_learner",
]

__getattr__, __dir__ = lazy_names(__name__, {
    "torchstream.evaluate.prequential": ("Prequential",),
    "torchstream.evaluate.runner": ("Evaluator",),
    "torchstream.learners.online": ("OnlineLearner",),
    "torchstream.learners.tasks": ("OnlineClassifier", "OnlineRegressor", "online_learner"),
    "torchstream.schema": ("Feature", "Schema"),
    "torchstream.streams.base": ("Stream",),
})
