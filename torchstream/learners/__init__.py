"""Online learners and the adapters that turn any model into a ``ModelFn``."""

from torchstream.learners.adapters import RiverModelFn, SklearnModelFn, as_model_fn
from torchstream.learners.divergence import DivergenceError, DivergenceWarning
from torchstream.learners.online import (
    OnlineClassifier,
    OnlineLearner,
    OnlineRegressor,
    resolve_device,
)
from torchstream.learners.river_learner import RiverLearner
from torchstream.learners.scaling import RunningStandardizer
from torchstream.learners.threads import ThreadsNotice, use_threads

__all__ = [
    "DivergenceError",
    "DivergenceWarning",
    "OnlineClassifier",
    "OnlineLearner",
    "OnlineRegressor",
    "RiverLearner",
    "RiverModelFn",
    "RunningStandardizer",
    "SklearnModelFn",
    "ThreadsNotice",
    "as_model_fn",
    "resolve_device",
    "use_threads",
]
