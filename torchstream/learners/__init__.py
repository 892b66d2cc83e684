"""Online learners and the adapters that turn any model into a ``ModelFn``.

The learners themselves are imported with the package: :class:`OnlineLearner` (``online``) is
the base of the task classes :class:`OnlineClassifier` and :class:`OnlineRegressor` (``tasks``,
with :func:`online_learner`, which builds the one a task names). The other names (the river
and scikit-learn adapters, which import river's trees and, through them, scikit-learn) are
imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchstream._lazy import lazy_names
from torchstream.learners.online import OnlineLearner, resolve_device
from torchstream.learners.tasks import OnlineClassifier, OnlineRegressor, online_learner

if TYPE_CHECKING:
    from torchstream.learners.adapters import RiverModelFn, SklearnModelFn, as_model_fn
    from torchstream.learners.divergence import DivergenceError, DivergenceWarning
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
    "online_learner",
    "resolve_device",
    "use_threads",
]

__getattr__, __dir__ = lazy_names(__name__, {
    "torchstream.learners.adapters": ("RiverModelFn", "SklearnModelFn", "as_model_fn"),
    "torchstream.learners.divergence": ("DivergenceError", "DivergenceWarning"),
    "torchstream.learners.river_learner": ("RiverLearner",),
    "torchstream.learners.scaling": ("RunningStandardizer",),
    "torchstream.learners.threads": ("ThreadsNotice", "use_threads"),
})
