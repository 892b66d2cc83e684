"""Learners by name, for the command line and sweeps: our model specs, river models and the
Dynamic Model Tree (``"dmt"``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["RIVER_MODELS", "available_learners", "make_learner"]


def _river_models() -> dict[str, Callable[[str], Any]]:
    from river import linear_model, naive_bayes, preprocessing, tree

    def pick(classifier: Callable[[], Any], regressor: Callable[[], Any] | None):
        def make(task: str) -> Any:
            if task == "classification":
                return classifier()
            if regressor is None:
                raise ValueError("this river model is a classifier only")
            return regressor()
        return make

    return {
        "hoeffding_tree": pick(tree.HoeffdingTreeClassifier, tree.HoeffdingTreeRegressor),
        "hoeffding_adaptive_tree": pick(tree.HoeffdingAdaptiveTreeClassifier,
                                        tree.HoeffdingAdaptiveTreeRegressor),
        "naive_bayes": pick(naive_bayes.GaussianNB, None),
        "logistic_regression": pick(
            lambda: preprocessing.StandardScaler() | linear_model.LogisticRegression(),
            lambda: preprocessing.StandardScaler() | linear_model.LinearRegression(),
        ),
        "perceptron": pick(
            lambda: preprocessing.StandardScaler() | linear_model.Perceptron(), None
        ),
    }


#: Names of the river models :func:`make_learner` knows (``task -> estimator`` factories).
RIVER_MODELS = ("hoeffding_tree", "hoeffding_adaptive_tree", "naive_bayes",
                "logistic_regression", "perceptron")


def available_learners() -> list[str]:
    """Our model specs followed by the river models."""
    from torchstream.models import available_specs

    return [*available_specs(), *RIVER_MODELS, "dmt"]


def make_learner(name: str, stream: Any, *, seed: int = 0, device: str = "auto",
                 lr: float | None = None, scale_inputs: bool = True) -> Any:
    """A learner for ``stream``: an :class:`~torchstream.learners.OnlineLearner` from a model
    spec (name or TOML path), or a river model wrapped in a
    :class:`~torchstream.learners.RiverLearner`."""
    from torchstream.learners.online import OnlineLearner
    from torchstream.learners.river_learner import RiverLearner
    from torchstream.models import load_spec

    if name == "dmt":
        from torchstream.trees import DynamicModelTree

        return DynamicModelTree.for_stream(stream)
    if name in RIVER_MODELS:
        try:
            model = _river_models()[name](stream.task)
        except ValueError as e:
            raise ValueError(f"{name}: {e}; the stream is for {stream.task}") from None
        return RiverLearner.for_stream(model, stream)
    try:
        spec = load_spec(name)
    except FileNotFoundError:
        raise ValueError(
            f"unknown learner {name!r}; known: {', '.join(available_learners())} "
            "or a model spec TOML path"
        ) from None
    if spec.type == "autoencoder":
        raise ValueError(f"{name!r} is an autoencoder spec (unsupervised), not a predictor")
    overrides: dict[str, Any] = {"device": device, "seed": seed, "scale_inputs": scale_inputs,
                                 "schema": stream.schema}
    if lr is not None:
        overrides["lr"] = lr
    return OnlineLearner.from_spec(spec, task=stream.task, **overrides)
