"""torchstream: explainable online learning on data streams with PyTorch."""

from torchstream._version import __version__
from torchstream.evaluate import Evaluator, Prequential
from torchstream.learners import OnlineClassifier, OnlineLearner, OnlineRegressor
from torchstream.schema import Feature, Schema
from torchstream.streams import Stream

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
]
